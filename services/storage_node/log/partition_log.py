"""PartitionLog: one partition's segments — append, read, index, recover, retain, truncate.

One writer (append, roll, truncate, retention, cleaner swap hold `_lock`); any number of reader
threads, lock-free: a reader snapshots the log end offset and the immutable segment view, and
reads only up to each segment's committed `size`, published after an append's bytes are written.
"""
from __future__ import annotations

import bisect
import logging
import os
import random
import re
import struct
import threading
import time
from typing import NamedTuple

from riverbed import errors
from riverbed import records as rec
from services.storage_node.core import log_policy
from services.storage_node.core.aborted_txns import AbortedTxn, collect_aborted
from services.storage_node.core.checkpoints import CheckpointError, format_epochs, parse_epochs
from services.storage_node.core.leader_epoch import LeaderEpochCache
from services.storage_node.core.offset_index import lookup_time
from services.storage_node.log import files
from services.storage_node.log.cleaner import recover_interrupted_clean
from services.storage_node.log.config import LogConfig
from services.storage_node.log.segment import LogSegment

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

_PREFIX = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_LAST_OFFSET_DELTA_POSITION = 23
_STAMP = struct.Struct(">qii")          # baseOffset, batchLength, partitionLeaderEpoch
_MAX_IOV_BATCHES = 256                  # 2 iovecs per batch; IOV_MAX is 1024 on Linux
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")


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


class ReadResult(NamedTuple):
    data: bytes | memoryview     # whole batches, raw, as on disk
    first_offset: int            # base offset of the first batch returned; -1 when empty
    next_offset: int             # where the next read continues (requested offset when empty)
    log_start_offset: int
    log_end_offset: int


class _View:
    """An immutable snapshot of the segment list; replaced whole, never changed."""

    __slots__ = ("bases", "segments")

    def __init__(self, segments: list[LogSegment]) -> None:
        self.segments = tuple(segments)
        self.bases = [s.base_offset for s in segments]


class PartitionLog:
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

    # ---- opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str, topic: str, partition: int, config: LogConfig, *,
             now_ms: int, rng: random.Random, recovery_point: int = 0,
             log_start_offset: int = 0, needs_recovery: bool = False,
             cleaner_checkpoint: int = 0) -> PartitionLog:
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

    # ---- read ------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        """Raw whole batches from the batch holding `offset`, up to `max_bytes` (at least one
        batch when `min_one_batch`), only batches whose last offset is below `max_offset`."""
        end = self._log_end_offset
        view = self._view
        start = self._log_start_offset
        if offset < start or offset > end:
            raise errors.OffsetOutOfRangeError(
                f"offset {offset} outside [{start}, {end}]", topic=self.topic,
                partition=self.partition)
        bound = end if max_offset is None else min(end, max_offset)
        if offset < bound:
            i = max(bisect.bisect_right(view.bases, offset) - 1, 0)
            segments = view.segments
            while i < len(segments):
                seg = segments[i]
                if not seg.acquire():        # deleted and closed after we took the view
                    return self.read(offset, max_bytes, max_offset=max_offset,
                                     min_one_batch=min_one_batch)
                try:
                    result = self._read_segment(seg, offset, max_bytes, bound, min_one_batch)
                finally:
                    seg.release()
                if result is not None:
                    return ReadResult(result[0], result[1], result[2], start, end)
                i += 1
        return ReadResult(b"", -1, offset, start, end)

    @staticmethod
    def _read_segment(seg: LogSegment, offset: int, max_bytes: int, bound: int,
                      min_one_batch: bool):
        limit = seg.size
        generation = seg.generation
        hint = seg.read_hint
        if hint is not None and hint[0] == generation and hint[1] == offset and hint[2] <= limit:
            pos = hint[2]
        else:
            found = seg.find_batch(offset, limit)
            if found is None:
                return None
            pos = found[0]
        if pos + rec.HEADER_SIZE > limit:
            return None
        data = seg.pread(max(min(max_bytes, limit - pos), 0), pos)
        n = len(data)
        p = 0
        first = -1
        next_offset = offset
        while p + rec.HEADER_SIZE <= n:
            base, length = _PREFIX.unpack_from(data, p)
            size = length + rec.LOG_OVERHEAD
            if p + size > n:
                break
            last = base + _INT32.unpack_from(data, p + _LAST_OFFSET_DELTA_POSITION)[0]
            if last >= bound:
                break
            if first < 0:
                first = base
            p += size
            next_offset = last + 1
        if p == 0:
            header = rec.read_header(data if n >= rec.HEADER_SIZE else
                                     seg.pread(rec.HEADER_SIZE, pos))
            if header.last_offset < offset:
                return None
            if header.last_offset >= bound or not min_one_batch:
                return b"", -1, offset
            data = seg.pread(header.size, pos)
            p = n = len(data)
            first = header.base_offset
            next_offset = header.next_offset
        seg.read_hint = (generation, next_offset, pos + p)
        return (data if p == n else memoryview(data)[:p]), first, next_offset

    # ---- offsets by time -------------------------------------------------------------------
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`; -2 gives the
        log start offset and -1 the log end offset (timestamp -1). None when there is none."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self._log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._log_end_offset, -1
        start = self._log_start_offset
        for seg in self._view.segments:
            if seg.largest_timestamp < timestamp or not seg.acquire():
                continue
            try:
                buf, count = seg.time_index.snapshot()
                entry = lookup_time(buf, count, timestamp)
                from_offset = max(seg.base_offset + entry[1] if entry else seg.base_offset, start)
                limit = seg.size
                found = seg.find_batch(from_offset, limit)
                if found is None:
                    continue
                for pos, h in seg.headers_from(found[0], limit):
                    if h.max_timestamp < timestamp or h.last_offset < start:
                        continue
                    for r in rec.decode_batch(seg.pread(h.size, pos)):
                        if r.offset >= start and r.timestamp >= timestamp:
                            return r.offset, r.timestamp
            finally:
                seg.release()
        return None

    # ---- aborted transactions (.txnindex) ----------------------------------------------------
    def add_aborted_txn(self, entry: AbortedTxn) -> bool:
        """Record an aborted transaction in the txn index of the segment holding its marker
        (`entry.last_offset`); a second call for the same marker adds nothing."""
        view = self._view
        i = bisect.bisect_right(view.bases, entry.last_offset) - 1
        if i < 0:
            return False                 # below the log start: deleted already
        return view.segments[i].txn_index.add(entry)

    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed reader of [fetch_offset, upper_bound)
        needs (core.aborted_txns.collect_aborted over the segments from fetch_offset's)."""
        view = self._view
        i = max(bisect.bisect_right(view.bases, fetch_offset) - 1, 0)
        return collect_aborted((s.txn_index.entries for s in view.segments[i:]), fetch_offset,
                               upper_bound)

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
