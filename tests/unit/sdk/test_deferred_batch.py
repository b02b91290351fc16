"""ProducerBatch defers keyless, header-less values and encodes them at close() in runs
(BatchBuilder.append_run): the batch must be byte for byte what BatchBuilder.append makes record
by record, with the same records in it (the same one fails to fit) and the same size meanwhile.

Checked on the batch alone (ProducerBatch.add: the fast append's window and its recomputation)
and through Producer.send, whose inlined copy of the fast append is the hot path."""
from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverbed._proto.v1 import producer_id_pb2
from riverbed.accumulator import ProducerBatch, _same_size
from riverbed.records import BatchBuilder, Compression, decode_batches
from riverbed.records.codec import size_of_varint
from riverbed.records.header import HEADER_SIZE, LOG_OVERHEAD, iter_batches, read_header
from riverbed.structs import TopicPartition

TP = TopicPartition("t", 0)
BASE_TS = 1_700_000_000_000

# Edges of the varints a record's size depends on: the value's length (63/64, 8191/8192), the
# record's length (a body of 63/64 bytes), the timestamp delta on both sides of zero.
LENGTHS = [0, 1, 5, 10, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 100, 127, 128,
           300, 8191, 8192]
DELTAS = [0, 0, 0, 1, 2, 62, 63, 64, 65, 8191, 8192, 8193, (1 << 20) - 1, 1 << 20,
          -1, -63, -64, -65, -66, -8192, -8193, -(1 << 20), -(1 << 20) - 1]
KINDS = ["plain"] * 6 + ["keyed", "headers", "null_value", "key_only"]


def _value(kind: str, length: int, i: int) -> tuple:
    value = bytes([i % 251]) * length
    if kind == "plain":
        return None, value, ()
    if kind == "keyed":
        return b"k%d" % i, value, ()
    if kind == "headers":
        return None, value, (("h", b"x"), ("n", None))
    if kind == "null_value":
        return b"k", None, ()
    return b"", value, ()                                   # an empty key is not a null one


# a group: `repeat` records of one kind, value length and timestamp delta (runs; offset deltas
# crossing 63/64 with enough of them)
GROUPS = st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(LENGTHS),
                            st.one_of(st.sampled_from(DELTAS), st.integers(-200, 200)),
                            st.integers(1, 70)),
                  min_size=1, max_size=12)
LIMITS = st.one_of(st.sampled_from([61, 100, 200, 1000, 4096, 16384, 1 << 20]),
                   st.integers(62, 3000))
COMPRESSIONS = st.sampled_from([Compression.NONE, Compression.GZIP])


def _records(groups) -> list[tuple[int, bytes | None, bytes | None, tuple]]:
    out = []
    for kind, length, delta, repeat in groups:
        for _ in range(repeat):
            key, value, headers = _value(kind, length, len(out))
            out.append((BASE_TS + delta, key, value, headers))
    return out


def _fill(records, limit, compression):
    """(the deferred batch's bytes, the record-by-record batch's bytes, records in them)."""
    batch = ProducerBatch(TP, BatchBuilder(compression=compression, batch_size=limit), 0, limit)
    ref = BatchBuilder(compression=compression, batch_size=limit)
    n = 0
    for ts, key, value, headers in records:
        index = batch.add(ts, key, value, headers)
        fitted = ref.append(ts, key, value, headers)
        assert (index >= 0) == fitted, f"record {n}: deferred {index}, append {fitted}"
        assert batch.size_in_bytes == ref.estimated_size
        if not fitted:
            assert batch.full
            break
        assert index == n
        n += 1
    assert batch.record_count == ref.record_count == n
    return batch.close(), ref.build(), n


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GROUPS, LIMITS, COMPRESSIONS)
def test_a_deferred_batch_is_the_record_by_record_batch(groups, limit, compression):
    records = _records(groups)
    got, want, n = _fill(records, limit, compression)
    assert got == want
    assert [(r.timestamp, r.key, r.value, r.headers) for r in decode_batches(got)] == \
        [(ts, k, v, tuple(h)) for ts, k, v, h in records[:n]]


