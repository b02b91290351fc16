"""Inputs to the offset manager core (what happened). Frozen dataclasses; no I/O."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """`body` is an offset_pb2 OffsetCommit/OffsetFetch/OffsetDelete request; the `Reply`
    effect names `request_id` (a commit's reply comes after its write completes)."""
    request_id: int
    body: Any


@dataclass(frozen=True, slots=True)
class ShardLoadStarted:
    """Now owning __consumer_offsets partition `shard`: the shell reads it from the start into
    `replay`, then sends ShardLoadCompleted. Afterwards it keeps tailing the partition into
    `replay` so group-metadata records written by the group coordinator arrive (records this
    core wrote itself are recognised by log offset and skipped)."""
    shard: int


@dataclass(frozen=True, slots=True)
class ShardLoadCompleted:
    shard: int


@dataclass(frozen=True, slots=True)
class ShardUnloaded:
    shard: int


@dataclass(frozen=True, slots=True)
class WriteCompleted:
    """An AppendRecords finished: NONE = durable with acks=all, the first record at
    `base_offset`; otherwise the storage error (REQUEST_TIMED_OUT, NOT_LEADER_FOR_PARTITION...)."""
    write_id: int
    error_code: int
    base_offset: int = -1


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
