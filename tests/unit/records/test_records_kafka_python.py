"""kafka-python (test-only oracle) and riverbed.records read each other's batches.

kafka-python's DefaultRecordBatchBuilder always writes partition leader epoch 0, base offset 0,
and falls back to no compression when compressing does not shrink the records; we compare with
those inputs. Uncompressed batches must be equal byte for byte, CRC included.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riverbed.records import Compression, build_batch, decode_batch, read_header

from records_strategies import RECORDS

kafka_codec = pytest.importorskip("kafka.codec", reason="kafka-python is the test oracle")
from kafka.record.default_records import (  # noqa: E402
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)

AVAILABLE = {
    Compression.NONE: True,
    Compression.GZIP: kafka_codec.has_gzip(),
    Compression.SNAPPY: kafka_codec.has_snappy(),
    Compression.LZ4: kafka_codec.has_lz4(),
    Compression.ZSTD: kafka_codec.has_zstd(),
}
CODECS = [pytest.param(c, marks=pytest.mark.skipif(
    not ok, reason=f"kafka-python lacks the {c.name} library here")) for c, ok in AVAILABLE.items()]
SUPPORTED = st.sampled_from([c for c, ok in AVAILABLE.items() if ok])


def kafka_python_build(records, codec, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                       transactional=False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 30)
    for offset, (timestamp, key, value, headers) in enumerate(records):
        assert builder.append(offset, timestamp=timestamp, key=key, value=value,
                              headers=list(headers)) is not None
    return bytes(builder.build())


def kafka_python_decode(data: bytes):
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers))
            for r in batch]


def as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def expected(records):
    return [(i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(records)]


IDEMPOTENT = st.tuples(st.integers(0, (1 << 63) - 1), st.integers(0, 32767),
                       st.integers(0, (1 << 31) - 1)) | st.just((-1, -1, -1))


@settings(max_examples=100, deadline=None)
@given(records=RECORDS, producer=IDEMPOTENT, transactional=st.booleans())
def test_uncompressed_batches_are_byte_for_byte_equal(records, producer, transactional):
    producer_id, producer_epoch, base_sequence = producer
    transactional = transactional and producer_id >= 0
    theirs = kafka_python_build(records, Compression.NONE, producer_id, producer_epoch,
                                base_sequence, transactional)
    ours = build_batch(records, partition_leader_epoch=0, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence,
                       is_transactional=transactional)
    assert ours == theirs


@settings(max_examples=100, deadline=None)
@given(records=RECORDS, codec=SUPPORTED)
def test_kafka_python_batches_decode_with_ours(records, codec):
    theirs = kafka_python_build(records, codec)
    assert as_tuples(decode_batch(theirs)) == expected(records)


@settings(max_examples=100, deadline=None)
@given(records=RECORDS, codec=SUPPORTED)
def test_our_batches_decode_with_kafka_python(records, codec):
    ours = build_batch(records, compression=codec, producer_id=9, producer_epoch=1,
                       base_sequence=100)
    assert kafka_python_decode(ours) == expected(records)
    batch = DefaultRecordBatch(ours)
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, 100)


@pytest.mark.parametrize("codec", CODECS)
def test_compressible_batch_both_ways(codec):
    records = [(1_700_000_000_000 + i, b"user-%d" % (i % 7), b"payload " * 20, ())
               for i in range(500)]
    theirs = kafka_python_build(records, codec)
    assert read_header(theirs).compression == codec        # really compressed
    assert as_tuples(decode_batch(theirs)) == expected(records)
    ours = build_batch(records, compression=codec)
    assert kafka_python_decode(ours) == expected(records)
