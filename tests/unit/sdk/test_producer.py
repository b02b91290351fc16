import threading
import time

import pytest
from sdk_fakes import FakeGateway

from riverbed import errors
from riverbed._proto.v1 import header_pb2, metadata_pb2, produce_pb2
from riverbed.cluster import GatewayConnection
from riverbed.producer import RecordAccumulator, Sender
from riverbed.records import decode_batches
from riverbed.structs import TopicPartition

ApiKey = header_pb2.ApiKey
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
LEADER = lambda tp: 1  # noqa: E731


def acc(**kw):
    kw.setdefault("batch_size", 200)
    kw.setdefault("buffer_memory", 100_000)
    return RecordAccumulator(**kw)


def test_records_fill_a_batch_then_open_a_new_one():
    a = acc(linger_ms=1000)
    futs = [a.append(TP0, 1, None, b"x" * 30, (), now_ms=0) for _ in range(12)]
    indexes = [f._index for f in futs]
    assert indexes[0] == 0 and 0 in indexes[1:]            # a second batch started over at 0
    assert futs[0]._batch is not futs[-1]._batch
    check = a.ready(LEADER, now_ms=1)
    assert check.ready == [TP0]                              # full: more than one batch queued


def test_linger_and_ready_delay():
    a = acc(linger_ms=50)
    a.append(TP0, 1, None, b"v", (), now_ms=0)
    check = a.ready(LEADER, now_ms=10)
    assert check.ready == [] and check.next_ready_check_delay_ms == 40
    assert a.ready(LEADER, now_ms=50).ready == [TP0]


def test_unknown_leader_reported_not_ready():
    a = acc()
    a.append(TP0, 1, None, b"v", (), now_ms=0)
    check = a.ready(lambda tp: -1, now_ms=0)
    assert check.ready == [] and check.unknown_leader_topics == {"t"}


def test_drain_respects_max_request_size_and_takes_first_batch_always():
    a = acc(batch_size=100)
    for _ in range(20):
        a.append(TP0, 1, None, b"y" * 40, (), now_ms=0)
    ready = a.ready(LEADER, 0).ready
    got = a.drain(ready, max_request_size=150, now_ms=0)
    assert len(got) == 1
    got2 = a.drain(ready, max_request_size=10_000, now_ms=0)
    assert len(got2) > 1
    records = decode_batches(b"".join(b.payload for b in got + got2))
    assert [r.value for r in records] == [b"y" * 40] * sum(b.record_count for b in got + got2)


def test_guarantee_order_mutes_partition_while_in_flight():
    a = acc(guarantee_order=True)
    a.append(TP0, 1, None, b"a", (), now_ms=0)
    (b,) = a.drain(a.ready(LEADER, 0).ready, 10_000, 0)
    a.append(TP0, 1, None, b"b", (), now_ms=0)
    assert a.ready(LEADER, 1).ready == []
    a.unmute(TP0)
    assert a.ready(LEADER, 1).ready == [TP0]


def test_reenqueue_goes_to_head_with_backoff():
    a = acc(retry_backoff_ms=100)
    a.append(TP0, 1, None, b"a", (), now_ms=0)
    (b,) = a.drain([TP0], 10_000, 0)
    a.append(TP0, 1, None, b"b", (), now_ms=0)
    a.reenqueue(b, now_ms=10)
    assert a.ready(LEADER, 50).ready == []                  # backing off
    assert a.ready(LEADER, 111).ready == [TP0]
    first = a.drain([TP0], 10_000, 111)
    assert first == [b]                                       # retried batch first, alone


def test_buffer_exhausted_after_max_block():
    a = acc(batch_size=100, buffer_memory=250)
    a.append(TP0, 1, None, b"a", (), now_ms=0)
    a.append(TP1, 1, None, b"a", (), now_ms=0)
    with pytest.raises(errors.BufferExhaustedError):
        a.append(TopicPartition("t", 2), 1, None, b"a", (), now_ms=0, max_block_ms=10)


