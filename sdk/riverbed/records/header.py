"""The v2 record-batch header (magic 2): read, validate, walk and rewrite it in place.

Pure functions over bytes (`bytes`, `bytearray` or `memoryview`); nothing here decodes records.
Storage nodes use this module on the produce path (validate, then stamp base offset and leader
epoch) and when recovering a segment (walk batches by length, stop at a torn tail).

RecordBatch layout (big-endian; Kafka DefaultRecordBatch.java, aiokafka's default_records):

    position  size  field                   in CRC  notes
    --------  ----  ----------------------  ------  ------------------------------------------
     0         8    baseOffset      int64     no    set by the leader on append
     8         4    batchLength     int32     no    bytes after this field: size = length + 12
    12         4    partitionLeaderEpoch i32  no    set by the leader on append
    16         1    magic           int8      no    always 2 here
    17         4    crc             uint32    --    CRC-32C (Castagnoli) of bytes 21..end
    21         2    attributes      int16     yes   bits 0-2 compression, 3 timestamp type,
                                                    4 transactional, 5 control, 6-15 unused (0)
    23         4    lastOffsetDelta int32     yes   offset of the last record - baseOffset
    27         8    baseTimestamp   int64     yes   first record's timestamp (ms)
    35         8    maxTimestamp    int64     yes   largest record timestamp, or log-append time
    43         8    producerId      int64     yes   -1 when not idempotent
    51         2    producerEpoch   int16     yes   -1 when not idempotent
    53         4    baseSequence    int32     yes   -1 when not idempotent
    57         4    recordsCount    int32     yes   number of records that follow
    61         -    records                   yes   compressed as a whole when bits 0-2 != 0

The minimum batchLength is therefore 61 - 12 = 49 (a batch with no records).
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

from crc32c import crc32c

from riverbed import errors

HEADER_SIZE = 61
LOG_OVERHEAD = 12                      # baseOffset(8) + batchLength(4)
MAGIC = 2
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD   # 49

BASE_OFFSET_POSITION = 0
BATCH_LENGTH_POSITION = 8
PARTITION_LEADER_EPOCH_POSITION = 12
MAGIC_POSITION = 16
CRC_POSITION = 17
ATTRIBUTES_POSITION = 21               # the CRC covers [21, end)
MAX_TIMESTAMP_POSITION = 35
RECORDS_COUNT_POSITION = 57

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

# The smallest record: length, attributes, timestampDelta, offsetDelta, keyLength(-1),
# valueLength(-1), headers count, one byte each. Bounds recordsCount of an uncompressed batch.
MIN_RECORD_SIZE = 7

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == HEADER_SIZE
_PREFIX = struct.Struct(">qi")          # baseOffset, batchLength
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61 header bytes of one batch, decoded. Positions are in the table above."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        """Raises CorruptMessageError for codec numbers 5-7."""
        code = self.attributes & COMPRESSION_MASK
        if code > Compression.ZSTD:
            raise errors.CorruptMessageError(f"unknown compression codec {code}")
        return Compression(code)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK \
            else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Decode the header at `pos` without checking the CRC or that the body is present.

    Raises CorruptMessageError when fewer than 61 bytes are available, magic != 2 or
    batchLength < 49.
    """
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise errors.CorruptMessageError(
            f"need {HEADER_SIZE} header bytes at position {pos}, have {max(len(buf) - pos, 0)}")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise errors.CorruptMessageError(f"magic {header.magic} at position {pos}, expected 2")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise errors.CorruptMessageError(
            f"batch length {header.batch_length} at position {pos} is below {MIN_BATCH_LENGTH}")
    return header


