"""The idempotent producer's client side against a fake gateway that keeps Kafka's per-producer
sequence state (no sockets, no threads): sequences, duplicates, gaps, epoch bumps, fallback."""
import logging
import threading
import time

import pytest
from sdk_fakes import FakeGateway

from riverbed import errors
from riverbed._proto.v1 import header_pb2, metadata_pb2, produce_pb2, producer_id_pb2
from riverbed.cluster import GatewayConnection
from riverbed.idempotence import IdempotenceState, ProducerIdState
from riverbed.producer import Producer, RecordAccumulator, Sender
from riverbed.records import decode_batch, iter_batches
from riverbed.structs import TopicPartition

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode.Value
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def metadata_handler(body, payloads):
    resp = metadata_pb2.MetadataResponse(controller_id=1, cluster_id="c")
    for name in body.topics or ["t"]:
        t = resp.topics.add(name=name)
        for p in range(2):
            t.partitions.add(partition=p, leader=1, replicas=[1], isr=[1])
    return resp, []


class IdempotentBroker:
    """What the storage node must do (the semantics the SDK relies on), per partition:
    producer id -1: plain append. Otherwise, per producer id: the epoch and the last 5 batches
    (first seq, last seq, base offset). A batch equal to one of those: DUPLICATE_SEQUENCE_NUMBER
    with its base offset. A newer epoch must start at sequence 0; an unknown producer at 0;
    else the batch must follow the last sequence exactly: OUT_OF_ORDER_SEQUENCE_NUMBER."""

    def __init__(self):
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.producers: dict[tuple[str, int, int], dict] = {}
        self.script: list[dict] = []      # per PRODUCE call: (topic, partition) -> code | "lose"
        self.next_pid = 1000
        self.init_calls = 0
        self.lost = 0
        self.answers: list[int] = []      # every partition answer's error code, in order

    def init_producer_id(self, body, payloads):
        self.init_calls += 1
        pid = self.next_pid
        self.next_pid += 1
        return producer_id_pb2.InitProducerIdResponse(producer_id=pid, producer_epoch=0), []

    def _check(self, key, frame):
        """(code, base_offset or -1, batches to append)."""
        batches = [(h, decode_batch(frame, pos)) for pos, h in iter_batches(frame)]
        h0 = batches[0][0]
        if h0.producer_id < 0:
            return 0, -1, batches
        st = self.producers.get((key[0], key[1], h0.producer_id))
        first, last = h0.base_sequence, batches[-1][0].base_sequence + \
            batches[-1][0].records_count - 1
        if st is not None:
            if h0.producer_epoch < st["epoch"]:
                return E("INVALID_PRODUCER_EPOCH"), -1, []
            if h0.producer_epoch == st["epoch"]:
                for f, lst, off in st["recent"]:
                    if f == first:
                        return (E("DUPLICATE_SEQUENCE_NUMBER") if lst == last
                                else E("OUT_OF_ORDER_SEQUENCE_NUMBER")), off, []
                if first != st["last_seq"] + 1:
                    return E("OUT_OF_ORDER_SEQUENCE_NUMBER"), -1, []
                return 0, -1, batches
        if first != 0:
            return (E("UNKNOWN_PRODUCER_ID") if st is None
                    else E("OUT_OF_ORDER_SEQUENCE_NUMBER")), -1, []
        return 0, -1, batches

    def produce(self, body, payloads):
        script = self.script.pop(0) if self.script else {}
        resp = produce_pb2.ProduceResponse()
        lose = False
        i = 0
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                frame = payloads[i]
                i += 1
                key = (t.name, p.partition)
                forced = script.get(key)
                if forced == "lose":
                    lose = True
                elif forced:
                    rt.partitions.add(partition=p.partition, error_code=forced, base_offset=-1)
                    continue
                code, base, batches = self._check(key, frame)
                self.answers.append(code)
                if code:
                    rt.partitions.add(partition=p.partition, error_code=code, base_offset=base)
                    continue
                log = self.logs.setdefault(key, [])
                base = len(log)
                for h, recs in batches:
                    off = len(log)
                    log.extend(r.value for r in recs)
                    if h.producer_id >= 0:
                        st = self.producers.setdefault((key[0], key[1], h.producer_id),
                                                       {"epoch": h.producer_epoch, "recent": []})
                        if h.producer_epoch != st["epoch"]:
                            st.update(epoch=h.producer_epoch, recent=[])
                        last = h.base_sequence + h.records_count - 1
                        st["recent"] = (st["recent"] + [(h.base_sequence, last, off)])[-5:]
                        st["last_seq"] = last
                rt.partitions.add(partition=p.partition, base_offset=base, log_append_time_ms=-1)
        if lose:
            self.lost += 1
            return None           # appended, but the answer never comes back
        return resp, []