def test_buffer_freed_by_deallocate_unblocks_append():
    a = acc(batch_size=100, buffer_memory=150)
    f = a.append(TP0, 1, None, b"a", (), now_ms=0)
    (b,) = a.drain([TP0], 10_000, 0)
    threading.Timer(0.05, lambda: a.deallocate(b)).start()
    assert a.append(TP1, 1, None, b"a", (), now_ms=0, max_block_ms=5000) is not None
    assert a.memory_used == 100
    assert f._batch is b.result


def test_append_values_one_future_per_batch():
    a = acc(batch_size=300)
    values = [b"%03d" % i for i in range(200)]
    futs = a.append_values(TP0, 5, values, now_ms=0)
    assert len(futs) > 1
    batches = a.drain([TP0], 1 << 20, 0)
    assert sum(b.record_count for b in batches) == 200
    assert [f._index for f in futs] == [b.record_count - 1 for b in batches]
    assert [r.value for r in decode_batches(b"".join(b.payload for b in batches))] == values


# -- sender against a fake gateway --------------------------------------------------------------

def metadata_handler(partitions=2):
    def h(body, payloads):
        resp = metadata_pb2.MetadataResponse(controller_id=1, cluster_id="c")
        for name in body.topics or ["t"]:
            t = resp.topics.add(name=name)
            for p in range(partitions):
                t.partitions.add(partition=p, leader=1, replicas=[1], isr=[1])
        resp.gateways.add(gateway_id=1, endpoint="tcp://127.0.0.1:9092")
        return resp, []
    return h


class ProduceLog:
    """Appends every partition's frame to an in-memory log; errors scripted per call."""

    def __init__(self, script=()):
        self.logs: dict[tuple[str, int], list] = {}
        self.script = list(script)   # each: dict (topic, partition) -> error code

    def __call__(self, body, payloads):
        errors_now = self.script.pop(0) if self.script else {}
        resp = produce_pb2.ProduceResponse()
        i = 0
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                frame = payloads[i]
                i += 1
                code = errors_now.get((t.name, p.partition), 0)
                if code:
                    rt.partitions.add(partition=p.partition, error_code=code, base_offset=-1,
                                      error_message="scripted")
                    continue
                log = self.logs.setdefault((t.name, p.partition), [])
                recs = decode_batches(frame)
                rt.partitions.add(partition=p.partition, base_offset=len(log),
                                  log_append_time_ms=-1)
                log.extend(r.value for r in recs)
        return resp, []


def make_sender(gw, *, retries=3, max_in_flight=5, linger_ms=0, acks=1):
    conn = GatewayConnection(["tcp://127.0.0.1:1"], channel_factory=gw.factory)
    conn.fetch_metadata(["t"])
    a = RecordAccumulator(batch_size=100, buffer_memory=100_000, linger_ms=linger_ms,
                          retry_backoff_ms=0, guarantee_order=max_in_flight == 1)
    s = Sender(conn, a, acks=acks, retries=retries, max_in_flight=max_in_flight,
               max_request_size=1 << 20, request_timeout_ms=30000, retry_backoff_ms=0,
               metadata_max_age_ms=300000, metadata_changed=threading.Condition(),
               delivery_timeout_ms=float("inf"))   # appends here use now_ms=0, not the clock
    return conn, a, s


def step(s, now=0.0):
    """One sender step without the socket poll: ready, drain, send, handle answers.
    The sender stamps retries with the monotonic clock, so `now` is an offset from it."""
    now = time.monotonic() * 1000.0 + now
    check = s.acc.ready(s.conn.metadata.leader_for, now)
    if check.ready and len(s.in_flight) < s.max_in_flight:
        batches = s.acc.drain(check.ready, s.max_request_size, now)
        if batches:
            s._send_produce(batches, now)
    while (resp := s.conn.channel.recv(0)) is not None:
        s._handle_response(resp)


def test_one_request_carries_several_partitions_and_offsets_resolve():
    log = ProduceLog()
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log})
    conn, a, s = make_sender(gw)
    futs = [a.append(TopicPartition("t", i % 2), 1, None, b"v%d" % i, (), now_ms=0)
            for i in range(40)]
    step(s)
    produce_reqs = [r for r in gw.requests if r[0] == ApiKey.PRODUCE]
    assert len(produce_reqs) == 1
    _, body, payloads = produce_reqs[0]
    assert sorted(p.partition for p in body.topics[0].partitions) == [0, 1]
    assert len(payloads) == 2                                  # one frame per partition
    for i, f in enumerate(futs):
        md = f.result(timeout=0)
        assert md.partition == i % 2
        assert log.logs[("t", md.partition)][md.offset] == b"v%d" % i


