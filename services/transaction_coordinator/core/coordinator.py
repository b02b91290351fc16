"""The transaction coordinator core: Kafka's TransactionCoordinator + TransactionStateManager, pure.

Surface: `handle(event, now_ms) -> list[Effect]`, `tick(now_ms) -> list[Effect]`,
`replay(record)`, `check_invariants()`, `marker_wanted(marker_id)`.

State per transactional id (`TxnMetadata`): producer id and epoch, the transaction timeout, the
state (core/states.py), the partitions of the open transaction, its start and last update times,
and the state a write in flight moves it to (`pending`; at most one write per id at a time, any
request meanwhile is answered CONCURRENT_TRANSACTIONS, as Kafka's pendingState).

Durable state changes through one door: a transition is a __transaction_state record
(AppendRecords, acks=all); only when WriteCompleted says it is durable is it applied
(`_apply_value`, the code `replay` uses at load), and then the request is answered. A failed
write answers the mapped coordinator error and changes nothing.

Requests (the checks and answers are Kafka's):
- InitProducerId(transactional_id, timeout[, producer id/epoch]): a new id gets a producer id
  from the controller (AllocateProducerId) and epoch 0; a known one its epoch + 1 (a new
  producer id at epoch 0 once the epoch is exhausted), which fences every older instance. An
  Ongoing transaction is aborted first at epoch + 1 (PrepareEpochFence, then PrepareAbort): the
  caller gets CONCURRENT_TRANSACTIONS and retries. With producer id/epoch given (KIP-360): the
  current epoch is bumped, the previous one is a retry (answered with the current epoch), any
  other is PRODUCER_FENCED.
- AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the transaction (Ongoing); the
  group's __consumer_offsets partition for AddOffsetsToTxn.
- EndTxn: PrepareCommit / PrepareAbort is written, the caller answered, then SendMarkers to every
  partition; MarkersWritten -> CompleteCommit / CompleteAbort.
- Riverbed: an AddPartitionsToTxn / AddOffsetsToTxn of the current producer arriving while its
  previous transaction completes (or a write of the id is in flight) is parked until that is
  done, at most transaction.concurrent.request.max.wait.ms (then CONCURRENT_TRANSACTIONS, as
  Kafka answers at once): the next transaction starts as soon as the last one completed rather
  than after the client's retry backoff.
- DescribeTransactions / ListTransactions (KIP-664; ListTransactions v1's duration filter,
  KIP-994) from memory.

Timers (`tick`): an Ongoing transaction older than its timeout is aborted at epoch + 1 (the
producer is fenced: its later requests get PRODUCER_FENCED, its writes INVALID_PRODUCER_EPOCH);
an idle id older than transactional.id.expiration.ms is tombstoned.

Shards: ShardLoadStarted(shard, coordinator_epoch) -> records replayed -> ShardLoadCompleted:
every PrepareCommit/PrepareAbort found is completed (markers again, then Complete*), so a
transaction whose coordinator died mid-commit is finished by the successor. ShardUnloaded drops
the shard's ids; waiters get NOT_COORDINATOR.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from riverbed._proto.v1 import producer_id_pb2, transaction_pb2 as tx
from riverbed.coordinator import offsets_topic as ot
from riverbed.coordinator import transaction_log as tl
from riverbed.coordinator.transaction_log import TxnLogValue, TxnStatus
from riverbed.errors import ErrorCode as E
from services.transaction_coordinator.config import TransactionCoordinatorConfig
from services.transaction_coordinator.core.effects import (
    AllocateProducerId, AppendRecords, Effect, Reply, SendMarkers,
)
from services.transaction_coordinator.core.events import (
    Event, MarkersWritten, ProducerIdAllocated, RequestReceived, ShardLoadCompleted,
    ShardLoadStarted, ShardUnloaded, TopicMetadataChanged, WriteCompleted,
)
from services.transaction_coordinator.core.states import EXPIRATION_ALLOWED, check_transition

log = logging.getLogger(__name__)

S = TxnStatus
TP = tuple[str, int]
MAX_EPOCH = 32767
# Kafka's TransactionMetadata.isEpochExhausted: epoch >= Short.MaxValue - 1 (one bump must stay
# possible for fencing an open transaction).
EPOCH_EXHAUSTED = MAX_EPOCH - 1
PREPARE = (S.PREPARE_COMMIT, S.PREPARE_ABORT)
COMPLETE = (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int             # -1 for an id created here and not yet written
    last_producer_epoch: int        # the epoch before the last bump (in memory only, KIP-360)
    timeout_ms: int
    state: TxnStatus
    partitions: set[TP]
    start_ms: int                   # when the open transaction began (-1 none)
    last_update_ms: int
    pending: TxnStatus | None = None  # where the write in flight takes it
    log_offset: int = -1

    def value(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                           frozenset(self.partitions), self.last_update_ms, self.start_ms)


# What to do once a write is durable.
@dataclass(frozen=True, slots=True)
class _ReplyInit:
    request_id: int


@dataclass(frozen=True, slots=True)
class _ReplyBody:
    request_id: int
    body: object                    # the response to send as it is (errors already NONE)


@dataclass(frozen=True, slots=True)
class _ReplyEnd:
    request_id: int


@dataclass(frozen=True, slots=True)
class _SendMarkers:
    pass


@dataclass(frozen=True, slots=True)
class _Nothing:
    pass


Then = _ReplyInit | _ReplyBody | _ReplyEnd | _SendMarkers | _Nothing


@dataclass(slots=True)
class _PendingWrite:
    shard: int
    transactional_id: str
    value: TxnLogValue | None       # None: a tombstone (the id expires)
    last_epoch: int
    then: Then
    on_fail: object = None          # the response to answer on failure (error filled in)


@dataclass(slots=True)
class _MarkerJob:
    transactional_id: str
    shard: int
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(slots=True)
class _Shard:
    loaded: bool
    coordinator_epoch: int


@dataclass(slots=True)
class Statistics:
    commits: int = 0
    aborts: int = 0
    timed_out: int = 0               # transactions aborted by transaction.timeout.ms
    fenced: int = 0                  # open transactions aborted because a new instance started
    expired_ids: int = 0
    completed_after_load: int = 0    # Prepare* found at load and completed here
    by_state: dict = field(default_factory=dict)


class TransactionCoordinatorCore:
    def __init__(self, config: TransactionCoordinatorConfig, *, coordinator_id: int = -1):
        self.config = config
        self.coordinator_id = coordinator_id if coordinator_id >= 0 else \
            config.transaction_coordinator_id
        self.shards: dict[int, _Shard] = {}
        self.txns: dict[str, TxnMetadata] = {}
        self.partition_counts: dict[str, int] = {}
        self.stats = Statistics()
        self._writes: dict[int, _PendingWrite] = {}
        self._allocs: dict[int, tuple[int, producer_id_pb2.InitProducerIdRequest]] = {}
        self._markers: dict[int, _MarkerJob] = {}
        self._complete_due: set[str] = set()     # markers written, the Complete write failed
        # transactional id -> requests waiting for its transaction to complete:
        # (request id, body, deadline)
        self._parked: dict[str, list[tuple[int, Any, int]]] = {}
        self.parked_count = 0
        self._next_id = 1
        self._next_abort_check_ms: int | None = None
        self._next_expiry_check_ms: int | None = None

    def _new_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i

    def shard_of(self, transactional_id: str) -> int:
        return tl.partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    # ------------------------------------------------------------------ surface

    def handle(self, event: Event, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        if isinstance(event, RequestReceived):
            self._on_request(event.request_id, event.body, now_ms, out)
        elif isinstance(event, WriteCompleted):
            self._on_write_completed(event, now_ms, out)
        elif isinstance(event, MarkersWritten):
            self._on_markers_written(event, now_ms, out)
        elif isinstance(event, ProducerIdAllocated):
            self._on_allocated(event, now_ms, out)
        elif isinstance(event, TopicMetadataChanged):
            self.partition_counts = dict(event.partition_counts)
        elif isinstance(event, ShardLoadStarted):
            self._unload(event.shard, out, E.COORDINATOR_LOAD_IN_PROGRESS)
            self.shards[event.shard] = _Shard(False, event.coordinator_epoch)
        elif isinstance(event, ShardLoadCompleted):
            self._on_loaded(event.shard, now_ms, out)
        elif isinstance(event, ShardUnloaded):
            self._unload(event.shard, out, E.NOT_COORDINATOR)
            self.shards.pop(event.shard, None)
        else:
            raise TypeError(f"unknown event {event!r}")
        return out

    def tick(self, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        cfg = self.config
        if self._next_abort_check_ms is None or now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = \
                now_ms + cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms
            for tid in sorted(self.txns):
                txn = self.txns[tid]
                if txn.state is S.ONGOING and txn.pending is None and self._loaded(tid) \
                        and txn.start_ms + txn.timeout_ms <= now_ms:
                    log.info("[txn=%s producer=%d epoch=%d] open for %d ms, over its timeout %d ms: "
                             "aborting it", tid, txn.producer_id, txn.producer_epoch,
                             now_ms - txn.start_ms, txn.timeout_ms)
                    self.stats.timed_out += 1
                    self._fence_and_abort(txn, now_ms, out)
        if self._next_expiry_check_ms is None or now_ms >= self._next_expiry_check_ms:
            self._next_expiry_check_ms = \
                now_ms + cfg.transaction_remove_expired_transaction_cleanup_interval_ms
            for tid in sorted(self.txns):
                txn = self.txns[tid]
                if txn.state in EXPIRATION_ALLOWED and txn.pending is None and self._loaded(tid) \
                        and txn.producer_epoch >= 0 \
                        and txn.last_update_ms + cfg.transactional_id_expiration_ms <= now_ms:
                    log.info("[txn=%s] idle since %d: expired", tid, txn.last_update_ms)
                    self._write(txn, None, txn.last_producer_epoch, _Nothing(), out,
                                pending=S.DEAD)
        for tid in sorted(self._parked):
            waiting = self._parked[tid]
            due = [w for w in waiting if w[2] <= now_ms]
            if due:
                self._parked[tid] = [w for w in waiting if w[2] > now_ms]
                if not self._parked[tid]:
                    del self._parked[tid]
                self.parked_count -= len(due)
                for rid, body, _ in due:
                    out.append(Reply(rid, _error_answer(
                        body, E.CONCURRENT_TRANSACTIONS,
                        f"{tid}: its previous transaction is still completing")))
        for tid in sorted(self._complete_due):
            txn = self.txns.get(tid)
            if txn is None or txn.state not in PREPARE or not self._loaded(tid):
                self._complete_due.discard(tid)
            elif txn.pending is None:
                self._complete_due.discard(tid)
                self._write_complete(txn, now_ms, out)
        return out

    def replay(self, record: ot.StoredRecord) -> None:
        """Apply one __transaction_state record read from the log (loading), in log order."""
        if record.shard not in self.shards:
            return
        try:
            tid = tl.decode_key(record.key)
            value = tl.decode_value(record.value) if record.value is not None else None
        except tl.TransactionLogFormatError as e:
            log.warning("shard %d offset %d: undecodable record skipped: %s", record.shard,
                        record.offset, e)
            return
        if self.shard_of(tid) != record.shard:
            log.warning("shard %d offset %d: transactional id %r belongs to shard %d: skipped",
                        record.shard, record.offset, tid, self.shard_of(tid))
            return
        old = self.txns.get(tid)
        if old is not None and 0 <= record.offset <= old.log_offset:
            return
        self._apply_value(tid, value, -1, record.offset)

    def check_invariants(self) -> None:
        pending_by_id: dict[str, int] = {}
        for wid, pw in self._writes.items():
            if pw.shard not in self.shards:
                raise AssertionError(f"write {wid} pending for shard {pw.shard}, not owned")
            pending_by_id[pw.transactional_id] = pending_by_id.get(pw.transactional_id, 0) + 1
        for tid, txn in self.txns.items():
            if self.shard_of(tid) not in self.shards:
                raise AssertionError(f"transactional id {tid!r} kept for a shard not owned")
            if txn.transactional_id != tid:
                raise AssertionError(f"metadata of {txn.transactional_id!r} filed under {tid!r}")
            if not -1 <= txn.producer_epoch <= MAX_EPOCH:
                raise AssertionError(f"{tid!r}: producer epoch {txn.producer_epoch}")
            if txn.state in (S.EMPTY, *COMPLETE) and txn.partitions:
                raise AssertionError(f"{tid!r}: {txn.state.kafka_name} with partitions")
            if txn.state in (S.ONGOING, *PREPARE) and not txn.partitions:
                raise AssertionError(f"{tid!r}: {txn.state.kafka_name} without partitions")
            writes = pending_by_id.get(tid, 0)
            if (txn.pending is not None) != (writes == 1) or writes > 1:
                raise AssertionError(f"{tid!r}: pending {txn.pending} with {writes} writes")
        for pw in self._writes.values():
            if pw.transactional_id not in self.txns:
                raise AssertionError(f"write pending for unknown id {pw.transactional_id!r}")
        if self.parked_count != sum(len(w) for w in self._parked.values()):
            raise AssertionError(f"{self.parked_count} parked requests counted, "
                                 f"{sum(len(w) for w in self._parked.values())} parked")
        for tid, waiting in self._parked.items():
            if not waiting or self.shard_of(tid) not in self.shards:
                raise AssertionError(f"requests of {tid!r} parked for a shard not owned")

    def _answer_parked(self, tid: str, out: list[Effect]) -> None:
        """A write of the id failed: its parked requests hear a retriable error at once."""
        waiting = self._parked.pop(tid, None)
        for rid, body, _ in waiting or ():
            self.parked_count -= 1
            out.append(Reply(rid, _error_answer(body, E.CONCURRENT_TRANSACTIONS,
                                                f"{tid}: its state change failed; retry")))

    def marker_wanted(self, marker_id: int) -> bool:
        """Whether the markers of SendMarkers(marker_id) are still to be written (the shell
        stops retrying when not: the shard moved, or the transaction went on)."""
        return marker_id in self._markers

    def states(self) -> dict[str, int]:
        """Transactional ids per state (metrics)."""
        out: dict[str, int] = {}
        for txn in self.txns.values():
            out[txn.state.kafka_name] = out.get(txn.state.kafka_name, 0) + 1
        return out

    # ------------------------------------------------------------------ shards

    def _loaded(self, tid: str) -> bool:
        sh = self.shards.get(self.shard_of(tid))
        return sh is not None and sh.loaded

    def _shard_error(self, tid: str) -> tuple[int, str] | None:
        if not tid:
            return E.INVALID_REQUEST, "transactional id is empty"
        shard = self.shard_of(tid)
        sh = self.shards.get(shard)
        if sh is None:
            return E.NOT_COORDINATOR, f"shard {shard} of __transaction_state is not served here"
        if not sh.loaded:
            return E.COORDINATOR_LOAD_IN_PROGRESS, f"shard {shard} is loading"
        return None

    def _unload(self, shard: int, out: list[Effect], code: int) -> None:
        msg = f"shard {shard} moved" if code == E.NOT_COORDINATOR else f"shard {shard} is loading"
        for wid in [w for w, pw in self._writes.items() if pw.shard == shard]:
            pw = self._writes.pop(wid)
            txn = self.txns.get(pw.transactional_id)
            if txn is not None:
                txn.pending = None
            self._fail_then(pw, code, msg, out)
        for aid in [a for a, (_, b) in self._allocs.items()
                    if self.shard_of(b.transactional_id) == shard]:
            rid, _ = self._allocs.pop(aid)
            out.append(Reply(rid, _init_error(code, msg)))
        for mid in [m for m, job in self._markers.items() if job.shard == shard]:
            del self._markers[mid]
        for tid in [t for t in self._parked if self.shard_of(t) == shard]:
            for rid, body, _ in self._parked.pop(tid):
                self.parked_count -= 1
                out.append(Reply(rid, _error_answer(body, code, msg)))
        for tid in [t for t in self.txns if self.shard_of(t) == shard]:
            del self.txns[tid]
            self._complete_due.discard(tid)

    def _on_loaded(self, shard: int, now_ms: int, out: list[Effect]) -> None:
        sh = self.shards.get(shard)
        if sh is None:
            return
        sh.loaded = True
        unfinished = [t for t in sorted(self.txns)
                      if self.shard_of(t) == shard and self.txns[t].state in PREPARE]
        n = sum(1 for t in self.txns if self.shard_of(t) == shard)
        log.info("shard %d loaded (coordinator epoch %d): %d transactional ids, %d to complete",
                 shard, sh.coordinator_epoch, n, len(unfinished))
        for tid in unfinished:
            self.stats.completed_after_load += 1
            self._send_markers(self.txns[tid], out)

    # ------------------------------------------------------------------ requests

    def _on_request(self, rid: int, b, now_ms: int, out: list[Effect]) -> None:
        if isinstance(b, producer_id_pb2.InitProducerIdRequest):
            self._init(rid, b, now_ms, out)
        elif isinstance(b, tx.AddPartitionsToTxnRequest):
            self._add_partitions(rid, b, now_ms, out)
        elif isinstance(b, tx.AddOffsetsToTxnRequest):
            self._add_offsets(rid, b, now_ms, out)
        elif isinstance(b, tx.EndTxnRequest):
            self._end(rid, b, now_ms, out)
        elif isinstance(b, tx.DescribeTransactionsRequest):
            out.append(Reply(rid, self._describe(b)))
        elif isinstance(b, tx.ListTransactionsRequest):
            out.append(Reply(rid, self._list(b, now_ms)))
        else:
            raise TypeError(f"not a transaction coordinator request: {type(b).__name__}")

    # -- InitProducerId ---------------------------------------------------------------------
    def _init(self, rid: int, b: producer_id_pb2.InitProducerIdRequest, now_ms: int,
              out: list[Effect], allocated: int = -1) -> None:
        tid = b.transactional_id
        cfg = self.config
        if not tid:
            out.append(Reply(rid, _init_error(E.INVALID_REQUEST, "transactional id is empty")))
            return
        if not 0 < b.transaction_timeout_ms <= cfg.transaction_max_timeout_ms:
            out.append(Reply(rid, _init_error(
                E.INVALID_TRANSACTION_TIMEOUT,
                f"transaction.timeout.ms={b.transaction_timeout_ms}: use 1.."
                f"{cfg.transaction_max_timeout_ms} (transaction.max.timeout.ms)")))
            return
        if (b.producer_id >= 0) != (b.producer_epoch >= 0) or b.producer_epoch > MAX_EPOCH:
            out.append(Reply(rid, _init_error(
                E.INVALID_REQUEST, "producer id and epoch: both -1, or both set")))
            return
        err = self._shard_error(tid)
        if err is not None:
            out.append(Reply(rid, _init_error(*err)))
            return
        txn = self.txns.get(tid)
        if txn is None:
            if allocated < 0:
                if len(self.txns) >= cfg.transaction_max_transactional_ids:
                    out.append(Reply(rid, _init_error(
                        E.COORDINATOR_NOT_AVAILABLE, "transaction.max.transactional.ids reached")))
                    return
                self._allocate(rid, b, out)
                return
            txn = TxnMetadata(tid, allocated, -1, -1, b.transaction_timeout_ms, S.EMPTY, set(),
                              -1, now_ms)
            self.txns[tid] = txn
            allocated = -1
        if txn.pending is not None:
            out.append(Reply(rid, _init_error(E.CONCURRENT_TRANSACTIONS,
                                              f"{tid}: a state change is being written")))
            return
        if b.producer_id >= 0 and b.producer_id != txn.producer_id:
            out.append(Reply(rid, _init_error(
                E.PRODUCER_FENCED, f"{tid}: producer id {b.producer_id} is not the current "
                                   f"{txn.producer_id}")))
            return
        if txn.state in PREPARE:
            out.append(Reply(rid, _init_error(E.CONCURRENT_TRANSACTIONS,
                                              f"{tid}: its transaction is completing")))
            return
        if txn.state is S.ONGOING:
            # A new instance (or a retry of one): fence the open transaction's producer and
            # abort it; the caller retries until the abort completed.
            self.stats.fenced += 1
            log.info("[txn=%s producer=%d epoch=%d] InitProducerId while a transaction is open: "
                     "aborting it at epoch %d", tid, txn.producer_id, txn.producer_epoch,
                     min(txn.producer_epoch + 1, MAX_EPOCH))
            self._fence_and_abort(txn, now_ms, out)
            out.append(Reply(rid, _init_error(E.CONCURRENT_TRANSACTIONS,
                                              f"{tid}: aborting its open transaction")))
            return
        if txn.state not in (S.EMPTY, *COMPLETE):
            raise AssertionError(f"{tid}: InitProducerId in state {txn.state.kafka_name}")
        if txn.producer_epoch >= EPOCH_EXHAUSTED:
            if allocated < 0:
                self._allocate(rid, b, out)
                return
            new = _empty(txn, allocated, 0, b.transaction_timeout_ms, now_ms)
            self._write(txn, new, -1, _ReplyInit(rid), out,
                        on_fail=producer_id_pb2.InitProducerIdResponse(producer_id=-1,
                                                                       producer_epoch=-1))
            return
        if b.producer_id >= 0:
            if txn.producer_epoch in (-1, b.producer_epoch):
                last = txn.producer_epoch
            elif b.producer_epoch == txn.last_producer_epoch:
                out.append(Reply(rid, producer_id_pb2.InitProducerIdResponse(   # a retry
                    producer_id=txn.producer_id, producer_epoch=txn.producer_epoch)))
                return
            else:
                out.append(Reply(rid, _init_error(
                    E.PRODUCER_FENCED, f"{tid}: epoch {b.producer_epoch} is neither the current "
                                       f"{txn.producer_epoch} nor the previous one")))
                return
        else:
            last = -1
        new = _empty(txn, txn.producer_id, txn.producer_epoch + 1, b.transaction_timeout_ms,
                     now_ms)
        self._write(txn, new, last, _ReplyInit(rid), out,
                    on_fail=producer_id_pb2.InitProducerIdResponse(producer_id=-1,
                                                                   producer_epoch=-1))

    def _allocate(self, rid: int, b, out: list[Effect]) -> None:
        aid = self._new_id()
        self._allocs[aid] = (rid, b)
        out.append(AllocateProducerId(aid))

    def _on_allocated(self, ev: ProducerIdAllocated, now_ms: int, out: list[Effect]) -> None:
        parked = self._allocs.pop(ev.alloc_id, None)
        if parked is None:
            return
        rid, b = parked
        if ev.error_code != E.NONE or ev.producer_id < 0:
            code = ev.error_code if ev.error_code != E.NONE else E.COORDINATOR_NOT_AVAILABLE
            if code in (E.NOT_CONTROLLER, E.REQUEST_TIMED_OUT, E.NETWORK_EXCEPTION):
                code = E.COORDINATOR_NOT_AVAILABLE      # retriable for the client
            out.append(Reply(rid, _init_error(code, f"no producer id: {ev.error_message}")))
            return
        self._init(rid, b, now_ms, out, allocated=ev.producer_id)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------
    def _txn_error(self, tid: str, producer_id: int, producer_epoch: int
                   ) -> tuple[int, str] | None:
        """The checks every transaction request of a producer passes first (Kafka's order)."""
        err = self._shard_error(tid)
        if err is not None:
            return err
        txn = self.txns.get(tid)
        if txn is None or txn.producer_epoch < 0 or txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, \
                f"{tid}: producer id {producer_id} is not this transactional id's"
        if txn.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, \
                f"{tid}: epoch {producer_epoch} is not the current {txn.producer_epoch}"
        if txn.pending is not None:
            return E.CONCURRENT_TRANSACTIONS, f"{tid}: a state change is being written"
        return None

    def _add_partitions(self, rid: int, b: tx.AddPartitionsToTxnRequest, now_ms: int,
                        out: list[Effect]) -> None:
        resp = tx.AddPartitionsToTxnResponse()
        slots: dict[TP, tx.AddPartitionsToTxnPartitionResult] = {}
        for t in b.topics:
            tr = resp.results.add(name=t.name)
            for p in t.partitions:
                slots[(t.name, p)] = tr.results.add(partition_index=p)
        unknown = {tp for tp in slots
                   if not 0 <= tp[1] < self.partition_counts.get(tp[0], 0)}
        if unknown:
            for tp, s in slots.items():
                if tp in unknown:
                    s.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
                    s.error_message = f"{tp[0]}-{tp[1]} does not exist"
                else:
                    s.error_code = E.OPERATION_NOT_ATTEMPTED
            out.append(Reply(rid, resp))
            return
        if self._park(rid, b, now_ms):
            return
        err = self._txn_error(b.transactional_id, b.producer_id, b.producer_epoch)
        if err is None and self.txns[b.transactional_id].state in PREPARE:
            err = (E.CONCURRENT_TRANSACTIONS, f"{b.transactional_id}: its transaction is completing")
        if err is not None:
            for s in slots.values():
                s.error_code, s.error_message = err
            out.append(Reply(rid, resp))
            return
        txn = self.txns[b.transactional_id]
        self._join(txn, set(slots), rid, resp, now_ms, out)

    def _add_offsets(self, rid: int, b: tx.AddOffsetsToTxnRequest, now_ms: int,
                     out: list[Effect]) -> None:
        resp = tx.AddOffsetsToTxnResponse()
        n = self.partition_counts.get(ot.OFFSETS_TOPIC, 0)
        err = None
        if not b.group_id:
            err = (E.INVALID_GROUP_ID, "group id is empty")
        elif n < 1:
            err = (E.COORDINATOR_NOT_AVAILABLE, f"{ot.OFFSETS_TOPIC} is not known here yet")
        if err is None and self._park(rid, b, now_ms):
            return
        err = err or self._txn_error(b.transactional_id, b.producer_id, b.producer_epoch)
        if err is None and self.txns[b.transactional_id].state in PREPARE:
            err = (E.CONCURRENT_TRANSACTIONS, f"{b.transactional_id}: its transaction is completing")
        if err is not None:
            resp.error_code, resp.error_message = err
            out.append(Reply(rid, resp))
            return
        txn = self.txns[b.transactional_id]
        tp = (ot.OFFSETS_TOPIC, ot.partition_for(b.group_id, n))
        self._join(txn, {tp}, rid, resp, now_ms, out)

    def _park(self, rid: int, b, now_ms: int) -> bool:
        """Park `b` (AddPartitionsToTxn / AddOffsetsToTxn of the current producer) while the
        id's previous transaction completes or a write of it is in flight; False: answer now."""
        wait = self.config.transaction_concurrent_request_max_wait_ms
        tid = b.transactional_id
        txn = self.txns.get(tid)
        if wait <= 0 or txn is None or self._shard_error(tid) is not None \
                or txn.producer_id != b.producer_id or txn.producer_epoch != b.producer_epoch \
                or (txn.pending is None and txn.state not in PREPARE) \
                or self.parked_count >= self.config.transaction_max_parked_requests:
            return False
        self._parked.setdefault(tid, []).append((rid, b, now_ms + wait))
        self.parked_count += 1
        return True

    def _unpark(self, tid: str, now_ms: int, out: list[Effect]) -> None:
        """The id's state moved: its parked requests are handled again (parked anew if it is
        still busy)."""
        waiting = self._parked.pop(tid, None)
        if not waiting:
            return
        self.parked_count -= len(waiting)
        for rid, body, _deadline in waiting:
            self._on_request(rid, body, now_ms, out)

    def _join(self, txn: TxnMetadata, tps: set[TP], rid: int, resp, now_ms: int,
              out: list[Effect]) -> None:
        if txn.state is S.ONGOING and tps <= txn.partitions:
            out.append(Reply(rid, resp))        # nothing new: no write (Kafka's shortcut)
            return
        start = now_ms if txn.state in (S.EMPTY, *COMPLETE) else txn.start_ms
        new = TxnLogValue(txn.producer_id, txn.producer_epoch, txn.timeout_ms, S.ONGOING,
                          frozenset(txn.partitions | tps), now_ms, start)
        self._write(txn, new, txn.last_producer_epoch, _ReplyBody(rid, resp), out, on_fail=resp)

    # -- EndTxn ------------------------------------------------------------------------------
    def _end(self, rid: int, b: tx.EndTxnRequest, now_ms: int, out: list[Effect]) -> None:
        err = self._txn_error(b.transactional_id, b.producer_id, b.producer_epoch)
        if err is not None:
            out.append(Reply(rid, tx.EndTxnResponse(error_code=err[0], error_message=err[1])))
            return
        txn = self.txns[b.transactional_id]
        what = "commit" if b.committed else "abort"
        st = txn.state
        if st is S.ONGOING:
            target = S.PREPARE_COMMIT if b.committed else S.PREPARE_ABORT
            new = TxnLogValue(txn.producer_id, txn.producer_epoch, txn.timeout_ms, target,
                              frozenset(txn.partitions), now_ms, txn.start_ms)
            self._write(txn, new, txn.last_producer_epoch, _ReplyEnd(rid), out,
                        on_fail=tx.EndTxnResponse())
            return
        if (st is S.COMPLETE_COMMIT and b.committed) or (st is S.COMPLETE_ABORT and not b.committed):
            out.append(Reply(rid, tx.EndTxnResponse()))      # a retry of what completed
            return
        if (st is S.PREPARE_COMMIT and b.committed) or (st is S.PREPARE_ABORT and not b.committed):
            out.append(Reply(rid, tx.EndTxnResponse(
                error_code=E.CONCURRENT_TRANSACTIONS,
                error_message=f"{b.transactional_id}: the {what} is completing")))
            return
        out.append(Reply(rid, tx.EndTxnResponse(
            error_code=E.INVALID_TXN_STATE,
            error_message=f"{b.transactional_id}: cannot {what} in state {st.kafka_name}")))

    # -- DescribeTransactions / ListTransactions ---------------------------------------------
    def _describe(self, b: tx.DescribeTransactionsRequest) -> tx.DescribeTransactionsResponse:
        resp = tx.DescribeTransactionsResponse()
        for tid in b.transactional_ids:
            d = resp.transaction_states.add(transactional_id=tid, producer_id=-1, producer_epoch=-1,
                                            transaction_start_time_ms=-1,
                                            coordinator_id=self.coordinator_id)
            err = self._shard_error(tid)
            txn = self.txns.get(tid)
            if err is None and (txn is None or txn.producer_epoch < 0):
                err = (E.TRANSACTIONAL_ID_NOT_FOUND, f"no transactional id {tid!r}")
            if err is not None:
                d.error_code, d.error_message = err
                continue
            assert txn is not None
            d.transaction_state = txn.state.kafka_name
            d.transaction_timeout_ms = txn.timeout_ms
            d.transaction_start_time_ms = txn.start_ms
            d.producer_id = txn.producer_id
            d.producer_epoch = txn.producer_epoch
            for topic, parts in _by_topic(txn.partitions):
                d.topics.add(name=topic, partitions=parts)
        return resp

    def _list(self, b: tx.ListTransactionsRequest, now_ms: int) -> tx.ListTransactionsResponse:
        resp = tx.ListTransactionsResponse()
        # v1 (KIP-994): only transactions open at least this long
        min_open_ms = b.duration_filter_ms if b.HasField("duration_filter_ms") else -1
        states: set[TxnStatus] = set()
        for name in b.state_filters:
            try:
                states.add(TxnStatus.from_kafka_name(name))
            except ValueError:
                resp.unknown_state_filters.append(name)
        pids = set(b.producer_id_filters)
        loading = sorted(s for s, sh in self.shards.items() if not sh.loaded)
        if loading:
            resp.error_code = E.COORDINATOR_LOAD_IN_PROGRESS
            resp.error_message = f"shards {loading} are loading"
        for tid in sorted(self.txns):
            txn = self.txns[tid]
            if txn.producer_epoch < 0 or not self._loaded(tid):
                continue
            if (states or b.state_filters) and txn.state not in states:
                continue
            if pids and txn.producer_id not in pids:
                continue
            if min_open_ms >= 0 and (txn.state not in (S.ONGOING, *PREPARE) or txn.start_ms < 0
                                     or now_ms - txn.start_ms < min_open_ms):
                continue
            resp.transaction_states.add(transactional_id=tid, producer_id=txn.producer_id,
                                        transaction_state=txn.state.kafka_name,
                                        coordinator_id=self.coordinator_id)
        return resp

    # ------------------------------------------------------------------ transitions

    def _fence_and_abort(self, txn: TxnMetadata, now_ms: int, out: list[Effect]) -> None:
        """Kafka's PrepareEpochFence + PrepareAbort: abort the open transaction at epoch + 1, so
        its producer's later writes and requests are refused."""
        if txn.pending is not None:
            return
        check_transition(txn.state, S.PREPARE_EPOCH_FENCE)
        epoch = min(txn.producer_epoch + 1, MAX_EPOCH)
        new = TxnLogValue(txn.producer_id, epoch, txn.timeout_ms, S.PREPARE_ABORT,
                          frozenset(txn.partitions), now_ms, txn.start_ms)
        self._write(txn, new, -1, _SendMarkers(), out)

    def _write_complete(self, txn: TxnMetadata, now_ms: int, out: list[Effect]) -> None:
        target = S.COMPLETE_COMMIT if txn.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        new = TxnLogValue(txn.producer_id, txn.producer_epoch, txn.timeout_ms, target,
                          frozenset(), now_ms, txn.start_ms)
        self._write(txn, new, txn.last_producer_epoch, _Nothing(), out)

    def _write(self, txn: TxnMetadata, value: TxnLogValue | None, last_epoch: int, then: Then,
               out: list[Effect], *, on_fail=None, pending: TxnStatus | None = None) -> None:
        if value is not None:
            check_transition(txn.state, value.status)
            pending = value.status
        else:
            check_transition(txn.state, S.DEAD)
        assert txn.pending is None, f"{txn.transactional_id}: a second write in flight"
        wid = self._new_id()
        shard = self.shard_of(txn.transactional_id)
        txn.pending = pending
        self._writes[wid] = _PendingWrite(shard, txn.transactional_id, value, last_epoch, then,
                                          on_fail)
        record = (tl.encode_key(txn.transactional_id),
                  tl.encode_value(value) if value is not None else None)
        out.append(AppendRecords(wid, shard, (record,)))

    def _on_write_completed(self, ev: WriteCompleted, now_ms: int, out: list[Effect]) -> None:
        pw = self._writes.pop(ev.write_id, None)
        if pw is None:
            return
        txn = self.txns.get(pw.transactional_id)
        if txn is None:
            return
        txn.pending = None
        if ev.error_code != E.NONE:
            self._answer_parked(pw.transactional_id, out)
            code = ot.coordinator_error_for_append(ev.error_code)
            log.warning("[txn=%s] writing %s to __transaction_state failed (%s)",
                        pw.transactional_id,
                        pw.value.status.kafka_name if pw.value is not None else "a tombstone",
                        E.Name(ev.error_code))
            if pw.value is not None and pw.value.status in COMPLETE:
                self._complete_due.add(pw.transactional_id)     # markers are written: retry
            self._fail_then(pw, code, f"writing to __transaction_state failed "
                                      f"({E.Name(ev.error_code)})", out)
            return
        before = txn.state
        self._apply_value(pw.transactional_id, pw.value, pw.last_epoch, ev.base_offset)
        if pw.value is None:
            self.stats.expired_ids += 1
            return
        status = pw.value.status
        if status is S.COMPLETE_COMMIT and before is S.PREPARE_COMMIT:
            self.stats.commits += 1
        elif status is S.COMPLETE_ABORT and before is S.PREPARE_ABORT:
            self.stats.aborts += 1
        then = pw.then
        if isinstance(then, _ReplyInit):
            out.append(Reply(then.request_id, producer_id_pb2.InitProducerIdResponse(
                producer_id=txn.producer_id, producer_epoch=txn.producer_epoch)))
        elif isinstance(then, _ReplyBody):
            out.append(Reply(then.request_id, then.body))
        elif isinstance(then, _ReplyEnd):
            out.append(Reply(then.request_id, tx.EndTxnResponse()))
            self._send_markers(txn, out)
        elif isinstance(then, _SendMarkers):
            self._send_markers(txn, out)
        if txn.state not in PREPARE and txn.pending is None:
            self._unpark(pw.transactional_id, now_ms, out)

    def _fail_then(self, pw: _PendingWrite, code: int, msg: str, out: list[Effect]) -> None:
        then = pw.then
        rid = getattr(then, "request_id", None)
        if rid is None:
            return
        resp = pw.on_fail
        if isinstance(resp, tx.AddPartitionsToTxnResponse):
            for t in resp.results:
                for s in t.results:
                    s.error_code, s.error_message = code, msg
        elif resp is not None:
            resp.error_code, resp.error_message = code, msg
        else:
            resp = _init_error(code, msg)
        out.append(Reply(rid, resp))

    def _apply_value(self, tid: str, value: TxnLogValue | None, last_epoch: int,
                     log_offset: int) -> None:
        """The one door for durable state: a written record (acknowledged) or a replayed one."""
        if value is None:
            self.txns.pop(tid, None)
            self._complete_due.discard(tid)
            return
        txn = self.txns.get(tid)
        if txn is None:
            txn = self.txns[tid] = TxnMetadata(tid, value.producer_id, value.producer_epoch, -1,
                                               value.transaction_timeout_ms, value.status, set(),
                                               value.start_timestamp_ms,
                                               value.last_update_timestamp_ms)
        txn.producer_id = value.producer_id
        if value.producer_epoch != txn.producer_epoch:
            txn.last_producer_epoch = last_epoch
        txn.producer_epoch = value.producer_epoch
        txn.timeout_ms = value.transaction_timeout_ms
        txn.state = value.status
        txn.partitions = set(value.partitions)
        txn.start_ms = value.start_timestamp_ms
        txn.last_update_ms = value.last_update_timestamp_ms
        if log_offset >= 0:
            txn.log_offset = log_offset

    # ------------------------------------------------------------------ markers

    def _send_markers(self, txn: TxnMetadata, out: list[Effect]) -> None:
        shard = self.shard_of(txn.transactional_id)
        sh = self.shards[shard]
        commit = txn.state is S.PREPARE_COMMIT
        mid = self._new_id()
        self._markers[mid] = _MarkerJob(txn.transactional_id, shard, txn.producer_id,
                                        txn.producer_epoch, commit)
        out.append(SendMarkers(mid, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                               commit, sh.coordinator_epoch, tuple(sorted(txn.partitions))))

    def _on_markers_written(self, ev: MarkersWritten, now_ms: int, out: list[Effect]) -> None:
        job = self._markers.pop(ev.marker_id, None)
        if job is None:
            return
        txn = self.txns.get(job.transactional_id)
        if txn is None or txn.state not in PREPARE or txn.producer_id != job.producer_id \
                or txn.producer_epoch != job.producer_epoch:
            return
        if ev.fenced:
            log.warning("[txn=%s] a partition leader refused the markers as fenced: a newer "
                        "coordinator owns this transaction", job.transactional_id)
            return
        if txn.pending is not None:
            self._complete_due.add(job.transactional_id)
            return
        self._write_complete(txn, now_ms, out)


def _empty(txn: TxnMetadata, producer_id: int, epoch: int, timeout_ms: int,
           now_ms: int) -> TxnLogValue:
    return TxnLogValue(producer_id, epoch, timeout_ms, S.EMPTY, frozenset(), now_ms, -1)


def _error_answer(body, code: int, msg: str):
    """The answer to a parked AddPartitionsToTxn / AddOffsetsToTxn carrying `code`."""
    if isinstance(body, tx.AddPartitionsToTxnRequest):
        resp = tx.AddPartitionsToTxnResponse()
        for t in body.topics:
            tr = resp.results.add(name=t.name)
            for p in t.partitions:
                tr.results.add(partition_index=p, error_code=code, error_message=msg)
        return resp
    return tx.AddOffsetsToTxnResponse(error_code=code, error_message=msg)


def _init_error(code: int, msg: str) -> producer_id_pb2.InitProducerIdResponse:
    return producer_id_pb2.InitProducerIdResponse(error_code=code, error_message=msg,
                                                  producer_id=-1, producer_epoch=-1)


def _by_topic(tps) -> list[tuple[str, list[int]]]:
    by: dict[str, list[int]] = {}
    for topic, p in sorted(tps):
        by.setdefault(topic, []).append(p)
    return list(by.items())