def _record_size(delta: int, offset: int, length: int) -> int:
    body = 3 + size_of_varint(delta) + size_of_varint(offset) + size_of_varint(length) + length
    return size_of_varint(body) + body


@pytest.mark.parametrize("length", [10, 58, 59, 100])
@pytest.mark.parametrize("fits", [1, 2, 5, 63, 64, 65, 200])
def test_a_batch_holds_exactly_what_its_limit_allows(length, fits):
    """batch.size exactly the size of `fits` records: all of them go in, the next does not."""
    limit = HEADER_SIZE + sum(_record_size(0, i, length) for i in range(fits))
    records = [(BASE_TS, None, b"v" * length, ())] * (fits + 1)
    got, want, n = _fill(records, limit, Compression.NONE)
    assert n == fits and got == want and len(got) == limit
    got, want, n = _fill(records, limit - 1, Compression.NONE)
    assert n == max(1, fits - 1) and got == want


def test_offset_deltas_past_8192_and_timestamps_back_and_forth():
    records = [(BASE_TS + (i % 300) - 150 + (i // 4000) * 9000, None, b"%d" % (i % 10), ())
               for i in range(8400)]
    records[8192] = (BASE_TS, b"key", b"v", ())
    got, want, n = _fill(records, 1 << 20, Compression.NONE)
    assert n == 8400 and got == want


def test_the_first_record_always_fits_and_values_are_kept_not_copied():
    batch = ProducerBatch(TP, BatchBuilder(batch_size=10), 0, 10)
    assert batch.add(BASE_TS, None, b"x" * 100, ()) == 0
    assert batch.add(BASE_TS, None, b"x", ()) == -1 and batch.full
    # a bytearray is copied when appended (it may change after send()): never deferred
    batch = ProducerBatch(TP, BatchBuilder(), 0, 1000)
    value = bytearray(b"abc")
    assert batch.add(BASE_TS, None, value, ()) == 0 and not batch.pending
    value[:] = b"xyz"
    assert decode_batches(batch.close())[0].value == b"abc"


def test_send_many_then_send_continue_one_batch_with_its_base_timestamp():
    # the accumulator's append_values writes into the builder directly: the deferred records
    # after it take their timestamp deltas from the builder's base
    batch = ProducerBatch(TP, BatchBuilder(batch_size=1 << 16), 0, 1 << 16)
    ref = BatchBuilder(batch_size=1 << 16)
    batch.materialize()
    n = batch.builder.append_values(BASE_TS - 100, [b"a", b"b"])
    batch.record_count += n
    ref.append_values(BASE_TS - 100, [b"a", b"b"])
    for i in range(100):
        assert batch.add(BASE_TS + i, None, b"v", ()) == i + 2
        ref.append(BASE_TS + i, None, b"v")
        assert batch.size_in_bytes == ref.estimated_size
    assert batch.close() == ref.build()


@pytest.mark.parametrize("value", [0, 1, 63, 64, -64, -65, 8191, 8192, -8192, -8193,
                                   (1 << 62), -(1 << 63), (1 << 63) - 1])
def test_same_size_is_the_range_of_one_varint_size(value):
    lo, hi = _same_size(value)
    assert lo <= value < hi
    size = size_of_varint(value)
    for v in (lo, hi - 1):
        assert size_of_varint(v) == size
    for v in (lo - 1, hi):
        if -(1 << 63) <= v < (1 << 63):
            assert size_of_varint(v) != size


# -- through Producer.send (the inlined fast append) ---------------------------------------------

class _Captured:
    """A PRODUCE handler keeping every batch's bytes in order; answers success."""

    def __init__(self):
        from riverbed._proto.v1 import produce_pb2
        self.pb = produce_pb2
        self.frames: list[bytes] = []
        self.next_offset = 0
        self.lock = threading.Lock()

    def __call__(self, body, payloads):
        resp = self.pb.ProduceResponse()
        i = 0
        with self.lock:
            for t in body.topics:
                rt = resp.topics.add(name=t.name)
                for p in t.partitions:
                    frame = bytes(payloads[i])      # the partition's batches, one after another
                    i += 1
                    rt.partitions.add(partition=p.partition, base_offset=self.next_offset,
                                      log_append_time_ms=-1)
                    for pos, h in iter_batches(frame):
                        self.frames.append(frame[pos:pos + h.batch_length + LOG_OVERHEAD])
                        self.next_offset += h.records_count
        return resp, []


def _rebuilt(frame: bytes, limit: int | None = None) -> BatchBuilder:
    """A builder given `frame`'s records one by one with BatchBuilder.append."""
    h = read_header(frame)
    b = BatchBuilder(compression=Compression(h.attributes & 7), producer_id=h.producer_id,
                     producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                     partition_leader_epoch=h.partition_leader_epoch, batch_size=limit)
    for r in decode_batches(frame):
        assert b.append(r.timestamp, r.key, r.value, r.headers)
    return b


@pytest.fixture
def producer_factory(monkeypatch):
    import zmq

    from sdk_fakes import FakeChannel, FakeGateway
    from test_producer import ApiKey, metadata_handler
    pair = zmq.Context.instance().socket(zmq.PAIR)
    pair.bind("inproc://fake-dealer-deferred-%d" % id(pair))
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)

    def make(**kwargs):
        from riverbed.producer import Producer
        log = _Captured()
        gw = FakeGateway({ApiKey.METADATA: metadata_handler(1), ApiKey.PRODUCE: log,
                          ApiKey.INIT_PRODUCER_ID: lambda body, payloads: (
                              producer_id_pb2.InitProducerIdResponse(producer_id=7,
                                                                     producer_epoch=0), [])})
        return Producer(["tcp://127.0.0.1:1"], _channel_factory=gw.factory, **kwargs), log
    yield make
    pair.close(0)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(GROUPS, st.sampled_from([100, 300, 1000, 16384]), st.sampled_from([None, "gzip"]),
       st.booleans(), st.sampled_from([0, None]))
def test_send_makes_the_record_by_record_batches(producer_factory, groups, limit, compression,
                                                 idempotent, partition):
    """Every batch send() made is the record-by-record batch of its records, within batch.size
    (but a lone record); the records are the ones sent, in order, each future with its offset.
    Keyless records with no partition take the sticky partition's inlined path.
    (Where a batch ends is not checked here: the sender drains the open batch behind a full one
    in the same request. test_a_deferred_batch_is_the_record_by_record_batch checks it.)"""
    records = _records(groups)
    p, log = producer_factory(batch_size=limit, batch_size_max=limit, compression_type=compression,
                              linger_ms=60_000, enable_idempotence=idempotent,
                              acks="all" if idempotent else 1)
    with p:
        p.partitions_for("t")
        # partition None: keyless records go to the sticky partition (the topic has one)
        futs = [p.send("t", v, key=k, partition=partition, headers=list(h) or None,
                       timestamp_ms=ts)
                for ts, k, v, h in records]
        p.flush(timeout=30)
        offsets = [f.result(timeout=10).offset for f in futs]
    assert offsets == list(range(len(records)))
    got = []
    for i, frame in enumerate(log.frames):
        rebuilt = _rebuilt(frame, limit)
        assert frame == rebuilt.build()
        assert rebuilt.estimated_size <= limit or rebuilt.record_count == 1
        got += [(r.timestamp, r.key, r.value, r.headers) for r in decode_batches(frame)]
    assert got == [(ts, k, v, tuple(h)) for ts, k, v, h in records]
