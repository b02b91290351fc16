"""The codec's fast paths against its plain loops.

- Decoding: runs of records sharing one layout are unpacked by `codec.uniform_run` (struct, in C)
  in both decode_batch and the consumer's `fetcher.decode_records`. On any input, valid or not,
  they must give exactly what the record-by-record loops give, or raise CorruptMessageError
  where the loop does.
- Building: `BatchBuilder.append_values` lays runs of equal-length values out with one join;
  byte for byte what `append` builds, batch_size bound included.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverbed import errors, fetcher
from riverbed.records import BatchBuilder, Compression, build_batch, decode_batch, read_header
from riverbed.records import codec
from riverbed.records.header import HEADER_SIZE
from riverbed.structs import ConsumerRecord

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASE_TS = 1_700_000_000_000


def loop_records(body: bytes, count: int, base_offset: int, base_ts: int, lat):
    out: list = []
    pos = codec._decode_loop(body, 0, count, base_offset, base_ts, lat, out)
    if pos != len(body):
        raise errors.CorruptMessageError("trailing bytes")
    return out


def loop_consumer_records(body: bytes, count: int, base_offset: int, base_ts: int, lat):
    out: list = []
    pos = fetcher._decode_loop(body, 0, count, base_offset, base_ts, lat, "t", 7, out)
    if pos != len(body):
        raise errors.CorruptMessageError("trailing bytes")
    return out


def outcome(fn, *args):
    try:
        return fn(*args)
    except (errors.CorruptMessageError, IndexError, ValueError, UnicodeDecodeError,
            OverflowError):     # what decode_batch and decode_records turn into CORRUPT
        return "corrupt"


@st.composite
def uniform_batches(draw):
    """Records that mostly share a layout: fixed key/value lengths, timestamps whose deltas
    cross the 1-, 2- and 3-byte varint sizes, and a few odd records (other lengths, headers)."""
    count = draw(st.integers(0, 400))
    key_len = draw(st.sampled_from([None, 0, 5, 70]))
    value_len = draw(st.sampled_from([None, 0, 1, 100, 1024]))
    step = draw(st.sampled_from([0, 0, 1, 3, 40]))
    odd = set(draw(st.lists(st.integers(0, max(count - 1, 0)), max_size=4)))
    records = []
    for i in range(count):
        key = None if key_len is None else bytes([65 + i % 26]) * key_len
        value = None if value_len is None else bytes([97 + i % 26]) * value_len
        headers = ()
        if i in odd:
            kind = draw(st.sampled_from(["value", "key", "header", "ts"]))
            if kind == "value":
                value = b"odd" * draw(st.integers(0, 50))
            elif kind == "key":
                key = b"k" if key is None else None
            elif kind == "header":
                headers = (("h", b"\x00"),)
        ts = BASE_TS + i * step + (10_000 if i in odd else 0)
        records.append((ts, key, value, headers))
    return records


def body_of(batch: bytes):
    h = read_header(batch)
    return h, batch[HEADER_SIZE:]


@SETTINGS
@given(uniform_batches(), st.integers(0, 1 << 40), st.booleans())
def test_decoders_match_their_loops(records, base_offset, log_append):
    batch = build_batch(records, base_offset=base_offset)
    h, body = body_of(batch)
    lat = h.max_timestamp if log_append else None
    expected = loop_records(body, h.records_count, base_offset, h.base_timestamp, lat)
    assert codec._decode_records(body, h.records_count, base_offset, h.base_timestamp,
                                 lat) == expected
    assert [(r.offset, r.key, r.value, r.headers) for r in expected] == \
        [(base_offset + i, k, v, tuple(hd)) for i, (_, k, v, hd) in enumerate(records)]
    got = fetcher.decode_records(body, h.records_count, base_offset, h.base_timestamp, lat,
                                 "t", 7)
    assert got == loop_consumer_records(body, h.records_count, base_offset, h.base_timestamp,
                                        lat)
    assert all(type(r) is ConsumerRecord for r in got)
    assert got == [ConsumerRecord("t", 7, r.offset, r.timestamp, r.key, r.value, r.headers)
                   for r in expected]


@SETTINGS
@given(uniform_batches(), st.data())
def test_tampered_bodies_decode_like_the_loops(records, data):
    batch = build_batch(records)
    h, body = body_of(batch)
    body = bytearray(body)
    for _ in range(data.draw(st.integers(1, 3))):
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip" and body:
            i = data.draw(st.integers(0, len(body) - 1))
            body[i] = data.draw(st.integers(0, 255))
        elif action == "cut" and body:
            i = data.draw(st.integers(0, len(body) - 1))
            del body[i:i + data.draw(st.integers(1, 3))]
        else:
            i = data.draw(st.integers(0, len(body)))
            body[i:i] = bytes([data.draw(st.integers(0, 255))])
    body = bytes(body)
    count = h.records_count + data.draw(st.sampled_from([0, 0, 0, -1, 1]))
    args = (body, count, 10, h.base_timestamp, None)
    assert outcome(codec._decode_records, *args) == outcome(loop_records, *args)
    assert outcome(fetcher.decode_records, *args, "t", 7) == \
        outcome(loop_consumer_records, *args)


def test_a_long_uniform_batch_takes_the_fast_path_and_round_trips():
    values = [bytes([65 + i % 26]) * 100 for i in range(9000)]   # 1-, 2- and 3-byte deltas
    builder = BatchBuilder()
    assert builder.append_values(BASE_TS, values) == 9000
    batch = builder.build()
    h, body = body_of(batch)
    assert codec.uniform_run(body, memoryview(body), 0, len(body), 9000)[0] == 64
    records = decode_batch(batch)
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(9000))
    got = fetcher.decode_records(body, 9000, 0, h.base_timestamp, None, "t", 7)
    assert got == loop_consumer_records(body, 9000, 0, h.base_timestamp, None)


@pytest.mark.parametrize("codec_id", [Compression.NONE, Compression.LZ4])
def test_keyed_records_with_log_append_time(codec_id):
    records = [(BASE_TS + i, b"key-%04d" % i, b"v" * 50, ()) for i in range(500)]
    batch = build_batch(records, compression=codec_id)
    out = decode_batch(batch)
    assert [(r.key, r.value, r.timestamp) for r in out] == [(k, v, t) for t, k, v, _ in records]


@st.composite
def value_lists(draw):
    runs = draw(st.lists(st.tuples(st.integers(0, 300), st.sampled_from([0, 1, 63, 64, 200])),
                         max_size=6))
    values = []
    for n, length in runs:
        values += [bytes([48 + len(values) % 10]) * length for _ in range(n)]
    return values


@SETTINGS
@given(value_lists(), value_lists(), st.integers(0, 70), st.sampled_from([None, 100, 5000,
                                                                         20_000, 1 << 20]))
def test_append_values_builds_what_append_builds(first, second, prefix, batch_size):
    kwargs = {} if batch_size is None else {"batch_size": HEADER_SIZE + batch_size}
    slow = BatchBuilder(**kwargs)
    fast = BatchBuilder(**kwargs)
    for i in range(prefix):                     # records before: offset deltas start later
        assert slow.append(5, None, b"p") == fast.append(5, None, b"p")
    comparable = True
    for ts, values in ((7, first), (9, second)):
        if not values:
            continue
        fitted = 0
        for value in values:
            if not slow.append(ts, None, value):
                break
            fitted += 1
        assert fast.append_values(ts, values) == fitted
        assert fast.record_count == slow.record_count
        assert fast.estimated_size == slow.estimated_size
        # (append_values moves the max timestamp even when no value fits; append can't)
        comparable &= fitted > 0
    if comparable:
        assert fast.build() == slow.build()


def test_append_values_takes_any_iterable():
    fast = BatchBuilder()
    assert fast.append_values(1, (b"x" * 10 for _ in range(100))) == 100
    slow = BatchBuilder()
    for _ in range(100):
        slow.append(1, None, b"x" * 10)
    assert fast.build() == slow.build()
