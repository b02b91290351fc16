"""PartitionLog: one partition's segments — append, read, index, recover, retain, truncate.

One writer (append, roll, truncate, retention, cleaner swap hold `_lock`); any number of reader
threads, lock-free: a reader snapshots the log end offset and the immutable segment view, and
reads only up to each segment's committed `size`, published after an append's bytes are written.

Opening and recovery are the `LogRecovery` mixin (log/log_recovery.py), the lock-free read side
the `LogReads` mixin (log/log_reads.py); this module keeps the writer: append, roll, truncation,
retention, flushes and the leader epochs the replication layer assigns.
"""
from __future__ import annotations

import bisect
import logging
import os
import random
import struct
import threading
import time
from typing import NamedTuple

from riverbed import errors
from riverbed import records as rec
from services.storage_node.core import log_policy
from services.storage_node.core.aborted_txns import AbortedTxn
from services.storage_node.core.leader_epoch import LeaderEpochCache
from services.storage_node.log import files
from services.storage_node.log.config import LogConfig
from services.storage_node.log.log_reads import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, LogReads, ReadResult, _View)
from services.storage_node.log.log_recovery import LEADER_EPOCH_CHECKPOINT, LogRecovery
from services.storage_node.log.segment import LogSegment

__all__ = ["PartitionLog", "AppendInfo", "ReadResult", "UnexpectedAppendOffsetError",
           "FlushStats", "FLUSH_STATS", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP",
           "LEADER_EPOCH_CHECKPOINT"]

log = logging.getLogger(__name__)


_STAMP = struct.Struct(">qii")          # baseOffset, batchLength, partitionLeaderEpoch
_MAX_IOV_BATCHES = 256                  # 2 iovecs per batch; IOV_MAX is 1024 on Linux


class FlushStats:
    """Log flushes of this process: how many and their total seconds (read by the metrics)."""
    __slots__ = ("count", "seconds")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0

    def record(self, seconds: float) -> None:
        self.count += 1
        self.seconds += seconds


FLUSH_STATS = FlushStats()


class UnexpectedAppendOffsetError(errors.InvalidRecordError):
    """A replica append (assign_offsets=False) whose offsets do not follow the log end."""


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int      # -1 unless message.timestamp.type=LogAppendTime
    record_count: int
    batch_count: int
    log_start_offset: int


