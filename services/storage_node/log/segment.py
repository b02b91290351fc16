"""One segment's files: `<base>.log`, `<base>.index`, `<base>.timeindex`, and `<base>.txnindex`
when a transaction was aborted in it. Thin I/O only.

Decisions (where index entries go, where a torn tail is cut) come from `services.storage_node.core`.
Concurrency: one writer; readers use `size` (published after each append completes), the index
entry counts (published after each entry is written), and `pread` on the segment's fd. The fd is
reference counted so a segment renamed to `.deleted` and later unlinked stays readable by a read
in flight; reads never reopen files by name.
"""
from __future__ import annotations

import logging
import mmap
import os
import threading

from riverbed.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header
from services.storage_node.core import offset_index as oi
from services.storage_node.core.log_policy import ScanResult, scan_valid_prefix
from services.storage_node.log import files
from services.storage_node.log.txn_index import TxnIndex

log = logging.getLogger(__name__)

SCAN_BLOCK_BYTES = 64 * 1024


class MmapIndex:
    """A preallocated, memory-mapped index file of fixed-size entries."""

    def __init__(self, path: str, entry_size: int, *, max_bytes: int | None, new: bool) -> None:
        self.path = path
        self.entry_size = entry_size
        flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if new else 0)
        self._fd = os.open(path, flags, 0o644)
        self._mm: mmap.mmap | None = None
        self.capacity = 0
        self.count = 0
        file_size = os.fstat(self._fd).st_size
        capacity = file_size // entry_size
        self._map(file_size)
        counter = oi.count_offset_entries if entry_size == oi.OFFSET_ENTRY_SIZE else oi.count_time_entries
        self.count = counter(self._mm, capacity) if self._mm is not None else 0
        if max_bytes is not None:
            self.resize(max_bytes)

    def _map(self, size: int) -> None:
        size -= size % self.entry_size
        self._mm = mmap.mmap(self._fd, size) if size > 0 else None
        self.capacity = size // self.entry_size

    def resize(self, max_bytes: int) -> None:
        """Grow to `max_bytes` (sparse) for appends, or shrink to the entries in use."""
        size = max(max_bytes - max_bytes % self.entry_size, self.count * self.entry_size)
        if self._mm is not None:
            self._mm.flush()
        os.ftruncate(self._fd, size)
        # A reader may still hold the old map; it reads only entries below `count`, which stay
        # within the file, so the old map is dropped rather than closed.
        self._map(size)

    def trim(self) -> None:
        self.resize(0)

    @property
    def is_full(self) -> bool:
        return self.count >= self.capacity

    def append(self, entry: bytes) -> None:
        mm = self._mm
        assert mm is not None and self.count < self.capacity, "index full"
        at = self.count * self.entry_size
        mm[at:at + self.entry_size] = entry
        self.count += 1         # publish after the bytes are in place

    def snapshot(self):
        """(buffer, count) for a lookup; consistent because entries below count never change."""
        count = self.count
        return (self._mm if self._mm is not None else b""), count

    def truncate_entries(self, count: int) -> None:
        if count >= self.count:
            return
        old = self.count
        self.count = count
        if self._mm is not None:
            self._mm[count * self.entry_size:old * self.entry_size] = bytes((old - count) * self.entry_size)

    def reset(self) -> None:
        self.truncate_entries(0)

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def rename(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    def close(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:      # a reader holds it; it goes when they are done
                pass
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class LogSegment:
    """A segment: the `.log` data file plus its two sparse indexes."""

    def __init__(self, directory: str, base_offset: int, *, index_interval_bytes: int,
                 max_index_bytes: int, created_ms: int, jitter_ms: int = 0,
                 active: bool, new: bool, suffix: str = "") -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.created_ms = created_ms
        self.jitter_ms = jitter_ms
        self.max_index_bytes = max_index_bytes
        self.index_interval_bytes = index_interval_bytes
        self.suffix = suffix
        self.log_path = self._path(files.LOG_SUFFIX)
        flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if new else 0)
        self.fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self.fd).st_size      # committed bytes: readers never go past it
        idx_max = max_index_bytes if active else None
        self.offset_index = MmapIndex(self._path(files.INDEX_SUFFIX), oi.OFFSET_ENTRY_SIZE,
                                      max_bytes=idx_max, new=new)
        self.time_index = MmapIndex(self._path(files.TIME_INDEX_SUFFIX), oi.TIME_ENTRY_SIZE,
                                    max_bytes=idx_max, new=new)
        self.txn_index = TxnIndex(self._path(files.TXN_INDEX_SUFFIX))
        if new:
            files.unlink_quietly(self.txn_index.path)
        self.planner = oi.IndexPlanner(base_offset, index_interval_bytes)
        self._next_offset: int | None = base_offset if new else None
        self._first_batch_timestamp: int | None = None
        self.generation = 0            # bumped when bytes below `size` change (truncation)
        self.read_hint: tuple[int, int, int] | None = None   # (generation, offset, position)
        self.dirty = False             # bytes written since the last fsync
        self._refs = 0
        self._closing = False
        self._ref_lock = threading.Lock()
        self._load_planner_from_time_index()

    # ---- names --------------------------------------------------------------------------
    def _path(self, suffix: str) -> str:
        return os.path.join(self.dir, files.segment_name(self.base_offset, suffix) + self.suffix)

    # ---- reading --------------------------------------------------------------------------
    def acquire(self) -> bool:
        with self._ref_lock:
            if self.fd < 0:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        with self._ref_lock:
            self._refs -= 1
            if self._closing and self._refs == 0:
                self._close_now()

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self.fd, size, position)

    def headers_from(self, position: int, limit: int):
        """Yield (position, header) of whole batches in [position, limit), reading in blocks."""
        while position + HEADER_SIZE <= limit:
            block = self.pread(min(SCAN_BLOCK_BYTES, limit - position), position)
            pos = 0
            n = len(block)
            while pos + HEADER_SIZE <= n:
                header = read_header(block, pos)
                if position + pos + header.batch_length + LOG_OVERHEAD > limit:
                    return
                yield position + pos, header
                pos += header.batch_length + LOG_OVERHEAD
            if pos == 0:
                return          # not even one header in the block: a short read
            position += pos

    def find_batch(self, offset: int, limit: int, start_position: int | None = None
                   ) -> tuple[int, BatchHeader] | None:
        """The first whole batch below `limit` whose last offset is >= `offset`."""
        if start_position is None:
            start_position = 0
            buf, count = self.offset_index.snapshot()
            entry = oi.lookup_offset(buf, count, offset - self.base_offset)
            if entry is not None and entry[1] < limit:
                start_position = entry[1]
        for pos, header in self.headers_from(start_position, limit):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    @property
    def next_offset(self) -> int:
        """The offset after this segment's last batch (its base offset when empty)."""
        if self._next_offset is None:
            nxt = self.base_offset
            buf, count = self.offset_index.snapshot()
            start = oi.OFFSET_ENTRY.unpack_from(buf, (count - 1) * 8)[1] if count else 0
            for _pos, header in self.headers_from(start if start < self.size else 0, self.size):
                nxt = header.next_offset
            self._next_offset = nxt
        return self._next_offset

    @property
    def largest_timestamp(self) -> int:
        if self.planner.max_timestamp < 0 and self.size > 0:
            for _pos, header in self.headers_from(0, self.size):
                self.planner.on_batch(0, 0, header.last_offset, header.max_timestamp)
            self.planner.bytes_since_last_entry = 0
        return self.planner.max_timestamp

    @property
    def first_batch_timestamp(self) -> int:
        if self._first_batch_timestamp is None:
            if self.size < HEADER_SIZE:
                return -1
            self._first_batch_timestamp = read_header(self.pread(HEADER_SIZE, 0)).max_timestamp
        return self._first_batch_timestamp

    def _load_planner_from_time_index(self) -> None:
        buf, count = self.time_index.snapshot()
        if count:
            ts, rel = oi.TIME_ENTRY.unpack_from(buf, (count - 1) * 12)
            self.planner.max_timestamp = ts
            self.planner.offset_of_max_timestamp = self.base_offset + rel
            self.planner.last_time_entry_timestamp = ts

    # ---- writing --------------------------------------------------------------------------
    def append(self, data, total: int, batches: list[tuple[int, int, int, int]]) -> None:
        """Write `total` bytes of whole batches at the end: `data` is one buffer or a list of
        buffers (one pwritev). `batches` = (position in data, size, last offset, max timestamp).
        Index entries per index.interval.bytes."""
        start = self.size
        if isinstance(data, list):
            written = os.pwritev(self.fd, data, start)
            if written < total:                 # a short write: finish from a joined copy
                rest = memoryview(b"".join(data))
                while written < total:
                    written += os.pwrite(self.fd, rest[written:], start + written)
        else:
            view = memoryview(data)
            written = 0
            while written < total:
                written += os.pwrite(self.fd, view[written:], start + written)
        if start == 0 and batches:
            self._first_batch_timestamp = batches[0][3]
        self.dirty = True
        self.size = start + total               # publish: readers may now see these batches
        self._next_offset = batches[-1][2] + 1
        planner = self.planner
        for pos, size, last_offset, max_ts in batches:
            entry, time_entry = planner.on_batch(start + pos, size, last_offset, max_ts)
            if entry is not None and not self.offset_index.is_full:
                self.offset_index.append(oi.OFFSET_ENTRY.pack(*entry))
            if time_entry is not None and not self.time_index.is_full:
                self.time_index.append(oi.TIME_ENTRY.pack(*time_entry))

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def on_become_inactive(self) -> None:
        """At roll (and close): add the final time entry, trim both indexes to what is in use."""
        entry = self.planner.final_time_entry()
        if entry is not None:
            if self.time_index.is_full:
                self.time_index.resize((self.time_index.count + 1) * oi.TIME_ENTRY_SIZE)
            self.time_index.append(oi.TIME_ENTRY.pack(*entry))
        self.offset_index.trim()
        self.time_index.trim()

    def make_active(self) -> None:
        self.offset_index.resize(self.max_index_bytes)
        self.time_index.resize(self.max_index_bytes)

    def rebuild_indexes(self, batches: list[tuple[int, BatchHeader]] | None = None) -> None:
        """Recompute both indexes from the batches (scanning the file when not given)."""
        if batches is None:
            batches = list(self.headers_from(0, self.size))
        self.offset_index.reset()
        self.time_index.reset()
        if self.offset_index.capacity * 8 < self.max_index_bytes:
            self.offset_index.resize(self.max_index_bytes)
            self.time_index.resize(self.max_index_bytes)
        self.planner = oi.IndexPlanner(self.base_offset, self.index_interval_bytes)
        for pos, h in batches:
            entry, time_entry = self.planner.on_batch(pos, h.size, h.last_offset, h.max_timestamp)
            if entry is not None and not self.offset_index.is_full:
                self.offset_index.append(oi.OFFSET_ENTRY.pack(*entry))
            if time_entry is not None and not self.time_index.is_full:
                self.time_index.append(oi.TIME_ENTRY.pack(*time_entry))
        self._next_offset = batches[-1][1].next_offset if batches else self.base_offset
        self._first_batch_timestamp = batches[0][1].max_timestamp if batches else None

    def recover(self, *, contiguous: bool) -> ScanResult:
        """Check every batch (length, CRC, offsets); cut the file at the first bad byte;
        rebuild the indexes. Returns the scan (its `reason` says why it stopped early)."""
        file_size = os.fstat(self.fd).st_size
        if file_size == 0:
            result = ScanResult(0, [], None)
        else:
            with mmap.mmap(self.fd, file_size, access=mmap.ACCESS_READ) as mm:
                view = memoryview(mm)
                try:
                    result = scan_valid_prefix(view, base_offset=self.base_offset,
                                               next_offset=self.base_offset,
                                               contiguous=contiguous)
                finally:
                    view.release()
        if result.valid_end < file_size:
            log.warning("%s: truncating %d bytes at position %d: %s", self.log_path,
                        file_size - result.valid_end, result.valid_end, result.reason)
            os.ftruncate(self.fd, result.valid_end)
            self.generation += 1
            self.read_hint = None
        self.size = result.valid_end
        self.rebuild_indexes(result.batches)
        return result

    def truncate_to_position(self, position: int) -> None:
        """Drop bytes from `position` on (a batch boundary), then recompute the indexes."""
        if position >= self.size:
            return
        self.generation += 1
        self.read_hint = None
        self.size = position
        os.ftruncate(self.fd, position)
        self.dirty = True
        self.rebuild_indexes()

    # ---- durability and lifecycle ------------------------------------------------------------
    def flush(self) -> None:
        if self.fd >= 0:
            os.fsync(self.fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        self.dirty = False

    def rename_suffix(self, suffix: str) -> None:
        """Rename all three files to `<base>.<ext><suffix>` (e.g. `.deleted`, or '' from `.swap`)."""
        self.suffix = suffix
        # Indexes first, the log last: the log's rename is the commit point of a cleaner swap.
        self.offset_index.rename(self._path(files.INDEX_SUFFIX))
        self.time_index.rename(self._path(files.TIME_INDEX_SUFFIX))
        self.txn_index.rename(self._path(files.TXN_INDEX_SUFFIX))
        new_log = self._path(files.LOG_SUFFIX)
        os.rename(self.log_path, new_log)
        self.log_path = new_log

    def close(self) -> None:
        """Close when no read is in flight (at once if none)."""
        with self._ref_lock:
            self._closing = True
            if self._refs == 0:
                self._close_now()

    def _close_now(self) -> None:
        if self.fd >= 0:
            self.offset_index.close()
            self.time_index.close()
            os.close(self.fd)
            self.fd = -1

    def delete_files(self) -> None:
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path):
            files.unlink_quietly(path)
        self.close()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"
