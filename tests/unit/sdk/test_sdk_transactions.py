"""The transactional producer's client side against a fake gateway (its sender thread for real,
no sockets): the order of coordinator requests, transactional batches, errors classified as
Kafka does (fatal, abortable, retriable), aborting unsent records; the pure TransactionManager;
and the read_committed consumer's filtering of aborted transactions."""
from __future__ import annotations

import pytest
from sdk_fakes import FakeGateway

from riverbed import errors
from riverbed._proto.v1 import (header_pb2, metadata_pb2, produce_pb2, producer_id_pb2,
                                transaction_pb2 as tx)
from riverbed.fetcher import CompletedFetch
from riverbed.idempotence import IdempotenceState
from riverbed.producer import Producer
from riverbed.records import build_batch, iter_batches
from riverbed.records.control import build_marker_batch
from riverbed.structs import OffsetAndMetadata, TopicPartition
from riverbed.transactions import (ABORTABLE, FATAL, RETRIABLE, ConsumerGroupMetadata,
                                   TransactionManager, TxnState, classify)

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode.Value
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class TxnBroker:
    """Just enough of a cluster: metadata, a coordinator keeping one transaction, and leaders
    that accept every batch (recording them)."""

    def __init__(self):
        self.epoch = -1
        self.added: set[tuple[str, int]] = set()
        self.produced: list[tuple[str, int, bytes]] = []
        self.ended: list[bool] = []
        self.script: dict[int, list[int]] = {}      # api -> error codes to answer first
        self.offsets: list = []

    def _scripted(self, api):
        codes = self.script.get(api)
        return codes.pop(0) if codes else 0

    def metadata(self, body, payloads):
        resp = metadata_pb2.MetadataResponse(controller_id=1, cluster_id="c")
        for name in body.topics or ["t"]:
            t = resp.topics.add(name=name)
            for p in range(2):
                t.partitions.add(partition=p, leader=1, replicas=[1], isr=[1])
        return resp, []

    def init(self, body, payloads):
        code = self._scripted(ApiKey.INIT_PRODUCER_ID)
        if code:
            return producer_id_pb2.InitProducerIdResponse(error_code=code, producer_id=-1,
                                                          producer_epoch=-1), []
        assert body.transactional_id == "tx"
        self.epoch += 1
        return producer_id_pb2.InitProducerIdResponse(producer_id=77, producer_epoch=self.epoch), []

    def add_partitions(self, body, payloads):
        code = self._scripted(ApiKey.ADD_PARTITIONS_TO_TXN)
        resp = tx.AddPartitionsToTxnResponse()
        for t in body.topics:
            r = resp.results.add(name=t.name)
            for p in t.partitions:
                r.results.add(partition_index=p, error_code=code)
                if not code:
                    self.added.add((t.name, p))
        return resp, []

    def produce(self, body, payloads):
        resp = produce_pb2.ProduceResponse()
        i = 0
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                frame = payloads[i]
                i += 1
                assert (t.name, p.partition) in self.added, "produced before AddPartitionsToTxn"
                code = self._scripted(ApiKey.PRODUCE)
                for _, h in iter_batches(frame):
                    assert h.is_transactional and h.producer_id == 77
                if not code:
                    self.produced.append((t.name, p.partition, bytes(frame)))
                rt.partitions.add(partition=p.partition, error_code=code,
                                  base_offset=len(self.produced) if not code else -1)
        return resp, []

    def add_offsets(self, body, payloads):
        return tx.AddOffsetsToTxnResponse(error_code=self._scripted(ApiKey.ADD_OFFSETS_TO_TXN)), []

    def txn_offset_commit(self, body, payloads):
        code = self._scripted(ApiKey.TXN_OFFSET_COMMIT)
        self.offsets.append(body)
        resp = tx.TxnOffsetCommitResponse()
        for t in body.topics:
            r = resp.topics.add(name=t.name)
            for p in t.partitions:
                r.partitions.add(partition_index=p.partition_index, error_code=code)
        return resp, []

    def end(self, body, payloads):
        code = self._scripted(ApiKey.END_TXN)
        if not code:
            assert not any(api == ApiKey.PRODUCE for api in self.inflight())
            self.ended.append(body.committed)
            self.added.clear()
        return tx.EndTxnResponse(error_code=code), []

    def inflight(self):
        return []

    def gateway(self):
        return FakeGateway({ApiKey.METADATA: self.metadata, ApiKey.INIT_PRODUCER_ID: self.init,
                            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions,
                            ApiKey.PRODUCE: self.produce, ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets,
                            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
                            ApiKey.END_TXN: self.end})


