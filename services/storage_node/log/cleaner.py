"""The log cleaner (compaction) for one PartitionLog, and the crash-safe segment swap.

Transactions (Kafka's cleaner, KIP-98): only segments below the first unstable offset are
cleaned (`PartitionLog.first_unstable_offset_hint`, kept by the producer state); the records of
aborted transactions (the .txnindex entries of the cleaned range) count for no key and are
removed; a transaction marker stays while its transaction still has records before it, then
until delete.retention.ms (`log_policy.retain_marker`); the cleaned segment's .txnindex keeps
the entries whose markers it keeps.

Decisions (what is cleanable, the dirty ratio, groups, which record survives) are in
`core.log_policy`; this module reads batches, re-encodes survivors with `riverbed.records` and
swaps files. Swap protocol (a crash at any step leaves a valid log; `recover_interrupted_clean`
runs before a log opens):

  1. write `<B>.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`), fsync
  2. write the manifest `<B>.swap-group` ("0", then the offset where the group ends: the base of
     the first segment after it), atomically
  3. rename the `.cleaned` files to `.swap`, the log last: **commit point**
  4. rename the group's old segment files to `.deleted` (unlinked after file.delete.delay.ms)
  5. rename the `.swap` files to their final names, the log last; remove the manifest

On open: `.cleaned` files are discarded (steps 1-2: old segments intact); a `<B>.log.swap`
means the clean committed: every old `.log` with base in [B, end) is removed and the swap
files take their final names (indexes, if lost, are rebuilt by the log). A manifest without a
`.log.swap` is stale and removed. Kafka uses the same `.cleaned`/`.swap` states; the manifest
is ours, because the cleaned segment may end before the group did (its tail compacted away).
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from riverbed import records as rec
from services.storage_node.core import log_policy
from services.storage_node.log import files
from services.storage_node.log.segment import LogSegment

log = logging.getLogger(__name__)

SWAP_MANIFEST_SUFFIX = ".swap-group"


class Throttler:
    """Caps bytes per second (log.cleaner.io.max.bytes.per.second) by sleeping; the clock and
    sleep are injected so tests run in virtual time."""

    def __init__(self, max_bytes_per_second: float, *, clock=time.monotonic,
                 sleep=time.sleep, window_s: float = 1.0) -> None:
        self.rate = max_bytes_per_second
        self.clock = clock
        self.sleep = sleep
        self.window_s = window_s
        self._start = clock()
        self._bytes = 0
        self.slept_s = 0.0

    def throttle(self, nbytes: int) -> None:
        if self.rate == float("inf") or self.rate <= 0:
            return
        self._bytes += nbytes
        now = self.clock()
        elapsed = now - self._start
        needed = self._bytes / self.rate
        if needed > elapsed:
            self.sleep(needed - elapsed)
            self.slept_s += needed - elapsed
        elif elapsed > self.window_s:      # idle credit does not accumulate past one window
            self._start = now
            self._bytes = 0


@dataclass(frozen=True, slots=True)
class CleanResult:
    first_dirty_offset: int
    first_uncleanable_offset: int
    dirty_ratio: float
    bytes_read: int
    bytes_written: int
    records_kept: int
    records_dropped: int
    groups: int


def _manifest_path(directory: str, base: int) -> str:
    return os.path.join(directory, files.segment_name(base, SWAP_MANIFEST_SUFFIX))


def recover_interrupted_clean(directory: str) -> None:
    """Finish committed swaps and discard uncommitted ones (see the module docstring)."""
    if not os.path.isdir(directory):
        return
    names = os.listdir(directory)
    for name in names:
        if name.endswith(files.CLEANED_SUFFIX):
            files.unlink_quietly(os.path.join(directory, name))
    for name in names:
        if not name.endswith(files.LOG_SUFFIX + files.SWAP_SUFFIX):
            continue
        base = int(name[:20])
        text = files.read_text(_manifest_path(directory, base))
        end = _parse_manifest(text)
        if end is None:            # no manifest: Kafka's rule, the swap's own offset range
            end = _next_offset_of(os.path.join(directory, name), base)
        log.warning("%s: completing an interrupted cleaner swap of [%d, %d)", directory, base, end)
        for other in os.listdir(directory):
            stem, ext = os.path.splitext(other)
            if ext in files.SEGMENT_SUFFIXES and stem.isdigit() and base <= int(stem) < end:
                files.unlink_quietly(os.path.join(directory, other))
        for ext in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX,
                    files.LOG_SUFFIX):
            src = os.path.join(directory, files.segment_name(base, ext) + files.SWAP_SUFFIX)
            if os.path.exists(src):
                os.rename(src, os.path.join(directory, files.segment_name(base, ext)))
        files.fsync_dir(directory)
    for name in os.listdir(directory):
        if name.endswith(files.SWAP_SUFFIX) or name.endswith(SWAP_MANIFEST_SUFFIX):
            files.unlink_quietly(os.path.join(directory, name))


def _parse_manifest(text: str | None) -> int | None:
    if text is None:
        return None
    lines = text.split()
    if len(lines) != 2 or lines[0] != "0":
        return None
    try:
        return int(lines[1])
    except ValueError:
        return None


def _next_offset_of(path: str, base: int) -> int:
    with open(path, "rb") as f:
        data = f.read()
    nxt = base + 1          # at least the old segment of the same name
    for _pos, header in rec.iter_batches(data):
        nxt = header.next_offset
    return nxt


def clean_log(plog, *, now_ms: int, throttler: Throttler | None = None,
              force: bool = False) -> CleanResult | None:
    """Compact `plog` once if its dirty ratio reaches min.cleanable.dirty.ratio (or `force`).

    Keeps the latest record per key (offsets and order unchanged), drops tombstones whose
    segment is older than delete.retention.ms, never touches the active segment or records
    newer than min.compaction.lag.ms. Returns what was done, or None.
    """
    cfg = plog.config
    if not cfg.compact or plog.closed:
        return None
    throttle = throttler.throttle if throttler is not None else (lambda n: None)
    segments = list(plog.segments)
    infos = [log_policy.SegmentInfo(s.base_offset, s.size, s.largest_timestamp) for s in segments]
    plan = log_policy.plan_clean(infos, cleaner_checkpoint=plog.cleaner_checkpoint,
                                 log_start_offset=plog.log_start_offset, now_ms=now_ms,
                                 min_compaction_lag_ms=cfg.min_compaction_lag_ms,
                                 first_unstable_offset=getattr(
                                     plog, "first_unstable_offset_hint", None))
    if plan is None or not (force or log_policy.should_clean(plan, cfg.min_cleanable_dirty_ratio)):
        return None
    # The cleaner may run beside the partition's appends, truncations and closes (the storage
    # node runs it in its log-maintenance thread, as Kafka's cleaner threads): the segments
    # it reads stay open until it is done, and a truncation or a close meanwhile cancels the
    # swap (the cleaned copy would bring back truncated records).
    truncations = plog.truncations
    held = [seg for seg in segments if seg.acquire()]
    try:
        if len(held) != len(segments):
            return None                                     # closed meanwhile
        return _clean(plog, segments, plan, now_ms, throttle, truncations)
    except Exception:
        if plog.closed or plog.truncations != truncations:
            log.info("[%s-%d] cleaning aborted: the log was truncated or closed", plog.topic,
                     plog.partition)
            return None
        raise
    finally:
        for seg in held:
            seg.release()


def _clean(plog, segments: list[LogSegment], plan, now_ms: int, throttle,
           truncations: int) -> CleanResult | None:
    cfg = plog.config
    stats = {"read": 0, "written": 0, "kept": 0, "dropped": 0}
    cleanable = [s for s in segments if s.base_offset < plan.first_uncleanable_offset]

    # 0. aborted transactions of the cleanable range: producer -> (first offset, marker offset)
    aborted: dict[int, list[tuple[int, int]]] = {}
    for seg in cleanable:
        for e in seg.txn_index.entries:
            aborted.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))

    # 1. the offset map: key -> offset of its latest record in the dirty section (records of
    #    aborted transactions do not count)
    latest: dict[bytes, int] = {}
    for i, seg in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if seg.base_offset >= plan.first_uncleanable_offset or (nxt is not None and nxt <= plan.first_dirty_offset):
            continue
        for pos, header in seg.headers_from(0, seg.size):
            if header.is_control or header.last_offset < plan.first_dirty_offset:
                continue
            if header.is_transactional and log_policy.is_aborted(
                    header.producer_id, header.base_offset, aborted):
                continue
            data = seg.pread(header.size, pos)
            throttle(len(data))
            stats["read"] += len(data)
            for r in rec.decode_batch(data):
                if r.key is not None and r.offset >= plan.first_dirty_offset:
                    latest[r.key] = r.offset

    # 2. recopy every cleanable segment, group by group, from the log start
    by_base = {s.base_offset: s for s in cleanable}
    txn_data: dict[int, bool] = {}     # producer -> its current transaction kept records
    groups = log_policy.group_segments(
        [log_policy.SegmentInfo(s.base_offset, s.size, s.largest_timestamp) for s in cleanable],
        max_bytes=cfg.segment_bytes)
    done = 0
    for group in groups:
        if not _clean_group(plog, [by_base[g.base_offset] for g in group], latest, now_ms,
                            throttle, stats, truncations, aborted, txn_data):
            log.info("[%s-%d] cleaning aborted: the log changed", plog.topic, plog.partition)
            return None
        done += 1
    with plog._lock:
        if plog.truncations == truncations:     # else the truncation has set it
            plog.cleaner_checkpoint = plan.first_uncleanable_offset
    log.info("[%s-%d] cleaned [%d, %d): kept %d records, dropped %d", plog.topic,
             plog.partition, plan.first_dirty_offset, plan.first_uncleanable_offset,
             stats["kept"], stats["dropped"])
    return CleanResult(plan.first_dirty_offset, plan.first_uncleanable_offset, plan.dirty_ratio,
                       stats["read"], stats["written"], stats["kept"], stats["dropped"], done)


def _runs(records):
    """Split records into runs of consecutive offsets (the builder numbers deltas 0, 1, 2...)."""
    run = [records[0]]
    for r in records[1:]:
        if r.offset == run[-1].offset + 1:
            run.append(r)
        else:
            yield run
            run = [r]
    yield run


def _clean_group(plog, group: list[LogSegment], latest: dict[bytes, int], now_ms: int,
                 throttle, stats, truncations: int,
                 aborted: dict[int, list[tuple[int, int]]] | None = None,
                 txn_data: dict[int, bool] | None = None) -> bool:
    cfg = plog.config
    directory = plog.dir
    base = group[0].base_offset
    cleaned = LogSegment(directory, base, index_interval_bytes=cfg.index_interval_bytes,
                         max_index_bytes=cfg.segment_index_bytes, created_ms=now_ms,
                         active=True, new=True, suffix=files.CLEANED_SUFFIX)
    aborted = aborted if aborted is not None else {}
    txn_data = txn_data if txn_data is not None else {}
    kept_markers: set[int] = set()
    try:
        for seg in group:
            largest = seg.largest_timestamp
            expired = largest >= 0 and largest + cfg.delete_retention_ms <= now_ms
            for pos, h in seg.headers_from(0, seg.size):
                data = seg.pread(h.size, pos)
                throttle(len(data))
                stats["read"] += len(data)
                if h.is_control:
                    if h.producer_id >= 0 and not log_policy.retain_marker(
                            transaction_has_data=txn_data.pop(h.producer_id, False),
                            marker_expired=expired):
                        stats["dropped"] += h.records_count
                        continue
                    kept_markers.add(h.base_offset)
                    out = [data]
                elif h.is_transactional and log_policy.is_aborted(h.producer_id, h.base_offset,
                                                                   aborted):
                    stats["dropped"] += h.records_count    # an aborted transaction's records
                    continue
                else:
                    records = rec.decode_batch(data)
                    keep = [r for r in records if log_policy.retain_record(
                        key=r.key, offset=r.offset, is_tombstone=r.value is None,
                        latest_offset_for_key=latest.get(r.key, -1) if r.key is not None else -1,
                        tombstone_expired=expired)]
                    stats["kept"] += len(keep)
                    stats["dropped"] += len(records) - len(keep)
                    if keep and h.is_transactional:
                        txn_data[h.producer_id] = True
                    if not keep:
                        continue
                    if len(keep) == len(records):
                        out = [data]
                    else:
                        out = [_rebuild(h, run) for run in _runs(keep)]
                for batch in out:
                    hdr = rec.read_header(batch)
                    cleaned.append(batch, len(batch), [(0, len(batch), hdr.last_offset, hdr.max_timestamp)])
                    throttle(len(batch))
                    stats["written"] += len(batch)
        for seg in group:          # the aborted transactions whose markers stay
            for e in seg.txn_index.entries:
                if e.last_offset in kept_markers:
                    cleaned.txn_index.add(e)
        cleaned.on_become_inactive()
        cleaned.flush()
        return _swap(plog, group, cleaned, now_ms, truncations)
    except Exception:       # a failpoint's SimulatedCrash (BaseException) leaves files as a crash would
        cleaned.delete_files()
        raise


def _rebuild(h, run) -> bytes:
    seq = h.base_sequence + (run[0].offset - h.base_offset) if h.base_sequence >= 0 else -1
    return rec.build_batch(((r.timestamp, r.key, r.value, r.headers) for r in run),
                           compression=h.compression, base_offset=run[0].offset,
                           producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                           base_sequence=seq, partition_leader_epoch=h.partition_leader_epoch,
                           is_transactional=h.is_transactional, timestamp_type=h.timestamp_type)


class SimulatedCrash(BaseException):
    """Raised by a test failpoint to stop a swap midway, leaving the files as a crash would."""


# Failpoint for tests: a callable(step: str) that may raise SimulatedCrash at a swap step.
crash_at = None


def _step(name: str) -> None:
    if crash_at is not None:
        crash_at(name)


def _swap(plog, group: list[LogSegment], cleaned: LogSegment, now_ms: int,
          truncations: int) -> bool:
    directory = plog.dir
    with plog._lock:
        if plog.closed or plog.truncations != truncations:
            cleaned.delete_files()
            return False
        current = list(plog.segments)
        try:
            i = next(k for k, s in enumerate(current) if s is group[0])
        except StopIteration:
            cleaned.delete_files()
            return False
        if current[i:i + len(group)] != group or i + len(group) >= len(current):
            cleaned.delete_files()
            return False
        end = current[i + len(group)].base_offset
        manifest = _manifest_path(directory, cleaned.base_offset)
        files.atomic_write(manifest, f"0\n{end}\n")
        _step("manifest")
        cleaned.rename_suffix(files.SWAP_SUFFIX)
        files.fsync_dir(directory)
        _step("swap")                                     # committed
        for seg in group:
            seg.rename_suffix(files.DELETED_SUFFIX)
        _step("deleted")
        cleaned.rename_suffix("")
        files.fsync_dir(directory)
        files.unlink_quietly(manifest)
        plog.replace_segments(current[:i] + [cleaned] + current[i + len(group):])
        plog._schedule_delete(group, now_ms, renamed=True)
        return True
