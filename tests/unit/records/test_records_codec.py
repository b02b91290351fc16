"""codec.py: build and decode records, varints, compression framing, builder limits."""
from __future__ import annotations

import struct

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from riverbed import errors
from riverbed.records import (
    HEADER_SIZE,
    BatchBuilder,
    Compression,
    Record,
    TimestampType,
    build_batch,
    compress,
    decode_batch,
    decode_batches,
    decode_varint,
    decompress,
    encode_varint,
    iter_records,
    read_header,
    validate_batch,
)

from records_strategies import CODECS, INT64, RECORDS


def expected(records, base_offset=0):
    return [Record(base_offset + i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(records)]


@settings(max_examples=150, deadline=None)
@given(records=RECORDS, codec=CODECS, base_offset=st.integers(0, 1 << 62),
       producer_id=st.integers(-1, (1 << 63) - 1), producer_epoch=st.integers(-1, 32767),
       base_sequence=st.integers(-1, (1 << 31) - 1), leader_epoch=st.integers(-1, (1 << 31) - 1),
       transactional=st.booleans(), control=st.booleans())
def test_round_trip(records, codec, base_offset, producer_id, producer_epoch, base_sequence,
                    leader_epoch, transactional, control):
    data = build_batch(records, compression=codec, base_offset=base_offset,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence, partition_leader_epoch=leader_epoch,
                       is_transactional=transactional, is_control=control)
    header = validate_batch(data)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == \
        (producer_id, producer_epoch, base_sequence)
    assert header.partition_leader_epoch == leader_epoch
    assert (header.is_transactional, header.is_control) == (transactional, control)
    assert header.records_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.base_timestamp == records[0][0]
    assert header.max_timestamp == max(r[0] for r in records)
    assert decode_batch(data) == expected(records, base_offset)


@settings(max_examples=50, deadline=None)
@given(records=RECORDS)
def test_log_append_time_reports_max_timestamp_for_every_record(records):
    data = build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME)
    top = max(r[0] for r in records)
    assert [r.timestamp for r in decode_batch(data)] == [top] * len(records)


@settings(max_examples=200, deadline=None)
@given(value=INT64)
def test_varint_round_trip(value):
    encoded = encode_varint(value)
    assert decode_varint(encoded + b"\xff") == (value, len(encoded))
    assert len(encoded) <= 10


def test_varint_known_encodings():
    # zigzag: 0 -> 0, -1 -> 1, 1 -> 2, -64 -> 127, 64 -> 128 (two bytes)
    assert [encode_varint(v) for v in (0, -1, 1, -64, 63, 64, 300)] == \
        [b"\x00", b"\x01", b"\x02", b"\x7f", b"\x7e", b"\x80\x01", b"\xd8\x04"]
    with pytest.raises(ValueError):
        encode_varint(1 << 63)
    with pytest.raises(errors.CorruptMessageError):
        decode_varint(b"\x80\x80")
    with pytest.raises(errors.CorruptMessageError):
        decode_varint(b"\xff" * 11)
    with pytest.raises(errors.CorruptMessageError):
        decode_varint(b"\x80" * 9 + b"\x02")            # a 65th bit
    assert decode_varint(b"\xff" * 9 + b"\x01") == (-(1 << 63), 10)


def test_append_values_matches_append_byte_for_byte():
    values = [b"x" * (i % 150) for i in range(9_000)]   # crosses 1- and 2-byte offset deltas
    slow = BatchBuilder(producer_id=5, producer_epoch=1, base_sequence=0)
    for value in values[:4000]:
        assert slow.append(77, None, value)
    for value in values[4000:]:
        assert slow.append(78, None, value)
    fast = BatchBuilder(producer_id=5, producer_epoch=1, base_sequence=0)
    assert fast.append_values(77, values[:4000]) == 4000
    assert fast.append_values(78, values[4000:]) == 5000
    assert fast.record_count == slow.record_count == 9000
    assert fast.estimated_size == slow.estimated_size
    assert fast.build() == slow.build()


def test_append_values_large_values_and_offsets():
    values = [b"v" * 20_000, b"w" * 40_000]
    fast = BatchBuilder()
    fast.append_values(1, values)
    records = decode_batch(fast.build())
    assert [r.value for r in records] == values
    assert all(r.key is None and r.headers == () for r in records)