@pytest.fixture
def broker():
    return TxnBroker()


@pytest.fixture
def fake_dealer(monkeypatch):
    """The sender thread polls its channel's socket: a pollable inproc PAIR that never fires
    (the fake channel's answers are ready at once; the sender finds them after its poll)."""
    import zmq

    from sdk_fakes import FakeChannel
    pair = zmq.Context.instance().socket(zmq.PAIR)
    pair.bind("inproc://fake-txn-dealer-%d" % id(pair))
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)
    yield
    pair.close(0)


@pytest.fixture
def producer(broker, fake_dealer):
    gw = broker.gateway()
    p = Producer(["tcp://127.0.0.1:1"], transactional_id="tx", retry_backoff_ms=5,
                 _channel_factory=gw.factory)
    p._gw = gw
    yield p
    p.close(timeout=5)


def apis(p):
    return [api for api, _, _ in p._gw.requests if api not in (ApiKey.METADATA,)]


def test_a_transaction_adds_partitions_before_producing_and_ends_after(producer, broker):
    with pytest.raises(errors.IllegalStateError):
        producer.send("t", b"x", partition=0)          # before init_transactions
    producer.init_transactions(timeout=10)
    assert producer.config["acks"] == -1 and producer.idempotent
    with pytest.raises(errors.IllegalStateError):
        producer.send("t", b"x", partition=0)          # outside a transaction
    producer.begin_transaction()
    futs = [producer.send("t", b"v%d" % i, partition=i % 2) for i in range(6)]
    producer.commit_transaction(timeout=10)
    assert all(f.get(timeout=0) for f in futs)
    seq = apis(producer)
    assert seq[0] == ApiKey.INIT_PRODUCER_ID
    assert seq.index(ApiKey.ADD_PARTITIONS_TO_TXN) < seq.index(ApiKey.PRODUCE)
    assert seq[-1] == ApiKey.END_TXN and broker.ended == [True]
    init = next(b for api, b, _ in producer._gw.requests if api == ApiKey.INIT_PRODUCER_ID)
    assert init.transaction_timeout_ms == 60000
    assert producer.transaction_state == "READY"


def test_init_retries_concurrent_transactions(producer, broker):
    broker.script[ApiKey.INIT_PRODUCER_ID] = [E("CONCURRENT_TRANSACTIONS"),
                                              E("COORDINATOR_NOT_AVAILABLE")]
    producer.init_transactions(timeout=10)
    assert apis(producer).count(ApiKey.INIT_PRODUCER_ID) == 3


def test_fenced_at_commit_is_fatal(producer, broker):
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    producer.send("t", b"x", partition=0)
    broker.script[ApiKey.END_TXN] = [E("PRODUCER_FENCED")]
    with pytest.raises(errors.ProducerFencedError) as info:
        producer.commit_transaction(timeout=10)
    assert info.value.fatal and not info.value.txn_requires_abort
    with pytest.raises(errors.IllegalStateError):
        producer.begin_transaction()
    assert producer.transaction_state == "FATAL_ERROR"


def test_a_failed_batch_makes_the_transaction_abortable(producer, broker):
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    broker.script[ApiKey.PRODUCE] = [E("INVALID_PRODUCER_EPOCH")]
    fut = producer.send("t", b"x", partition=0)
    with pytest.raises(errors.RiverbedError) as info:
        producer.commit_transaction(timeout=10)
    assert info.value.txn_requires_abort and not info.value.fatal
    with pytest.raises(errors.InvalidProducerEpochError):
        fut.get(timeout=0)
    producer.abort_transaction(timeout=10)
    assert broker.ended == [False]
    # a sequence gap: the coordinator bumped the epoch before the next transaction (KIP-360)
    assert apis(producer).count(ApiKey.INIT_PRODUCER_ID) == 2
    assert producer.metrics()["producer_epoch"] == 1
    producer.begin_transaction()
    producer.send("t", b"y", partition=0)
    producer.commit_transaction(timeout=10)
    assert broker.ended == [False, True]


def test_abort_drops_records_not_sent(producer, broker):
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    broker.script[ApiKey.ADD_PARTITIONS_TO_TXN] = [E("COORDINATOR_NOT_AVAILABLE")] * 1000
    fut = producer.send("t", b"x", partition=1)
    producer.abort_transaction(timeout=10)
    with pytest.raises(errors.TransactionAbortedError):
        fut.get(timeout=0)
    assert not broker.produced
    assert producer.transaction_state == "READY"


