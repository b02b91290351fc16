"""Accumulator/sender rules behind the fast paths (drain fairness, delivery timeout, codecs,
ordering with one request in flight) and the consumer's lazy decoding. No sockets or threads."""
import threading
import time

import pytest
from sdk_fakes import FakeGateway
from test_consumer_admin import batch as make_batch
from test_consumer_admin import metadata as one_partition_metadata
from test_producer import ProduceLog, metadata_handler

from riverbed import errors
from riverbed._proto.v1 import fetch_pb2, header_pb2, list_offsets_pb2
from riverbed.cluster import GatewayConnection
from riverbed.consumer import Consumer
from riverbed.fetcher import CompletedFetch, decode_records
from riverbed.producer import RecordAccumulator, Sender
from riverbed.records import BatchBuilder, decode_batch, decode_batches, \
    iter_batches, read_header
from riverbed.records.header import HEADER_SIZE
from riverbed.structs import ConsumerRecord, TopicPartition

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode.Value
TPS = [TopicPartition("t", p) for p in range(3)]


def now():
    return time.monotonic() * 1000.0


# -- accumulator -----------------------------------------------------------------------------

def test_drain_rotates_so_no_partition_starves():
    a = RecordAccumulator(batch_size=200, buffer_memory=1 << 20)
    for _ in range(6):
        for tp in TPS:
            a.append(tp, 1, None, b"z" * 150, (), now_ms=0)   # one full batch per record
    served = []
    for _ in range(6):
        ready = a.ready(lambda tp: 1, 0).ready
        (b,) = a.drain(ready, max_request_size=250, now_ms=0)  # room for one batch per request
        served.append(b.tp.partition)
    assert sorted(served[:3]) == [0, 1, 2] and sorted(served[3:]) == [0, 1, 2]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_type_builds_batches_that_decode(codec):
    from riverbed.producer import compression_from_name
    a = RecordAccumulator(batch_size=4096, compression=compression_from_name(codec))
    values = [b"value-%04d" % i * 5 for i in range(300)]
    for v in values[:150]:
        a.append(TPS[0], 7, b"k", v, (("h", b"1"),), now_ms=0)
    a.append_values(TPS[0], 8, values[150:], now_ms=0)
    batches = a.drain([TPS[0]], 1 << 20, now_ms=0)
    assert len(batches) > 1
    for b in batches:
        assert read_header(b.payload).compression == compression_from_name(codec)
    recs = decode_batches(b"".join(b.payload for b in batches))
    assert [r.value for r in recs] == values
    assert recs[0].headers == (("h", b"1"),) and recs[-1].key is None


def test_send_many_chunks_fill_one_batch_per_sticky_partition():
    a = RecordAccumulator(batch_size=1000, buffer_memory=1 << 20)
    values = [b"%03d" % i for i in range(1000)]
    futs, n = a.append_values_counted(TPS[1], 5, values, now_ms=0, one_batch=True)
    assert len(futs) == 1 and 0 < n < len(values)
    (b,) = a.drain([TPS[1]], 1 << 20, now_ms=0)
    assert b.record_count == n and [r.value for r in decode_batch(b.payload)] == values[:n]


def test_try_append_is_none_when_a_new_batch_is_needed():
    a = RecordAccumulator(batch_size=150)
    assert a.try_append(TPS[0], 1, None, b"x", ()) is None          # no batch yet
    a.append(TPS[0], 1, None, b"x" * 50, (), now_ms=0)
    f = a.try_append(TPS[0], 1, None, b"y" * 10, ())
    assert f is not None and f._index == 1
    assert a.try_append(TPS[0], 1, None, b"y" * 100, ()) is None    # does not fit: full
    assert a.ready(lambda tp: 1, 0).ready == [TPS[0]]               # a full batch is ready


# -- sender: delivery timeout, ordering with one in flight ---------------------------------------

def make_sender(handlers, *, max_in_flight=5, retries=3, delivery_timeout_ms=120000):
    gw = FakeGateway(handlers)
    conn = GatewayConnection(["tcp://127.0.0.1:1"], channel_factory=gw.factory)
    conn.fetch_metadata(["t"])
    a = RecordAccumulator(batch_size=100, buffer_memory=100_000, retry_backoff_ms=0,
                          guarantee_order=max_in_flight == 1)
    s = Sender(conn, a, acks=1, retries=retries, max_in_flight=max_in_flight,
               max_request_size=1 << 20, request_timeout_ms=30000, retry_backoff_ms=0,
               metadata_max_age_ms=300000, metadata_changed=threading.Condition(),
               delivery_timeout_ms=delivery_timeout_ms)
    return gw, conn, a, s


def test_queued_record_not_acknowledged_within_delivery_timeout_fails():
    gw, conn, a, s = make_sender({ApiKey.METADATA: metadata_handler(),
                                  ApiKey.PRODUCE: ProduceLog()}, delivery_timeout_ms=1000)
    t0 = now()
    f = a.append(TPS[0], 1, None, b"v", (), now_ms=t0)
    conn.metadata._partitions = {}              # no leader known: the batch cannot be sent
    s.prepare(t0 + 999)
    assert not f.done()
    s.prepare(t0 + 1000)
    with pytest.raises(errors.KafkaTimeoutError, match="delivery_timeout_ms=1000"):
        f.result(timeout=0)
    assert a.memory_used == 0 and s.batches_expired == 1


