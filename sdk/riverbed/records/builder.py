"""Building Kafka v2 record batches: BatchBuilder (the producer's batch) and build_batch.

The record layout is in `codec.py`, the batch header in `header.py`, compression framing in
`compression.py`.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from crc32c import crc32c

from riverbed.records.codec import (
    _ATTR_VARINT,
    _ATTR_VARINT_SIZE,
    _NULL,
    _VARINT,
    _VARINT_TABLE_SIZE,
    Header,
    _encode_varint_slow,
    encode_varint,
)
from riverbed.records.compression import compress
from riverbed.records.header import (
    ATTRIBUTES_POSITION,
    CONTROL_MASK,
    CRC_POSITION,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    Compression,
    TimestampType,
)

__all__ = ["BatchBuilder", "build_batch"]

_HEADER = struct.Struct(">qiibIhiqqqhii")   # header.py's layout table
_CRC = struct.Struct(">I")

class BatchBuilder:
    """Accumulates records into one v2 batch; `build()` returns its bytes.

    Records are encoded straight into one bytearray behind 61 reserved header bytes; nothing
    per record is kept but the bytes. `batch_size` bounds the uncompressed batch size (header
    included), like the producer's `batch.size`; the first record always fits.
    """

    __slots__ = ("_compression", "_base_offset", "_producer_id", "_producer_epoch",
                 "_base_sequence", "_partition_leader_epoch", "_attributes", "_batch_size",
                 "_buf", "_count", "_base_timestamp", "_max_timestamp")

    def __init__(self, *, compression: Compression | int = Compression.NONE,
                 base_offset: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, partition_leader_epoch: int = -1,
                 is_transactional: bool = False, is_control: bool = False,
                 timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                 batch_size: int | None = None) -> None:
        compression = Compression(compression)
        attributes = int(compression)
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if is_control:
            attributes |= CONTROL_MASK
        self._compression = compression
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._attributes = attributes
        self._batch_size = batch_size
        self._buf = bytearray(HEADER_SIZE)
        self._count = 0
        self._base_timestamp = -1
        self._max_timestamp = -1

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def batch_size(self) -> int | None:
        """The bound on the uncompressed batch size (None: none)."""
        return self._batch_size

    @property
    def base_timestamp(self) -> int:
        """The first record's timestamp (-1 before any record)."""
        return self._base_timestamp

    @property
    def estimated_size(self) -> int:
        """Bytes of the batch if built uncompressed now (an upper bound when compressing)."""
        return len(self._buf)

    def append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: Iterable[Header] = ()) -> bool:
        """Add one record; False (and nothing added) if it would overflow batch_size."""
        varint = _VARINT
        count = self._count
        if count == 0:
            base_timestamp = timestamp_ms
        else:
            base_timestamp = self._base_timestamp
        delta = timestamp_ms - base_timestamp
        if not headers:
            # The common case: one join of the fields straight into the buffer.
            delta_bytes = _ATTR_VARINT[delta] if 0 <= delta < _ATTR_VARINT_SIZE \
                else b"\x00" + _encode_varint_slow(delta)      # attributes, timestampDelta
            offset_bytes = varint[count] if count < _VARINT_TABLE_SIZE \
                else _encode_varint_slow(count)
            n = 1 + len(delta_bytes) + len(offset_bytes)        # + headers count
            if key is None:
                key_length = _NULL
                n += 1
            else:
                k = len(key)
                key_length = varint[k] if k < _VARINT_TABLE_SIZE else _encode_varint_slow(k)
                n += len(key_length) + k
            if value is None:
                value_length = _NULL
                n += 1
            else:
                k = len(value)
                value_length = varint[k] if k < _VARINT_TABLE_SIZE else _encode_varint_slow(k)
                n += len(value_length) + k
            length = varint[n] if n < _VARINT_TABLE_SIZE else _encode_varint_slow(n)
            buf = self._buf
            limit = self._batch_size
            if count and limit is not None and len(buf) + len(length) + n > limit:
                return False
            buf += b"".join((length, delta_bytes, offset_bytes, key_length,
                             b"" if key is None else key, value_length,
                             b"" if value is None else value, b"\x00"))
            self._count = count + 1
            if count == 0:
                self._base_timestamp = timestamp_ms
                self._max_timestamp = timestamp_ms
            elif timestamp_ms > self._max_timestamp:
                self._max_timestamp = timestamp_ms
            return True
        parts = [b"\x00",
                 varint[delta] if 0 <= delta < _VARINT_TABLE_SIZE else _encode_varint_slow(delta),
                 varint[count] if count < _VARINT_TABLE_SIZE else _encode_varint_slow(count)]
        append = parts.append
        if key is None:
            append(_NULL)
        else:
            n = len(key)
            append(varint[n] if n < _VARINT_TABLE_SIZE else _encode_varint_slow(n))
            append(key)
        if value is None:
            append(_NULL)
        else:
            n = len(value)
            append(varint[n] if n < _VARINT_TABLE_SIZE else _encode_varint_slow(n))
            append(value)
        if headers:
            headers = tuple(headers)
            append(encode_varint(len(headers)))
            for header_key, header_value in headers:
                header_key = header_key.encode("utf-8")
                append(encode_varint(len(header_key)))
                append(header_key)
                if header_value is None:
                    append(_NULL)
                else:
                    append(encode_varint(len(header_value)))
                    append(header_value)
        else:
            append(b"\x00")
        body = b"".join(parts)
        n = len(body)
        length = varint[n] if n < _VARINT_TABLE_SIZE else _encode_varint_slow(n)
        buf = self._buf
        limit = self._batch_size
        if count and limit is not None and len(buf) + len(length) + n > limit:
            return False
        buf += length
        buf += body
        self._count = count + 1
        if count == 0:
            self._base_timestamp = timestamp_ms
            self._max_timestamp = timestamp_ms
        elif timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        return True

    def append_values(self, timestamp_ms: int, values: Sequence[bytes]) -> int:
        """Add keyless, header-less records sharing one timestamp; return how many fitted.

        The fast path: runs of values of one length (whose offset-delta varints have one size)
        are laid out by one b"".join of an interleaved list built by slice assignment (no Python
        bytecode per record); other values go through a loop in which the per-record bytes other
        than the offset delta and the value are computed once per distinct value length.
        """
        count = self._count
        if count == 0:
            self._base_timestamp = timestamp_ms
            self._max_timestamp = timestamp_ms
        elif timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        delta = timestamp_ms - self._base_timestamp
        prefix = b"\x00" + encode_varint(delta)                 # attributes, timestampDelta
        fixed = len(prefix) + 2                                  # + null key + empty headers
        varint = _VARINT
        buf = self._buf
        size = len(buf)
        limit = self._batch_size
        if limit is None:
            limit = 1 << 62
        if not isinstance(values, (list, tuple)):
            values = list(values)
        total = len(values)
        i = 0
        while i < total and count < 8192:
            # A run: the offset deltas keep their varint size, the values their length.
            end = min(total, i + (64 if count < 64 else 8192) - count)
            n = len(values[i])
            run = values[i:end]
            if list(map(len, run)).count(n) != end - i:
                break                                            # mixed lengths: the loop
            value_length = encode_varint(n)
            delta_size = 1 if count < 64 else 2
            body = fixed + delta_size + len(value_length) + n
            head = encode_varint(body) + prefix
            record_size = len(head) + body - len(prefix)
            k = (limit - size) // record_size
            if k <= 0:
                if count:
                    self._count = count
                    return i
                k = 1                                            # the first always fits
            if k < end - i:
                end = i + k
                run = run[:k]
            k = end - i
            tail = _NULL + value_length
            parts = [b"\x00" + head, None, tail, None] * k       # record i's headers count (0)
            parts[0] = head                                      # and record i+1's head
            parts[1::4] = varint[count:count + k]
            parts[3::4] = run
            buf += b"".join(parts)
            buf += b"\x00"
            size += k * record_size
            count += k
            i = end
            if i < total and size + record_size > limit:
                self._count = count
                return i
        added = i
        if i:
            values = values[i:]
        cached_length = -1
        cached_delta_size = 0
        head = tail = b""
        record_size = 0
        for value in values:
            n = len(value)
            delta_bytes = varint[count] if count < _VARINT_TABLE_SIZE \
                else _encode_varint_slow(count)
            if n != cached_length or len(delta_bytes) != cached_delta_size:
                cached_length = n
                cached_delta_size = len(delta_bytes)
                value_length = encode_varint(n)
                body = fixed + cached_delta_size + len(value_length) + n
                head = encode_varint(body) + prefix
                tail = _NULL + value_length
                record_size = len(head) - len(prefix) + body
            if size + record_size > limit and count:
                break
            buf += head
            buf += delta_bytes
            buf += tail
            buf += value
            buf += b"\x00"
            size += record_size
            count += 1
            added += 1
        self._count = count
        return added

    def append_run(self, timestamp_ms: int, values: Sequence[bytes]) -> None:
        """append_values for records already promised a place in this batch: all of them go
        in, whatever batch_size says (the producer's accumulator counted their sizes as they
        were appended and encodes them later, in runs of one timestamp)."""
        limit = self._batch_size
        self._batch_size = None
        try:
            added = self.append_values(timestamp_ms, values)
        finally:
            self._batch_size = limit
        assert added == len(values), "append_values without a bound takes every value"

    def build(self) -> bytes:
        """The finished batch. The builder may keep appending; build() again for a new batch."""
        count = self._count
        buf = self._buf
        if self._compression != Compression.NONE:
            compressed = compress(self._compression, memoryview(buf)[HEADER_SIZE:])
            out = bytearray(HEADER_SIZE)
            out += compressed
        else:
            out = buf
        _HEADER.pack_into(
            out, 0,
            self._base_offset,
            len(out) - LOG_OVERHEAD,
            self._partition_leader_epoch,
            MAGIC,
            0,
            self._attributes,
            count - 1 if count else 0,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            count,
        )
        _CRC.pack_into(out, CRC_POSITION, crc32c(memoryview(out)[ATTRIBUTES_POSITION:]))
        return bytes(out)


def build_batch(records: Iterable[tuple], **kwargs) -> bytes:
    """One batch from (timestamp_ms, key, value) or (timestamp_ms, key, value, headers) tuples.

    kwargs are BatchBuilder's; batch_size is ignored (every record goes in).
    """
    kwargs.pop("batch_size", None)
    builder = BatchBuilder(**kwargs)
    for record in records:
        builder.append(*record)
    return builder.build()
