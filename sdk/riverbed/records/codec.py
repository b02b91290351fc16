"""Decode Kafka v2 record batches (magic 2), byte for byte as the Java client writes them; the
record layout and varints (shared with `builder.py`, which builds batches, and `compression.py`).

The batch header is laid out in `header.py`. After the 61 header bytes come `recordsCount`
records; when the compression bits (attributes & 0x7) are set, all the records together are
compressed as one stream (no count or length in front of it). Each record:

    field            encoding                  notes
    ---------------  ------------------------  ---------------------------------------------
    length           varint                    bytes of the record after this field
    attributes       int8                      unused, always 0
    timestampDelta   varlong                   timestamp - batch baseTimestamp
    offsetDelta      varint                    offset - batch baseOffset
    keyLength        varint                    -1 for a null key
    key              bytes
    valueLength      varint                    -1 for a null value
    value            bytes
    headersCount     varint
    headers          [headerKeyLength varint, headerKey utf-8,
                      headerValueLength varint (-1 null), headerValue bytesCompression framing: see `compression.py`.

utputStream's defaults)
    zstd    4  one zstd frame; frames without a content size are read too

With LOG_APPEND_TIME (attributes bit 3) every record's timestamp is the batch maxTimestamp.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import repeat

from riverbed import errors
from riverbed.records.compression import decompress
from riverbed.records.header import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    iter_batches,
    validate_batch,
)


Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp (ms)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


# ---------------------------------------------------------------------------------------------
# Varints

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
# Precomputed zigzag varints of 0 .. _VARINT_TABLE_SIZE-1 (lengths, offset deltas).
_VARINT_TABLE_SIZE = 1 << 15


def _encode_varint_slow(value: int) -> bytes:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong")
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


_VARINT = [_encode_varint_slow(n) for n in range(_VARINT_TABLE_SIZE)]
_NULL = b"\x01"   # varint -1: a null key, value or header value
# The attributes byte (0) and the varint of a timestamp delta 0 .. _ATTR_VARINT_SIZE-1 ms.
_ATTR_VARINT_SIZE = 1 << 12
_ATTR_VARINT = [b"\x00" + _VARINT[n] for n in range(_ATTR_VARINT_SIZE)]


def encode_varint(value: int) -> bytes:
    """Zigzag varint (varlong) bytes of a signed 64-bit integer."""
    if 0 <= value < _VARINT_TABLE_SIZE:
        return _VARINT[value]
    return _encode_varint_slow(value)


def size_of_varint(value: int) -> int:
    return len(encode_varint(value))


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Return (value, next position).

    Raises CorruptMessageError on a truncated varint or one longer than 64 bits.
    """
    try:
        return _read_varint(buf, pos)
    except IndexError:
        raise errors.CorruptMessageError(f"truncated varint at position {pos}") from None


def _read_varint(data, pos: int) -> tuple[int, int]:
    # Slow path of the decoder; IndexError on truncation is turned into CORRUPT by callers.
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >> 64:
                raise errors.CorruptMessageError(f"varint overflows 64 bits at position {pos}")
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise errors.CorruptMessageError(f"varint longer than 10 bytes at position {pos}")


def _read_uvarint(data, pos: int) -> tuple[int, int]:
    # The raw (not yet zigzag-decoded) varint at pos, for the decoder's inline fast paths.
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >> 64:
                raise errors.CorruptMessageError(f"varint overflows 64 bits at position {pos}")
            return result, pos
        shift += 7
        if shift > 63:
            raise errors.CorruptMessageError(f"varint longer than 10 bytes at position {pos}")


read_uvarint = _read_uvarint       # shared with the consumer's decoder (riverbed.fetcher)