def test_send_offsets_to_transaction(producer, broker):
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    meta = ConsumerGroupMetadata("g", 4, "m-1")
    producer.send_offsets_to_transaction({TP0: OffsetAndMetadata(12, "md"), TP1: 7}, meta,
                                         timeout=10)
    producer.commit_transaction(timeout=10)
    (body,) = broker.offsets
    assert (body.group_id, body.generation_id, body.member_id, body.producer_id) == \
        ("g", 4, "m-1", 77)
    assert {(t.name, p.partition_index, p.committed_offset, p.committed_metadata)
            for t in body.topics for p in t.partitions} == {("t", 0, 12, "md"), ("t", 1, 7, "")}
    assert broker.ended == [True]            # started by the offsets alone
    producer.begin_transaction()
    broker.script[ApiKey.TXN_OFFSET_COMMIT] = [E("ILLEGAL_GENERATION")]
    with pytest.raises(errors.CommitFailedError) as info:
        producer.send_offsets_to_transaction({TP0: OffsetAndMetadata(13)}, meta, timeout=10)
    assert info.value.txn_requires_abort
    producer.abort_transaction(timeout=10)


def test_prepare_leaves_the_transaction_for_another_process_to_commit(producer, broker):
    from riverbed import Admin, PreparedTxnState
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    with pytest.raises(errors.IllegalStateError):
        producer.prepare_transaction(timeout=10)        # nothing sent: nothing to prepare
    futs = [producer.send("t", b"v%d" % i, partition=i % 2) for i in range(4)]
    producer.send_offsets_to_transaction({TP0: OffsetAndMetadata(5, "batch")}, "g", timeout=10)
    state = producer.prepare_transaction(timeout=10)
    assert state == PreparedTxnState("tx", 77, 0)
    assert all(f.get(timeout=0) for f in futs)           # every record acknowledged
    assert broker.ended == [] and producer.transaction_state == "PREPARED_TRANSACTION"
    assert producer.prepare_transaction(timeout=10) == state   # again: the same
    with pytest.raises(errors.IllegalStateError, match="prepared"):
        producer.send("t", b"late", partition=0)
    with pytest.raises(errors.IllegalStateError):
        producer.begin_transaction()
    admin = Admin(["tcp://127.0.0.1:1"], retry_backoff_ms=1, _channel_factory=producer._gw.factory)
    try:
        broker.script[ApiKey.END_TXN] = [E("CONCURRENT_TRANSACTIONS"), E("NOT_COORDINATOR")]
        admin.complete_transaction(state)                 # retried until it is answered
        assert broker.ended == [True]
        ends = [b for api, b, _ in producer._gw.requests if api == ApiKey.END_TXN]
        assert len(ends) == 3 and all((b.transactional_id, b.producer_id, b.producer_epoch,
                                       b.committed) == ("tx", 77, 0, True) for b in ends)
        broker.script[ApiKey.END_TXN] = [E("PRODUCER_FENCED")]
        with pytest.raises(errors.ProducerFencedError):
            admin.complete_transaction(state, commit=False)
    finally:
        admin.close()


def test_a_prepared_transaction_may_still_end_in_its_producer(producer, broker):
    producer.init_transactions(timeout=10)
    for commit in (True, False):
        producer.begin_transaction()
        producer.send("t", b"x", partition=0)
        producer.prepare_transaction(timeout=10)
        (producer.commit_transaction if commit else producer.abort_transaction)(timeout=10)
        assert producer.transaction_state == "READY"
    assert broker.ended == [True, False]


def test_prepare_raises_a_failed_record_as_abortable(producer, broker):
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    broker.script[ApiKey.PRODUCE] = [E("INVALID_PRODUCER_EPOCH")]
    producer.send("t", b"x", partition=0)
    with pytest.raises(errors.RiverbedError) as info:
        producer.prepare_transaction(timeout=10)
    assert info.value.txn_requires_abort
    producer.abort_transaction(timeout=10)
    assert broker.ended == [False]


def test_transactional_config_errors():
    with pytest.raises(errors.ClientError):
        Producer(["tcp://127.0.0.1:1"], transactional_id="x", enable_idempotence=False)
    with pytest.raises(errors.ClientError):
        Producer(["tcp://127.0.0.1:1"], transactional_id="x", acks=0)
    with pytest.raises(ValueError):
        Producer(["tcp://127.0.0.1:1"], transactional_id="")


