"""Inputs to the group coordinator core (what happened). Frozen dataclasses; no I/O.

The shard inputs (ShardLoadStarted/Completed, ShardUnloaded, WriteCompleted) are the sharded
roles' shared ones, from services.common.sharded_role.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.common.sharded_role import (
    ShardLoadCompleted, ShardLoadStarted, ShardUnloaded, WriteCompleted,
)

__all__ = ["CoordinatorStopping", "Event", "RequestReceived", "ShardLoadCompleted", "ShardLoadStarted", "ShardUnloaded",
           "TopicMetadataChanged", "WriteCompleted"]


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A request. `request_id` is the shell's handle for the reply (a `Reply` effect names it,
    maybe in a later call: joins and syncs wait); `body` a decoded group_pb2 request."""
    request_id: int
    body: Any
    client_id: str = ""


@dataclass(frozen=True, slots=True)
class TopicMetadataChanged:
    """The cluster's topics now: name -> partition count (the full list, not a delta)."""
    partition_counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class CoordinatorStopping:
    """The instance is stopping: parked heartbeats are answered now (COORDINATOR_NOT_AVAILABLE,
    what a heartbeat gets from a gateway once this instance is gone) and none parks after."""


Event = CoordinatorStopping | RequestReceived | ShardLoadStarted | ShardLoadCompleted | ShardUnloaded | WriteCompleted \
    | TopicMetadataChanged
