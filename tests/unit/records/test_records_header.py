"""header.py: read, validate, walk and stamp v2 batch headers."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riverbed import errors
from riverbed.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchBuilder,
    Compression,
    TimestampType,
    build_batch,
    decode_batch,
    iter_batches,
    read_header,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
    validate_batch,
    validate_batches,
)

from records_strategies import fix_crc

RECORDS = [(1_000 + i, b"key-%d" % i, b"value-%d" % i * 3) for i in range(10)]


def batch(**kwargs) -> bytes:
    return build_batch(RECORDS, **kwargs)


def test_header_fields_and_properties():
    data = batch(base_offset=100, producer_id=42, producer_epoch=3, base_sequence=7,
                 partition_leader_epoch=5, is_transactional=True, compression=Compression.LZ4)
    header = read_header(data)
    assert header.base_offset == 100
    assert header.batch_length == len(data) - LOG_OVERHEAD
    assert header.size == len(data)
    assert header.partition_leader_epoch == 5
    assert header.magic == 2
    assert header.last_offset_delta == 9
    assert header.last_offset == 109
    assert header.next_offset == 110
    assert header.records_count == 10
    assert header.base_timestamp == 1_000
    assert header.max_timestamp == 1_009
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 7)
    assert header.compression is Compression.LZ4
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.is_transactional and not header.is_control
    assert validate_batch(data) == header


def test_control_and_log_append_time_bits():
    header = read_header(batch(is_control=True, timestamp_type=TimestampType.LOG_APPEND_TIME))
    assert header.is_control and not header.is_transactional
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME


def test_read_header_at_position_in_larger_buffer():
    data = b"\xff" * 7 + batch(base_offset=3)
    assert read_header(data, 7).base_offset == 3
    assert validate_batch(memoryview(data), 7).records_count == 10


@pytest.mark.parametrize("cut", [0, 1, 12, HEADER_SIZE - 1])
def test_read_header_short_buffer(cut):
    with pytest.raises(errors.CorruptMessageError):
        read_header(batch()[:cut])


def test_read_header_bad_magic_and_length():
    data = bytearray(batch())
    data[16] = 1
    with pytest.raises(errors.CorruptMessageError, match="magic"):
        read_header(data)
    data = bytearray(batch())
    struct.pack_into(">i", data, 8, 48)
    with pytest.raises(errors.CorruptMessageError, match="below 49"):
        read_header(data)


def test_validate_batch_needs_the_whole_batch():
    data = batch()
    read_header(data[:-1])                       # the header alone reads fine
    with pytest.raises(errors.CorruptMessageError, match="present"):
        validate_batch(data[:-1])


def test_validate_batch_max_size():
    data = batch()
    assert validate_batch(data, max_size=len(data)).size == len(data)
    with pytest.raises(errors.MessageTooLargeError):
        validate_batch(data, max_size=len(data) - 1)


@pytest.mark.parametrize("field, fmt, offset, value", [
    ("last_offset_delta", ">i", 23, -1),
    ("records_count", ">i", 57, -1),
    ("records_count", ">i", 57, 11),             # more records than offsets
    ("records_count", ">i", 57, 10_000),         # cannot fit in the bytes
    ("attributes", ">h", 21, 5),                 # compression codec 5
])
def test_validate_batch_rejects_insane_fields_even_with_a_good_crc(field, fmt, offset, value):
    data = bytearray(batch())
    struct.pack_into(fmt, data, offset, value)
    fix_crc(data)
    with pytest.raises(errors.CorruptMessageError):
        validate_batch(data)


def test_compacted_batch_with_fewer_records_than_offsets_is_valid():
    builder = BatchBuilder()
    builder.append(1, b"k", b"v")
    data = bytearray(builder.build())
    struct.pack_into(">i", data, 23, 5)          # last offset delta 5, one record left
    fix_crc(data)
    assert validate_batch(data).last_offset == 5


def test_set_base_offset_and_leader_epoch_keep_crc_valid():
    data = bytearray(batch(compression=Compression.ZSTD))
    set_base_offset(data, 0, 1 << 40)
    set_partition_leader_epoch(data, 0, 17)
    header = validate_batch(data)
    assert (header.base_offset, header.partition_leader_epoch) == (1 << 40, 17)
    assert [r.offset for r in decode_batch(data)] == list(range(1 << 40, (1 << 40) + 10))


def test_set_base_offset_on_memoryview_at_position():
    first, second = batch(), batch()
    data = bytearray(first + second)
    set_base_offset(memoryview(data), len(first), 10)
    assert [h.base_offset for _, h in iter_batches(data, validate=True)] == [0, 10]


def test_set_max_timestamp_log_append_recomputes_crc():
    data = bytearray(batch())
    set_max_timestamp_log_append(data, 0, 99_999)
    header = validate_batch(data)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 99_999
    assert {r.timestamp for r in decode_batch(data)} == {99_999}


# Bytes 0..7 (base offset) and 12..15 (leader epoch) are outside the CRC by design: the
# leader stamps them. Every other byte is covered by the CRC, the magic check or length checks.
UNCHECKED = set(range(0, 8)) | set(range(12, 16))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), codec=st.sampled_from(list(Compression)))
def test_every_single_byte_flip_outside_base_offset_and_epoch_is_detected(data, codec):
    original = batch(compression=codec, producer_id=1, producer_epoch=0, base_sequence=0)
    position = data.draw(st.integers(0, len(original) - 1).filter(lambda p: p not in UNCHECKED))
    flip = data.draw(st.integers(1, 255))
    tampered = bytearray(original)
    tampered[position] ^= flip
    with pytest.raises((errors.CorruptMessageError, errors.MessageTooLargeError)):
        validate_batch(tampered, max_size=len(original) * 2)


def test_flips_in_base_offset_and_epoch_are_not_detected_by_design():
    original = batch()
    for position in UNCHECKED:
        tampered = bytearray(original)
        tampered[position] ^= 0x40
        validate_batch(tampered)


def test_iter_batches_walks_and_stops_at_partial_tail():
    batches = [batch(base_offset=10 * i) for i in range(3)]
    data = b"".join(batches)
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [p for p, _ in iter_batches(data)] == positions
    for cut in (1, 11, 12, HEADER_SIZE, len(batches[2]) - 1):
        walked = list(iter_batches(data[:-cut]))
        assert [h.base_offset for _, h in walked] == [0, 10]
    assert [p for p, _ in iter_batches(data, positions[1])] == positions[1:]
    assert [p for p, _ in iter_batches(data, 0, positions[2])] == positions[:2]
    assert list(iter_batches(b"")) == []


def test_iter_batches_validate_raises_on_bad_crc():
    data = bytearray(batch() + batch())
    data[-1] ^= 1
    assert len(list(iter_batches(data))) == 2
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(data, validate=True))


def test_validate_batches_produce_payload():
    one, two = batch(), batch(compression=Compression.GZIP)
    assert [h.compression for h in validate_batches(one + two)] == \
        [Compression.NONE, Compression.GZIP]
    with pytest.raises(errors.CorruptMessageError):
        validate_batches(b"")
    with pytest.raises(errors.CorruptMessageError):
        validate_batches(one + two[:-1])
    with pytest.raises(errors.CorruptMessageError):
        validate_batches(one + b"\x00")
    bad = bytearray(one + two)
    bad[len(one) + 30] ^= 1
    with pytest.raises(errors.CorruptMessageError):
        validate_batches(bad)
    with pytest.raises(errors.MessageTooLargeError):
        validate_batches(one + two, max_size=max(len(one), len(two)) - 1)


def test_validate_batches_strict_requires_consistent_counts():
    assert len(validate_batches(batch(), strict=True)) == 1
    empty = BatchBuilder().build()
    assert validate_batches(empty)[0].records_count == 0
    with pytest.raises(errors.InvalidRecordError):
        validate_batches(empty, strict=True)
