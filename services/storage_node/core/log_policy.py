"""Storage decisions for one partition log, pure: roll, retention, recovery cut, cleaner plan.

No files, clocks or randomness of their own: inputs are numbers and buffers, time is passed in,
jitter comes from a `random.Random` the caller owns. The file layer (`services.storage_node.log`)
performs what these functions decide.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from riverbed import errors
from riverbed.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, validate_batch

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the policies need to know of a segment."""

    base_offset: int
    size_bytes: int
    largest_timestamp: int   # -1 when the segment holds no batch


# ---- roll ------------------------------------------------------------------------------------

def roll_jitter_ms(rng: random.Random, segment_jitter_ms: int, segment_ms: int) -> int:
    """Per-segment jitter subtracted from segment.ms (Kafka: abs(nextInt) % min(jitter, ms))."""
    if segment_jitter_ms <= 0:
        return 0
    return rng.randrange(max(1, min(segment_jitter_ms, segment_ms)))


def should_roll(*, segment_size: int, append_size: int, segment_bytes: int,
                first_batch_timestamp: int, segment_created_ms: int, append_max_timestamp: int,
                now_ms: int, segment_ms: int, jitter_ms: int, index_full: bool,
                time_index_full: bool, segment_base_offset: int, append_last_offset: int) -> bool:
    """Kafka LogSegment.shouldRoll: only a non-empty segment rolls.

    Reasons: the append would pass segment.bytes; segment.ms (minus this segment's jitter) has
    passed since the first batch's timestamp (or the segment's creation when that is unknown);
    an index is full; or a relative offset would overflow an int32.
    """
    if segment_size == 0:
        return False
    if segment_size > segment_bytes - append_size:
        return True
    if first_batch_timestamp >= 0:
        waited = append_max_timestamp - first_batch_timestamp
    else:
        waited = now_ms - segment_created_ms
    if waited > segment_ms - jitter_ms:
        return True
    if index_full or time_index_full:
        return True
    return append_last_offset - segment_base_offset > INT32_MAX


# ---- retention -------------------------------------------------------------------------------

def retention_deletable_count(segments: list[SegmentInfo], *, now_ms: int, retention_ms: int,
                              retention_bytes: int, log_start_offset: int,
                              delete_policy: bool) -> int:
    """How many leading segments retention deletes. Never the last (active) segment.

    A segment goes when it lies wholly below the log start offset (always), or, with the
    `delete` policy, when its largest timestamp is older than retention.ms, or while the log
    exceeds retention.bytes by at least the segment's size.
    """
    n = len(segments) - 1          # candidates: all but the active segment
    if n <= 0:
        return 0
    count = 0
    # below the log start offset: the next segment's base is <= log start
    while count < n and segments[count + 1].base_offset <= log_start_offset:
        count += 1
    if not delete_policy:
        return count
    if retention_ms >= 0:
        by_time = 0
        while by_time < n and 0 <= segments[by_time].largest_timestamp < now_ms - retention_ms:
            by_time += 1
        count = max(count, by_time)
    if retention_bytes >= 0:
        excess = sum(s.size_bytes for s in segments) - retention_bytes
        by_size = 0
        while by_size < n and excess - segments[by_size].size_bytes >= 0:
            excess -= segments[by_size].size_bytes
            by_size += 1
        count = max(count, by_size)
    return count


# ---- recovery --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ScanResult:
    """The valid prefix of a segment buffer."""

    valid_end: int                              # truncate the segment here
    batches: list[tuple[int, BatchHeader]]      # (position, header) of every valid batch
    reason: str | None                          # why the scan stopped early; None at a clean end


def scan_valid_prefix(buf, *, start: int = 0, base_offset: int, next_offset: int,
                      contiguous: bool = False) -> ScanResult:
    """Walk batches from `start`, checking each as on arrival (length, magic, CRC-32C) and that
    offsets increase and fit the segment; stop at the first bad byte.

    `next_offset` is the smallest offset the first batch may start at. The CRC does not cover
    the base offset, so with `contiguous` (a log never compacted: offsets have no gaps) each batch
    must start exactly at `next_offset`, which catches damage there too. A torn or garbage tail
    is cut; everything before it is kept.
    """
    end = len(buf)
    pos = start
    batches: list[tuple[int, BatchHeader]] = []
    reason = None
    while pos < end:
        if end - pos < HEADER_SIZE:
            reason = f"{end - pos} trailing bytes at position {pos}, less than a batch header"
            break
        try:
            header = validate_batch(buf, pos)
        except errors.KafkaError as e:
            reason = f"invalid batch at position {pos}: {e}"
            break
        if header.base_offset < next_offset or (contiguous and header.base_offset != next_offset):
            reason = f"batch at position {pos} has base offset {header.base_offset}, expected {next_offset}"
            break
        if header.last_offset - base_offset > INT32_MAX or header.base_offset < base_offset:
            reason = f"batch at position {pos} has offsets outside segment {base_offset}"
            break
        batches.append((pos, header))
        next_offset = header.next_offset
        pos += header.batch_length + LOG_OVERHEAD
    return ScanResult(pos, batches, reason)


