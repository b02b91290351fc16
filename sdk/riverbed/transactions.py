"""Client side of the transactional producer (Kafka's TransactionManager, KIP-98/360/447/588).
Pure state and decisions: no sockets, threads or clocks. The application's calls
(riverbed.producer.Producer.init_transactions & co.) change the state and queue coordinator
requests; the sender (riverbed.sender.Sender, the only owner of the gateway connection) sends
them in order and hands back each answer (`handle_answer`), and asks which partitions must be
added to the transaction before their batches may be drained (`can_send_to`).

States (Kafka's) and who moves them:

    UNINITIALIZED --init_transactions--> INITIALIZING --answer--> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING_TRANSACTION --EndTxn answered--> READY
    IN_TRANSACTION | ABORTABLE_ERROR --abort_transaction--> ABORTING_TRANSACTION --> READY
    IN_TRANSACTION --prepare_transaction--> PREPARED_TRANSACTION --commit/abort--> as above
    IN_TRANSACTION | COMMITTING --an abortable error--> ABORTABLE_ERROR
    any --a fatal error--> FATAL_ERROR (the producer can only be closed)

Errors, as Kafka classifies them (`classify`):
- fatal (the instance is done; close it): PRODUCER_FENCED and INVALID_PRODUCER_EPOCH from the
  coordinator (a newer instance of the transactional id, or the coordinator aborted the
  transaction at a higher epoch: `ProducerFencedError`), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  CLUSTER_AUTHORIZATION_FAILED, INVALID_TXN_STATE, INVALID_TRANSACTION_TIMEOUT, anything the
  coordinator answers that has no meaning here;
- abortable (only the current transaction is lost: abort_transaction(), then go on): a record
  batch that failed (a timeout, INVALID_PRODUCER_EPOCH from a partition leader: KIP-588), a
  topic or group not authorized, UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION of
  send_offsets_to_transaction (the group moved on: CommitFailedError), INVALID_PRODUCER_ID_MAPPING
  and UNKNOWN_PRODUCER_ID;
- retriable (retried by the sender after retry_backoff_ms, invisible to the application):
  COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  CONCURRENT_TRANSACTIONS, UNKNOWN_TOPIC_OR_PARTITION (metadata lag), REQUEST_TIMED_OUT...

Two-phase commit (KIP-939's prepareTransaction): `prepare_transaction()` sends every record
and offset of the transaction and returns a `PreparedTxnState` (transactional id, producer id,
epoch); the transaction stays open, and any process may then end it with EndTxn at that producer
id and epoch (`riverbed.Admin.complete_transaction`). That is how Spark's exactly-once sink
commits its tasks' transactions from the driver (riverbed.spark).

Every exception raised from the transactional API carries `fatal`, `txn_requires_abort` and
`retriable` attributes (confluent-kafka's KafkaError methods, as attributes).

Sequences: a transactional producer's epoch belongs to the coordinator: a sequence gap
(a batch failed for good) makes the transaction abortable and, once it is aborted, the epoch is
bumped through InitProducerId(producer id, epoch) (KIP-360) before the next transaction.
"""
from __future__ import annotations

import enum
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from riverbed import errors
from riverbed._proto.v1 import header_pb2, producer_id_pb2, transaction_pb2 as tx
from riverbed.structs import OffsetAndMetadata, TopicPartition

__all__ = ["TxnState", "TransactionManager", "TxnRequest", "classify", "FATAL", "ABORTABLE",
           "RETRIABLE", "ConsumerGroupMetadata", "PreparedTxnState"]

log = logging.getLogger(__name__)
ApiKey = header_pb2.ApiKey
E = errors.ErrorCode

FATAL, ABORTABLE, RETRIABLE = "fatal", "abortable", "retriable"
# Kafka's ADD_PARTITIONS_RETRY_BACKOFF_MS: the first AddPartitionsToTxn of a transaction usually
# meets the previous one's markers still being written (CONCURRENT_TRANSACTIONS); it is retried
# sooner than retry.backoff.ms.
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20

