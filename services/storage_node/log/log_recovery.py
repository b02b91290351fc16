"""Opening a partition log: finding its segments, recovering after an unclean shutdown, and
its leader-epoch-checkpoint.

A mixin of `PartitionLog` (log/partition_log.py), split out of it along this seam; it never
imports partition_log. `open` finishes or discards an interrupted cleaner swap, removes
leftover `.deleted`/`.tmp` files and indexes whose log is gone, then either checks each
segment's indexes (rebuilding bad ones) or, without a clean shutdown marker, re-reads every
batch from the recovery point's segment on and cuts a bad tail (Kafka's LogSegment.recover).
The leader epochs are loaded from leader-epoch-checkpoint, trimmed to the log, and completed
from the headers of the batches recovery re-read.
"""
from __future__ import annotations

import bisect
import logging
import os
import random
import re
from typing import Self

from services.storage_node.core import log_policy
from services.storage_node.core.checkpoints import CheckpointError, format_epochs, parse_epochs
from services.storage_node.core.leader_epoch import LeaderEpochCache
from services.storage_node.log import files
from services.storage_node.log.cleaner import recover_interrupted_clean
from services.storage_node.log.config import LogConfig
from services.storage_node.log.log_reads import _View
from services.storage_node.log.segment import LogSegment

log = logging.getLogger("services.storage_node.log.partition_log")  # PartitionLog's, as before

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")


class LogRecovery:
    """open and recovery, leader-epoch-checkpoint (mixed into PartitionLog)."""

    # ---- opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str, topic: str, partition: int, config: LogConfig, *,
             now_ms: int, rng: random.Random, recovery_point: int = 0,
             log_start_offset: int = 0, needs_recovery: bool = False,
             cleaner_checkpoint: int = 0) -> Self:
        """Open (creating if absent) the log in `directory`. With `needs_recovery` (no clean
        shutdown marker), every batch from the recovery point's segment on is checked and a
        bad tail is cut. Interrupted cleaner swaps are finished or discarded first."""
        self = cls(directory, topic, partition, config, rng)
        os.makedirs(directory, exist_ok=True)
        recover_interrupted_clean(directory)
        bases = []
        for name in os.listdir(directory):
            if name.endswith(files.DELETED_SUFFIX) or name.endswith(".tmp"):
                files.unlink_quietly(os.path.join(directory, name))
            m = _SEGMENT_LOG.match(name)
            if m:
                bases.append(int(m.group(1)))
        for name in os.listdir(directory):       # indexes whose log is gone
            stem, ext = os.path.splitext(name)
            if ext in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX) \
                    and stem.isdigit() \
                    and int(stem) not in bases:
                files.unlink_quietly(os.path.join(directory, name))
        bases.sort()
        segments = [self._new_segment_object(b, now_ms, active=False, new=False) for b in bases]
        if not segments:
            segments = [self._new_segment_object(log_start_offset, now_ms, active=False, new=True)]
            self._dir_dirty = True
        if needs_recovery:
            segments = self._recover(segments, recovery_point)
        else:
            for seg in segments:
                self._check_indexes(seg)
        active = segments[-1]
        active.make_active()
        active.jitter_ms = log_policy.roll_jitter_ms(rng, config.segment_jitter_ms, config.segment_ms)
        self._view = _View(segments)
        self._log_end_offset = active.next_offset
        self._log_start_offset = min(max(log_start_offset, segments[0].base_offset),
                                     self._log_end_offset)
        self.recovery_point = self._log_end_offset if needs_recovery \
            else min(recovery_point, self._log_end_offset)
        self.cleaner_checkpoint = cleaner_checkpoint
        self._last_flush_ms = now_ms
        self._load_epochs()
        return self

    def _new_segment_object(self, base: int, now_ms: int, *, active: bool, new: bool) -> LogSegment:
        cfg = self.config
        return LogSegment(self.dir, base, index_interval_bytes=cfg.index_interval_bytes,
                          max_index_bytes=cfg.segment_index_bytes, created_ms=now_ms,
                          active=active, new=new)

    def _check_indexes(self, seg: LogSegment) -> None:
        from services.storage_node.core.offset_index import offset_entries_valid
        buf, count = seg.offset_index.snapshot()
        if not offset_entries_valid(buf, count, seg.base_offset, seg.size) or \
                (count == 0 and seg.size > 2 * max(self.config.index_interval_bytes, 1)):
            log.warning("%s: rebuilding indexes", seg.log_path)
            seg.rebuild_indexes()
            seg.on_become_inactive()

    def _recover(self, segments: list[LogSegment], recovery_point: int) -> list[LogSegment]:
        bases = [s.base_offset for s in segments]
        k = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        for seg in segments[:k]:
            self._check_indexes(seg)
        # A log that was never compacted has no offset gaps: recovery can demand contiguity.
        contiguous = not self.config.compact
        for i in range(k, len(segments)):
            seg = segments[i]
            result = seg.recover(contiguous=contiguous)
            seg.txn_index.truncate_to(seg.next_offset)      # entries of markers cut away
            self._recovered_epochs.extend((h.partition_leader_epoch, h.base_offset)
                                          for _pos, h in result.batches)
            if i < len(segments) - 1:
                seg.on_become_inactive()
            if result.reason is not None:
                for dropped in segments[i + 1:]:
                    log.warning("%s: dropping segment after the cut", dropped.log_path)
                    dropped.delete_files()
                self._dir_dirty = True
                return segments[:i + 1]
        return segments

    def _load_epochs(self) -> None:
        text = files.read_text(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT))
        entries: list[tuple[int, int]] = []
        if text is not None:
            try:
                entries = parse_epochs(text)
            except CheckpointError as e:
                log.warning("%s: ignoring bad leader-epoch-checkpoint: %s", self.dir, e)
        self.epochs = LeaderEpochCache(entries)
        changed = self.epochs.truncate_from_end(self._log_end_offset)
        changed |= self.epochs.truncate_from_start(self._log_start_offset)
        # Batches recovery re-read above the recovery point: the checkpoint may not have their
        # epochs yet (written with the next flush). A batch's epoch is in its header.
        for epoch, base in self._recovered_epochs:
            if epoch > self.epochs.latest_epoch and base >= self._log_start_offset:
                changed |= self.epochs.assign(epoch, base)
        self._recovered_epochs = []
        if changed:
            self._write_epochs()
        elif text is None:
            # A new log: an empty checkpoint says nothing that a missing or torn one does not
            # (both read as no epochs), so it needs no fsync.
            files.write_unsynced(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT),
                                 format_epochs(self.epochs.entries))

    def _write_epochs(self) -> None:
        """leader-epoch-checkpoint now, durably (tmp, fsync, rename, dir fsync)."""
        files.atomic_write(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT),
                           format_epochs(self.epochs.entries))
        self._epochs_dirty = False

    def _write_epochs_if_dirty(self) -> None:
        """Before the recovery point moves: the epochs of what it covers on disk."""
        if self._epochs_dirty:
            self._write_epochs()