# ---- the pure manager -------------------------------------------------------------------------

@pytest.mark.parametrize("code,kind", [
    ("PRODUCER_FENCED", FATAL), ("INVALID_PRODUCER_EPOCH", FATAL),
    ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", FATAL), ("INVALID_TXN_STATE", FATAL),
    ("CONCURRENT_TRANSACTIONS", RETRIABLE), ("NOT_COORDINATOR", RETRIABLE),
    ("COORDINATOR_LOAD_IN_PROGRESS", RETRIABLE), ("UNSTABLE_OFFSET_COMMIT", RETRIABLE),
    ("TOPIC_AUTHORIZATION_FAILED", ABORTABLE), ("UNKNOWN_MEMBER_ID", ABORTABLE),
    ("INVALID_PRODUCER_ID_MAPPING", ABORTABLE)])
def test_classification_is_kafkas(code, kind):
    assert classify(E(code)) == kind


def test_manager_states():
    m = TransactionManager("x", 1000, IdempotenceState())
    assert m.state is TxnState.UNINITIALIZED
    with pytest.raises(errors.IllegalStateError):
        m.begin_transaction()
    req = m.begin_init()
    assert m.begin_init() is req                     # a second call waits on the same one
    m.handle_answer(req, producer_id_pb2.InitProducerIdResponse(producer_id=5, producer_epoch=2),
                    0, 10)
    assert req.done and m.state is TxnState.READY
    m.begin_transaction()
    assert m.begin_commit() is None and m.state is TxnState.READY   # nothing was written
    m.begin_transaction()
    m.note_partition(TP0)
    assert m.partitions_to_add() == [TP0] and not m.can_send_to(TP0)
    add = m.add_partitions_request([TP0])
    answer = tx.AddPartitionsToTxnResponse(results=[tx.AddPartitionsToTxnTopicResult(
        name="t", results=[tx.AddPartitionsToTxnPartitionResult(partition_index=0)])])
    m.handle_answer(add, answer, 0, 10)
    assert m.can_send_to(TP0) and m.transaction_started
    end = m.begin_commit()
    assert end.body.committed and end.body.producer_epoch == 2
    m.handle_answer(end, tx.EndTxnResponse(error_code=E("CONCURRENT_TRANSACTIONS")), 100, 10)
    assert not end.done and m.next_request(105) is None and m.next_request(110) is end
    m.handle_answer(end, tx.EndTxnResponse(), 110, 10)
    assert end.done and end.error is None and m.state is TxnState.READY and not m.partitions


# ---- read_committed filtering ------------------------------------------------------------------

def _log(*batches):
    """Concatenate batches, giving them consecutive offsets."""
    out = bytearray()
    offset = 0
    for b in batches:
        b = bytearray(b)
        b[0:8] = offset.to_bytes(8, "big")
        out += b
        (h,) = [h for _, h in iter_batches(bytes(b))]
        offset = h.next_offset
    return bytes(out)


def _txn(pid, values, seq=0):
    return build_batch([(1000, None, v) for v in values], producer_id=pid, producer_epoch=0,
                       base_sequence=seq, is_transactional=True)


def test_read_committed_skips_aborted_transactions_and_markers():
    data = _log(_txn(1, [b"a1", b"a2"]),                    # 0-1  pid 1, aborted
                _txn(2, [b"c1"]),                           # 2    pid 2, committed
                build_marker_batch(1, 0, False, 0, 1000),   # 3    abort pid 1
                _txn(1, [b"c2"], seq=2),                    # 4    pid 1 again, committed
                build_batch([(1000, None, b"plain")]),      # 5
                build_marker_batch(2, 0, True, 0, 1000),    # 6    commit pid 2
                build_marker_batch(1, 0, True, 0, 1000))    # 7    commit pid 1
    batches = list(iter_batches(data))
    tp = TopicPartition("t", 0)
    cf = CompletedFetch(tp, data, batches, 8, 8, True, aborted=[(1, 0)], read_committed=True)
    recs, pos = cf.take(0, 100)
    assert [r.value for r in recs] == [b"c1", b"c2", b"plain"]
    assert cf.skipped_aborted == 2
    uncommitted = CompletedFetch(tp, data, list(iter_batches(data)), 8, 8, True)
    assert [r.value for r in uncommitted.take(0, 100)[0]] == [b"a1", b"a2", b"c1", b"c2",
                                                             b"plain"]
