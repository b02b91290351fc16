"""The hand-written Produce and Fetch response encoders (services/gateway/kafka/fast.py) write
exactly what kio writes for the same content, in every version served."""
from __future__ import annotations

import datetime
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as H0
from kio.schema.response_header.v1.header import ResponseHeader as H1
from kio.serial import entity_writer

from services.gateway.kafka import fast
from services.gateway.kafka import protocol as kp
from services.gateway.kafka.translate import _mk

CODES = [0, 1, 6, 74, 87]
names = st.text(alphabet="abcxyz.-_", min_size=1, max_size=20)
int64 = st.integers(-1, 2**62)


def kio_frame(cls, corr: int, entity) -> bytes:
    buf = io.BytesIO()
    header = H1(correlation_id=corr) if cls.__header_schema__ is H1 else H0(correlation_id=corr)
    entity_writer(type(header))(buf, header)
    entity_writer(cls)(buf, entity)
    body = buf.getvalue()
    return len(body).to_bytes(4, "big") + body


def module(cls):
    import sys
    return sys.modules[cls.__module__]


produce_parts = st.lists(st.tuples(st.integers(0, 1000), st.sampled_from(CODES), int64,
                                   st.integers(-1, 2**45),   # append time: a datetime in kio
                                   int64, st.none() | st.text(max_size=30)), max_size=4)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(range(kp.SERVED[kp.PRODUCE][0], kp.SERVED[kp.PRODUCE][1] + 1)),
       st.integers(0, 10_000), st.lists(st.tuples(names, produce_parts), max_size=3))
def test_produce_response_is_kios(version, throttle_ms, topics):
    cls = load_response_schema(kp.PRODUCE, version)
    m = module(cls)
    entity = _mk(cls, throttle_time=datetime.timedelta(milliseconds=throttle_ms), responses=tuple(
        _mk(m.TopicProduceResponse, name=name, partition_responses=tuple(
            _mk(m.PartitionProduceResponse, index=i, error_code=ErrorCode(code), base_offset=base,
                log_append_time=None if t < 0 else datetime.datetime.fromtimestamp(
                    t / 1000, datetime.timezone.utc),
                log_start_offset=start, record_errors=(), error_message=msg)
            for i, code, base, t, start, msg in parts)) for name, parts in topics))
    ours = fast.produce_response(version, throttle_ms, topics).frame(99)
    assert ours == kio_frame(cls, 99, entity)


fetch_parts = st.lists(st.tuples(st.integers(0, 1000), st.sampled_from(CODES), int64, int64, int64,
                                 st.binary(max_size=300),
                                 # a read_committed answer's aborted transactions, or none
                                 st.none() | st.lists(st.tuples(int64, int64), max_size=3)),
                       max_size=4)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(range(kp.SERVED[kp.FETCH][0], kp.SERVED[kp.FETCH][1] + 1)),
       st.integers(0, 10_000), st.sampled_from(CODES), st.integers(0, 2**31 - 1),
       st.lists(st.tuples(names, fetch_parts), max_size=3))
def test_fetch_response_is_kios(version, throttle_ms, code, session_id, topics):
    cls = load_response_schema(kp.FETCH, version)
    m = module(cls)
    entity = _mk(cls, throttle_time=datetime.timedelta(milliseconds=throttle_ms),
                 error_code=ErrorCode(code), session_id=session_id, responses=tuple(
                     _mk(m.FetchableTopicResponse, topic=name, partitions=tuple(
                         _mk(m.PartitionData, partition_index=i, error_code=ErrorCode(c),
                             high_watermark=hw, last_stable_offset=lso, log_start_offset=start,
                             aborted_transactions=None if c != 0 else tuple(
                                 m.AbortedTransaction(producer_id=pid, first_offset=first)
                                 for pid, first in aborted or ()),
                             preferred_read_replica=-1, records=records)
                         for i, c, hw, lso, start, records, aborted in parts))
                 for name, parts in topics))
    # records as the storage node's frames give them: memoryviews, spliced in uncopied
    ours = fast.fetch_response(version, throttle_ms, code, session_id, [
        (name, [(*p[:5], memoryview(p[5]), p[6]) for p in parts])
        for name, parts in topics]).frame(7)
    assert ours == kio_frame(cls, 7, entity)


@pytest.mark.parametrize("n", [0, 1, 126, 127, 128, 300, 16383, 16384, 2**31])
def test_unsigned_varints(n):
    from kio.serial.writers import write_unsigned_varint
    buf = io.BytesIO()
    write_unsigned_varint(buf, n)
    assert fast.uvarint(n) == buf.getvalue()