def make(broker=None, *, handlers=None, max_in_flight=5, retries=5, batch_size=100,
         hold_partial_at_in_flight=2):
    broker = broker or IdempotentBroker()
    h = {ApiKey.METADATA: metadata_handler, ApiKey.PRODUCE: broker.produce,
         ApiKey.INIT_PRODUCER_ID: broker.init_producer_id}
    h.update(handlers or {})
    gw = FakeGateway(h)
    conn = GatewayConnection(["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"],
                             channel_factory=gw.factory)
    conn.fetch_metadata(["t"])
    idem = IdempotenceState()
    acc = RecordAccumulator(batch_size=batch_size, buffer_memory=1_000_000, retry_backoff_ms=0,
                            idempotence=idem, hold_partial_at_in_flight=hold_partial_at_in_flight)
    s = Sender(conn, acc, acks=-1, retries=retries, max_in_flight=max_in_flight,
               max_request_size=1 << 20, request_timeout_ms=30000, retry_backoff_ms=0,
               metadata_max_age_ms=300000, metadata_changed=threading.Condition(),
               delivery_timeout_ms=120000, idempotence=idem)
    return broker, gw, conn, acc, s, idem


def now():
    return time.monotonic() * 1000.0


def step(s, times=1):
    for _ in range(times):
        s.prepare(now())
        s.handle_responses()


def append(acc, tp, value):
    return acc.append(tp, 1, None, value, (), now_ms=now())


def produce_requests(gw):
    return [r for r in gw.requests if r[0] == ApiKey.PRODUCE]


def test_batches_carry_producer_id_epoch_and_per_partition_sequences():
    broker, gw, conn, acc, s, idem = make()
    futs = [append(acc, TP0 if i % 3 else TP1, b"v%02d" % i) for i in range(30)]
    step(s, 3)
    assert broker.init_calls == 1 and idem.ready and idem.producer_id == 1000
    seen: dict[int, list[tuple[int, int, int]]] = {0: [], 1: []}
    for _, body, payloads in produce_requests(gw):
        parts = [p.partition for t in body.topics for p in t.partitions]
        for part, frame in zip(parts, payloads):
            for _, h in iter_batches(frame):
                seen[part].append((h.producer_id, h.producer_epoch, h.base_sequence,
                                   h.records_count))
    for part, batches in seen.items():
        assert {(pid, ep) for pid, ep, _, _ in batches} == {(1000, 0)}
        expected = 0
        for _, _, seq, count in batches:     # contiguous per partition, from 0
            assert seq == expected
            expected += count
    for i, f in enumerate(futs):
        md = f.result(timeout=0)
        assert broker.logs[("t", md.partition)][md.offset] == b"v%02d" % i


def test_lost_answer_retry_is_a_duplicate_completed_once_with_the_original_offsets():
    broker, gw, conn, acc, s, idem = make()
    step(s)                                          # producer id
    first = [append(acc, TP0, b"a%d" % i) for i in range(3)]
    step(s)
    broker.script = [{("t", 0): "lose"}]             # appended by the server, answer lost
    lost = [append(acc, TP0, b"b%d" % i) for i in range(3)]
    step(s)
    assert broker.lost == 1 and conn.failovers == 1 and not lost[0].done()
    step(s, 3)                                       # the retry: same sequence -> DUPLICATE
    assert broker.answers[-1] == E("DUPLICATE_SEQUENCE_NUMBER")
    assert broker.logs[("t", 0)] == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2"]  # once
    assert [f.result(timeout=0).offset for f in first + lost] == [0, 1, 2, 3, 4, 5]
    # the duplicate answer came back for the retried request
    last_frame = produce_requests(gw)[-1][2][0]
    assert [h.base_sequence for _, h in iter_batches(last_frame)] == [3]
    # completing twice would assert in BatchResult; a later batch continues the sequence
    more = append(acc, TP0, b"c")
    step(s)
    assert more.result(timeout=0).offset == 6


