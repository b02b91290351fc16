"""Producer-state snapshots: `<offset, 20 digits>.snapshot` files in the partition directory, and
`ProducerStateStore`, which keeps a partition's `ProducerStateManager` in step with its log
(load at startup, snapshot on roll and at clean shutdown, reload on truncation, old snapshots
deleted with the segments below the log start offset). Kafka's ProducerStateManager file half.

A snapshot named N holds the state of every batch below offset N (the manager's map end offset).

File layout (big-endian), after Kafka's ProducerSnapshot v1: a version, then a CRC-32C of every
byte after the CRC field. Kafka's body keeps only the last batch of each producer; Riverbed's
keeps all cached batches (5, or producer.state.batches.retained), so duplicates of any of them are still recognised after a
restart. The file is Riverbed's own, not readable by Kafka's tools.

    position  size  field
     0         2    version          int16   2 (1 is still read: no transaction fields)
     2         4    crc              uint32  CRC-32C (Castagnoli) of bytes 6..end
     6         4    producer count   int32
    then per producer, by producer id:
               8    producer_id      int64
               2    producer_epoch   int16
               8    last_timestamp   int64
    (v2)       4    coordinator_epoch int32  of its last transaction marker, -1 none
    (v2)       8    current_txn_first_offset int64  its open transaction's first offset, -1 none
               4    batch count      int32   0..1024 (the window; v1: 1..), oldest first
    then per batch (32 bytes):
               4    first_seq        int32
               4    last_seq         int32
               8    first_offset     int64
               8    last_offset      int64
               8    timestamp        int64   the batch's max timestamp

Loading (Kafka's truncateAndReload): snapshots above the log end offset or below the log start
offset are deleted; the newest remaining one that decodes is loaded (a corrupt one is deleted
and the next older tried; none: empty state at the log start offset); then the log's batches
from the snapshot's offset to the log end are applied.
"""
from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterator

from crc32c import crc32c

from riverbed import errors
from riverbed.records import BatchHeader, iter_batches
from riverbed.records.control import ControlRecord, read_control_record
from services.storage_node.core.aborted_txns import AbortedTxn
from services.storage_node.core.producer_state import (
    MAX_CACHED_BATCHES, MAX_PRODUCER_STATE_WINDOW, BatchMetadata, Decision, ProducerStateEntry,
    ProducerStateManager, Verdict, resolve_old_duplicates, with_assigned_offsets)

_OUT_OF_ORDER = errors.ErrorCode.Value("OUT_OF_ORDER_SEQUENCE_NUMBER")
from services.storage_node.log import files

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 2
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_HEADER = struct.Struct(">hI")            # version, crc
_COUNT = struct.Struct(">i")
_PRODUCER_V1 = struct.Struct(">qhqi")     # producer_id, epoch, last_timestamp, batch count
# producer_id, epoch, last_timestamp, coordinator_epoch, current_txn_first_offset, batch count
_PRODUCER = struct.Struct(">qhqiqi")
_BATCH = struct.Struct(">iiqqq")          # first_seq, last_seq, first_offset, last_offset, ts
_CRC_START = _HEADER.size


class ProducerSnapshotError(errors.KafkaStorageError):
    """A snapshot file does not decode (bad length, version, CRC or contents)."""


# ---- the format ------------------------------------------------------------------------------
def snapshot_name(offset: int) -> str:
    return files.segment_name(offset, SNAPSHOT_SUFFIX)


