"""Client side of the idempotent producer (Kafka's TransactionManager, idempotent part; KIP-98,
KIP-360). Pure state: no sockets, threads or clocks; the sender thread is its only user.

What it keeps
- the producer id and epoch from INIT_PRODUCER_ID (state below);
- per partition: the epoch its sequences belong to, the next sequence to assign, the last
  acknowledged sequence, and the batches that have a sequence but are not complete yet
  ("in flight" in Kafka's sense: sent, being retried, or waiting to be re-sent), ordered by
  sequence.

Rules (Kafka's client logic)
- A batch gets its base sequence when it is drained for the first time; a retry keeps it. The
  next sequence moves on by the batch's record count (int32, wrapping to 0 like Kafka's).
- At most MAX_IN_FLIGHT_PER_PARTITION (5) sequenced batches per partition are incomplete at a
  time: the broker remembers the last 5 batches per producer and partition, which is what lets it
  recognise a retried duplicate.
- A batch being retried is re-sent only when it is the first incomplete batch of its partition
  (all earlier ones done): retries go out one at a time, in sequence order, so a retry can never
  leave a gap the broker would reject for good. New batches wait behind retried ones (they are
  behind them in the deque).
- OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is NOT the next one after the last acknowledged
  sequence: an earlier batch failed or is being retried; retry this one (not counted against
  `retries`). For the next expected batch it means a real gap (the broker lost state or a batch
  expired unresolved): bump the epoch and retry.
- UNKNOWN_PRODUCER_ID: the broker has no state for this producer id on this partition (expired
  with producer.id.expiration.ms, or the log was truncated): bump the epoch and retry.
- DUPLICATE_SEQUENCE_NUMBER: the broker already has this batch; it is complete, with the base
  offset the broker returns.
- A sequenced batch that fails for good (non-retriable error, retries or delivery_timeout_ms
  used up) leaves a hole: bump the epoch for its partition.
- Epoch bump (KIP-360, idempotent producers bump locally, no RPC): once none of the affected
  partitions' batches is on the wire, epoch += 1 and each affected partition's incomplete batches
  are renumbered from sequence 0 under the new epoch (the broker accepts a new epoch only from
  sequence 0). Other partitions move to the new epoch (restarting at 0) the next time they have
  nothing incomplete. At epoch 32767 a new producer id is requested instead.
"""
from __future__ import annotations

import enum
import logging
import struct

from crc32c import crc32c

from riverbed import errors

__all__ = ["IdempotenceState", "ProducerIdState", "Verdict", "MAX_IN_FLIGHT_PER_PARTITION",
           "stamp_producer"]

log = logging.getLogger(__name__)

MAX_IN_FLIGHT_PER_PARTITION = 5          # the broker keeps the last 5 batches per producer
_MAX_EPOCH = 32767                        # int16
_SEQ_MOD = 1 << 31                        # sequences are int32 >= 0 and wrap to 0

_OUT_OF_ORDER = errors.ErrorCode.Value("OUT_OF_ORDER_SEQUENCE_NUMBER")
_DUPLICATE = errors.ErrorCode.Value("DUPLICATE_SEQUENCE_NUMBER")
_UNKNOWN_PRODUCER_ID = errors.ErrorCode.Value("UNKNOWN_PRODUCER_ID")


class ProducerIdState(enum.Enum):
    UNINITIALIZED = "uninitialized"   # INIT_PRODUCER_ID not answered yet: nothing is drained
    READY = "ready"                   # id and epoch known
    DISABLED = "disabled"             # the cluster does not serve INIT_PRODUCER_ID: plain producer


class Verdict(enum.Enum):
    COMPLETE = "complete"             # success (or a duplicate of a written batch)
    RETRY = "retry"                   # re-enqueue, counted against `retries`
    RETRY_FREE = "retry_free"         # re-enqueue, not counted (an earlier batch caused it)
    FAIL = "fail"


class _PartitionSequences:
    __slots__ = ("epoch", "next_sequence", "last_acked_sequence", "incomplete")

    def __init__(self, epoch: int):
        self.epoch = epoch
        self.next_sequence = 0
        self.last_acked_sequence = -1
        self.incomplete: list = []        # sequenced, not complete; sorted by base_sequence

    def reset(self, epoch: int) -> None:
        self.epoch = epoch
        self.next_sequence = 0
        self.last_acked_sequence = -1


