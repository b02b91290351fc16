"""The leader-epoch cache (Kafka LeaderEpochFileCache), pure: (epoch, start offset) entries.

Epochs and start offsets both strictly increase. The file layer persists `entries` with
`core.checkpoints.format_epochs` after every change.
"""
from __future__ import annotations

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = []
        for epoch, start in entries or []:
            self.assign(epoch, start)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`. Returns whether the cache changed.

        An older or equal epoch is ignored; entries at or after `start_offset` with a smaller
        epoch are replaced (Kafka: a new leader's epoch supersedes what it overwrote)."""
        if epoch < 0:
            return False
        if self.entries and epoch <= self.entries[-1][0]:
            return False
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, the offset where the next epoch starts), as the
        OffsetsForLeaderEpoch API answers; the latest epoch ends at the log end offset."""
        if not self.entries or requested_epoch < self.entries[0][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        found = UNDEFINED_EPOCH
        for i, (epoch, _start) in enumerate(self.entries):
            if epoch > requested_epoch:
                return found, self.entries[i][1]
            found = epoch
        return found, log_end_offset

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        before = len(self.entries)
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()
        return len(self.entries) != before

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at `start_offset`: keep the epoch covering it, moved up to it."""
        changed = False
        while len(self.entries) > 1 and self.entries[1][1] <= start_offset:
            self.entries.pop(0)
            changed = True
        if self.entries and self.entries[0][1] < start_offset:
            self.entries[0] = (self.entries[0][0], start_offset)
            changed = True
        return changed