def decode_headers(data, pos: int, record_end: int) -> tuple[tuple, int]:
    """A record's headers (count varint at `pos`, all within `record_end`) and the position after
    them. Raises CorruptMessageError on negative or overlong counts and lengths; IndexError on
    truncation is turned into CORRUPT by callers. Both record decoders use it."""
    corrupt = errors.CorruptMessageError
    n, pos = _read_varint(data, pos)
    if n < 0:
        raise corrupt(f"header count {n}")
    if n > record_end - pos:
        raise corrupt(f"header count {n} exceeds the record")
    header_list = []
    for _h in range(n):
        n, pos = _read_varint(data, pos)
        if n < 0 or pos + n > record_end:
            raise corrupt(f"header key length {n}")
        header_key = data[pos:pos + n].decode("utf-8")
        pos += n
        n, pos = _read_varint(data, pos)
        if n >= 0:
            if pos + n > record_end:
                raise corrupt(f"header value length {n}")
            header_value = data[pos:pos + n]
            pos += n
        elif n == -1:
            header_value = None
        else:
            raise corrupt(f"header value length {n}")
        header_list.append((header_key, header_value))
    return tuple(header_list), pos


# ---------------------------------------------------------------------------------------------
# Decoding fast path: runs of records with one layout, unpacked by struct (C) column by column
#
# Records from one producer batch usually share a layout: the same length, null key (or a key of
# one length), a value of one length, no headers, and 1- or 2-byte timestamp and offset deltas.
# Such a run of k records is k repetitions of one struct format; struct.iter_unpack reads it in C,
# the columns are checked in C (tuple.count, list membership) and the varints are decoded by table
# lookup. Anything that does not check out is decoded by the record-by-record loop instead, which
# alone decides what is corrupt: the fast path only ever accepts records that the loop would
# decode to the same values.

# Zigzag-decoded value of a 1-byte varint (index: the byte), None where the byte is not one.
_ZZ1 = [((b >> 1) ^ -(b & 1)) if b < 0x80 else None for b in range(256)]
# Zigzag-decoded value of a 2-byte varint (index: first byte | second byte << 8, as struct's "<H"
# reads it), None where the two bytes are not a 2-byte varint.
_ZZ2: list[int | None] = [None] * 65536
for _b in range(0x80, 0x100):
    for _c in range(0x80):
        _u = (_b & 0x7F) | (_c << 7)
        _ZZ2[_b | (_c << 8)] = (_u >> 1) ^ -(_u & 1)
del _b, _c, _u
_ZZ1_GET = _ZZ1.__getitem__
_ZZ2_GET = _ZZ2.__getitem__
RUN_MIN = 8                 # shorter runs: the loop is as fast
_RUN_STRUCTS: dict[str, struct.Struct] = {}


def _small_varint(data, pos: int):
    """(raw, size, value) of the 1- or 2-byte varint at pos; None if longer or truncated."""
    b = data[pos]
    if b < 0x80:
        return b, 1, (b >> 1) ^ -(b & 1)
    c = data[pos + 1]
    if c < 0x80:
        u = (b & 0x7F) | (c << 7)
        return b | (c << 8), 2, (u >> 1) ^ -(u & 1)
    return None