def test_retriable_error_retries_then_succeeds():
    log = ProduceLog(script=[{("t", 0): 6}])    # NOT_LEADER_FOR_PARTITION once
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log})
    conn, a, s = make_sender(gw)
    f = a.append(TP0, 1, None, b"a", (), now_ms=0)
    step(s)
    assert not f.done() and s._metadata_wanted               # refresh asked for
    step(s, now=1)
    assert f.result(timeout=0).offset == 0
    assert log.logs[("t", 0)] == [b"a"]


def test_non_retriable_error_fails_with_topic_partition():
    log = ProduceLog(script=[{("t", 1): 10}])   # MESSAGE_TOO_LARGE
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log})
    conn, a, s = make_sender(gw)
    f = a.append(TP1, 1, None, b"a", (), now_ms=0)
    step(s)
    with pytest.raises(errors.MessageTooLargeError, match=r"t-1"):
        f.result(timeout=0)
    assert a.memory_used == 0


def test_retries_exhausted_fail_the_batch():
    log = ProduceLog(script=[{("t", 0): 7}] * 10)   # REQUEST_TIMED_OUT every time
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log})
    conn, a, s = make_sender(gw, retries=2)
    f = a.append(TP0, 1, None, b"a", (), now_ms=0)
    for i in range(5):
        step(s, now=i)
    assert len([r for r in gw.requests if r[0] == ApiKey.PRODUCE]) == 3
    with pytest.raises(errors.RequestTimedOutError, match=r"t-0"):
        f.result(timeout=0)


def test_several_batches_of_one_partition_get_consecutive_offsets():
    log = ProduceLog()
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log})
    conn, a, s = make_sender(gw)
    futs = [a.append(TP0, 1, None, b"%02d" % i, (), now_ms=0) for i in range(50)]
    assert len({id(f._batch) for f in futs}) > 1
    step(s)
    assert [f.result(timeout=0).offset for f in futs] == list(range(50))
    assert log.logs[("t", 0)] == [b"%02d" % i for i in range(50)]


def test_max_in_flight_limits_pipelining():
    log = ProduceLog()
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log})
    conn, a, s = make_sender(gw, max_in_flight=2)
    conn.channel.hold = True
    for i in range(5):
        a.append(TP0, 1, None, b"x", (), now_ms=0)
        step(s)
    assert len(s.in_flight) == 2
    conn.channel.release()
    step(s)
    assert len(s.in_flight) <= 1


def test_the_sender_looks_again_at_once_while_ready_batches_wait_for_a_free_slot():
    # A request holds at most max_request_size: the ready batches it left behind go in the
    # next requests at once, not after the next answer or append (under bulk load the app is
    # blocked on buffer_memory and appends nothing: one or two requests were in flight).
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: ProduceLog()})
    conn, a, s = make_sender(gw, max_in_flight=3)
    s.max_request_size = 150                  # one batch per request
    conn.channel.hold = True
    for _ in range(6):
        a.append(TP0, 1, None, b"x" * 60, (), now_ms=0)   # a batch each (batch_size 100)
    now = time.monotonic() * 1000.0
    for sent in (1, 2, 3):
        assert s.prepare(now) == 0            # more is ready and a slot is free: no sleep
        assert len(s.in_flight) == sent
    assert s.prepare(now) > 0                 # every slot taken: only an answer helps now
    assert len(s.in_flight) == 3
    conn.channel.release()
    s.handle_responses()
    assert not s.in_flight and s.prepare(now) == 0 and len(s.in_flight) == 1


def test_acks0_completes_without_answer():
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: lambda b, p: None})
    conn, a, s = make_sender(gw, acks=0)
    f = a.append(TP0, 1, None, b"a", (), now_ms=0)
    step(s)
    assert f.result(timeout=0).offset == -1
    assert s.in_flight == {}


