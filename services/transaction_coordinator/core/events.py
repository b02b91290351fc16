"""Inputs to the transaction coordinator core (what happened). Frozen dataclasses; no I/O.

The shard inputs (ShardLoadStarted with its coordinator epoch, ShardLoadCompleted,
ShardUnloaded, WriteCompleted) are the sharded roles' shared ones (services.common.sharded_role).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.common.sharded_role import (
    ShardLoadCompleted, ShardLoadStarted, ShardUnloaded, WriteCompleted,
)

__all__ = ["Event", "MarkersWritten", "ProducerIdAllocated", "RequestReceived",
           "ShardLoadCompleted", "ShardLoadStarted", "ShardUnloaded", "TopicMetadataChanged",
           "WriteCompleted"]


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """`body`: an InitProducerIdRequest (with a transactional id), AddPartitionsToTxnRequest,
    AddOffsetsToTxnRequest, EndTxnRequest, DescribeTransactionsRequest or
    ListTransactionsRequest. The `Reply` effect names `request_id`."""
    request_id: int
    body: Any


@dataclass(frozen=True, slots=True)
class ProducerIdAllocated:
    """The answer to AllocateProducerId(alloc_id): a fresh producer id (error_code NONE), or the
    controller's error."""
    alloc_id: int
    producer_id: int
    error_code: int = 0
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class MarkersWritten:
    """SendMarkers(marker_id) finished: every partition has the marker (`fenced` False), or a
    leader refused it as coming from an older coordinator or producer epoch (`fenced`: a newer
    coordinator owns the transaction; this one stops)."""
    marker_id: int
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class TopicMetadataChanged:
    """The topics and their partition counts (full list, from the controller's snapshots)."""
    partition_counts: Mapping[str, int]


Event = RequestReceived | ProducerIdAllocated | MarkersWritten | TopicMetadataChanged \
    | ShardLoadStarted | ShardLoadCompleted | ShardUnloaded | WriteCompleted
