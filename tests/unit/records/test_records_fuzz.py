"""Bad input into every decoder may only give a value or CORRUPT_MESSAGE (or MESSAGE_TOO_LARGE).

Random bytes almost never pass the CRC, so the record decoder is also fed tampered batches whose
CRC has been recomputed (a buggy or hostile producer), for every codec.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverbed import errors
from riverbed.records import (
    Compression,
    build_batch,
    compress,
    decode_batch,
    decode_batches,
    decode_varint,
    decompress,
    iter_batches,
    read_header,
    validate_batch,
    validate_batches,
)

from records_strategies import RECORDS, fix_crc

ALLOWED = (errors.CorruptMessageError, errors.MessageTooLargeError)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def attempt(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except ALLOWED:
        return None


def every_decoder(data):
    attempt(read_header, data)
    attempt(validate_batch, data, max_size=1 << 20)
    attempt(validate_batches, data, max_size=1 << 20)
    attempt(decode_batch, data)
    attempt(decode_batches, data)
    attempt(lambda: list(iter_batches(data, validate=True)))


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bytes(data):
    every_decoder(data)


# A plausible header (magic 2, a length that fits) in front of random bytes reaches the CRC.
@FUZZ
@given(body=st.binary(min_size=49, max_size=300), attributes=st.integers(0, 0x3F),
       count=st.integers(-2, 40), last_offset_delta=st.integers(-2, 40))
def test_random_body_behind_plausible_header(body, attributes, count, last_offset_delta):
    data = bytearray(struct.pack(">qiibI", 0, 21 + len(body) - 12, 0, 2, 0)) + body
    assert read_header(data).size == len(data)
    struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">i", data, 23, last_offset_delta)
    struct.pack_into(">i", data, 57, count)
    fix_crc(data)
    every_decoder(bytes(data))


@FUZZ
@given(records=RECORDS, codec=st.sampled_from(list(Compression)), data=st.data())
def test_tampered_batches_with_recomputed_crc(records, codec, data):
    batch = bytearray(build_batch(records, compression=codec))
    positions = data.draw(st.lists(st.integers(21, len(batch) - 1), min_size=1, max_size=4))
    for position in positions:
        batch[position] = data.draw(st.integers(0, 255))
    fix_crc(batch)
    every_decoder(bytes(batch))
    decoded = attempt(decode_batch, bytes(batch))
    assert decoded is None or isinstance(decoded, list)


@FUZZ
@given(records=RECORDS, codec=st.sampled_from(list(Compression)), cut=st.integers(1, 400))
def test_truncated_and_extended_record_sections(records, codec, cut):
    batch = bytearray(build_batch(records, compression=codec))
    shorter = batch[:max(61, len(batch) - cut)]
    longer = batch + bytes(range(cut % 256)) * 2
    for tampered in (shorter, longer):
        struct.pack_into(">i", tampered, 8, len(tampered) - 12)
        fix_crc(tampered)
        every_decoder(bytes(tampered))


@FUZZ
@given(codec=st.sampled_from([c for c in Compression if c != Compression.NONE]),
       payload=st.binary(max_size=200), data=st.data())
def test_decompress_garbage(codec, payload, data):
    attempt(decompress, codec, payload)
    framed = bytearray(compress(codec, payload * 3))
    position = data.draw(st.integers(0, len(framed) - 1))
    framed[position] ^= data.draw(st.integers(1, 255))
    attempt(decompress, codec, bytes(framed))


@FUZZ
@given(data=st.binary(max_size=12))
def test_varint_garbage(data):
    result = attempt(decode_varint, data)
    assert result is None or -(1 << 63) <= result[0] < (1 << 63)


def test_huge_claimed_counts_fail_fast():
    batch = bytearray(build_batch([(1, None, b"x")], compression=Compression.LZ4))
    struct.pack_into(">i", batch, 23, (1 << 31) - 1)      # last offset delta
    struct.pack_into(">i", batch, 57, (1 << 31) - 1)      # records count
    fix_crc(batch)
    with pytest.raises(errors.CorruptMessageError):
        decode_batch(bytes(batch))