def test_gateway_timeout_fails_over_and_retries():
    log = ProduceLog()
    answers = {"n": 0}

    def flaky(body, payloads):
        answers["n"] += 1
        return None if answers["n"] == 1 else log(body, payloads)   # first: no answer
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: flaky})
    conn, a, s = make_sender(gw)
    conn.learn_gateways([])  # endpoints: current + bootstrap
    f = a.append(TP0, 1, None, b"a", (), now_ms=0)
    step(s)
    assert conn.failovers == 1
    step(s, now=1)
    assert f.result(timeout=0).offset == 0


def test_producer_end_to_end_with_fake_channel(monkeypatch):
    """The real sender thread, over a fake channel (poll on the wake pipe only)."""
    import zmq

    from riverbed.producer import Producer
    log = ProduceLog()
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(3), ApiKey.PRODUCE: log})

    class Sock:  # a pollable stand-in for the DEALER: an inproc PAIR that never fires
        ctx = zmq.Context.instance()
    pair = Sock.ctx.socket(zmq.PAIR)
    pair.bind("inproc://fake-dealer-%d" % id(pair))
    from sdk_fakes import FakeChannel
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)
    try:
        with Producer(["tcp://127.0.0.1:1"], _channel_factory=gw.factory, batch_size=200) as p:
            futs = [p.send("t", b"v%d" % i, key=b"k%d" % (i % 7)) for i in range(300)]
            bulk = p.send_many("t", [b"bulk%d" % i for i in range(500)])
            p.flush(timeout=10)
            mds = [f.result(timeout=5) for f in futs]
            assert all(b.result(timeout=5).offset >= 0 for b in bulk)
        from riverbed.partitioner import partition_for_key
        for i, md in enumerate(mds):
            assert md.partition == partition_for_key(b"k%d" % (i % 7), 3)
            assert log.logs[("t", md.partition)][md.offset] == b"v%d" % i
        assert sum(len(v) for v in log.logs.values()) == 800
    finally:
        pair.close(0)


def test_deallocate_many_frees_every_batch_once_and_unblocks_append():
    a = acc(batch_size=100, buffer_memory=250)
    a.append(TP0, 1, None, b"a", (), now_ms=0)
    a.append(TP1, 1, None, b"a", (), now_ms=0)
    batches = a.drain([TP0, TP1], 10_000, 0)
    assert len(batches) == 2 and a.memory_used == 200
    threading.Timer(0.05, lambda: a.deallocate_many(batches + batches)).start()
    assert a.append(TopicPartition("t", 2), 1, None, b"a", (), now_ms=0,
                    max_block_ms=5000) is not None
    assert a.memory_used == 100                      # each batch freed once


def test_try_append_wakes_a_sleeping_sender_outside_the_lock():
    seen = []
    a = acc(linger_ms=0)
    a._on_ready = lambda: seen.append(a._lock.locked())
    a.append(TP0, 1, None, b"a", (), now_ms=0)
    seen.clear()
    a.sender_sleeping = True
    assert a.try_append(TP0, 1, None, b"b", ()) is not None
    assert seen == [False] and a.sender_sleeping is False    # woken once, lock not held
    assert a.try_append(TP0, 1, None, b"c", ()) is not None
    assert seen == [False]                                    # not sleeping: no wake


def test_try_append_with_linger_does_not_wake_for_a_lone_open_batch():
    seen = []
    a = acc(linger_ms=1000)
    a._on_ready = lambda: seen.append(True)
    a.append(TP0, 1, None, b"a", (), now_ms=0)
    seen.clear()
    a.sender_sleeping = True
    assert a.try_append(TP0, 1, None, b"b", ()) is not None
    assert seen == [] and a.sender_sleeping is True