def encode_snapshot(entries) -> bytes:
    """The file bytes for `entries` (ProducerStateEntry, any order; written by producer id)."""
    entries = sorted(entries, key=lambda e: e.producer_id)
    body = bytearray(_COUNT.pack(len(entries)))
    for e in entries:
        body += _PRODUCER.pack(e.producer_id, e.producer_epoch, e.last_timestamp,
                               e.coordinator_epoch, e.current_txn_first_offset, len(e.batches))
        for b in e.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
    return _HEADER.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Entries from snapshot bytes; ProducerSnapshotError on anything that is not a whole,
    CRC-valid version-1 or version-2 snapshot."""
    if len(data) < _HEADER.size + _COUNT.size:
        raise ProducerSnapshotError(f"snapshot of {len(data)} bytes is too short")
    version, crc = _HEADER.unpack_from(data, 0)
    if version not in (1, SNAPSHOT_VERSION):
        raise ProducerSnapshotError(f"unknown snapshot version {version}")
    layout = _PRODUCER if version == SNAPSHOT_VERSION else _PRODUCER_V1
    min_batches = 0 if version == SNAPSHOT_VERSION else 1
    actual = crc32c(memoryview(data)[_CRC_START:])
    if actual != crc:
        raise ProducerSnapshotError(f"snapshot CRC mismatch: stored {crc:#010x}, "
                                    f"computed {actual:#010x}")
    pos = _CRC_START
    (count,) = _COUNT.unpack_from(data, pos)
    pos += _COUNT.size
    entries = []
    try:
        if count < 0 or count * layout.size > len(data) - pos:
            raise ProducerSnapshotError(f"producer count {count} does not fit the file")
        previous_pid = -1
        for _ in range(count):
            if layout is _PRODUCER:
                pid, epoch, last_ts, coord_epoch, txn_first, nbatches = \
                    _PRODUCER.unpack_from(data, pos)
            else:
                pid, epoch, last_ts, nbatches = _PRODUCER_V1.unpack_from(data, pos)
                coord_epoch, txn_first = -1, -1
            pos += layout.size
            if not min_batches <= nbatches <= MAX_PRODUCER_STATE_WINDOW:
                raise ProducerSnapshotError(f"producer {pid}: {nbatches} batches")
            if pid <= previous_pid:
                raise ProducerSnapshotError(f"producer ids out of order at {pid}")
            previous_pid = pid
            batches = []
            for _ in range(nbatches):
                batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                pos += _BATCH.size
            entries.append(ProducerStateEntry(pid, epoch, tuple(batches), last_ts, coord_epoch,
                                              txn_first))
    except struct.error as e:
        raise ProducerSnapshotError(f"snapshot truncated: {e}") from None
    if pos != len(data):
        raise ProducerSnapshotError(f"{len(data) - pos} trailing bytes after the entries")
    return entries


# ---- files -----------------------------------------------------------------------------------
def list_snapshots(directory: str) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_SNAPSHOT_FILE.match, names) if m)


def write_snapshot(directory: str, offset: int, entries) -> str:
    """Write `<offset>.snapshot` atomically (tmp + fsync + rename + dir fsync). Returns the path.
    The `.tmp` left by a crash is removed by PartitionLog.open."""
    path = os.path.join(directory, snapshot_name(offset))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(encode_snapshot(entries))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    files.fsync_dir(directory)
    return path


def read_snapshot(directory: str, offset: int) -> list[ProducerStateEntry]:
    """Decode `<offset>.snapshot`; ProducerSnapshotError if it does not decode or holds a batch
    at or above its own offset."""
    with open(os.path.join(directory, snapshot_name(offset)), "rb") as f:
        data = f.read()
    entries = decode_snapshot(data)
    for e in entries:
        if e.last_offset >= offset or e.current_txn_first_offset >= offset:
            raise ProducerSnapshotError(
                f"producer {e.producer_id}: batch at offset {e.last_offset} (open transaction "
                f"at {e.current_txn_first_offset}) in a snapshot of the state below {offset}")
    return entries


def delete_snapshots(directory: str, *, below: int | None = None,
                     above: int | None = None) -> list[int]:
    """Delete snapshots with offset < `below` and/or offset > `above`. Returns their offsets."""
    doomed = [o for o in list_snapshots(directory)
              if (below is not None and o < below) or (above is not None and o > above)]
    for o in doomed:
        files.unlink_quietly(os.path.join(directory, snapshot_name(o)))
    return doomed


# ---- reading the log's batch headers ----------------------------------------------------------
def iter_batch_headers(plog, from_offset: int) -> Iterator[BatchHeader]:
    """Headers of the log's whole batches whose last offset is >= `from_offset`, in offset order,
    up to the log end at the call (no records decoded; the log is read in 64 KiB blocks).

    Uses only PartitionLog's public segment view; call it from the partition's writer (startup,
    truncation) so the segments do not change under it."""
    for h, _ in iter_batches_with_controls(plog, from_offset, decode_controls=False):
        yield h


def iter_batches_with_controls(plog, from_offset: int, *, decode_controls: bool = True
                               ) -> Iterator[tuple[BatchHeader, ControlRecord | None]]:
    """`iter_batch_headers`, each with its transaction marker decoded (None for a data batch,
    an undecodable control record (logged), or without `decode_controls`)."""
    end = plog.log_end_offset
    segments = plog.segments
    for i, seg in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= from_offset:
            continue
        if not seg.acquire():
            continue
        try:
            limit = seg.size
            found = seg.find_batch(from_offset, limit)
            if found is None:
                continue
            for pos, h in seg.headers_from(found[0], limit):
                if h.base_offset >= end:
                    return
                control = None
                if decode_controls and h.is_control and h.producer_id >= 0:
                    control = _control_of(seg.pread(h.size, pos), plog, h)
                yield h, control
        finally:
            seg.release()


def _control_of(data, plog, h: BatchHeader) -> ControlRecord | None:
    try:
        return read_control_record(data, 0)
    except errors.CorruptMessageError as e:
        log.warning("[%s-%d] control batch at %d does not decode: %s", plog.topic,
                    plog.partition, h.base_offset, e)
        return None


def controls_of(payload, headers: list[BatchHeader] | None = None) -> dict[int, ControlRecord]:
    """The transaction markers of a payload of whole batches, by base offset."""
    out: dict[int, ControlRecord] = {}
    if headers is not None and not any(h.is_control for h in headers):
        return out
    for pos, h in iter_batches(payload):
        if h.is_control and h.producer_id >= 0:
            try:
                out[h.base_offset] = read_control_record(payload, pos)
            except errors.CorruptMessageError:
                continue
    return out


# ---- a partition's log + state + snapshots ----------------------------------------------------
class ProducerStateStore:
    """Keeps one partition's ProducerStateManager in step with its PartitionLog and snapshots.

    Every method runs on the partition's writer (the same serialisation as appends).
    `append_as_leader` / `append_as_follower` wrap `PartitionLog.append` so that a roll during
    the append is seen (the active segment's base moves) and snapshotted with the state as it
    was before the append, named by the new segment's base offset, as Kafka does on roll.
    """

    def __init__(self, plog, state: ProducerStateManager | None = None, *,
                 batches_retained: int = MAX_CACHED_BATCHES) -> None:
        self.log = plog
        self.state = state if state is not None else ProducerStateManager(
            map_end_offset=plog.log_start_offset, batches_retained=batches_retained)

    @property
    def dir(self) -> str:
        return self.log.dir

    # ---- startup, truncation ------------------------------------------------------------
    def load(self, *, now_ms: int, producer_id_expiration_ms: int) -> None:
        """Startup, after the log is open (recovered): the newest good snapshot at or below the
        log end, plus the log from there; then expired producers are dropped."""
        self._reload()
        self.state.expire(now_ms, producer_id_expiration_ms)

    def truncate_to(self, offset: int, *, now_ms: int = 0) -> int:
        """Truncate the log (PartitionLog.truncate_to) and reload the state from the newest
        snapshot at or below the new end. Returns the new log end offset."""
        if offset <= self.log.log_start_offset and offset < self.log.log_end_offset:
            self.truncate_fully_and_start_at(offset, now_ms=now_ms)   # as PartitionLog does
            return offset
        new_end = self.log.truncate_to(offset, now_ms=now_ms)
        self._reload()
        return new_end

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int = 0) -> None:
        """PartitionLog.truncate_fully_and_start_at, every snapshot deleted, empty state."""
        self.log.truncate_fully_and_start_at(offset, now_ms=now_ms)
        delete_snapshots(self.dir, above=-1)            # every one
        self.state.restore((), offset)
        self.log.first_unstable_offset_hint = None

    def _reload(self) -> None:
        start, end = self.log.log_start_offset, self.log.log_end_offset
        delete_snapshots(self.dir, below=start, above=end)
        offset = start
        for candidate in reversed(list_snapshots(self.dir)):
            try:
                # restore() refuses entries that `_apply` could not have produced (ValueError)
                self.state.restore(read_snapshot(self.dir, candidate), candidate)
                offset = candidate
                break
            except (ProducerSnapshotError, OSError, ValueError) as e:
                log.warning("[%s-%d] ignoring producer snapshot %s: %s", self.log.topic,
                            self.log.partition, snapshot_name(candidate), e)
                files.unlink_quietly(os.path.join(self.dir, snapshot_name(candidate)))
        else:
            self.state.restore((), start)
        applied = self.state.rebuild(iter_batches_with_controls(self.log, offset))
        self.state.update_map_end_offset(end)
        self._index_completed()
        log.info("[%s-%d] producer state: %d producers from snapshot %d + %d batches",
                 self.log.topic, self.log.partition, len(self.state), offset, applied)

    # ---- appends ------------------------------------------------------------------------
    def append_as_leader(self, payload, headers: list[BatchHeader], *, now_ms: int,
                         leader_epoch: int, validated: bool = False,
                         allow_unsequenced: bool = False):
        """Check, append, apply. `headers` are the payload's (e.g. from
        `riverbed.records.iter_batches`); with `validated` they came from
        `riverbed.records.validate_batches` over this payload and the log does not check the
        CRCs again. `allow_unsequenced`: a coordinator's transactional write (no sequences).
        Returns (Decision, AppendInfo | None); the log is touched only for Verdict.APPEND.
        Errors of PartitionLog.append propagate, state unchanged."""
        decision = self.state.check_and_prepare(headers, log_whole=self.log_whole(),
                                                allow_unsequenced=allow_unsequenced)
        if decision.old_duplicates:        # a retry older than the window: find it in the log
            decision = self.find_old_duplicates(decision)
        if not decision.ok:
            return decision, None
        info = self._append(payload, now_ms=now_ms, leader_epoch=leader_epoch,
                            assign_offsets=True, validated=headers if validated else None)
        self.state.on_appended(with_assigned_offsets(headers, info.first_offset,
                                                     info.log_append_time_ms))
        if any(h.is_transactional for h in headers):
            self._index_completed()
        return decision, info

    def append_marker(self, payload, header: BatchHeader, control: ControlRecord, *,
                      now_ms: int, leader_epoch: int):
        """The leader writes a transaction marker (one control batch it built): checked against
        the producer's state (`check_marker`), appended, applied; an aborted transaction goes
        to the .txnindex. Returns ((error code, message) or None, AppendInfo | None)."""
        refusal = self.state.check_marker(header.producer_id, header.producer_epoch,
                                          control.coordinator_epoch)
        if refusal is not None:
            return refusal, None
        info = self._append(payload, now_ms=now_ms, leader_epoch=leader_epoch,
                            assign_offsets=True)
        (h,) = with_assigned_offsets([header], info.first_offset, info.log_append_time_ms)
        self.state.on_appended([h], {h.base_offset: control})
        self._index_completed()
        return None, info

    def _index_completed(self) -> None:
        """Every aborted transaction the last batches applied closed goes to the .txnindex of
        the segment holding its marker (idempotent per marker: a rebuild re-adds only what a
        crash lost); then the log's first unstable offset for the cleaner."""
        for c in self.state.take_completed():
            if c.aborted:
                self.log.add_aborted_txn(AbortedTxn(c.producer_id, c.first_offset,
                                                    c.last_offset, c.last_stable_offset))
        self.log.first_unstable_offset_hint = self.state.first_unstable_offset()

    def last_stable_offset(self, high_watermark: int) -> int:
        """The partition's LSO for its high watermark (ProducerStateManager.last_stable_offset);
        the log's first unstable offset (for the cleaner) follows it."""
        lso = self.state.last_stable_offset(high_watermark)
        self.log.first_unstable_offset_hint = self.state.first_unstable_offset()
        return lso

    def find_old_duplicates(self, decision: Decision) -> Decision:
        """Look for a DUPLICATE_SEQUENCE_NUMBER decision's batches in the log, newest segment
        first, below the oldest cached batch (a rare path: a retry older than the window)."""
        below = decision.old_duplicates_below
        guess = decision.old_duplicates_guess
        if guess >= 0:       # one producer writing alone: the batch starts right there
            near = self._headers_from(guess, below)
            resolved = resolve_old_duplicates(decision, near)
            if resolved is not decision:
                return resolved

        def newest_first():
            for seg in reversed([s for s in self.log.segments if s.base_offset < below]):
                if not seg.acquire():
                    continue
                try:
                    headers = [h for _, h in seg.headers_from(0, seg.size)
                               if h.base_offset < below]
                finally:
                    seg.release()
                yield from headers

        resolved = resolve_old_duplicates(decision, newest_first())
        if resolved is decision and self.log_whole():
            # Nothing was ever removed from this log (no retention, no compaction), so a batch
            # not in it was never written: a gap, not a duplicate. DUPLICATE_SEQUENCE_NUMBER
            # would make the client count it as written (acknowledged with offset -1, and
            # lost); OUT_OF_ORDER_SEQUENCE_NUMBER makes it bump its epoch and write it again.
            # (Seen when a later batch of a producer the leader had no state for was accepted
            # first, KIP-360, e.g. after two requests crossed on the way.)
            k = decision.old_duplicates[0]
            return Decision(Verdict.REFUSE, _OUT_OF_ORDER,
                            f"producer {k.producer_id}: sequences {k.first_seq}..{k.last_seq} "
                            "precede the batches remembered and are not in the log")
        return resolved

    def log_whole(self) -> bool:
        """Nothing was ever removed from the log: it starts at 0 and is not compacted (so a
        batch not in it was never written)."""
        return self.log.log_start_offset == 0 and not self.log.config.compact

    def _headers_from(self, offset: int, below: int) -> list[BatchHeader]:
        """Batch headers from the one holding `offset` up to `below` (offset index lookup, then
        a forward scan); [] when the offset is not in the log."""
        segs = [s for s in self.log.segments if s.base_offset <= offset]
        if not segs or offset < self.log.log_start_offset:
            return []
        out = []
        for seg in self.log.segments[len(segs) - 1:]:
            if seg.base_offset >= below or not seg.acquire():
                break
            try:
                limit = seg.size
                found = seg.find_batch(max(offset, seg.base_offset), limit)
                if found is None:
                    continue
                for _, h in seg.headers_from(found[0], limit):
                    if h.base_offset >= below:
                        return out
                    out.append(h)
            finally:
                seg.release()
        return out

    def append_as_follower(self, payload, headers: list[BatchHeader], *, now_ms: int):
        """Append the leader's batches with their offsets and apply them (no checks); the
        markers among them close their transactions here too."""
        info = self._append(payload, now_ms=now_ms, assign_offsets=False)
        self.state.on_replicated(headers, controls_of(payload, headers))
        self._index_completed()
        return info

    def _append(self, payload, **kw):
        before = self.log.active_segment.base_offset
        end_before = self.log.log_end_offset
        info = self.log.append(payload, **kw)
        rolled_at = self.log.active_segment.base_offset
        if rolled_at != before:
            self._snapshot_on_roll(rolled_at, end_before)
        return info

    def roll(self, now_ms: int) -> None:
        """PartitionLog.roll, with the snapshot at the new segment's base."""
        before = self.log.active_segment.base_offset
        self.log.roll(now_ms)
        if self.log.active_segment.base_offset != before:
            self._snapshot_on_roll(self.log.active_segment.base_offset,
                                   self.log.active_segment.base_offset)

    def _snapshot_on_roll(self, new_base: int, end_before: int) -> None:
        # The state covers [.., end_before); nothing lies in [end_before, new_base).
        if self.state.map_end_offset == end_before:
            self.state.update_map_end_offset(new_base)
            self.take_snapshot()

    # ---- snapshots ----------------------------------------------------------------------
    def take_snapshot(self) -> str | None:
        """Write `<map end offset>.snapshot` unless it exists. Returns the path written."""
        offset = self.state.map_end_offset
        if offset in list_snapshots(self.dir):
            return None
        return write_snapshot(self.dir, offset, self.state.entries())

    def close(self) -> str | None:
        """Clean shutdown: the snapshot at the log end (call before LogManager.close)."""
        if self.state.map_end_offset != self.log.log_end_offset:
            # Some append bypassed the store; the snapshot still describes [.., map end) and
            # the next start rebuilds the rest from the log.
            log.warning("[%s-%d] producer state ends at %d, the log at %d", self.log.topic,
                        self.log.partition, self.state.map_end_offset, self.log.log_end_offset)
        return self.take_snapshot()

    def delete_old_snapshots(self) -> list[int]:
        """Snapshots below the log start offset go with their segments (after retention or
        DeleteRecords moved the log start)."""
        return delete_snapshots(self.dir, below=self.log.log_start_offset)

    def expire(self, now_ms: int, producer_id_expiration_ms: int) -> list[int]:
        return self.state.expire(now_ms, producer_id_expiration_ms)
