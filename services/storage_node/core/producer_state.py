"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, KIP-98). Pure.

What it keeps, per producer id: the producer epoch, the metadata of the last batches it
appended (5 in Kafka, `producer.state.batches.retained` here: the window of batches a retry may
repeat and still be recognised) (first/last sequence, first/last offset, max timestamp), and the last batch's max
timestamp (for `producer.id.expiration.ms`). Plus `map_end_offset`: the offset after the last
batch applied (Kafka's `lastMapOffset`); the state describes exactly the batches below it.

Who calls what (the leader serialises check -> append -> on_appended per partition):

    leader   decision = check_and_prepare(headers)        # nothing changes
             APPEND    -> log.append(...) -> on_appended(headers with the assigned offsets)
             DUPLICATE -> answer NONE with decision.first_offset (no append)
             REFUSE    -> answer decision.error_code for the partition (no append)
    follower log.append(leader's batches) -> on_replicated(their headers)   # no checks
    startup  restore(snapshot entries, snapshot offset) + rebuild(headers from that offset)

Sequence rules (Kafka's ProducerAppendInfo.checkProducerEpoch/checkSequence and
Log.analyzeAndValidateProducerState, for a client append):

- producer_id < 0: not idempotent, always passes (Kafka's `hasProducerId()` is id > -1).
- producer_id >= 0 with base_sequence < 0 or producer_epoch < 0: INVALID_RECORD (Kafka's
  LogValidator refuses a negative sequence from a client).
- duplicate: same epoch and (first_seq, last_seq) equal to one of the cached batches -> the
  batch is already in the log; answered with the cached offsets (Kafka returns NONE and the
  original offset). Checked first, against the committed state, as Kafka does.
- epoch older than the known one: INVALID_PRODUCER_EPOCH.
- epoch newer than the known one: first_seq must be 0, else OUT_OF_ORDER_SEQUENCE_NUMBER.
- same epoch: first_seq == last_seq + 1 (int32 wraps: Integer.MAX_VALUE is followed by 0) is in
  sequence; a batch wholly before the oldest cached batch is an old duplicate: the decision is
  DUPLICATE_SEQUENCE_NUMBER with the batches to look for (`Decision.old_duplicates`); the log
  layer finds them in the log (`resolve_old_duplicates` over its batch headers) and answers
  like a cached duplicate, with the offsets they have. Only a batch no longer in the log (deleted
  by retention) stays DUPLICATE_SEQUENCE_NUMBER with offset -1 (the client counts it as
  written). Anything else OUT_OF_ORDER_SEQUENCE_NUMBER.
- unknown producer id (never seen, expired, or its batches deleted and no snapshot had it): any
  sequence is accepted. This is Kafka's behaviour since 2.5 (KIP-360): a broker without state
  cannot tell a gap from retention, so it accepts and the producer's sequence continues.
  `reject_unknown_producer_sequence=True` gives the pre-KIP-360 behaviour instead
  (UNKNOWN_PRODUCER_ID unless the sequence starts at 0). And when the caller says the log is
  whole (`log_whole=True`: nothing was ever removed from it, no retention, no compaction), a
  producer with no state cannot have lost batches to retention: a first batch with a sequence
  other than 0 is OUT_OF_ORDER_SEQUENCE_NUMBER (its earlier batches are still on their way, e.g.
  two requests crossed in a gateway; accepting it would turn the earlier batch into an
  "old duplicate" that was never written).

A payload is decided as a whole (all-or-nothing per partition): the first refusal refuses it;
a payload whose idempotent batches are all duplicates is a DUPLICATE; a payload that mixes
duplicates with new batches is refused with OUT_OF_ORDER_SEQUENCE_NUMBER (a client never sends
that; appending part of it would need the payload cut). Several batches of one producer in a
payload must follow each other.

Applying a batch (`on_appended`, `on_replicated`, `rebuild` use the same code, so rebuilding
from the log yields exactly the state built incrementally): a new epoch clears the cached
batches; the batch's metadata is appended and only the last 5 kept; the last timestamp becomes
the batch's max timestamp (Kafka keeps the batch timestamp, so the state is a function of the
log alone).

Transactions (KIP-98; Kafka's ProducerStateEntry.currentTxnFirstOffset, ongoingTxns,
unreplicatedTxns, ProducerAppendInfo.appendEndTxnMarker):

- a transactional batch of a producer without an open transaction here opens one at its base
  offset; the producer's next transaction marker (a control batch, decoded by the caller into a
  `ControlRecord`) closes it: a `CompletedTxn` (first offset, marker offset, aborted or not, the
  last stable offset right after it) that the log layer takes with `take_completed()` (an
  aborted one goes to the segment's .txnindex);
- the last stable offset (`last_stable_offset(hw)`) is the first offset of the oldest
  transaction still open, or completed with its marker not yet below the high watermark, else
  the high watermark: read_committed consumers read only below it;
- checks on client batches: a control batch is refused (INVALID_RECORD: only the leader writes
  markers); a non-transactional batch of a producer with an open transaction is
  INVALID_TXN_STATE; a transactional batch without a sequence (base sequence -1) is accepted
  only from a coordinator (`allow_unsequenced`, TXN_OFFSET_COMMIT's writes to
  __consumer_offsets), with the epoch check alone;
- a marker (`check_marker`) from an older producer epoch is INVALID_PRODUCER_EPOCH, from an
  older coordinator epoch than the producer's last marker TRANSACTION_COORDINATOR_FENCED; a
  marker at a newer producer epoch (the coordinator fenced the producer: a timeout, a new
  instance) moves the producer to that epoch and forgets its cached batches, so the fenced
  instance's later writes are refused;
- a producer with an open transaction never expires; snapshots keep each producer's open
  transaction and coordinator epoch, so open transactions survive restarts.
"""
from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass

from riverbed import errors
from riverbed.records import BatchHeader
from riverbed.records.control import ControlRecord

__all__ = ["BatchMetadata", "ProducerStateEntry", "Verdict", "Decision", "ProducerStateManager",
           "CompletedTxn",
           "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "MAX_CACHED_BATCHES", "SEQ_MOD",
           "MAX_PRODUCER_STATE_WINDOW", "BatchKey", "resolve_old_duplicates",
           "DEFAULT_PRODUCER_ID_EXPIRATION_MS", "next_sequence", "with_assigned_offsets"]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_CACHED_BATCHES = 5                 # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
# producer.state.batches.retained may raise the window up to this (a snapshot entry holds at most
# this many batches; bounded so a corrupt count cannot allocate without limit).
MAX_PRODUCER_STATE_WINDOW = 1024
SEQ_MOD = 1 << 31                      # sequences are int32 >= 0; MAX_VALUE wraps to 0
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000   # producer.id.expiration.ms (Kafka >= 2.8: 1 day)

_NONE = errors.ErrorCode.Value("NONE")
_OUT_OF_ORDER = errors.ErrorCode.Value("OUT_OF_ORDER_SEQUENCE_NUMBER")
_DUPLICATE_SEQUENCE = errors.ErrorCode.Value("DUPLICATE_SEQUENCE_NUMBER")
_INVALID_PRODUCER_EPOCH = errors.ErrorCode.Value("INVALID_PRODUCER_EPOCH")
_UNKNOWN_PRODUCER_ID = errors.ErrorCode.Value("UNKNOWN_PRODUCER_ID")
_INVALID_RECORD = errors.ErrorCode.Value("INVALID_RECORD")
_INVALID_TXN_STATE = errors.ErrorCode.Value("INVALID_TXN_STATE")
_COORDINATOR_FENCED = errors.ErrorCode.Value("TRANSACTION_COORDINATOR_FENCED")


def next_sequence(sequence: int, increment: int) -> int:
    """sequence + increment with Kafka's int32 wrap (DefaultRecordBatch.incrementSequence)."""
    return (sequence + increment) % SEQ_MOD


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == next_sequence(last_seq, 1)


def _seq_before(a: int, b: int) -> bool:
    """a comes strictly before b on the wrapping sequence circle (within half of it)."""
    d = (b - a) % SEQ_MOD
    return 0 < d < SEQ_MOD // 2


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int             # the batch's max timestamp


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    # oldest first, at most the window; none for a producer known here only by its markers or
    # its unsequenced (coordinator-written) transactional batches, or whose epoch a marker bumped
    batches: tuple[BatchMetadata, ...]
    last_timestamp: int                     # of its last batch or marker
    coordinator_epoch: int = -1             # of its last transaction marker here
    current_txn_first_offset: int = -1      # its open transaction's first offset here; -1 none

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class Verdict(enum.Enum):
    APPEND = "append"          # append the whole payload, then call on_appended
    DUPLICATE = "duplicate"    # already in the log: answer NONE with first_offset, no append
    REFUSE = "refuse"          # answer error_code for the partition, no append


@dataclass(frozen=True, slots=True)
class BatchKey:
    """An idempotent batch as a retry names it."""
    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int

    def matches(self, h: BatchHeader) -> bool:
        return (h.producer_id == self.producer_id and h.producer_epoch == self.producer_epoch
                and h.base_sequence == self.first_seq
                and next_sequence(h.base_sequence, h.last_offset_delta) == self.last_seq)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed in this partition (Kafka's CompletedTxn)."""
    producer_id: int
    first_offset: int
    last_offset: int            # the marker's offset
    aborted: bool
    last_stable_offset: int     # the partition's LSO right after it (see aborted_txns)


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    error_code: int = _NONE
    message: str = ""
    first_offset: int = -1     # DUPLICATE: base offset of the (first) duplicate batch
    last_offset: int = -1      # DUPLICATE: last offset of the (last) duplicate batch
    timestamp: int = -1        # DUPLICATE: the cached batch timestamp (Kafka's logAppendTime)
    # REFUSE with DUPLICATE_SEQUENCE_NUMBER: the payload's batches (all older than the window),
    # for the log layer to find in the log (resolve_old_duplicates).
    old_duplicates: tuple[BatchKey, ...] = ()
    # ... and below which offset they lie (the oldest cached batch's first offset), and where
    # the first of them starts if no other producer wrote in between (where to look first).
    old_duplicates_below: int = -1
    old_duplicates_guess: int = -1

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.APPEND


_APPEND = Decision(Verdict.APPEND)


def _refuse(code: int, message: str) -> Decision:
    return Decision(Verdict.REFUSE, code, message)


def with_assigned_offsets(headers: Iterable[BatchHeader], first_offset: int,
                          log_append_time_ms: int = -1) -> list[BatchHeader]:
    """The produce payload's headers as the leader wrote them: base offsets laid end to end from
    `first_offset` (as PartitionLog.append assigns them) and, with LogAppendTime
    (`log_append_time_ms` >= 0), that time as every batch's max timestamp."""
    out = []
    offset = first_offset
    for h in headers:
        changes = {"base_offset": offset}
        if log_append_time_ms >= 0:
            changes["max_timestamp"] = log_append_time_ms
        out.append(dataclasses.replace(h, **changes))
        offset += h.last_offset_delta + 1
    return out


class ProducerStateManager:
    """One partition's producer state. Not thread-safe: the partition's writer owns it."""

    def __init__(self, *, map_end_offset: int = 0,
                 reject_unknown_producer_sequence: bool = False,
                 batches_retained: int = MAX_CACHED_BATCHES) -> None:
        if not 1 <= batches_retained <= MAX_PRODUCER_STATE_WINDOW:
            raise ValueError(f"producer.state.batches.retained={batches_retained}: use 1.."
                             f"{MAX_PRODUCER_STATE_WINDOW}")
        self._producers: dict[int, ProducerStateEntry] = {}
        self._map_end_offset = map_end_offset
        self._ongoing: dict[int, int] = {}           # producer id -> open txn's first offset
        self._unreplicated: list[CompletedTxn] = []  # completed, marker not yet below the HW
        self._completed: list[CompletedTxn] = []     # completed since take_completed()
        self.reject_unknown_producer_sequence = reject_unknown_producer_sequence
        self.batches_retained = batches_retained    # the window: batches cached per producer

    # ---- reading ---------------------------------------------------------------------------
    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> tuple[ProducerStateEntry, ...]:
        """Every producer's entry, by producer id (what a snapshot holds)."""
        return tuple(self._producers[pid] for pid in sorted(self._producers))

    def __len__(self) -> int:
        return len(self._producers)

    def same_state(self, other: ProducerStateManager) -> bool:
        return self._map_end_offset == other._map_end_offset and \
            self.entries() == other.entries()

    # ---- transactions ----------------------------------------------------------------------
    def ongoing_transactions(self) -> dict[int, int]:
        """Open transactions here: producer id -> first offset."""
        return dict(self._ongoing)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction open here, or completed with its marker
        not yet known to be below the high watermark; None when there is none."""
        first = min(self._ongoing.values(), default=None)
        for c in self._unreplicated:
            if first is None or c.first_offset < first:
                first = c.first_offset
        return first

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO for a high watermark: completed transactions whose marker is below it stop
        counting (Kafka's onHighWatermarkUpdated), then min(first unstable offset, HW)."""
        if self._unreplicated:
            self._unreplicated = [c for c in self._unreplicated
                                  if c.last_offset >= high_watermark]
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def take_completed(self) -> list[CompletedTxn]:
        """The transactions completed by the batches applied since the last call, in order."""
        out, self._completed = self._completed, []
        return out

    def check_marker(self, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int) -> tuple[int, str] | None:
        """Whether the leader may write a marker of `producer_id` at `producer_epoch` from a
        coordinator at `coordinator_epoch`: None, or (error code, message)."""
        if producer_id < 0 or not 0 <= producer_epoch <= 32767 or coordinator_epoch < 0:
            return _INVALID_RECORD, (f"marker of producer {producer_id} epoch {producer_epoch} "
                                     f"from coordinator epoch {coordinator_epoch}")
        e = self._producers.get(producer_id)
        if e is None:
            return None
        if producer_epoch < e.producer_epoch:
            return _INVALID_PRODUCER_EPOCH, (f"marker of producer {producer_id} at epoch "
                                             f"{producer_epoch}, older than {e.producer_epoch}")
        if coordinator_epoch < e.coordinator_epoch:
            return _COORDINATOR_FENCED, (f"marker from coordinator epoch {coordinator_epoch}, "
                                         f"older than {e.coordinator_epoch}")
        return None

    # ---- the leader's check ----------------------------------------------------------------
    def check_and_prepare(self, batches: Iterable[BatchHeader], *,
                          log_whole: bool = False, allow_unsequenced: bool = False) -> Decision:
        """Decide a produce payload (its batch headers, in order) before the leader appends it.
        Changes nothing; see the module docstring for the rules. `allow_unsequenced`: the
        writer is a coordinator (transactional batches without sequences are accepted)."""
        working: dict[int, tuple[int, int]] = {}     # pid -> (epoch, last_seq) inside the payload
        duplicates: list[BatchMetadata] = []
        old: list[BatchKey] = []
        old_below = -1
        old_guess = -1
        fresh = 0
        for h in batches:
            pid = h.producer_id
            if h.is_control:
                return _refuse(_INVALID_RECORD, "a client may not write control batches "
                                                "(transaction markers)")
            if pid < 0:
                if h.is_transactional:
                    return _refuse(_INVALID_RECORD, "a transactional batch needs a producer id")
                fresh += 1
                continue
            current = self._producers.get(pid)
            if current is not None and current.current_txn_first_offset >= 0 \
                    and not h.is_transactional and h.producer_epoch == current.producer_epoch:
                return _refuse(_INVALID_TXN_STATE,
                               f"producer {pid}: a non-transactional batch while its transaction "
                               f"from offset {current.current_txn_first_offset} is open")
            if h.base_sequence < 0 and allow_unsequenced and h.is_transactional \
                    and h.producer_epoch >= 0:
                if current is not None and h.producer_epoch < current.producer_epoch:
                    return _refuse(_INVALID_PRODUCER_EPOCH,
                                   f"producer {pid}: epoch {h.producer_epoch} is older than the "
                                   f"current {current.producer_epoch}")
                fresh += 1
                continue
            if h.base_sequence < 0 or h.producer_epoch < 0:
                return _refuse(_INVALID_RECORD,
                               f"producer {pid}: batch with sequence {h.base_sequence} and epoch "
                               f"{h.producer_epoch}; an idempotent batch needs both >= 0")
            first_seq = h.base_sequence
            last_seq = next_sequence(first_seq, h.last_offset_delta)
            if current is not None and not current.batches and pid not in working:
                refusal = self._check_without_batches(pid, h.producer_epoch, first_seq, current)
                if refusal is not None:
                    return refusal
                working[pid] = (h.producer_epoch, last_seq)
                fresh += 1
                continue
            if current is not None and pid not in working:
                dup = current.find_duplicate(h.producer_epoch, first_seq, last_seq)
                if dup is not None:
                    duplicates.append(dup)
                    continue
                if h.producer_epoch == current.producer_epoch and \
                        _seq_before(last_seq, current.batches[0].first_seq):
                    old.append(BatchKey(pid, h.producer_epoch, first_seq, last_seq))
                    oldest = current.batches[0]
                    old_below = oldest.first_offset if old_below < 0 else \
                        min(old_below, oldest.first_offset)
                    if old_guess < 0:
                        old_guess = oldest.first_offset - \
                            (oldest.first_seq - first_seq) % SEQ_MOD
                    continue
            if current is None and pid not in working and log_whole and first_seq != 0:
                return _refuse(_OUT_OF_ORDER,
                               f"producer {pid}: first batch at sequence {first_seq}, not 0, in a "
                               "log nothing was removed from: its earlier batches are missing")
            refusal = self._check(pid, h.producer_epoch, first_seq, last_seq, current,
                                  working.get(pid))
            if refusal is not None:
                return refusal
            working[pid] = (h.producer_epoch, last_seq)
            fresh += 1
        if duplicates or old:
            if fresh:
                return _refuse(_OUT_OF_ORDER,
                               "payload mixes duplicates of written batches with new batches")
            if old:
                k = old[0]
                return Decision(Verdict.REFUSE, _DUPLICATE_SEQUENCE,
                                f"producer {k.producer_id}: sequences {k.first_seq}..{k.last_seq} "
                                "precede the batches remembered",
                                old_duplicates=tuple(old), old_duplicates_below=old_below,
                                old_duplicates_guess=old_guess)
            return Decision(Verdict.DUPLICATE, first_offset=duplicates[0].first_offset,
                            last_offset=duplicates[-1].last_offset,
                            timestamp=duplicates[-1].timestamp)
        return _APPEND

    @staticmethod
    def _check_without_batches(pid: int, epoch: int, first_seq: int,
                               current: ProducerStateEntry) -> Decision | None:
        """A producer known here without sequences (markers, unsequenced writes, or a marker
        bumped its epoch): an older epoch is refused, a first batch must start at sequence 0
        (Kafka's checkSequence with no last sequence)."""
        if epoch < current.producer_epoch:
            return _refuse(_INVALID_PRODUCER_EPOCH,
                           f"producer {pid}: epoch {epoch} is older than the current "
                           f"{current.producer_epoch}")
        if first_seq != 0:
            return _refuse(_OUT_OF_ORDER,
                           f"producer {pid} epoch {epoch}: no sequence known here, so the first "
                           f"batch must start at 0, got {first_seq}")
        return None

    def _check(self, pid: int, epoch: int, first_seq: int, last_seq: int,
               current: ProducerStateEntry | None,
               in_payload: tuple[int, int] | None) -> Decision | None:
        if in_payload is not None:
            known_epoch, known_last = in_payload
        elif current is not None:
            known_epoch, known_last = current.producer_epoch, current.last_seq
        else:
            if self.reject_unknown_producer_sequence and first_seq != 0:
                return _refuse(_UNKNOWN_PRODUCER_ID,
                               f"no state for producer {pid} (expired or removed with the log); "
                               f"sequence {first_seq} is not 0")
            return None
        if epoch < known_epoch:
            return _refuse(_INVALID_PRODUCER_EPOCH,
                           f"producer {pid}: epoch {epoch} is older than the current {known_epoch}")
        if epoch > known_epoch:
            if first_seq != 0:
                return _refuse(_OUT_OF_ORDER,
                               f"producer {pid}: new epoch {epoch} (current {known_epoch}) must "
                               f"start at sequence 0, got {first_seq}")
            return None
        if _in_sequence(known_last, first_seq):
            return None
        if in_payload is None and current is not None and \
                _seq_before(last_seq, current.batches[0].first_seq):
            return _refuse(_DUPLICATE_SEQUENCE,
                           f"producer {pid}: sequences {first_seq}..{last_seq} precede the "
                           f"{len(current.batches)} batches remembered (from "
                           f"{current.batches[0].first_seq})")
        return _refuse(_OUT_OF_ORDER,
                       f"producer {pid} epoch {epoch}: expected sequence "
                       f"{next_sequence(known_last, 1)}, got {first_seq}")

    # ---- applying batches in the log -------------------------------------------------------
    def on_appended(self, batches: Iterable[BatchHeader],
                    controls: dict[int, ControlRecord] | None = None) -> None:
        """The leader appended a payload that `check_and_prepare` allowed (or a marker it
        wrote: `controls` maps a control batch's base offset to its decoded marker); `batches`
        carry the offsets the log assigned (see `with_assigned_offsets`)."""
        for h in batches:
            self._apply(h, controls.get(h.base_offset) if controls else None)

    def on_replicated(self, batches: Iterable[BatchHeader],
                      controls: dict[int, ControlRecord] | None = None) -> None:
        """A follower appended the leader's batches (offsets as the leader wrote them);
        `controls`: the markers among them by base offset."""
        for h in batches:
            self._apply(h, controls.get(h.base_offset) if controls else None)

    def rebuild(self, batches: Iterable) -> int:
        """Apply the log's batches from `map_end_offset` on (batches wholly below it are already
        in the state and skipped): BatchHeaders, or (BatchHeader, ControlRecord | None) pairs
        (the markers decoded). Returns the number applied."""
        n = 0
        for item in batches:
            h, control = item if isinstance(item, tuple) else (item, None)
            if h.last_offset < self._map_end_offset:
                continue
            self._apply(h, control)
            n += 1
        return n

    def _apply(self, h: BatchHeader, control: ControlRecord | None = None) -> None:
        pid = h.producer_id
        if pid >= 0:
            current = self._producers.get(pid)
            if h.is_control:
                if control is not None and control.coordinator_epoch >= 0:
                    self._apply_marker(h, control, current)
            else:
                epoch_changed = current is None or current.producer_epoch != h.producer_epoch
                if h.base_sequence >= 0:
                    meta = BatchMetadata(h.base_sequence,
                                         next_sequence(h.base_sequence, h.last_offset_delta),
                                         h.base_offset, h.last_offset, h.max_timestamp)
                    cached: tuple[BatchMetadata, ...] = (meta,) if epoch_changed else \
                        (current.batches + (meta,))[-self.batches_retained:]
                else:
                    cached = () if epoch_changed else current.batches
                txn_first = current.current_txn_first_offset if current is not None else -1
                if h.is_transactional and txn_first < 0:
                    txn_first = h.base_offset
                    self._ongoing[pid] = txn_first
                self._producers[pid] = ProducerStateEntry(
                    pid, h.producer_epoch, cached, h.max_timestamp,
                    current.coordinator_epoch if current is not None else -1, txn_first)
        if h.next_offset > self._map_end_offset:
            self._map_end_offset = h.next_offset

    def _apply_marker(self, h: BatchHeader, control: ControlRecord,
                      current: ProducerStateEntry | None) -> None:
        pid = h.producer_id
        if current is None or h.producer_epoch > current.producer_epoch:
            epoch, batches = h.producer_epoch, ()       # fenced: the old epoch's window goes
        else:
            epoch, batches = current.producer_epoch, current.batches
        first = current.current_txn_first_offset if current is not None else -1
        self._ongoing.pop(pid, None)
        coordinator_epoch = control.coordinator_epoch
        if current is not None and current.coordinator_epoch > coordinator_epoch:
            coordinator_epoch = current.coordinator_epoch
        self._producers[pid] = ProducerStateEntry(pid, epoch, batches, h.max_timestamp,
                                                  coordinator_epoch, -1)
        if first >= 0:
            lso = min(self._ongoing.values(), default=h.base_offset + 1)
            done = CompletedTxn(pid, first, h.base_offset, not control.commit, lso)
            self._unreplicated.append(done)
            self._completed.append(done)

    def update_map_end_offset(self, offset: int) -> None:
        """The log is known to hold no batch of interest below `offset` beyond those applied
        (Kafka calls this on roll, with the new segment's base offset, before a snapshot)."""
        if offset > self._map_end_offset:
            self._map_end_offset = offset

    # ---- expiry, snapshots, truncation -----------------------------------------------------
    def expire(self, now_ms: int, producer_id_expiration_ms: int) -> list[int]:
        """Drop producers whose last timestamp is `producer_id_expiration_ms` or more before
        `now_ms` (Kafka's isProducerExpired). Returns the dropped ids."""
        dropped = [pid for pid, e in self._producers.items()
                   if now_ms - e.last_timestamp >= producer_id_expiration_ms
                   and e.current_txn_first_offset < 0]
        for pid in dropped:
            del self._producers[pid]
        return sorted(dropped)

    def restore(self, entries: Iterable[ProducerStateEntry], map_end_offset: int) -> None:
        """Replace the whole state by a snapshot's (or by nothing, at a log start offset);
        then `rebuild` with the log's batches from `map_end_offset`."""
        producers = {}
        for e in entries:
            _check_entry(e)
            if len(e.batches) > self.batches_retained:     # written with a wider window
                e = dataclasses.replace(e, batches=e.batches[-self.batches_retained:])
            if e.last_offset >= map_end_offset:
                raise ValueError(f"producer {e.producer_id}: last offset {e.last_offset} is not "
                                 f"below the snapshot offset {map_end_offset}")
            if e.current_txn_first_offset >= map_end_offset:
                raise ValueError(f"producer {e.producer_id}: open transaction at "
                                 f"{e.current_txn_first_offset}, not below the snapshot offset "
                                 f"{map_end_offset}")
            producers[e.producer_id] = e
        self._producers = producers
        self._map_end_offset = map_end_offset
        self._ongoing = {pid: e.current_txn_first_offset for pid, e in producers.items()
                         if e.current_txn_first_offset >= 0}
        self._unreplicated = []
        self._completed = []

    def check_invariants(self) -> None:
        for pid, e in self._producers.items():
            if pid != e.producer_id:
                raise AssertionError(f"entry of {e.producer_id} filed under {pid}")
            _check_entry(e)
            if len(e.batches) > self.batches_retained:
                raise AssertionError(f"producer {pid}: {len(e.batches)} cached batches > "
                                     f"{self.batches_retained}")
            if e.last_offset >= self._map_end_offset:
                raise AssertionError(f"producer {pid}: last offset {e.last_offset} >= map end "
                                     f"offset {self._map_end_offset}")
            if (e.current_txn_first_offset >= 0) != (pid in self._ongoing) or \
                    self._ongoing.get(pid, -1) != e.current_txn_first_offset:
                raise AssertionError(f"producer {pid}: open transaction "
                                     f"{e.current_txn_first_offset} vs {self._ongoing.get(pid)}")
        if set(self._ongoing) - set(self._producers):
            raise AssertionError("an open transaction of a producer without state")

    def __repr__(self) -> str:
        return (f"ProducerStateManager(producers={len(self._producers)}, "
                f"map_end_offset={self._map_end_offset})")


def _check_entry(e: ProducerStateEntry) -> None:
    """Raises ValueError when an entry could not have come from `_apply`."""
    if e.producer_id < 0 or not 0 <= e.producer_epoch <= 32767:
        raise ValueError(f"bad producer id/epoch {e.producer_id}/{e.producer_epoch}")
    if not 0 <= len(e.batches) <= MAX_PRODUCER_STATE_WINDOW:
        raise ValueError(f"producer {e.producer_id}: {len(e.batches)} cached batches")
    if e.current_txn_first_offset < -1 or e.coordinator_epoch < -1:
        raise ValueError(f"producer {e.producer_id}: open transaction "
                         f"{e.current_txn_first_offset}, coordinator epoch {e.coordinator_epoch}")
    if not e.batches and e.current_txn_first_offset < 0 and e.coordinator_epoch < 0:
        raise ValueError(f"producer {e.producer_id}: an entry with nothing in it")
    previous = None
    for b in e.batches:
        if not (0 <= b.first_seq < SEQ_MOD and 0 <= b.last_seq < SEQ_MOD):
            raise ValueError(f"producer {e.producer_id}: sequence out of range in {b}")
        if b.last_offset < b.first_offset or b.first_offset < 0:
            raise ValueError(f"producer {e.producer_id}: bad offsets in {b}")
        if previous is not None and b.first_offset <= previous.last_offset:
            raise ValueError(f"producer {e.producer_id}: cached batches out of offset order")
        previous = b
    if e.batches and e.last_timestamp < e.batches[-1].timestamp:
        raise ValueError(f"producer {e.producer_id}: last timestamp before the last batch's")


def resolve_old_duplicates(decision: Decision, log_headers: Iterable[BatchHeader]) -> Decision:
    """A DUPLICATE_SEQUENCE_NUMBER decision (batches older than the window) against the log's
    batch headers below `decision.old_duplicates_below` (any order, any superset): when every
    batch is found, the answer a cached duplicate gets, NONE with the offsets they have
    (Kafka's answer to a duplicate); otherwise the decision unchanged (a batch gone with
    retention cannot be told apart any more)."""
    if not decision.old_duplicates:
        return decision
    wanted = decision.old_duplicates
    found: dict[BatchKey, BatchHeader] = {}
    for h in log_headers:
        if h.producer_id < 0:
            continue
        for k in wanted:
            if k not in found and k.matches(h):
                found[k] = h
        if len(found) == len(wanted):
            break
    if len(found) != len(wanted):
        return decision
    first, last = found[wanted[0]], found[wanted[-1]]
    return Decision(Verdict.DUPLICATE, first_offset=first.base_offset,
                    last_offset=last.last_offset, timestamp=last.max_timestamp)