def uniform_run(data, view, pos: int, size: int, remaining: int):
    """Decode the run of records at pos that share the first one's layout.

    Returns None (nothing decoded: use the loop) or (k, next_pos, offset_deltas, timestamp_deltas,
    keys, values): k >= RUN_MIN records; keys/values are None when all null, else sequences.
    """
    try:
        f = _small_varint(data, pos)
        if f is None:
            return None
        length_raw, length_size, length = f
        p = pos + length_size + 1                               # + attributes
        f = _small_varint(data, p)
        if f is None:
            return None
        ts_size = f[1]
        p += ts_size
        f = _small_varint(data, p)
        if f is None:
            return None
        offset_size, offset_delta = f[1], f[2]
        p += offset_size
        fmt = ["<", "B" if length_size == 1 else "H", "x", "B" if ts_size == 1 else "H",
               "B" if offset_size == 1 else "H"]
        specs = []
        for _field in (0, 1):                                   # key, value
            f = _small_varint(data, p)
            if f is None:
                return None
            raw, vsize, n = f
            p += vsize
            if n == -1:
                fmt.append("B")
                specs.append((raw, None))
            elif n >= 0:
                fmt.append(("B%ds" if vsize == 1 else "H%ds") % n)
                specs.append((raw, n))
                p += n
            else:
                return None
        if data[p] != 0:                                        # headers
            return None
        p += 1
        record_size = p - pos
        if length != record_size - length_size or p > size:
            return None
    except IndexError:
        return None
    # The offset delta grows by one a record: the run ends where its varint gets longer.
    if offset_size == 1:
        room = 64 - offset_delta if offset_delta >= 0 else 0
    else:
        room = 8192 - offset_delta if offset_delta >= 64 else 0
    k = min(remaining, room, (size - pos) // record_size)
    if k < RUN_MIN:
        return None
    end = pos + k * record_size
    last = end - record_size                                    # cheap check before unpacking
    if (data[last] if length_size == 1 else data[last] | (data[last + 1] << 8)) != length_raw:
        return None
    fmt.append("B")
    fmt = "".join(fmt)
    st = _RUN_STRUCTS.get(fmt)
    if st is None:
        if len(_RUN_STRUCTS) >= 256:
            _RUN_STRUCTS.clear()
        st = _RUN_STRUCTS[fmt] = struct.Struct(fmt)
    cols = list(zip(*st.iter_unpack(view[pos:end])))
    if cols[0].count(length_raw) != k or cols[-1].count(0) != k:
        return None
    ts_deltas = list(map(_ZZ1_GET if ts_size == 1 else _ZZ2_GET, cols[1]))
    offset_deltas = list(map(_ZZ1_GET if offset_size == 1 else _ZZ2_GET, cols[2]))
    if None in ts_deltas or None in offset_deltas:
        return None
    i = 3
    out = [k, end, offset_deltas, ts_deltas]
    for raw, n in specs:
        if cols[i].count(raw) != k:
            return None
        if n is None:
            out.append(None)
            i += 1
        else:
            out.append(cols[i + 1])
            i += 2
    return out


# ---------------------------------------------------------------------------------------------
# Decoding

def decode_batch(buf, pos: int = 0) -> list[Record]:
    """Validate (CRC included), decompress and decode the batch at `pos`.

    Offsets are absolute (baseOffset + offsetDelta). Raises CorruptMessageError on any
    malformed input.
    """
    header = validate_batch(buf, pos)
    return _decode_body(buf, pos, header)


def decode_batches(buf) -> list[Record]:
    """Every whole batch in buf, in order; a trailing partial batch is ignored."""
    records: list[Record] = []
    for pos, header in iter_batches(buf):
        records += decode_batch(buf, pos)
    return records


def iter_records(buf, pos: int = 0, end: int | None = None) -> Iterator[Record]:
    """Lazily decode the whole batches in buf[pos:end], one batch at a time."""
    for batch_pos, _header in iter_batches(buf, pos, end):
        yield from decode_batch(buf, batch_pos)


def _decode_body(buf, pos: int, header: BatchHeader) -> list[Record]:
    end = pos + header.batch_length + LOG_OVERHEAD
    body = memoryview(buf)[pos + HEADER_SIZE:end]
    codec = header.attributes & COMPRESSION_MASK
    data = decompress(codec, body) if codec else bytes(body)
    timestamp = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    try:
        return _decode_records(data, header.records_count, header.base_offset,
                               header.base_timestamp, timestamp)
    except errors.CorruptMessageError:
        raise
    except (IndexError, ValueError, UnicodeDecodeError, OverflowError) as exc:
        raise errors.CorruptMessageError(
            f"malformed records in batch at position {pos}: {exc!r}") from None


def decode_runs(data, count: int, on_run: Callable, on_loop: Callable[[int, int], int]) -> None:
    """Decode `count` records of a batch body, mixing uniform_run with a record-by-record loop
    (the policy of both record decoders: this module's and riverbed.fetcher's).

    `on_run(k, offset_deltas, ts_deltas, keys, values)` takes a run the fast path unpacked (keys
    or values None when all are null); `on_loop(pos, n) -> pos` decodes n records from pos with
    the caller's loop. Called once per run or loop chunk, never per record. Raises
    CorruptMessageError when bytes follow the last record."""
    view = memoryview(data)
    pos = 0
    size = len(data)
    left = count
    misses = 0
    while left > 0:
        run = None
        if misses < MAX_MISSES and left >= RUN_MIN:
            run = uniform_run(data, view, pos, size, min(left, RUN_MAX))
        if run is None:          # the record-by-record loop, for a few records or the rest
            misses += 1
            n = left if misses >= MAX_MISSES else min(left, LOOP_AFTER_MISS)
            pos = on_loop(pos, n)
            left -= n
            continue
        k, pos, offset_deltas, ts_deltas, keys, values = run
        left -= k
        on_run(k, offset_deltas, ts_deltas, keys, values)
    if pos != size:
        raise errors.CorruptMessageError(f"{size - pos} bytes after the last of {count} records")


def _decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int,
                    log_append_time: int | None) -> list[Record]:
    out: list[Record] = []

    def on_run(k, offset_deltas, ts_deltas, keys, values):
        out.extend(map(Record, map(base_offset.__add__, offset_deltas),
                       map(base_timestamp.__add__, ts_deltas) if log_append_time is None
                       else repeat(log_append_time, k),
                       repeat(None, k) if keys is None else keys,
                       repeat(None, k) if values is None else values))

    def on_loop(pos, n):
        return _decode_loop(data, pos, n, base_offset, base_timestamp, log_append_time, out)

    decode_runs(data, count, on_run, on_loop)
    return out