@pytest.mark.parametrize("linger_ms", [0, 0.5, 3])
def test_hot_path_sends_in_order_with_sub_millisecond_and_longer_linger(monkeypatch, linger_ms):
    # send()'s inlined append (explicit partition, bytes) and the sender's waits: whole
    # milliseconds rounded down, sub-millisecond rests slept in slices.
    import zmq

    from riverbed.producer import Producer
    from sdk_fakes import FakeChannel
    log = ProduceLog()
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(2), ApiKey.PRODUCE: log})
    pair = zmq.Context.instance().socket(zmq.PAIR)
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)
    try:
        with Producer(["tcp://127.0.0.1:1"], _channel_factory=gw.factory, batch_size=300,
                      linger_ms=linger_ms) as p:
            p.partitions_for("t")
            futs = [p.send("t", b"r%d" % i, partition=1) for i in range(200)]
            mds = [f.result(timeout=10) for f in futs]
        assert [md.offset for md in mds] == list(range(200))
        assert [log.logs[("t", 1)][md.offset] for md in mds] == [b"r%d" % i for i in range(200)]
    finally:
        pair.close(0)


@pytest.fixture
def fake_dealer(monkeypatch):
    """Producers' sender threads poll their channel's socket: a pollable inproc PAIR."""
    import zmq

    from sdk_fakes import FakeChannel
    pair = zmq.Context.instance().socket(zmq.PAIR)
    pair.bind("inproc://fake-dealer-%d" % id(pair))
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)
    yield
    pair.close(0)


def test_unclosed_producer_is_closed_by_the_exit_hook(fake_dealer):
    from riverbed import producer as producer_mod
    log = ProduceLog()
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(1), ApiKey.PRODUCE: log})
    p = producer_mod.Producer(["tcp://127.0.0.1:1"], _channel_factory=gw.factory,
                              linger_ms=60_000)
    futs = [p.send("t", b"v%d" % i) for i in range(10)]
    assert p in producer_mod._LIVE_PRODUCERS
    producer_mod._close_live_producers()            # what atexit runs
    assert p._closed and p not in producer_mod._LIVE_PRODUCERS
    assert [f.result(timeout=0).offset for f in futs] == list(range(10))
    assert p.undelivered_at_close == 0


def test_close_counts_and_logs_undelivered_records(fake_dealer, caplog):
    from riverbed.producer import Producer
    # PRODUCE has no handler: the fake answers REQUEST_TIMED_OUT, and retries=0 fails the batch.
    # linger keeps all seven queued until close() (with linger 0 the sender could send, and
    # fail, the first record before close began: not one of close's undelivered records).
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(1)})
    p = Producer(["tcp://127.0.0.1:1"], _channel_factory=gw.factory, retries=0,
                 linger_ms=60_000)
    futs = [p.send("t", b"v%d" % i) for i in range(7)]
    with caplog.at_level("WARNING", logger="riverbed.producer"):
        p.close(timeout=0.2)
    assert p.undelivered_at_close == 7
    assert "7 record(s) could not be delivered" in caplog.text
    assert all(f.failed() for f in futs)


def test_a_forked_copy_refuses_use_and_its_close_is_a_no_op(fake_dealer, monkeypatch):
    from riverbed import process_owner
    from riverbed.producer import Producer
    log = ProduceLog()
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(1), ApiKey.PRODUCE: log})
    p = Producer(["tcp://127.0.0.1:1"], _channel_factory=gw.factory, linger_ms=60_000)
    pending = p.send("t", b"before")
    parent_pid = process_owner.current_pid()
    monkeypatch.setattr(process_owner, "_pid", parent_pid + 1)   # as in a forked child
    p._on_fork()
    for call in (lambda: p.send("t", b"x"), lambda: p.send_many("t", [b"x"]),
                 lambda: p.flush(), lambda: pending.get(), lambda: p.partitions_for("t")):
        with pytest.raises(errors.ForkedClientError, match=r"os\.fork\(\)"):
            call()
    monkeypatch.setattr(process_owner, "_pid", parent_pid)
    p.flush(timeout=10)      # the original is untouched
    assert pending.get(timeout=0).offset == 0
    p.close()


# ---- adaptive batch size ---------------------------------------------------------------------

def _capacities(a, tp=TP0):
    return [b.capacity for b in a.queued(tp)]


def test_batches_grow_while_full_ones_wait_and_stop_at_batch_size_max():
    a = acc(batch_size=200, batch_size_max=1600)
    for _ in range(400):                                   # nothing drained: a backlog
        a.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
    caps = _capacities(a)
    assert caps[:5] == [200, 400, 800, 1600, 1600]
    assert max(caps) == 1600
    sizes = [len(b.close()) for b in a.queued(TP0)[:-1]]
    assert all(s <= 1600 for s in sizes) and sizes[3] > 800   # filled to the grown capacity