def validate_batch(buf, pos: int = 0, *, max_size: int | None = None) -> BatchHeader:
    """Check one whole batch at `pos`: present, magic 2, sane counts, CRC-32C. Returns its header.

    Raises CorruptMessageError, or MessageTooLargeError when the batch's size exceeds max_size.
    Does not decompress or decode records (see `riverbed.records.decode_batch`).
    """
    header = read_header(buf, pos)
    size = header.batch_length + LOG_OVERHEAD
    end = pos + size
    if end > len(buf):
        raise errors.CorruptMessageError(
            f"batch at position {pos} claims {size} bytes, only {len(buf) - pos} present")
    if max_size is not None and size > max_size:
        raise errors.MessageTooLargeError(f"batch of {size} bytes exceeds the limit of {max_size}")
    attributes = header.attributes
    if attributes & COMPRESSION_MASK > Compression.ZSTD:
        raise errors.CorruptMessageError(
            f"unknown compression codec {attributes & COMPRESSION_MASK}")
    if header.last_offset_delta < 0:
        raise errors.CorruptMessageError(f"negative last offset delta {header.last_offset_delta}")
    count = header.records_count
    # Compaction may remove records but keeps lastOffsetDelta, so count <= lastOffsetDelta + 1.
    if count < 0 or count > header.last_offset_delta + 1:
        raise errors.CorruptMessageError(
            f"records count {count} does not fit last offset delta {header.last_offset_delta}")
    if not attributes & COMPRESSION_MASK and \
            count * MIN_RECORD_SIZE > header.batch_length - MIN_BATCH_LENGTH:
        raise errors.CorruptMessageError(
            f"records count {count} cannot fit in {header.batch_length - MIN_BATCH_LENGTH} bytes")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    actual = crc32c(view[pos + ATTRIBUTES_POSITION:end])
    if actual != header.crc:
        raise errors.CorruptMessageError(
            f"CRC mismatch at position {pos}: stored {header.crc:#010x}, computed {actual:#010x}")
    return header


def iter_batches(buf, pos: int = 0, end: int | None = None, *,
                 validate: bool = False) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch in buf[pos:end], walking by batchLength.

    Stops quietly at a trailing partial batch (a torn write, or a fetch cut at max bytes).
    A whole but malformed header (bad magic, batchLength < 49) raises CorruptMessageError.
    With validate=True each batch is checked by `validate_batch` (CRC included) first.
    """
    if end is None:
        end = len(buf)
    else:
        end = min(end, len(buf))
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if end < len(view):
        view = view[:end]
    while end - pos >= HEADER_SIZE:
        header = validate_batch(view, pos) if validate else read_header(view, pos)
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > end:
            return
        yield pos, header
        pos += size


def validate_batches(buf, *, max_size: int | None = None,
                     strict: bool = False) -> list[BatchHeader]:
    """Validate a produce payload: one or more whole batches, every one valid, nothing after.

    Raises CorruptMessageError (empty payload, a bad batch, trailing bytes) or
    MessageTooLargeError (a batch larger than max_size). With strict=True, also requires what
    Kafka's LogValidator requires of a batch from a client: at least one record and
    recordsCount == lastOffsetDelta + 1 (else InvalidRecordError).
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    total = len(view)
    if total == 0:
        raise errors.CorruptMessageError("empty record-batch payload")
    headers = []
    pos = 0
    while pos < total:
        header = validate_batch(view, pos, max_size=max_size)
        if strict and (header.records_count == 0 or
                       header.records_count != header.last_offset_delta + 1):
            raise errors.InvalidRecordError(
                f"batch at position {pos} has {header.records_count} records but last offset "
                f"delta {header.last_offset_delta}")
        headers.append(header)
        pos += header.batch_length + LOG_OVERHEAD
    return headers


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Stamp the base offset in place. The CRC does not cover it, so the batch stays valid."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_POSITION, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the partition leader epoch in place. The CRC does not cover it."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_POSITION, epoch)


def set_max_timestamp_log_append(buf: bytearray | memoryview, pos: int,
                                 log_append_time_ms: int) -> None:
    """Turn the batch at `pos` into a LogAppendTime batch stamped `log_append_time_ms`, in place.

    Sets the timestamp-type bit and maxTimestamp (Kafka DefaultRecordBatch.setMaxTimestamp);
    both are under the CRC, so this recomputes the CRC over the whole batch: O(batch size),
    unlike `set_base_offset`. Readers then report maxTimestamp as every record's timestamp.
    The batch must be whole (call `validate_batch` first).
    """
    header = read_header(buf, pos)
    end = pos + header.batch_length + LOG_OVERHEAD
    if end > len(buf):
        raise errors.CorruptMessageError(f"batch at position {pos} is not whole")
    _INT16.pack_into(buf, pos + ATTRIBUTES_POSITION, header.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POSITION, log_append_time_ms)
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    _UINT32.pack_into(buf, pos + CRC_POSITION, crc32c(view[pos + ATTRIBUTES_POSITION:end]))