# ---- log cleaner -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CleanPlan:
    first_dirty_offset: int        # cleaner checkpoint: records below were cleaned before
    first_uncleanable_offset: int  # a segment base: the active segment or too recent to clean
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def plan_clean(segments: list[SegmentInfo], *, cleaner_checkpoint: int, log_start_offset: int,
               now_ms: int, min_compaction_lag_ms: int,
               first_unstable_offset: int | None = None) -> CleanPlan | None:
    """Kafka LogCleanerManager: the dirty section runs from the cleaner checkpoint to the first
    uncleanable offset (the active segment, or the first segment with a record newer than
    min.compaction.lag.ms, or the segment holding the first unstable offset: a transaction not
    decided yet, whose records the cleaner may not judge). None when nothing is cleanable."""
    if len(segments) < 2:
        return None
    first_dirty = max(cleaner_checkpoint, log_start_offset, segments[0].base_offset)
    first_uncleanable = segments[-1].base_offset
    for seg in segments[:-1]:
        if min_compaction_lag_ms > 0 and seg.largest_timestamp > now_ms - min_compaction_lag_ms:
            first_uncleanable = seg.base_offset
            break
    if first_unstable_offset is not None:
        for seg in reversed(segments):
            if seg.base_offset <= first_unstable_offset:
                first_uncleanable = min(first_uncleanable, seg.base_offset)
                break
        else:
            first_uncleanable = segments[0].base_offset
    if first_dirty >= first_uncleanable:
        return None
    clean = dirty = 0
    for i, seg in enumerate(segments[:-1]):
        nxt = segments[i + 1].base_offset
        if nxt <= first_dirty:
            clean += seg.size_bytes
        elif seg.base_offset < first_uncleanable:
            dirty += seg.size_bytes
    return CleanPlan(first_dirty, first_uncleanable, clean, dirty)


def should_clean(plan: CleanPlan | None, min_cleanable_dirty_ratio: float) -> bool:
    return plan is not None and plan.dirty_bytes > 0 and \
        plan.dirty_ratio >= min_cleanable_dirty_ratio


def group_segments(segments: list[SegmentInfo], *, max_bytes: int) -> list[list[SegmentInfo]]:
    """Consecutive segments cleaned into one, bounded by segment.bytes (Kafka groupSegmentsBySize;
    the relative-offset bound holds because a group never spans more than one segment's worth of
    offsets beyond int32 only when segments themselves do, which roll prevents)."""
    groups: list[list[SegmentInfo]] = []
    current: list[SegmentInfo] = []
    size = 0
    for seg in segments:
        if current and size + seg.size_bytes > max_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size_bytes
    if current:
        groups.append(current)
    return groups


def is_aborted(producer_id: int, base_offset: int,
               aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """Whether a transactional batch of `producer_id` at `base_offset` belongs to an aborted
    transaction: `aborted` maps a producer to its aborted (first offset, marker offset) ranges
    (from the .txnindex entries)."""
    for first, marker in aborted.get(producer_id, ()):
        if first <= base_offset < marker:
            return True
    return False


def retain_marker(*, transaction_has_data: bool, marker_expired: bool) -> bool:
    """Kafka's cleaner keeps a transaction marker while records of its transaction remain
    before it, and afterwards until delete.retention.ms has passed (like a tombstone: a reader
    that started before may still need it). An ABORT marker's data is removed in the same pass,
    so it goes after delete.retention.ms."""
    return transaction_has_data or not marker_expired


def retain_record(*, key: bytes | None, offset: int, is_tombstone: bool,
                  latest_offset_for_key: int, tombstone_expired: bool) -> bool:
    """Keep a record when nothing later replaced its key, unless it is an expired tombstone.
    Keyless records are invalid in a compacted log and are dropped (as Kafka does)."""
    if key is None:
        return False
    if latest_offset_for_key > offset:
        return False
    return not (is_tombstone and tombstone_expired)