# How a decoder mixes uniform_run and its loop (here and in riverbed.fetcher):
RUN_MAX = 512                # records unpacked at once: bounds the work a failed check wastes
LOOP_AFTER_MISS = 16         # records the loop decodes after the fast path did not fit
MAX_MISSES = 4               # then the loop decodes the rest of the batch


def _decode_loop(data: bytes, pos: int, count: int, base_offset: int, base_timestamp: int,
                 log_append_time: int | None, out: list) -> int:
    # Hot loop: one- and two-byte varints are decoded inline; IndexError means truncation.
    read_uvarint = _read_uvarint
    corrupt = errors.CorruptMessageError
    make = Record
    append = out.append
    size = len(data)
    for _ in range(count):
        # length
        b = data[pos]
        if b < 0x80:
            pos = pos + 1
        else:
            c = data[pos + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos = pos + 2
            else:
                b, pos = read_uvarint(data, pos)
        length = (b >> 1) ^ -(b & 1)
        record_end = pos + length
        if length < 6 or record_end > size:
            raise corrupt(f"record length {length} at position {pos}")
        # attributes (ignored), timestampDelta
        b = data[pos + 1]
        if b < 0x80:
            pos = pos + 1 + 1
        else:
            c = data[pos + 1 + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos = pos + 1 + 2
            else:
                b, pos = read_uvarint(data, pos + 1)
        timestamp_delta = (b >> 1) ^ -(b & 1)
        # offsetDelta
        b = data[pos]
        if b < 0x80:
            pos = pos + 1
        else:
            c = data[pos + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos = pos + 2
            else:
                b, pos = read_uvarint(data, pos)
        offset_delta = (b >> 1) ^ -(b & 1)
        # key
        b = data[pos]
        if b < 0x80:
            pos = pos + 1
        else:
            c = data[pos + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos = pos + 2
            else:
                b, pos = read_uvarint(data, pos)
        n = (b >> 1) ^ -(b & 1)
        if n >= 0:
            key = data[pos:pos + n]
            pos += n
        elif n == -1:
            key = None
        else:
            raise corrupt(f"key length {n}")
        # value
        b = data[pos]
        if b < 0x80:
            pos = pos + 1
        else:
            c = data[pos + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos = pos + 2
            else:
                b, pos = read_uvarint(data, pos)
        n = (b >> 1) ^ -(b & 1)
        if n >= 0:
            value = data[pos:pos + n]
            pos += n
        elif n == -1:
            value = None
        else:
            raise corrupt(f"value length {n}")
        # headers
        b = data[pos]
        if b == 0:
            pos += 1
            headers = ()
        else:
            headers, pos = decode_headers(data, pos, record_end)
        if pos != record_end:
            raise corrupt(f"record ends at {pos}, its length says {record_end}")
        append(make(base_offset + offset_delta,
                    base_timestamp + timestamp_delta if log_append_time is None
                    else log_append_time,
                    key, value, headers))
    return pos
