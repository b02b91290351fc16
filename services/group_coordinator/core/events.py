"""Inputs to the group coordinator core (what happened). Frozen dataclasses; no I/O."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A request. `request_id` is the shell's handle for the reply (a `Reply` effect names it,
    maybe in a later call: joins and syncs wait); `body` a decoded group_pb2 request."""
    request_id: int
    body: Any
    client_id: str = ""


@dataclass(frozen=True, slots=True)
class ShardLoadStarted:
    """This instance now owns shard (__consumer_offsets partition) `shard`; the shell reads it
    from the start and passes each record to `replay`, then sends ShardLoadCompleted."""
    shard: int


@dataclass(frozen=True, slots=True)
class ShardLoadCompleted:
    shard: int


@dataclass(frozen=True, slots=True)
class ShardUnloaded:
    """Ownership of the shard moved elsewhere (or the instance resigns it): forget its groups."""
    shard: int


@dataclass(frozen=True, slots=True)
class WriteCompleted:
    """An AppendRecords finished. error_code NONE = every record is durable (acks=all), the
    first at log offset `base_offset`; anything else = it failed or timed out."""
    write_id: int
    error_code: int
    base_offset: int = -1


@dataclass(frozen=True, slots=True)
class TopicMetadataChanged:
    """The cluster's topics now: name -> partition count (the full list, not a delta)."""
    partition_counts: Mapping[str, int]


Event = RequestReceived | ShardLoadStarted | ShardLoadCompleted | ShardUnloaded | WriteCompleted \
    | TopicMetadataChanged