def test_append_values_grows_too_and_memory_is_reserved_by_capacity():
    a = acc(batch_size=200, batch_size_max=800)
    a.append_values(TP0, 1, [b"y" * 20] * 200)
    caps = _capacities(a)
    assert caps[:3] == [200, 400, 800]
    assert a.memory_used == sum(caps)


def test_no_backlog_keeps_batch_size_and_partial_drains_shrink_the_growth():
    a = acc(batch_size=200, batch_size_max=1600)
    for _ in range(3):                                     # the sender keeps up: one at a time
        a.append(TP0, 1, None, b"x" * 300, (), now_ms=0)   # one record each, taken unfilled
        drained = a.drain(a.ready(LEADER, now_ms=0).ready, 1 << 20, now_ms=0)
        assert [b.capacity for b in drained] == [200]
    for _ in range(60):
        a.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
    assert _capacities(a)[:3] == [200, 400, 800]           # a backlog: grow
    last = _capacities(a)[-1]
    a.drain(a.ready(LEADER, now_ms=0).ready, 1 << 20, now_ms=0)   # the last one taken unfilled
    caps = []
    for _ in range(6):                                     # light load: each taken unfilled
        a.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
        caps += [b.capacity for b in a.drain(a.ready(LEADER, now_ms=0).ready, 1 << 20, 0)]
    assert caps[0] == last // 2 and caps == sorted(caps, reverse=True) and caps[-1] == 200


def test_batches_that_fill_before_the_sender_takes_them_grow_the_next():
    a = acc(batch_size=200, batch_size_max=1600)
    caps = []
    for _ in range(6):                                     # each batch full when drained,
        while not a.queued(TP0) or not a.queued(TP0)[-1].full:    # and never two queued
            a.append(TP0, 1, None, b"x" * 30, (), now_ms=0, abort_on_new_batch=bool(a.queued(TP0)))
        caps += [b.capacity for b in a.drain(a.ready(LEADER, now_ms=0).ready, 1 << 20, 0)]
    assert caps == [200, 400, 800, 1600, 1600, 1600]


# ---- Nagle's rule: partial batches wait for answers ----------------------------------------

def test_partial_batches_wait_while_two_requests_are_in_flight():
    a = acc(batch_size=200)
    a.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
    assert a.ready(LEADER, now_ms=0, in_flight=1).ready == [TP0]   # light load: at once
    check = a.ready(LEADER, now_ms=0, in_flight=2)
    assert check.ready == [] and check.held and a.holding
    assert check.next_ready_check_delay_ms == float("inf")        # an answer wakes the sender
    check = a.ready(LEADER, now_ms=0, in_flight=1)                  # an answer came back
    assert check.ready == [TP0] and not check.held and not a.holding


def test_held_batches_still_go_when_full_flushed_or_turned_off():
    a = acc(batch_size=200)
    for _ in range(8):                                     # a full batch and a partial one
        a.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
    a.append(TP1, 1, None, b"x" * 30, (), now_ms=0)        # partial only
    assert a.ready(LEADER, now_ms=0, in_flight=3).ready == [TP0]
    a.begin_flush()
    assert sorted(a.ready(LEADER, now_ms=0, in_flight=3).ready) == [TP0, TP1]
    a.end_flush()
    off = acc(batch_size=200, hold_partial_at_in_flight=0)
    off.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
    assert off.ready(LEADER, now_ms=0, in_flight=5).ready == [TP0]


def test_appends_to_a_held_batch_neither_bump_nor_wake_but_a_full_one_does():
    woken = []
    a = acc(batch_size=200, on_ready=lambda: woken.append(1))
    a.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
    a.ready(LEADER, now_ms=0, in_flight=2)
    seq = a._ready_seq
    a.sender_sleeping = True
    assert a.try_append(TP0, 1, None, b"x" * 30, ()) is not None
    a.append_values(TP0, 1, [b"y" * 10])
    assert a._ready_seq == seq and woken == []
    while a.try_append(TP0, 1, None, b"x" * 30, ()) is not None:
        pass
    a.append(TP0, 1, None, b"x" * 30, (), now_ms=0)        # the first batch is full now
    assert woken == [1] and a.ready(LEADER, now_ms=0, in_flight=2).ready == [TP0]