def test_in_flight_record_past_delivery_timeout_fails_and_late_answer_is_ignored():
    log = ProduceLog()
    gw, conn, a, s = make_sender({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log},
                                 delivery_timeout_ms=1000)
    conn.channel.hold = True
    t0 = now()
    f = a.append(TPS[0], 1, None, b"v", (), now_ms=t0)
    s.prepare(t0)
    assert len(s.in_flight) == 1
    s.prepare(t0 + 1500)
    with pytest.raises(errors.KafkaTimeoutError):
        f.result(timeout=0)
    conn.channel.release()
    s.handle_responses()                        # the answer comes late: no second completion
    assert f.failed() and s.in_flight == {}


def test_one_in_flight_keeps_order_under_retries():
    log = ProduceLog(script=[{("t", 0): E("NOT_LEADER_FOR_PARTITION")}])
    gw, conn, a, s = make_sender({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log},
                                 max_in_flight=1)
    conn.channel.hold = True
    futs = [a.append(TPS[0], 1, None, b"x" * 60 + b"%d" % i, (), now_ms=now())
            for i in range(4)]
    s.prepare(now())
    s.prepare(now())
    assert len(s.in_flight) == 1                # muted: one request for the partition
    conn.channel.hold = False
    for _ in range(10):
        conn.channel.release()
        s.handle_responses()
        s._metadata_wanted = False
        s.prepare(now())
    assert [v[-1:] for v in log.logs[("t", 0)]] == [b"0", b"1", b"2", b"3"]
    assert [f.result(timeout=0).offset for f in futs] == [0, 1, 2, 3]


# -- consumer: lazy decoding and CRC checks ------------------------------------------------------

def test_decode_records_matches_the_codec():
    b = BatchBuilder()
    b.append(1000, b"key", b"value", (("a", b"1"), ("b", None)))
    b.append(1005, None, None, ())
    b.append(999, b"", b"x" * 300, ())
    buf = b.build()
    h = read_header(buf)
    got = decode_records(buf[HEADER_SIZE:], h.records_count, 40, h.base_timestamp, None, "t", 3)
    want = [ConsumerRecord("t", 3, r.offset + 40, r.timestamp, r.key, r.value, r.headers)
            for r in decode_batch(buf)]
    assert got == want
    with pytest.raises(errors.CorruptMessageError):
        decode_records(buf[HEADER_SIZE:-1], h.records_count, 0, 0, None, "t", 3)


def test_completed_fetch_decodes_only_the_batches_poll_reaches():
    buf = b"".join(make_batch(base, [b"%d" % i for i in range(base, base + 10)])
                   for base in range(0, 50, 10))
    cf = CompletedFetch(TPS[0], buf, list(iter_batches(buf)), 50, 50)
    recs, pos = cf.take(0, 12)
    assert [r.offset for r in recs] == list(range(12)) and pos == 12
    assert len(cf.batches) == 3                 # batches 3..5 not decoded yet
    recs, pos = cf.take(pos, 100)
    assert [r.offset for r in recs] == list(range(12, 50)) and cf.exhausted


def test_completed_fetch_trims_records_before_the_position():
    buf = make_batch(0, [b"%d" % i for i in range(10)])
    cf = CompletedFetch(TPS[0], buf, list(iter_batches(buf)), 10, 10)
    recs, pos = cf.take(7, 100)
    assert [r.offset for r in recs] == [7, 8, 9] and pos == 10


def corrupt_log():
    good = make_batch(0, [b"a", b"b"])
    bad = bytearray(make_batch(2, [b"c", b"d"]))
    bad[-2] ^= 0xFF                             # the last value byte: only the CRC notices
    data = good + bytes(bad)

    def fetch(body, payloads):
        resp = fetch_pb2.FetchResponse()
        rt = resp.topics.add(name="t")
        p = body.topics[0].partitions[0]
        rt.partitions.add(partition=0, high_watermark=4)
        return resp, [data if p.fetch_offset == 0 else b""]

    def list_offsets(body, payloads):
        resp = list_offsets_pb2.ListOffsetsResponse()
        rt = resp.topics.add(name="t")
        rt.partitions.add(partition=0, offset=0)
        return resp, []
    return {ApiKey.METADATA: one_partition_metadata, ApiKey.FETCH: fetch,
            ApiKey.LIST_OFFSETS: list_offsets}


@pytest.mark.parametrize("check_crcs", [True, False])
def test_check_crcs(check_crcs):
    gw = FakeGateway(corrupt_log())
    c = Consumer(bootstrap=["tcp://127.0.0.1:1"], _channel_factory=gw.factory,
                 auto_offset_reset="earliest", check_crcs=check_crcs)
    c.assign([TPS[0]])
    first = c.poll(timeout_ms=0, max_records=2)
    assert [r.value for r in first[TPS[0]]] == [b"a", b"b"]
    if check_crcs:
        with pytest.raises(errors.CorruptMessageError, match="CRC"):
            c.poll(timeout_ms=0)
    else:
        recs = c.poll(timeout_ms=0)[TPS[0]]
        assert [r.offset for r in recs] == [2, 3] and recs[1].value != b"d"


def test_send_checks_max_request_size_even_for_small_limits(monkeypatch):
    import zmq

    from riverbed.producer import Producer
    from sdk_fakes import FakeChannel
    pair = zmq.Context.instance().socket(zmq.PAIR)
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: ProduceLog()})
    p = Producer(["tcp://127.0.0.1:1"], _channel_factory=gw.factory, max_request_size=1000,
                 batch_size=500)
    try:
        p.partitions_for("t")
        with pytest.raises(errors.MessageTooLargeError):
            p.send("t", b"v" * 500, key=b"k" * 500, partition=0)
        with pytest.raises(errors.MessageTooLargeError):
            p.send("t", b"v" * 1000)
        assert p.send("t", b"v" * 100, partition=1).get(timeout=10).partition == 1
    finally:
        p.close()
        pair.close(0)
