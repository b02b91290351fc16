"""A partition log's read side: the immutable segment view and the lock-free readers.

A mixin of `PartitionLog` (log/partition_log.py), split out of it along this seam; it never
imports partition_log. Readers take no lock: a reader snapshots the log end offset and the
`_View` (a segment list replaced whole, never changed), and reads only up to each segment's
committed `size`. `read` returns raw whole batches, `offset_for_timestamp` answers
LIST_OFFSETS by time, `collect_aborted_transactions` what a read_committed reader skips.
partition_log re-exports `ReadResult`, `EARLIEST_TIMESTAMP` and `LATEST_TIMESTAMP`.
"""
from __future__ import annotations

import bisect
import struct
from typing import NamedTuple

from riverbed import errors
from riverbed import records as rec
from services.storage_node.core.aborted_txns import AbortedTxn, collect_aborted
from services.storage_node.core.offset_index import lookup_time
from services.storage_node.log.segment import LogSegment

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

_PREFIX = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_LAST_OFFSET_DELTA_POSITION = 23


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


class LogReads:
    """read, offset_for_timestamp, collect_aborted_transactions (mixed into PartitionLog)."""

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

    # ---- aborted transactions for read_committed readers ---------------------------------
    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed reader of [fetch_offset, upper_bound)
        needs (core.aborted_txns.collect_aborted over the segments from fetch_offset's)."""
        view = self._view
        i = max(bisect.bisect_right(view.bases, fetch_offset) - 1, 0)
        return collect_aborted((s.txn_index.entries for s in view.segments[i:]), fetch_offset,
                               upper_bound)