_RETRIABLE = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR,
                        E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS,
                        E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT, E.NETWORK_EXCEPTION,
                        E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                        E.NOT_LEADER_FOR_PARTITION, E.LEADER_NOT_AVAILABLE,
                        E.UNSTABLE_OFFSET_COMMIT})
_FENCED = frozenset({E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH})
_FATAL = frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
                    E.INVALID_TXN_STATE, E.INVALID_TRANSACTION_TIMEOUT, E.UNSUPPORTED_VERSION,
                    E.INVALID_REQUEST})
_ABORTABLE = frozenset({E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED,
                        E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.INVALID_PRODUCER_ID_MAPPING,
                        E.UNKNOWN_PRODUCER_ID, E.OFFSET_METADATA_TOO_LARGE,
                        E.INVALID_COMMIT_OFFSET_SIZE, E.OPERATION_NOT_ATTEMPTED,
                        E.REBALANCE_IN_PROGRESS})


def classify(code: int) -> str:
    """FATAL, ABORTABLE or RETRIABLE for a coordinator's (or offset manager's) answer."""
    if code in _RETRIABLE:
        return RETRIABLE
    if code in _FENCED or code in _FATAL:
        return FATAL
    if code in _ABORTABLE:
        return ABORTABLE
    return FATAL


def _marked(err: BaseException, kind: str) -> BaseException:
    """`err` with confluent-kafka's classification as attributes."""
    try:
        err.fatal = kind == FATAL                       # type: ignore[attr-defined]
        err.txn_requires_abort = kind == ABORTABLE      # type: ignore[attr-defined]
        if kind != RETRIABLE:
            err.retriable = False                       # type: ignore[attr-defined]
    except AttributeError:
        pass
    return err


def error_for(code: int, message: str, *, topic: str | None = None,
              partition: int | None = None) -> BaseException:
    """The exception for a coordinator's error code, fencing as ProducerFencedError."""
    if code in _FENCED:
        return errors.ProducerFencedError(
            message or "a newer producer with the same transactional id exists (or the "
                       "coordinator aborted this one's transaction at a newer epoch)")
    if code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.REBALANCE_IN_PROGRESS):
        return errors.CommitFailedError(
            f"{errors.ErrorCode.Name(code)}: the group moved on; the offsets were not added to "
            f"the transaction ({message})")
    return errors.for_code(code, message, topic=topic, partition=partition)


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"
    PREPARED_TRANSACTION = "PREPARED_TRANSACTION"


S = TxnState
_VALID = {   # to-state -> the states it may be reached from (Kafka's isTransitionValid)
    S.INITIALIZING: {S.UNINITIALIZED, S.ABORTING_TRANSACTION, S.READY},
    S.READY: {S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION},
    S.IN_TRANSACTION: {S.READY},
    S.COMMITTING_TRANSACTION: {S.IN_TRANSACTION, S.PREPARED_TRANSACTION},
    S.ABORTING_TRANSACTION: {S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.PREPARED_TRANSACTION},
    S.PREPARED_TRANSACTION: {S.IN_TRANSACTION},
    S.ABORTABLE_ERROR: {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR,
                        S.ABORTING_TRANSACTION},
    S.FATAL_ERROR: set(S),
}


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """What `Consumer.group_metadata()` returns and `send_offsets_to_transaction` takes (Kafka's
    ConsumerGroupMetadata, KIP-447): the offset manager checks the generation and member, so a
    worker the group has moved on from cannot commit offsets in a transaction."""
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class PreparedTxnState:
    """A transaction its producer prepared and left open (KIP-939's PreparedTxnState): what
    EndTxn needs to commit or abort it from another process. Plain data: it pickles."""
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(eq=False)
class TxnRequest:
    """One coordinator request queued for the sender; `done` once answered for good."""
    api: int
    body: Any
    api_version: int = 0
    done: bool = False
    error: BaseException | None = None
    next_attempt_ms: float = 0.0
    then: Any = None                  # the request to queue after this one succeeds
    final: "TxnRequest | None" = None   # the request whose completion the caller awaits
    attempts: int = 0
    context: dict = field(default_factory=dict)


