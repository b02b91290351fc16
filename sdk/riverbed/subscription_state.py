"""What a consumer reads and where: its assigned partitions and, per partition, the positions.

Shared by the Consumer (fetching, seeks) and its GroupMembership (a group's assignment replaces
the partitions; committed offsets become positions), so that neither imports the other. Pure
state: no I/O, no clock.

Per assigned partition two offsets:

    position      the next offset poll() will return to the application
    fetch_offset  the next offset to ask the storage node for (after the batches already
                  fetched and buffered)
"""
from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Iterable

from riverbed.structs import TopicPartition

if TYPE_CHECKING:  # pragma: no cover
    from riverbed.fetcher import CompletedFetch

__all__ = ["PartitionState", "SubscriptionState", "EARLIEST", "LATEST"]

EARLIEST = -2       # LIST_OFFSETS' timestamps for the log start and the high watermark
LATEST = -1


class PartitionState:
    __slots__ = ("position", "fetch_offset", "reset_to", "buffered", "backoff_until_ms",
                 "epoch", "high_watermark", "last_stable_offset", "paused")

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_offset: int | None = None
        self.reset_to: int | None = None          # EARLIEST / LATEST pending a LIST_OFFSETS
        self.buffered: collections.deque[CompletedFetch] = collections.deque()
        self.backoff_until_ms = 0.0
        self.epoch = 0                            # bumped by seeks: drops older answers
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.paused = False

    def seek(self, offset: int | None, reset_to: int | None = None) -> None:
        """Move to `offset` (None: unknown until `reset_to`, EARLIEST or LATEST, is looked up);
        drops buffered fetches and, through the epoch, answers to fetches in flight."""
        self.position = offset
        self.fetch_offset = offset
        self.reset_to = reset_to
        self.buffered.clear()
        self.epoch += 1


class SubscriptionState:
    """Which partitions this consumer reads and where. A group assignment replaces it."""

    def __init__(self) -> None:
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.subscribed_topics: tuple[str, ...] = ()

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        new = {}
        for tp in tps:
            tp = TopicPartition(*tp)
            new[tp] = self.assignment.get(tp) or PartitionState()
        self.assignment = new