def test_batch_size_max_equal_to_batch_size_turns_growth_off():
    a = acc(batch_size=200)
    for _ in range(100):
        a.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
    assert set(_capacities(a)) == {200}


def test_a_sticky_run_grows_while_the_partition_it_left_still_waits():
    """Keyless records move on after each full batch: the partition they move to has an empty
    deque, so the backlog shows on the partition they left (issue 15: with 1,000 partitions
    every batch stayed at batch_size)."""
    a = acc(batch_size=200, batch_size_max=1600)
    tps = [TopicPartition("t", p) for p in range(6)]
    left = None
    for tp in tps:                                         # nothing drained: a backlog
        futs, n = a.append_values_counted(tp, 1, [b"x" * 30] * 100, one_batch=True, after=left)
        assert n < 100                                     # filled one batch, then stopped
        left = tp
    assert [_capacities(a, tp) for tp in tps] == [[200], [400], [800], [1600], [1600], [1600]]
    # the same through append() (keyless send())
    b = acc(batch_size=200, batch_size_max=1600)
    b.append(TP0, 1, None, b"x" * 30, (), now_ms=0)
    b.append(TP1, 1, None, b"x" * 30, (), now_ms=0, after=TP0)
    assert _capacities(b, TP1) == [400]


def test_a_sticky_run_takes_the_capacity_the_drain_left_on_the_partition_it_left():
    a = acc(batch_size=200, batch_size_max=1600)
    a.append_values_counted(TP0, 1, [b"x" * 30] * 100, one_batch=True)       # fills 200
    a.drain(a.ready(LEADER, now_ms=0).ready, 1 << 20, now_ms=0)   # taken full: doubled
    a.append_values_counted(TP1, 1, [b"x" * 30] * 100, one_batch=True, after=TP0)
    assert _capacities(a, TP1) == [400]
    b = acc(batch_size=200, batch_size_max=1600)
    b.append_values_counted(TP0, 1, [b"x" * 30] * 2, now_ms=0, one_batch=True)  # not full
    assert len(b.drain(b.ready(LEADER, now_ms=0).ready, 1 << 20, now_ms=0)) == 1   # unfilled
    b.append_values_counted(TP1, 1, [b"x" * 30] * 100, one_batch=True, after=TP0)
    assert _capacities(b, TP1) == [200]
    c = acc(batch_size=200)                                # growth off: after changes nothing
    c.append_values_counted(TP0, 1, [b"x" * 30] * 100, one_batch=True)
    c.append_values_counted(TP1, 1, [b"x" * 30] * 100, one_batch=True, after=TP0)
    assert _capacities(c, TP1) == [200]


def test_send_many_without_a_partition_grows_batches_along_the_sticky_run(monkeypatch):
    """Producer.send_many tells the accumulator which partition the sticky run left."""
    import zmq

    from riverbed.producer import Producer
    from sdk_fakes import FakeChannel
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(50), ApiKey.PRODUCE: ProduceLog()})
    # PRODUCE answers held until the flush: the batches sent first (1000 B) stay incomplete
    # however fast the sender is, and the in-flight limit leaves the rest queued (a backlog)
    gw.hold_apis = {ApiKey.PRODUCE}
    pair = zmq.Context.instance().socket(zmq.PAIR)     # pollable, never fires (see above)
    pair.bind("inproc://fake-dealer-%d" % id(pair))
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)
    try:
        # linger keeps every batch that is not full queued until flush
        with Producer(["tcp://127.0.0.1:1"], _channel_factory=gw.factory, linger_ms=60_000,
                      batch_size=1000, batch_size_max=8000) as p:
            for _ in range(40):
                p.send_many("t", [b"v" * 50] * 18)         # about one batch_size per call
            caps = sorted({b.capacity for b in p._accumulator.incomplete()})
            assert caps[0] == 1000 and caps[-1] == 8000
            gw.hold_apis = set()
            for ch in gw.channels:
                ch.release()
            p.flush(timeout=10)
    finally:
        pair.close(0)