class TransactionManager:
    """One transactional producer's state (see the module doc). Not thread-safe by itself:
    the producer serialises the application's calls, and the sender's calls run on its own
    thread against the request queue and partition sets under the producer's lock."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int, idempotence) -> None:
        if not transactional_id:
            raise ValueError("transactional_id must not be empty")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.idem = idempotence
        self.state = S.UNINITIALIZED
        self.last_error: BaseException | None = None
        self.partitions: set[TopicPartition] = set()        # in the coordinator's transaction
        self.new_partitions: set[TopicPartition] = set()    # to add before they are written
        self.adding: set[TopicPartition] = set()            # AddPartitionsToTxn in flight
        self.transaction_started = False                    # something was added
        self.requests: deque[TxnRequest] = deque()
        self.epoch_bump_required = False
        self.failed_batches = 0
        self.abort_undrained = False       # the sender fails the queued batches, then EndTxn
        self.add_retry_at_ms = 0.0         # AddPartitionsToTxn backs off until then

    # -- states ---------------------------------------------------------------------------
    def _transition(self, to: TxnState, error: BaseException | None = None) -> None:
        if self.state is S.FATAL_ERROR:
            return
        if self.state not in _VALID[to]:
            raise errors.IllegalStateError(
                f"transactional producer {self.transactional_id}: cannot go from "
                f"{self.state.value} to {to.value}")
        if to in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            self.last_error = error
            log.info("transactional producer %s: %s (%s)", self.transactional_id, to.value, error)
        self.state = to

    def fatal(self, err: BaseException) -> BaseException:
        _marked(err, FATAL)
        self.state = S.FATAL_ERROR
        self.last_error = err
        for r in self.requests:
            if not r.done:
                r.done, r.error = True, err
        self.requests.clear()
        return err

    def abortable(self, err: BaseException) -> BaseException:
        _marked(err, ABORTABLE)
        if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
            self._transition(S.ABORTABLE_ERROR, err)
        return err

    def check_not_failed(self) -> None:
        if self.state is S.FATAL_ERROR:
            raise _marked(errors.IllegalStateError(
                f"transactional producer {self.transactional_id} failed for good: "
                f"{self.last_error!r}; close it"), FATAL) from self.last_error

    # -- the application's calls (then it waits for the request returned, if any) -----------
    def begin_init(self) -> TxnRequest:
        self.check_not_failed()
        if self.state not in (S.UNINITIALIZED, S.INITIALIZING):
            raise errors.IllegalStateError(f"init_transactions() in state {self.state.value}")
        if self.state is S.INITIALIZING and self.requests:
            return self.requests[0]
        self._transition(S.INITIALIZING)
        return self._enqueue(ApiKey.INIT_PRODUCER_ID, producer_id_pb2.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=-1, producer_epoch=-1), api_version=1)

    def begin_transaction(self) -> None:
        self.check_not_failed()
        if self.epoch_bump_required:
            raise errors.IllegalStateError("the previous transaction's epoch bump did not "
                                           "complete; call abort_transaction() again")
        if self.state is not S.READY:
            raise errors.IllegalStateError(f"begin_transaction() in state {self.state.value} "
                                           "(init_transactions() first; one transaction at a "
                                           "time)")
        self._transition(S.IN_TRANSACTION)

    def check_send(self) -> None:
        """send() may be called only inside a transaction (Kafka's failIfNotReadyForSend)."""
        if self.state is S.IN_TRANSACTION:
            return
        self.check_not_failed()
        if self.state is S.ABORTABLE_ERROR:
            raise _marked(errors.IllegalStateError(
                f"the transaction must be aborted: {self.last_error!r}"), ABORTABLE) \
                from self.last_error
        if self.state is S.UNINITIALIZED:
            raise errors.IllegalStateError("send() before init_transactions() on a "
                                           "transactional producer")
        if self.state is S.PREPARED_TRANSACTION:
            raise errors.IllegalStateError("send() after prepare_transaction(): the transaction "
                                           "is prepared; commit or abort it")
        raise errors.IllegalStateError(f"send() in state {self.state.value}: "
                                       "begin_transaction() first")

    def begin_send_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                           group: ConsumerGroupMetadata) -> TxnRequest | None:
        self.check_send()
        if not offsets:
            return None
        idem = self.idem
        first = self._enqueue(ApiKey.ADD_OFFSETS_TO_TXN, tx.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=idem.producer_id,
            producer_epoch=idem.producer_epoch, group_id=group.group_id))
        by_topic: dict[str, list] = {}
        for tp, om in sorted(offsets.items()):
            if not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(int(om))
            by_topic.setdefault(tp.topic, []).append(tx.TxnOffsetCommitPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch if om.leader_epoch is not None else -1,
                committed_metadata=om.metadata or ""))
        commit = TxnRequest(ApiKey.TXN_OFFSET_COMMIT, tx.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group.group_id,
            producer_id=idem.producer_id, producer_epoch=idem.producer_epoch,
            generation_id=group.generation_id, member_id=group.member_id or "",
            group_instance_id=group.group_instance_id or "",
            topics=[tx.TxnOffsetCommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))
        first.then = commit
        first.final = commit
        return commit

    def check_prepare(self) -> None:
        """prepare_transaction() may begin: a transaction is open and healthy."""
        self.check_not_failed()
        if self.state is S.ABORTABLE_ERROR:
            raise _marked(errors.IllegalStateError(
                f"cannot prepare: the transaction must be aborted ({self.last_error!r})"),
                ABORTABLE) from self.last_error
        if self.state not in (S.IN_TRANSACTION, S.PREPARED_TRANSACTION):
            raise errors.IllegalStateError(f"prepare_transaction() in state {self.state.value}")

    def prepared(self) -> PreparedTxnState:
        """After every batch and offset commit of the transaction completed (the producer
        flushed): the transaction is PREPARED; nothing more may be added to it. Again once
        prepared: the same state."""
        self.check_prepare()
        idem = self.idem
        state = PreparedTxnState(self.transactional_id, idem.producer_id, idem.producer_epoch)
        if self.state is S.PREPARED_TRANSACTION:
            return state
        if self.adding or self.new_partitions - self.partitions:
            raise errors.IllegalStateError("prepare_transaction(): partitions still being added")
        if not self.transaction_started:
            raise errors.IllegalStateError(
                "prepare_transaction(): nothing was sent in this transaction, so there is "
                "nothing for another process to commit (commit or abort it here)")
        self._transition(S.PREPARED_TRANSACTION)
        return state

    def begin_commit(self) -> TxnRequest | None:
        """After every batch of the transaction completed (the producer flushed)."""
        self.check_not_failed()
        if self.state is S.ABORTABLE_ERROR:
            raise _marked(errors.IllegalStateError(
                f"cannot commit: the transaction must be aborted ({self.last_error!r})"),
                ABORTABLE) from self.last_error
        if self.state not in (S.IN_TRANSACTION, S.PREPARED_TRANSACTION):
            raise errors.IllegalStateError(f"commit_transaction() in state {self.state.value}")
        self._transition(S.COMMITTING_TRANSACTION)
        return self._end(True)

    def begin_abort(self) -> TxnRequest | None:
        """After the queued batches were dropped and those in flight completed."""
        self.check_not_failed()
        if self.state not in (S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.PREPARED_TRANSACTION):
            raise errors.IllegalStateError(f"abort_transaction() in state {self.state.value}")
        self._transition(S.ABORTING_TRANSACTION)
        self.abort_undrained = True
        return self._end(False)

    def _end(self, commit: bool) -> TxnRequest | None:
        if not commit:
            self.new_partitions.clear()       # their batches are dropped, never written
        if not self.transaction_started and not self.new_partitions:
            self._completed()                 # nothing reached the coordinator: nothing to end
            return None
        idem = self.idem
        return self._enqueue(ApiKey.END_TXN, tx.EndTxnRequest(
            transactional_id=self.transactional_id, producer_id=idem.producer_id,
            producer_epoch=idem.producer_epoch, committed=commit))

    def _completed(self) -> None:
        """The transaction ended (EndTxn answered NONE, or it never started)."""
        aborting = self.state is S.ABORTING_TRANSACTION
        self.partitions.clear()
        self.new_partitions.clear()
        self.adding.clear()
        self.transaction_started = False
        self.failed_batches = 0
        if aborting and self.epoch_bump_required:
            # KIP-360: a sequence gap; the coordinator bumps the epoch before the next one
            self._transition(S.INITIALIZING)
            idem = self.idem
            self._enqueue(ApiKey.INIT_PRODUCER_ID, producer_id_pb2.InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=idem.producer_id, producer_epoch=idem.producer_epoch),
                api_version=1)
            return
        self._transition(S.READY)

    def _enqueue(self, api: int, body, api_version: int = 0) -> TxnRequest:
        r = TxnRequest(api, body, api_version)
        r.final = r
        self.requests.append(r)
        return r

    # -- the sender's side -----------------------------------------------------------------
    def note_partition(self, tp: TopicPartition) -> None:
        """A record for `tp` was appended in this transaction (Kafka's maybeAddPartition)."""
        if tp not in self.partitions:
            self.new_partitions.add(tp)

    def can_send_to(self, tp: TopicPartition) -> bool:
        """May a batch of `tp` be drained now? Only once the partition is in the transaction."""
        if tp in self.partitions:
            return True
        if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION) and tp not in self.adding:
            self.new_partitions.add(tp)
        return False

    def partitions_to_add(self, now_ms: float = 0.0) -> list[TopicPartition]:
        if self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION) or self.adding \
                or now_ms < self.add_retry_at_ms:
            return []
        return sorted(self.new_partitions - self.partitions)

    def take_abort_undrained(self) -> bool:
        """Whether the sender must now fail every queued batch (abort_transaction)."""
        out, self.abort_undrained = self.abort_undrained, False
        return out

    def end_waits_for_batches(self, req: TxnRequest) -> bool:
        """EndTxn goes only once every batch of the transaction completed (Kafka's rule)."""
        return req.api == ApiKey.END_TXN

    def add_partitions_request(self, tps: list[TopicPartition]) -> TxnRequest:
        self.adding = set(tps)
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        idem = self.idem
        return TxnRequest(ApiKey.ADD_PARTITIONS_TO_TXN, tx.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=idem.producer_id,
            producer_epoch=idem.producer_epoch,
            topics=[tx.TxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))

    def next_request(self, now_ms: float) -> TxnRequest | None:
        """The queued request to send now (in order; None while the head backs off)."""
        if self.requests and self.requests[0].next_attempt_ms <= now_ms:
            return self.requests[0]
        return None

    def handle_answer(self, req: TxnRequest, body, now_ms: float, retry_backoff_ms: float,
                      failure: BaseException | None = None) -> None:
        """The answer to `req` (its response body, or the failure of the call): done, retried
        after the backoff, or failed (abortable / fatal: the state moves)."""
        req.attempts += 1
        if failure is not None:
            code = getattr(failure, "code", E.REQUEST_TIMED_OUT)
            if not isinstance(failure, errors.KafkaError) or getattr(failure, "retriable", False):
                code = E.REQUEST_TIMED_OUT
            self._answer(req, code, str(failure), None, now_ms, retry_backoff_ms)
            return
        api = req.api
        if api == ApiKey.ADD_PARTITIONS_TO_TXN:
            self._added(req, body, now_ms, retry_backoff_ms)
            return
        if api == ApiKey.TXN_OFFSET_COMMIT:
            codes = [(t.name, p.partition_index, p.error_code, p.error_message)
                     for t in body.topics for p in t.partitions if p.error_code]
            code, msg = (codes[0][2], codes[0][3]) if codes else (E.NONE, "")
            # a retriable error on any partition: the whole commit again (it is idempotent)
            for _t, _p, c, m in codes:
                if classify(c) != RETRIABLE:
                    code, msg = c, m
                    break
            self._answer(req, code, msg, body, now_ms, retry_backoff_ms)
            return
        self._answer(req, body.error_code, body.error_message, body, now_ms, retry_backoff_ms)

    def _answer(self, req: TxnRequest, code: int, msg: str, body, now_ms: float,
                retry_backoff_ms: float) -> None:
        if code == E.NONE:
            self._succeeded(req, body)
            return
        kind = classify(code)
        if kind == RETRIABLE:
            req.next_attempt_ms = now_ms + retry_backoff_ms
            log.debug("transactional producer %s: %s answered %s; retrying",
                      self.transactional_id, ApiKey.Name(req.api), E.Name(code))
            return
        err = error_for(code, msg)
        self._finish(req, err)
        if kind == FATAL:
            self.fatal(err)
        else:
            self.abortable(err)

    def _finish(self, req: TxnRequest, err: BaseException | None) -> None:
        req.done, req.error = True, err
        if self.requests and self.requests[0] is req:
            self.requests.popleft()
        if err is not None and req.then is not None:
            # the request waited on (the chain's last) fails with it
            final = req.final
            if final is not None and final is not req:
                final.done, final.error = True, err

    def _succeeded(self, req: TxnRequest, body) -> None:
        api = req.api
        if api == ApiKey.INIT_PRODUCER_ID:
            self.idem.set_producer_id(body.producer_id, body.producer_epoch)
            self.idem.reset_sequences()
            self.epoch_bump_required = False
            self._finish(req, None)
            self._transition(S.READY)
            return
        if api == ApiKey.ADD_OFFSETS_TO_TXN:
            self.transaction_started = True
            self._finish(req, None)
            if req.then is not None:
                nxt = req.then
                nxt.final = req.final
                self.requests.appendleft(nxt)
            return
        if api == ApiKey.END_TXN:
            self._finish(req, None)
            self._completed()
            return
        self._finish(req, None)       # TXN_OFFSET_COMMIT

    def _added(self, req: TxnRequest, body, now_ms: float, retry_backoff_ms: float) -> None:
        """AddPartitionsToTxn's answer: the partitions added go in the transaction; a retriable
        error is retried (the partitions stay to add); the worst other error (fatal over
        abortable; OPERATION_NOT_ATTEMPTED only names the innocent ones) ends it."""
        retry = False
        concurrent_only = True
        failed: BaseException | None = None
        kind = ABORTABLE
        for t in body.results:
            for p in t.results:
                tp = TopicPartition(t.name, p.partition_index)
                code = p.error_code
                if code == E.NONE:
                    self.partitions.add(tp)
                    self.new_partitions.discard(tp)
                    self.transaction_started = True
                    continue
                k = classify(code)
                if k == RETRIABLE:
                    retry = True
                    concurrent_only &= code == E.CONCURRENT_TRANSACTIONS
                elif code != E.OPERATION_NOT_ATTEMPTED and (failed is None or
                                                             (k == FATAL and kind != FATAL)):
                    failed = error_for(code, p.error_message, topic=t.name,
                                       partition=p.partition_index)
                    kind = k
        self.adding.clear()
        if failed is not None:
            if kind == FATAL:
                self.fatal(failed)
            else:
                self.abortable(failed)
            return
        if retry:
            backoff = retry_backoff_ms
            if concurrent_only and not self.transaction_started:
                backoff = min(backoff, ADD_PARTITIONS_RETRY_BACKOFF_MS)
            self.add_retry_at_ms = now_ms + backoff

    def batch_failed(self, err: BaseException) -> None:
        """A record batch of the transaction failed for good: the transaction must be aborted
        (a fencing error too, KIP-588: the abort's EndTxn then says whether it is fenced). A
        commit waiting to be sent fails with it."""
        self.failed_batches += 1
        if self.state is S.COMMITTING_TRANSACTION:
            for r in list(self.requests):
                if r.api == ApiKey.END_TXN and not r.done:
                    self.requests.remove(r)
                    r.done, r.error = True, _marked(err, ABORTABLE)
        self.abortable(err)

    def request_epoch_bump(self) -> None:
        """A sequence gap: the epoch must be bumped (by the coordinator) after this transaction."""
        self.epoch_bump_required = True
