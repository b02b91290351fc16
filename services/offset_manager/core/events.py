"""Inputs to the offset manager core (what happened). Frozen dataclasses; no I/O.

The shard inputs (ShardLoadStarted/Completed, ShardUnloaded, WriteCompleted) are the sharded
roles' shared ones, from services.common.sharded_role. The offset manager tails its shards, so
after ShardLoadCompleted the group coordinator's group records keep arriving through `replay`
(records this core wrote itself are recognised by log offset and skipped).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.common.sharded_role import (
    ShardLoadCompleted, ShardLoadStarted, ShardUnloaded, WriteCompleted,
)

__all__ = ["Event", "GroupMembershipChanged", "RequestReceived", "ShardLoadCompleted",
           "ShardLoadStarted", "ShardUnloaded", "WriteCompleted"]


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """`body` is an offset_pb2 OffsetCommit/OffsetFetch/OffsetDelete request; the `Reply`
    effect names `request_id` (a commit's reply comes after its write completes)."""
    request_id: int
    body: Any


@dataclass(frozen=True, slots=True)
class GroupMembershipChanged:
    """The group coordinator's view of a group, when delivered directly instead of through the
    log (generation -1 and no members = the group is gone)."""
    group_id: str
    generation: int
    member_ids: frozenset[str]
    state_timestamp_ms: int = -1


Event = RequestReceived | ShardLoadStarted | ShardLoadCompleted | ShardUnloaded | WriteCompleted \
    | GroupMembershipChanged