def test_append_respects_batch_size_but_first_record_always_fits():
    builder = BatchBuilder(batch_size=HEADER_SIZE + 10)
    assert builder.append(1, None, b"x" * 100)              # first record, too big, still in
    size = builder.estimated_size
    assert not builder.append(2, None, b"y")
    assert builder.record_count == 1 and builder.estimated_size == size
    assert [r.value for r in decode_batch(builder.build())] == [b"x" * 100]


def test_batch_size_is_an_exact_bound():
    # each record of a 10-byte value, null key, offset delta < 64: 1 + 1+1+1+1+1+10+1 = 17 bytes
    builder = BatchBuilder(batch_size=HEADER_SIZE + 3 * 17)
    assert [builder.append(0, None, b"0123456789") for _ in range(4)] == [True] * 3 + [False]
    assert builder.estimated_size == HEADER_SIZE + 3 * 17
    fast = BatchBuilder(batch_size=HEADER_SIZE + 3 * 17)
    assert fast.append_values(0, [b"0123456789"] * 5) == 3
    assert fast.build() == builder.build()
    empty = BatchBuilder(batch_size=1)
    assert empty.append_values(0, [b"a", b"b"]) == 1


def test_timestamps_before_the_base_use_negative_deltas():
    records = [(1_000, None, b"a", ()), (10, None, b"b", ()), (5_000_000, None, b"c", ())]
    data = build_batch(records)
    assert read_header(data).max_timestamp == 5_000_000
    assert [r.timestamp for r in decode_batch(data)] == [1_000, 10, 5_000_000]


def test_empty_batch_builds_and_decodes():
    data = BatchBuilder().build()
    header = validate_batch(data)
    assert (header.records_count, len(data)) == (0, HEADER_SIZE)
    assert decode_batch(data) == []


def test_build_can_be_called_again_after_more_appends():
    builder = BatchBuilder(compression=Compression.SNAPPY)
    builder.append(1, b"a", b"1")
    first = builder.build()
    builder.append(2, b"b", b"2")
    assert len(decode_batch(first)) == 1
    assert [r.key for r in decode_batch(builder.build())] == [b"a", b"b"]


def test_decode_batches_and_iter_records_ignore_partial_tail():
    one = build_batch([(1, None, b"a"), (2, None, b"b")], base_offset=0)
    two = build_batch([(3, None, b"c")], base_offset=2, compression=Compression.GZIP)
    data = one + two + two[:30]
    assert [r.offset for r in decode_batches(data)] == [0, 1, 2]
    assert [r.value for r in iter_records(data)] == [b"a", b"b", b"c"]
    assert decode_batches(b"") == []


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_compression_round_trip_large(codec):
    payload = bytes(range(256)) * 1_000   # several snappy and lz4 blocks
    assert decompress(codec, compress(codec, payload)) == payload
    with pytest.raises(errors.CorruptMessageError):
        decompress(codec, compress(codec, payload)[:-5])


def test_snappy_is_xerial_framed_and_raw_snappy_is_read():
    payload = b"riverbed " * 10_000
    framed = compress(Compression.SNAPPY, payload)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first_block,) = struct.unpack_from(">i", framed, 16)
    assert snappy.decompress(framed[20:20 + first_block]) == payload[:32 * 1024]
    assert decompress(Compression.SNAPPY, snappy.compress(payload)) == payload


def test_lz4_frame_like_the_java_client():
    framed = compress(Compression.LZ4, b"abc" * 1000)
    assert framed[:4] == b"\x04\x22\x4d\x18"               # LZ4 frame magic
    flags = framed[4]
    assert flags & 0x20                                      # independent blocks
    assert not flags & 0x08 and not flags & 0x04             # no content size or checksum
    assert lz4.frame.decompress(framed) == b"abc" * 1000


def test_zstd_frame_without_content_size_is_read():
    payload = b"zstd " * 5000
    streamed = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = streamed.compress(payload) + streamed.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Compression.ZSTD, frame) == payload


def test_gzip_multiple_members():
    import gzip
    payload = gzip.compress(b"one ") + gzip.compress(b"two")
    assert decompress(Compression.GZIP, payload) == b"one two"


def test_headers_with_unicode_keys_and_null_values():
    headers = (("ключ", b"\x00\xff"), ("", None), ("k", b""))
    data = build_batch([(5, b"", b"", headers)])
    assert decode_batch(data) == [Record(0, 5, b"", b"", headers)]
