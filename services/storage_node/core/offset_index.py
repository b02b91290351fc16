"""Kafka's sparse segment indexes as pure functions over bytes, plus the rule that places entries.

`.index` entries are 8 bytes: relative offset (int32) and position (int32), big-endian.
`.timeindex` entries are 12 bytes: timestamp (int64) and relative offset (int32).
Both are sorted; lookups are binary searches over `count` entries of any buffer (mmap, bytes).

`IndexPlanner` is the one place deciding where entries go (Kafka LogSegment.append): an offset
entry for a batch when more than `index.interval.bytes` were appended since the last entry, and a
time entry beside it when the largest timestamp so far grew. The live append path and index
rebuilding (recovery, cleaning, truncation) both use it, so they produce the same entries.
"""
from __future__ import annotations

import struct

OFFSET_ENTRY = struct.Struct(">ii")     # relative offset, position
TIME_ENTRY = struct.Struct(">qi")       # timestamp, relative offset
OFFSET_ENTRY_SIZE = OFFSET_ENTRY.size   # 8
TIME_ENTRY_SIZE = TIME_ENTRY.size       # 12
NO_TIMESTAMP = -1


def lookup_offset(buf, count: int, target_relative_offset: int) -> tuple[int, int] | None:
    """The entry (relative offset, position) with the largest relative offset <= target, or None."""
    lo, hi = 0, count - 1
    found = None
    unpack = OFFSET_ENTRY.unpack_from
    while lo <= hi:
        mid = (lo + hi) >> 1
        entry = unpack(buf, mid * 8)
        if entry[0] <= target_relative_offset:
            found = entry
            lo = mid + 1
        else:
            hi = mid - 1
    return found


def lookup_offset_by_position(buf, count: int, position: int) -> int:
    """How many leading entries have position < `position` (entries kept by a truncation)."""
    lo, hi = 0, count
    unpack = OFFSET_ENTRY.unpack_from
    while lo < hi:
        mid = (lo + hi) >> 1
        if unpack(buf, mid * 8)[1] < position:
            lo = mid + 1
        else:
            hi = mid
    return lo


def lookup_time(buf, count: int, timestamp: int) -> tuple[int, int] | None:
    """The entry (timestamp, relative offset) with the largest timestamp < `timestamp`, or None.

    Strictly less: every record up to that entry's offset has a timestamp below the target, so a
    scan for the first timestamp >= target may start there.
    """
    lo, hi = 0, count - 1
    found = None
    unpack = TIME_ENTRY.unpack_from
    while lo <= hi:
        mid = (lo + hi) >> 1
        entry = unpack(buf, mid * 12)
        if entry[0] < timestamp:
            found = entry
            lo = mid + 1
        else:
            hi = mid - 1
    return found


def count_offset_entries(buf, capacity: int) -> int:
    """Entries in use in a (maybe preallocated) offset index: trailing all-zero slots are unused.

    Relative offsets strictly increase, so only slot 0 may hold relative offset 0; the first later
    slot holding (0, 0) starts the unused region.
    """
    if capacity == 0:
        return 0
    unpack = OFFSET_ENTRY.unpack_from
    lo, hi = 1, capacity
    while lo < hi:
        mid = (lo + hi) >> 1
        if unpack(buf, mid * 8) == (0, 0):
            hi = mid
        else:
            lo = mid + 1
    if lo == 1 and unpack(buf, 0) == (0, 0):
        return 0        # a lone (0, 0) entry would point at position 0: harmless to drop
    return lo


def count_time_entries(buf, capacity: int) -> int:
    """Entries in use in a (maybe preallocated) time index; unused slots are all zero."""
    unpack = TIME_ENTRY.unpack_from
    lo, hi = 0, capacity
    while lo < hi:
        mid = (lo + hi) >> 1
        if unpack(buf, mid * 12) == (0, 0):
            hi = mid
        else:
            lo = mid + 1
    return lo


def offset_entries_valid(buf, count: int, base_offset: int, log_size: int) -> bool:
    """Kafka's sanity check, cheap: the last entry is in range and after the first."""
    if count == 0:
        return True
    first = OFFSET_ENTRY.unpack_from(buf, 0)
    last = OFFSET_ENTRY.unpack_from(buf, (count - 1) * 8)
    return 0 <= first[0] <= last[0] and 0 <= first[1] <= last[1] < max(log_size, 1)


class IndexPlanner:
    """Where index entries go, batch by batch (Kafka LogSegment.append). Pure state."""

    __slots__ = ("base_offset", "interval_bytes", "bytes_since_last_entry", "max_timestamp",
                 "offset_of_max_timestamp", "last_time_entry_timestamp")

    def __init__(self, base_offset: int, interval_bytes: int) -> None:
        self.base_offset = base_offset
        self.interval_bytes = interval_bytes
        self.bytes_since_last_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.last_time_entry_timestamp = NO_TIMESTAMP

    def on_batch(self, position: int, size: int, last_offset: int, max_timestamp: int
                 ) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """Account one appended batch; returns (offset entry or None, time entry or None)."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        offset_entry = time_entry = None
        if self.bytes_since_last_entry > self.interval_bytes:
            offset_entry = (last_offset - self.base_offset, position)
            time_entry = self.final_time_entry()
            self.bytes_since_last_entry = 0
        self.bytes_since_last_entry += size
        return offset_entry, time_entry

    def final_time_entry(self) -> tuple[int, int] | None:
        """The entry to add when the segment becomes inactive (or closes), if the max grew."""
        if self.max_timestamp > self.last_time_entry_timestamp and self.offset_of_max_timestamp >= 0:
            self.last_time_entry_timestamp = self.max_timestamp
            return (self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        return None
