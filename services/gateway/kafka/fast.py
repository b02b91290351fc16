"""Hand-written encoders for the responses on the hot path (Produce, Fetch): pure functions over
bytes, byte for byte what kio writes for the same content (tests/unit/gateway/
test_kafka_fast.py checks every served version against kio).

kio's writer is pure Python that checks every value's type as it writes: a Produce answer cost
more to encode than to route, and a Fetch answer was copied twice (into a BytesIO, then out of
it). Here a response is a list of chunks: small `bytes` built with struct for the fixed-width
fields, and the record batches as the storage node's frames (memoryviews, never copied before
the one join that makes the frame).

    Produce v3-v11 response                 Fetch v4-v12 response
      responses [                             throttle_time_ms int32
        name string                           error_code int16           (v7+)
        partition_responses [                 session_id int32           (v7+)
          index int32, error_code int16,      responses [
          base_offset int64,                    topic string
          log_append_time_ms int64,             partitions [
          log_start_offset int64   (v5+)          partition_index int32, error_code int16,
          record_errors []         (v8+)          high_watermark int64,
          error_message nstring    (v8+)          last_stable_offset int64,
        ]                                         log_start_offset int64     (v5+)
      ]                                           aborted_transactions n[  (null on error)
      throttle_time_ms int32                        producer_id int64, first_offset int64 ]
                                                  preferred_read_replica int32 (v11+)
                                                  records nullable bytes
    Flexible from Produce v9 / Fetch v12: compact strings and arrays (unsigned varint
    length + 1), and an empty tagged-field section (one 0 byte) after every struct; the
    response header then carries one too (header v1).
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_I32 = struct.Struct(">i")
_HEADER_V0 = struct.Struct(">i")        # size, then correlation id
_PRODUCE_PART = struct.Struct(">ihqq")   # index, error_code, base_offset, log_append_time_ms
_I64 = struct.Struct(">q")
_FETCH_PART = struct.Struct(">ihqq")    # partition_index, error_code, high_watermark, lso
_FETCH_TOP = struct.Struct(">ihi")      # throttle_time_ms, error_code, session_id
EMPTY_TAGS = b"\x00"
NULL_ARRAY = _I32.pack(-1)
PRODUCE_FLEXIBLE, FETCH_FLEXIBLE = 9, 12


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_UVARINT = [uvarint(i) for i in range(128)]


def _len(n: int, flexible: bool) -> bytes:
    """An array's (or compact string's) length prefix."""
    if flexible:
        return _SMALL_UVARINT[n + 1] if n < 127 else uvarint(n + 1)
    return _I32.pack(n)


def string(s: str, flexible: bool) -> bytes:
    b = s.encode()
    if flexible:
        return _len(len(b), True) + b
    return len(b).to_bytes(2, "big", signed=True) + b


def nullable_string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    return string(s, flexible)


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body already encoded (chunks to join), and whether its header is v1."""
    chunks: Sequence[Any]
    flexible_header: bool

    def frame(self, correlation_id: int) -> bytes:
        head = _HEADER_V0.pack(correlation_id) + (EMPTY_TAGS if self.flexible_header else b"")
        body_len = sum(len(c) for c in self.chunks)
        return b"".join((_I32.pack(len(head) + body_len), head, *self.chunks))


# (index, error_code, base_offset, log_append_time_ms, log_start_offset, error_message|None)
ProducePartition = tuple[int, int, int, int, int, "str | None"]


def produce_response(version: int, throttle_ms: int,
                     topics: Sequence[tuple[str, Sequence[ProducePartition]]]) -> EncodedResponse:
    flex = version >= PRODUCE_FLEXIBLE
    out: list[bytes] = [_len(len(topics), flex)]
    pack = _PRODUCE_PART.pack
    for name, parts in topics:
        out.append(string(name, flex))
        out.append(_len(len(parts), flex))
        for index, code, base, append_ms, log_start, message in parts:
            out.append(pack(index, code, base, append_ms))
            if version >= 5:
                out.append(_I64.pack(log_start))
            if version >= 8:
                out.append(_len(0, flex))                 # record_errors: none
                out.append(nullable_string(message, flex))
            if flex:
                out.append(EMPTY_TAGS)
        if flex:
            out.append(EMPTY_TAGS)
    out.append(_I32.pack(throttle_ms))
    if flex:
        out.append(EMPTY_TAGS)
    return EncodedResponse(out, flex)


# (partition_index, error_code, high_watermark, last_stable_offset, log_start_offset, records
#  [, aborted_transactions: ((producer_id, first_offset), ...) of a read_committed fetch])
FetchPartition = tuple[Any, ...]
_ABORTED = struct.Struct(">qq")         # producer_id, first_offset


def fetch_response(version: int, throttle_ms: int, error_code: int, session_id: int,
                   topics: Sequence[tuple[str, Sequence[FetchPartition]]]) -> EncodedResponse:
    """Records are bytes-like (a storage node's frame): spliced in as they are. Aborted
    transactions: the partition's (producer id, first offset) pairs when given (read_committed),
    else an empty array for a partition without error; null with one (as Kafka)."""
    flex = version >= FETCH_FLEXIBLE
    if version >= 7:
        out: list[Any] = [_FETCH_TOP.pack(throttle_ms, error_code, session_id)]
    else:
        out = [_I32.pack(throttle_ms)]
    out.append(_len(len(topics), flex))
    pack = _FETCH_PART.pack
    null_array = b"\x00" if flex else NULL_ARRAY
    empty_array = _len(0, flex)
    for name, parts in topics:
        out.append(string(name, flex))
        out.append(_len(len(parts), flex))
        for part in parts:
            index, code, hw, lso, log_start, records = part[:6]
            aborted = part[6] if len(part) > 6 else None
            out.append(pack(index, code, hw, lso))
            tail = _I64.pack(log_start) if version >= 5 else b""
            if code != 0:
                tail += null_array
            elif aborted:
                tail += _len(len(aborted), flex) + b"".join(
                    _ABORTED.pack(pid, first) + (EMPTY_TAGS if flex else b"")
                    for pid, first in aborted)
            else:
                tail += empty_array
            if version >= 11:
                tail += b"\xff\xff\xff\xff"               # preferred_read_replica -1
            n = len(records)
            out.append(tail + _len(n, flex))
            if n:
                out.append(records)
            if flex:
                out.append(EMPTY_TAGS)
        if flex:
            out.append(EMPTY_TAGS)
    if flex:
        out.append(EMPTY_TAGS)
    return EncodedResponse(out, flex)


__all__ = ["EncodedResponse", "produce_response", "fetch_response", "uvarint", "string",
           "nullable_string"]