def test_five_in_flight_second_fails_retriably_order_is_kept():
    # five requests of one partial batch each: Nagle's rule (partial batches wait while two
    # requests are in flight) off, so the window fills
    broker, gw, conn, acc, s, idem = make(max_in_flight=5, hold_partial_at_in_flight=0)
    step(s)
    conn.channel.hold = True                          # answers held: 5 requests in flight
    broker.script = [{}, {("t", 0): E("NOT_LEADER_FOR_PARTITION")}]
    futs = []
    for i in range(5):
        futs.append(append(acc, TP0, b"x" * 60 + b"%d" % i))   # one batch each (batch_size 100)
        s.prepare(now())
    assert len(s.in_flight) == 5 and idem.incomplete_count(TP0) == 5
    # requests 3..5 arrived after a gap: the broker rejected them as out of order
    assert broker.answers == [0, E("OUT_OF_ORDER_SEQUENCE_NUMBER"),
                              E("OUT_OF_ORDER_SEQUENCE_NUMBER"), E("OUT_OF_ORDER_SEQUENCE_NUMBER")]
    conn.channel.release()
    s.handle_responses()                              # 1 ok, 2 retriable, 3..5 out of order
    for _ in range(3):
        s.prepare(now())
    assert len(s.in_flight) == 1                      # only batch 2 goes; 3..5 wait for it
    conn.channel.release()
    conn.channel.hold = False
    step(s, 20)
    # the retries went out one at a time, in sequence order
    assert broker.answers[4:] == [0, 0, 0, 0]
    log = broker.logs[("t", 0)]
    assert [v[-1:] for v in log] == [b"0", b"1", b"2", b"3", b"4"]
    assert [f.result(timeout=0).offset for f in futs] == [0, 1, 2, 3, 4]
    assert idem.producer_epoch == 0                  # no epoch bump was needed
    # batches 3..5 were not charged a retry for batch 2's failure
    assert all(not f.failed() for f in futs)
    # but the metrics count every batch sent again, as Kafka's record-retry-total does: one
    # record each for 2..5, and each send (5 first ones, 4 again) in record-send-total
    m = s.metrics.snapshot(now(), in_flight=0, buffer_total_bytes=1, buffer_used_bytes=0)
    assert m["record-retry-total"] == 4 and m["record-send-total"] == 9
    assert m["errors-by-code"] == {"NOT_LEADER_FOR_PARTITION": 1,
                                   "OUT_OF_ORDER_SEQUENCE_NUMBER": 3}


def test_out_of_order_for_the_next_sequence_bumps_the_epoch_and_restarts_at_zero():
    broker, gw, conn, acc, s, idem = make()
    step(s)
    f1 = append(acc, TP0, b"one")
    step(s)
    # the broker lost this producer's state (a real gap for the next expected batch)
    broker.script = [{("t", 0): E("OUT_OF_ORDER_SEQUENCE_NUMBER")}]
    f2 = append(acc, TP0, b"two")
    step(s, 3)
    assert idem.producer_epoch == 1 and idem.epoch_bumps == 1
    assert f1.result(timeout=0).offset == 0 and f2.result(timeout=0).offset == 1
    _, body, payloads = produce_requests(gw)[-1]
    (h,) = [h for _, h in iter_batches(payloads[0])]
    assert (h.producer_epoch, h.base_sequence) == (1, 0)


def test_unknown_producer_id_bumps_the_epoch_and_retries():
    broker, gw, conn, acc, s, idem = make()
    step(s)
    broker.script = [{("t", 1): E("UNKNOWN_PRODUCER_ID")}]
    f = append(acc, TP1, b"v")
    step(s, 3)
    assert idem.producer_epoch == 1
    assert f.result(timeout=0).offset == 0
    assert broker.logs[("t", 1)] == [b"v"]