class IdempotenceState:
    """Producer id, epoch and per-partition sequences. Batches are the accumulator's
    ProducerBatch (attributes used: tp, record_count, base_sequence, producer_epoch, on_wire)."""

    def __init__(self) -> None:
        self.state = ProducerIdState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self._parts: dict = {}
        self._bump_partitions: set = set()
        self.epoch_bumps = 0
        # A transactional producer's TransactionManager (riverbed.transactions): partitions are
        # drained only once added to the transaction, and an epoch bump is the coordinator's.
        self.transactions = None

    # -- producer id --------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self.state is not ProducerIdState.DISABLED

    @property
    def ready(self) -> bool:
        return self.state is ProducerIdState.READY

    @property
    def needs_producer_id(self) -> bool:
        return self.state is ProducerIdState.UNINITIALIZED

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        if producer_id < 0 or not 0 <= producer_epoch <= _MAX_EPOCH:
            raise errors.ClientError(
                f"INIT_PRODUCER_ID returned producer id {producer_id} epoch {producer_epoch}")
        new_id = producer_id != self.producer_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.state = ProducerIdState.READY
        if new_id:
            # A new id: every partition starts again at sequence 0 (the incomplete batches of
            # the bump partitions are renumbered by bump_epoch_if_possible's caller path).
            for tp, e in self._parts.items():
                if not e.incomplete:
                    e.reset(producer_epoch)

    def reset_sequences(self) -> None:
        """Every partition starts again at sequence 0 under the current epoch (a transactional
        producer after InitProducerId; between transactions nothing is incomplete)."""
        for e in self._parts.values():
            if not e.incomplete:
                e.reset(self.producer_epoch)

    def disable(self) -> None:
        """The cluster cannot give producer ids: behave as a non-idempotent producer."""
        self.state = ProducerIdState.DISABLED
        for e in self._parts.values():
            for b in e.incomplete:
                b.base_sequence = -1
                b.producer_epoch = -1
        self._parts.clear()
        self._bump_partitions.clear()

    # -- drain ----------------------------------------------------------------------------------
    def _entry(self, tp) -> _PartitionSequences:
        e = self._parts.get(tp)
        if e is None:
            e = self._parts[tp] = _PartitionSequences(self.producer_epoch)
        return e

    def can_drain(self, batch) -> bool:
        """May the head batch of its partition be drained now?"""
        if self.state is not ProducerIdState.READY:
            return False
        tp = batch.tp
        if tp in self._bump_partitions:
            return False
        txn = self.transactions
        if txn is not None and batch.base_sequence < 0 and not txn.can_send_to(tp):
            return False
        e = self._entry(tp)
        if batch.base_sequence < 0:
            return len(e.incomplete) < MAX_IN_FLIGHT_PER_PARTITION
        # a retry: only as the first incomplete batch, and only when none is on the wire
        return bool(e.incomplete) and e.incomplete[0] is batch and \
            not any(b.on_wire for b in e.incomplete)

    def assign(self, batch) -> None:
        """Give a drained batch its sequence (first drain only; a retry keeps its own)."""
        if batch.base_sequence >= 0:
            return
        e = self._entry(batch.tp)
        if not e.incomplete and e.epoch != self.producer_epoch:
            e.reset(self.producer_epoch)      # the partition moves to the current epoch at 0
        batch.producer_epoch = e.epoch
        batch.base_sequence = e.next_sequence
        e.next_sequence = (e.next_sequence + batch.record_count) % _SEQ_MOD
        e.incomplete.append(batch)            # assigned in order: stays sorted

    # -- answers ----------------------------------------------------------------------------------
    def classify(self, batch, error_code: int, retriable: bool) -> Verdict:
        """What to do with a sequenced batch the broker answered with error_code (!= NONE)."""
        if error_code == _DUPLICATE:
            return Verdict.COMPLETE
        e = self._entry(batch.tp)
        if error_code == _OUT_OF_ORDER:
            if batch.producer_epoch == e.epoch and \
                    batch.base_sequence != (e.last_acked_sequence + 1) % _SEQ_MOD:
                return Verdict.RETRY_FREE      # an earlier batch is missing: it goes first
            self.request_epoch_bump(batch.tp)
            return Verdict.RETRY
        if error_code == _UNKNOWN_PRODUCER_ID:
            self.request_epoch_bump(batch.tp)
            return Verdict.RETRY
        return Verdict.RETRY if retriable else Verdict.FAIL

    def completed(self, batch) -> None:
        """The batch was written (acknowledged, or a duplicate of a written one)."""
        e = self._parts.get(batch.tp)
        if e is None or batch.base_sequence < 0:
            return
        self._remove(e, batch)
        if batch.producer_epoch == e.epoch:
            last = (batch.base_sequence + batch.record_count - 1) % _SEQ_MOD
            if e.last_acked_sequence < 0 or _seq_after(last, e.last_acked_sequence):
                e.last_acked_sequence = last

    def failed(self, batch) -> None:
        """The batch failed for good (error, expiry): its sequence range may be a hole."""
        e = self._parts.get(batch.tp)
        if e is None or batch.base_sequence < 0:
            return
        self._remove(e, batch)
        self.request_epoch_bump(batch.tp)

    @staticmethod
    def _remove(e: _PartitionSequences, batch) -> None:
        for i, b in enumerate(e.incomplete):
            if b is batch:
                del e.incomplete[i]
                return

    # -- epoch bump ---------------------------------------------------------------------------------
    def request_epoch_bump(self, tp) -> None:
        if self.transactions is not None:
            # the coordinator owns a transactional producer's epoch: bumped after the abort
            self.transactions.request_epoch_bump()
            return
        if self.state is ProducerIdState.READY and tp not in self._bump_partitions:
            log.info("idempotent producer %d: epoch bump requested for %s-%s",
                     self.producer_id, tp[0], tp[1])
            self._bump_partitions.add(tp)

    @property
    def epoch_bump_pending(self) -> bool:
        return bool(self._bump_partitions)

    def bump_epoch_if_possible(self) -> list:
        """Bump the epoch once no batch of the affected partitions is on the wire. Returns the
        renumbered batches (they are queued; the accumulator re-stamps them when drained).
        When the epoch is exhausted, asks for a new producer id instead (state UNINITIALIZED)."""
        if not self._bump_partitions or self.state is not ProducerIdState.READY:
            return []
        for tp in self._bump_partitions:
            e = self._parts.get(tp)
            if e is not None and any(b.on_wire for b in e.incomplete):
                return []
        if self.producer_epoch >= _MAX_EPOCH:
            self.state = ProducerIdState.UNINITIALIZED     # INIT_PRODUCER_ID again: a new id
            return []
        self.producer_epoch += 1
        self.epoch_bumps += 1
        renumbered = []
        for tp in self._bump_partitions:
            e = self._entry(tp)
            e.reset(self.producer_epoch)
            for b in e.incomplete:
                b.producer_epoch = e.epoch
                b.base_sequence = e.next_sequence
                e.next_sequence = (e.next_sequence + b.record_count) % _SEQ_MOD
                renumbered.append(b)
        log.warning("idempotent producer %d: epoch bumped to %d; sequences of %s restart at 0",
                    self.producer_id, self.producer_epoch,
                    ", ".join(f"{t}-{p}" for t, p in sorted(self._bump_partitions)))
        self._bump_partitions.clear()
        return renumbered

    def sequence_order_key(self, batch) -> tuple[int, int]:
        return (batch.producer_epoch, batch.base_sequence)

    def incomplete_count(self, tp) -> int:
        e = self._parts.get(tp)
        return len(e.incomplete) if e is not None else 0

    def next_sequence(self, tp) -> int:
        e = self._parts.get(tp)
        return e.next_sequence if e is not None else 0


def _seq_after(a: int, b: int) -> bool:
    """a comes after b in int32 sequence space (with wrap-around)."""
    return 0 < (a - b) % _SEQ_MOD < _SEQ_MOD // 2


# -- stamping a built batch --------------------------------------------------------------------

_PRODUCER_FIELDS = struct.Struct(">qhi")   # producerId @43, producerEpoch @51, baseSequence @53
_PRODUCER_POSITION = 43
_CRC_POSITION = 17
_ATTRIBUTES_POSITION = 21
_UINT32 = struct.Struct(">I")


def stamp_producer(payload: bytes, producer_id: int, producer_epoch: int,
                   base_sequence: int) -> bytes:
    """The batch with producerId/producerEpoch/baseSequence set and its CRC-32C recomputed
    (these fields are under the CRC). O(batch size), in C: a 16 KiB batch costs ~2 µs."""
    buf = bytearray(payload)
    _PRODUCER_FIELDS.pack_into(buf, _PRODUCER_POSITION, producer_id, producer_epoch, base_sequence)
    _UINT32.pack_into(buf, _CRC_POSITION, crc32c(memoryview(buf)[_ATTRIBUTES_POSITION:]))
    return bytes(buf)

