"""Outputs of the transaction coordinator core (what to do). The shell performs them in order.

`Reply` and `AppendRecords` (to a __transaction_state shard) are the sharded roles' shared ones.
"""
from __future__ import annotations

from dataclasses import dataclass

from services.common.sharded_role import AppendRecords, Reply

__all__ = ["AllocateProducerId", "AppendRecords", "Effect", "Reply", "SendMarkers"]


@dataclass(frozen=True, slots=True)
class AllocateProducerId:
    """Ask the active controller for a fresh producer id (INIT_PRODUCER_ID without a
    transactional id); feed back ProducerIdAllocated(alloc_id, ...)."""
    alloc_id: int


@dataclass(frozen=True, slots=True)
class SendMarkers:
    """Write the marker (commit or abort of `producer_id` at `producer_epoch`, stamped with
    `coordinator_epoch`) to every partition, through its leader (WRITE_TXN_MARKERS), retrying
    retriable answers every transaction.marker.retry.backoff.ms while `still_wanted(marker_id)`;
    a partition of a topic that no longer exists is done. Then feed back MarkersWritten."""
    marker_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]


Effect = Reply | AppendRecords | AllocateProducerId | SendMarkers