def test_non_retriable_failure_leaves_no_gap_for_later_batches():
    broker, gw, conn, acc, s, idem = make()
    step(s)
    broker.script = [{("t", 0): E("MESSAGE_TOO_LARGE")}]
    bad = append(acc, TP0, b"bad")
    step(s)
    with pytest.raises(errors.MessageTooLargeError):
        bad.result(timeout=0)
    good = append(acc, TP0, b"good")
    step(s, 3)
    assert good.result(timeout=0).offset == 0         # new epoch from sequence 0: accepted
    assert idem.producer_epoch == 1


def test_init_producer_id_unsupported_falls_back_with_a_warning(caplog):
    broker = IdempotentBroker()
    broker_handlers = {ApiKey.INIT_PRODUCER_ID: lambda b, p: E("INVALID_REQUEST")}
    broker, gw, conn, acc, s, idem = make(broker, handlers=broker_handlers)
    f = append(acc, TP0, b"v")
    with caplog.at_level(logging.WARNING, logger="riverbed.sender"):
        step(s, 2)
    assert idem.state is ProducerIdState.DISABLED
    assert any("idempotence is OFF" in r.getMessage() for r in caplog.records)
    assert acc.guarantee_order                        # order kept by muting instead
    assert f.result(timeout=0).offset == 0
    (_, _, payloads), = produce_requests(gw)
    (h,) = [h for _, h in iter_batches(payloads[0])]
    assert (h.producer_id, h.base_sequence) == (-1, -1)


def test_nothing_is_drained_before_the_producer_id_arrives():
    broker = IdempotentBroker()
    calls = {"n": 0}

    def flaky(body, payloads):
        calls["n"] += 1
        return E("COORDINATOR_NOT_AVAILABLE") if calls["n"] == 1 else \
            broker.init_producer_id(body, payloads)
    broker, gw, conn, acc, s, idem = make(broker, handlers={ApiKey.INIT_PRODUCER_ID: flaky})
    f = append(acc, TP0, b"v")
    s.prepare(now())
    assert produce_requests(gw) == [] and not idem.ready
    s._pid_next_ms = 0
    step(s, 2)
    assert idem.ready and f.result(timeout=0).offset == 0


def test_config_rules_like_kafka(monkeypatch):
    import zmq
    from sdk_fakes import FakeChannel
    pair = zmq.Context.instance().socket(zmq.PAIR)   # a pollable stand-in that never fires
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)
    gw = FakeGateway({ApiKey.METADATA: metadata_handler})
    with pytest.raises(errors.ClientError, match="acks"):
        Producer(["tcp://127.0.0.1:1"], acks=1, enable_idempotence=True,
                 _channel_factory=gw.factory)
    with pytest.raises(errors.ClientError, match="max_in_flight"):
        Producer(["tcp://127.0.0.1:1"], acks="all", enable_idempotence=True,
                 max_in_flight_requests_per_connection=6, _channel_factory=gw.factory)
    with pytest.raises(errors.ClientError, match="delivery_timeout_ms"):
        Producer(["tcp://127.0.0.1:1"], delivery_timeout_ms=100, request_timeout_ms=30000,
                 _channel_factory=gw.factory)
    p = Producer(["tcp://127.0.0.1:1"], acks="all", _channel_factory=gw.factory)
    q = Producer(["tcp://127.0.0.1:1"], acks=1, _channel_factory=gw.factory)
    try:
        assert p.config["enable_idempotence"] is True and p.idempotent
        assert q.config["enable_idempotence"] is False and not q.idempotent
    finally:
        p.close()
        q.close()
        pair.close(0)


def test_partial_batches_ride_together_once_two_requests_are_in_flight():
    broker, gw, conn, acc, s, idem = make(max_in_flight=5)
    step(s)
    conn.channel.hold = True                          # answers held
    futs = []
    for i in range(5):
        futs.append(append(acc, TP0, b"r%d" % i))     # small: each leaves its batch partial
        s.prepare(now())
    # the first two went at once (light load); the rest waited, filling one batch
    assert len(s.in_flight) == 2 and len(acc.queued(TP0)) == 1
    conn.channel.release()
    conn.channel.hold = False
    step(s, 5)
    assert len(produce_requests(gw)) == 3             # 1 + 1 + the three that waited
    assert [f.result(timeout=0).offset for f in futs] == [0, 1, 2, 3, 4]