class PartitionLog(LogRecovery, LogReads):
    """One partition's log. The cleaner (log/cleaner.py) works on it through its public view
    and `replace_segments`; it never imports this module (no cleaner <-> partition_log
    cycle)."""

    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig,
                 rng: random.Random) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._rng = rng
        self._lock = threading.RLock()
        self._view = _View([])
        self._log_start_offset = 0
        self._log_end_offset = 0
        self.recovery_point = 0
        self.cleaner_checkpoint = 0
        self._flush_pending_before: int | None = None
        self._unflushed_messages = 0
        self._last_flush_ms = 0
        self._dir_dirty = False
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.epochs = LeaderEpochCache()
        # An epoch assigned by an append (a follower's first batch of a new leader epoch) or by
        # becoming leader is written to leader-epoch-checkpoint with the next flush, not at
        # once: one fsync per partition per epoch on the append path was what a first write
        # to many partitions cost (issue 15). The flush writes it before the recovery point
        # moves, so every epoch below the recovery point is on disk, and recovery re-assigns
        # the epochs of the batches above it from their headers (Kafka's LogSegment.recover).
        self._epochs_dirty = False
        # (leader epoch, base offset) of the batches recovery re-read, oldest first
        self._recovered_epochs: list[tuple[int, int]] = []
        self.closed = False
        self.truncations = 0     # bumped by every truncation (a log dir move re-copies then)
        # The first offset of a transaction not yet decided (or not yet replicated), kept by the
        # producer state's owner after each append; the cleaner stays below it. None: none.
        self.first_unstable_offset_hint: int | None = None

    # ---- properties ------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._view.segments

    def replace_segments(self, segments: list[LogSegment]) -> None:
        """Install a new segment list whole (the cleaner's swap; the caller holds the log's
        lock and has made the files durable)."""
        self._view = _View(segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._view.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._view.segments)

    def segment_infos(self) -> list[log_policy.SegmentInfo]:
        return [log_policy.SegmentInfo(s.base_offset, s.size, s.largest_timestamp)
                for s in self._view.segments]

    # ---- append ----------------------------------------------------------------------------
    def append(self, payload, *, now_ms: int, leader_epoch: int | None = None,
               assign_offsets: bool = True, validated: list | None = None) -> AppendInfo:
        """Append a produce payload of whole v2 batches.

        The whole payload is validated first (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
        INVALID_RECORD for keyless records in a compacted log); on error nothing is written.
        As leader (`assign_offsets`), each batch's base offset is set from the log end offset and
        its partition leader epoch to `leader_epoch` (both outside the CRC). As replica, the
        batches' offsets are kept and must not go backwards.

        `validated`: the payload's headers exactly as `riverbed.records.validate_batches`
        returned them for this payload (the produce path validates on admission): lengths,
        magic and CRCs are then not checked again; this log's max.message.bytes still is.
        """
        cfg = self.config
        if validated is None:
            headers = rec.validate_batches(payload, max_size=cfg.max_message_bytes)
        else:
            headers = validated
            for h in headers:
                if h.size > cfg.max_message_bytes:
                    raise errors.MessageTooLargeError(
                        f"batch of {h.size} bytes exceeds max.message.bytes "
                        f"{cfg.max_message_bytes}", topic=self.topic, partition=self.partition)
        if cfg.compact:
            self._check_keys(payload, headers)
        with self._lock:
            if self.closed:
                raise errors.KafkaStorageError("log is closed", topic=self.topic,
                                               partition=self.partition)
            leo = self._log_end_offset
            if not assign_offsets:
                expected = leo
                for h in headers:
                    if h.base_offset < expected:
                        raise UnexpectedAppendOffsetError(
                            f"batch base offset {h.base_offset} < expected {expected}",
                            topic=self.topic, partition=self.partition)
                    expected = h.next_offset
            append_time = now_ms if (cfg.log_append_time and assign_offsets) else -1
            # Leader appends of few batches are written without copying the payload: one
            # pwritev of (stamped 16-byte prefix, rest of the batch) pairs.
            copy = append_time >= 0 or (assign_offsets and len(headers) > _MAX_IOV_BATCHES)
            view = memoryview(payload)
            buf = bytearray(payload) if copy else None
            iov: list = []
            batches = []
            pos = 0
            offset = leo
            max_ts = -1
            records = 0
            epochs = []
            first_offset = leo if assign_offsets else headers[0].base_offset
            for h in headers:
                size = h.batch_length + rec.LOG_OVERHEAD
                if assign_offsets:
                    base = offset
                    epoch = leader_epoch if leader_epoch is not None else h.partition_leader_epoch
                    if copy:
                        rec.set_base_offset(buf, pos, offset)
                        rec.set_partition_leader_epoch(buf, pos, epoch)
                    else:
                        iov.append(_STAMP.pack(offset, h.batch_length, epoch))
                        iov.append(view[pos + _STAMP.size:pos + size])
                else:
                    base = h.base_offset
                    epoch = h.partition_leader_epoch
                if not epochs or epochs[-1][0] != epoch:
                    epochs.append((epoch, base))
                last = base + h.last_offset_delta
                batch_ts = h.max_timestamp
                if append_time >= 0:
                    rec.set_max_timestamp_log_append(buf, pos, append_time)
                    batch_ts = append_time
                batches.append((pos, size, last, batch_ts))
                if batch_ts > max_ts:
                    max_ts = batch_ts
                records += h.records_count
                offset = last + 1
                pos += size
            data = buf if copy else (iov if assign_offsets else view)
            last_offset = offset - 1
            seg = self.active_segment
            if log_policy.should_roll(
                    segment_size=seg.size, append_size=pos, segment_bytes=cfg.segment_bytes,
                    first_batch_timestamp=seg.first_batch_timestamp,
                    segment_created_ms=seg.created_ms, append_max_timestamp=max_ts,
                    now_ms=now_ms, segment_ms=cfg.segment_ms, jitter_ms=seg.jitter_ms,
                    index_full=seg.offset_index.is_full, time_index_full=seg.time_index.is_full,
                    segment_base_offset=seg.base_offset, append_last_offset=last_offset):
                seg = self._roll(first_offset, now_ms)
            seg.append(data, pos, batches)
            self._log_end_offset = offset           # publish
            for epoch, start in epochs:
                if epoch > self.epochs.latest_epoch and self.epochs.assign(epoch, start):
                    self._epochs_dirty = True       # written by the next flush
            self._unflushed_messages += records
            if self._unflushed_messages >= cfg.flush_messages:
                self.flush()
            return AppendInfo(first_offset, last_offset, max_ts, append_time, records,
                              len(headers), self._log_start_offset)

    def _check_keys(self, payload, headers) -> None:
        pos = 0
        for h in headers:
            if not h.is_control:
                for r in rec.decode_batch(payload, pos):
                    if r.key is None:
                        raise errors.InvalidRecordError(
                            "compacted topic requires a key on every record",
                            topic=self.topic, partition=self.partition)
            pos += h.batch_length + rec.LOG_OVERHEAD

    def _roll(self, new_base: int, now_ms: int) -> LogSegment:
        old = self.active_segment
        old.on_become_inactive()
        seg = self._new_segment_object(new_base, now_ms, active=True, new=True)
        seg.jitter_ms = log_policy.roll_jitter_ms(self._rng, self.config.segment_jitter_ms,
                                                  self.config.segment_ms)
        self._view = _View(list(self._view.segments) + [seg])
        self._flush_pending_before = new_base    # flushed by tick(), as Kafka's async flush
        self._dir_dirty = True
        log.info("[%s-%d] rolled new segment at offset %d", self.topic, self.partition, new_base)
        return seg

    def roll(self, now_ms: int) -> None:
        """Force a roll (if the active segment holds anything)."""
        with self._lock:
            if self.active_segment.size > 0:
                self._roll(self._log_end_offset, now_ms)

    # ---- aborted transactions (.txnindex) ----------------------------------------------------
    def add_aborted_txn(self, entry: AbortedTxn) -> bool:
        """Record an aborted transaction in the txn index of the segment holding its marker
        (`entry.last_offset`); a second call for the same marker adds nothing."""
        view = self._view
        i = bisect.bisect_right(view.bases, entry.last_offset) - 1
        if i < 0:
            return False                 # below the log start: deleted already
        return view.segments[i].txn_index.add(entry)

    # ---- truncation and log start ----------------------------------------------------------
    def truncate_to(self, offset: int, *, now_ms: int = 0) -> int:
        """Remove every batch whose last offset is >= `offset` (a replica diverged). Returns the
        new log end offset (<= `offset`, at a batch boundary)."""
        with self._lock:
            if offset >= self._log_end_offset:
                return self._log_end_offset
            if offset <= self._log_start_offset:
                self.truncate_fully_and_start_at(offset, now_ms=now_ms)
                return offset
            view = self._view
            i = max(bisect.bisect_right(view.bases, offset) - 1, 0)
            seg = view.segments[i]
            doomed = list(view.segments[i + 1:])
            found = seg.find_batch(offset, seg.size)
            if i + 1 < len(view.segments):
                seg.make_active()
                seg.jitter_ms = log_policy.roll_jitter_ms(
                    self._rng, self.config.segment_jitter_ms, self.config.segment_ms)
            self._view = _View(list(view.segments[:i + 1]))
            seg.truncate_to_position(found[0] if found else seg.size)
            self._log_end_offset = seg.next_offset
            seg.txn_index.truncate_to(self._log_end_offset)
            self._schedule_delete(doomed, now_ms)
            self._after_truncation()
            return self._log_end_offset

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int = 0) -> None:
        """Drop everything; the log restarts empty at `offset` (start = end = `offset`)."""
        with self._lock:
            doomed = list(self._view.segments)
            for seg in doomed:
                seg.rename_suffix(files.DELETED_SUFFIX)
            seg = self._new_segment_object(offset, now_ms, active=True, new=True)
            self._view = _View([seg])
            self._schedule_delete(doomed, now_ms, renamed=True)
            self._log_start_offset = self._log_end_offset = offset
            self.epochs.entries.clear()
            self._after_truncation()

    def _after_truncation(self) -> None:
        self.truncations += 1
        self.recovery_point = min(self.recovery_point, self._log_end_offset)
        self.cleaner_checkpoint = min(self.cleaner_checkpoint, self._log_end_offset)
        self._flush_pending_before = None
        self.epochs.truncate_from_end(self._log_end_offset)
        self._write_epochs()
        self._dir_dirty = True

    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset (DeleteRecords); whole segments below it go at the next
        retention pass. Returns the new log start offset."""
        with self._lock:
            if offset > self._log_end_offset:
                raise errors.OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: log end is {self._log_end_offset}",
                    topic=self.topic, partition=self.partition)
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                if self.epochs.truncate_from_start(offset):
                    self._write_epochs()
            return self._log_start_offset

    # ---- retention and deletion ------------------------------------------------------------
    def delete_old_segments(self, now_ms: int) -> int:
        """Apply retention.ms, retention.bytes (delete policy) and the log start offset."""
        cfg = self.config
        with self._lock:
            count = log_policy.retention_deletable_count(
                self.segment_infos(), now_ms=now_ms, retention_ms=cfg.retention_ms,
                retention_bytes=cfg.retention_bytes, log_start_offset=self._log_start_offset,
                delete_policy=cfg.delete)
            if count == 0:
                return 0
            doomed = list(self._view.segments[:count])
            self._view = _View(list(self._view.segments[count:]))
            new_start = self._view.segments[0].base_offset
            if new_start > self._log_start_offset:
                self._log_start_offset = new_start
                if self.epochs.truncate_from_start(new_start):
                    self._write_epochs()
            self._schedule_delete(doomed, now_ms)
            log.info("[%s-%d] retention deleted %d segments; log start offset %d", self.topic,
                     self.partition, count, self._log_start_offset)
            return count

    def _schedule_delete(self, segments: list[LogSegment], now_ms: int, *,
                         renamed: bool = False) -> None:
        """Rename to `.deleted` now; unlink after file.delete.delay.ms (see `delete_due`)."""
        for seg in segments:
            if not renamed:
                seg.rename_suffix(files.DELETED_SUFFIX)
            self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, seg))

    def delete_due(self, now_ms: int) -> int:
        with self._lock:
            due = [s for t, s in self._pending_deletes if t <= now_ms]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now_ms]
        for seg in due:
            seg.delete_files()       # the fd closes when the last read in flight releases it
        return len(due)

    # ---- durability ------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment with unflushed bytes; the recovery point becomes the log end.
        Counted in FLUSH_STATS (Kafka's LogFlushRateAndTimeMs)."""
        t0 = time.perf_counter()
        try:
            self._flush()
        finally:
            FLUSH_STATS.record(time.perf_counter() - t0)

    def _flush(self) -> None:
        with self._lock:
            leo = self._log_end_offset
            for seg in self._view.segments:
                if seg.dirty:
                    seg.flush()
            if self._dir_dirty:
                files.fsync_dir(self.dir)
                self._dir_dirty = False
            self._write_epochs_if_dirty()
            self.recovery_point = max(self.recovery_point, leo)
            self._unflushed_messages = 0
            self._flush_pending_before = None

    def tick(self, now_ms: int, *, background_io: bool = True) -> None:
        """Time-driven work: flush.ms, then `background_io` (unless False: the caller runs it
        itself, e.g. in a worker thread)."""
        if self.closed:
            return
        if now_ms - self._last_flush_ms >= self.config.flush_ms and self._unflushed_messages:
            self.flush()
            self._last_flush_ms = now_ms
        if background_io:
            self.background_io(now_ms)

    def background_io(self, now_ms: int) -> None:
        """The flush after a roll and the due deletions: whole-segment fsyncs and unlinks,
        which Kafka runs on its scheduler thread. Safe in any thread."""
        self.flush_rolled()
        self.delete_due(now_ms)

    def flush_rolled(self) -> None:
        """The flush after a roll (Kafka's asynchronous flush of the segments below the new
        one): fsync them and move the recovery point to the roll's offset. Safe in any thread,
        and the expensive part, the fsync of a rolled segment's data (hundreds of megabytes
        of dirty pages: half a second on this disk), runs without the log's lock, so appends
        and reads of the partition go on meanwhile. A truncation meanwhile wins: the recovery
        point then stays where it put it."""
        pending = self._flush_pending_before
        if pending is None or self.closed:
            return
        with self._lock:
            truncations = self.truncations
            held = [seg for seg in self._view.segments
                    if seg.base_offset < pending and seg.dirty and seg.acquire()]
        try:
            for seg in held:     # rolled segments: no append writes to them any more
                os.fsync(seg.fd)
        finally:
            for seg in held:
                seg.release()
        with self._lock:
            if (self.closed or self._flush_pending_before != pending
                    or self.truncations != truncations):
                return           # closed (flushed), flushed whole, or truncated meanwhile
            for seg in self._view.segments:
                if seg.base_offset < pending and seg.dirty:
                    seg.flush()  # the indexes, and the data written since (none: clean now)
            if self._dir_dirty:
                files.fsync_dir(self.dir)
                self._dir_dirty = False
            self._write_epochs_if_dirty()
            self.recovery_point = max(self.recovery_point, pending)
            self._flush_pending_before = None

    def close(self) -> None:
        """Flush, trim the active segment's indexes, close every file."""
        with self._lock:
            if self.closed:
                return
            self.flush()
            self.active_segment.on_become_inactive()
            self.active_segment.flush()
            self.closed = True
            for seg in self._view.segments:
                seg.close()
            for _t, seg in self._pending_deletes:
                seg.close()

    def abandon(self) -> None:
        """Close every file without flushing or trimming: the log dir failed (KIP-112), so
        nothing more is written; what is on disk is recovered by the next start."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for seg in list(self._view.segments) + [seg for _t, seg in self._pending_deletes]:
                try:
                    seg.close()
                except OSError:
                    pass

    # ---- leader epochs (for the replication layer) -----------------------------------------
    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """A new leader's epoch from its log end (Kafka's makeLeader). Written with the next
        flush: an entry starting at the log end is dropped on reopening anyway (no batch of it
        may be on disk), and recovery re-assigns it from the batches that have it."""
        with self._lock:
            if self.epochs.assign(epoch, start_offset):
                self._epochs_dirty = True

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self._log_end_offset)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
                f"end={self._log_end_offset}, segments={len(self._view.segments)})")
