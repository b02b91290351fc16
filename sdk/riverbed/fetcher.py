"""The consumer's fetched data: one partition's answer to one FETCH (undecoded bytes) and the
decoder that turns one batch of it into ConsumerRecords.

Batches are decoded lazily: a batch is decompressed and decoded only when poll() reaches it, and
poll(max_records=n) hands out at most n records, keeping the rest of the decoded batch for the next
call. The decoder builds `ConsumerRecord` tuples directly (no intermediate `records.Record`
objects, no per-record conversion step). Runs of records with one layout (the usual producer
batch) are unpacked by `records.codec.uniform_run` (struct.iter_unpack, checked column by column)
and the tuples built by map/zip, with no Python bytecode per record; the rest goes through a
record-by-record loop. 100 B records: ~0.45 us/record (the loop alone: ~0.85).
With check_crcs each batch's CRC-32C is verified (records.validate_batch) before decoding.
Control batches (transaction markers) are skipped, as Kafka's consumer does.

read_committed (KIP-98; Kafka's CompletedFetch with its aborted transactions): the storage node
sends data only below the last stable offset plus the aborted transactions overlapping it
(producer id, first offset). Before each batch of a producer, the aborted transactions that
began at or before its last offset make their producers "aborted"; a transactional batch of an
aborted producer is skipped, and that producer's ABORT marker ends it (the producer's later
transactions are read again).
"""
from __future__ import annotations

import collections
from itertools import repeat
from typing import Callable

from riverbed import errors
from riverbed.records import HEADER_SIZE, BatchHeader, decompress, validate_batch
from riverbed.records.codec import decode_runs
from riverbed.records.codec import decode_headers as _decode_headers
from riverbed.records.codec import read_uvarint as _read_uvarint
from riverbed.records.control import ABORT, read_control_record
from riverbed.records.header import COMPRESSION_MASK, CONTROL_MASK, LOG_OVERHEAD, \
    TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK
from riverbed.structs import ConsumerRecord, TopicPartition

__all__ = ["CompletedFetch", "decode_records"]

_tuple_new = tuple.__new__


def decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int,
                   log_append_time: int | None, topic: str, partition: int) -> list:
    """The `count` records of one (decompressed) batch body as ConsumerRecords. Raises
    CorruptMessageError on malformed input (checked: lengths, record ends, trailing bytes)."""
    try:
        return _decode(data, count, base_offset, base_timestamp, log_append_time, topic,
                       partition)
    except errors.CorruptMessageError:
        raise
    except (IndexError, ValueError, UnicodeDecodeError, OverflowError) as exc:
        raise errors.CorruptMessageError(f"malformed records: {exc!r}") from None


def _decode(data, count, base_offset, base_timestamp, log_append_time, topic, partition):
    # Runs of records sharing one layout go through codec.uniform_run (struct, in C); the rest
    # through the loop below; codec.decode_runs mixes the two.
    out: list = []

    def on_run(k, offset_deltas, ts_deltas, keys, values):
        out.extend(map(_tuple_new, repeat(ConsumerRecord, k), zip(
            repeat(topic, k), repeat(partition, k), map(base_offset.__add__, offset_deltas),
            map(base_timestamp.__add__, ts_deltas) if log_append_time is None
            else repeat(log_append_time, k),
            repeat(None, k) if keys is None else keys,
            repeat(None, k) if values is None else values, repeat((), k))))

    def on_loop(pos, n):
        return _decode_loop(data, pos, n, base_offset, base_timestamp, log_append_time,
                            topic, partition, out)

    decode_runs(data, count, on_run, on_loop)
    return out


def _decode_loop(data, pos, count, base_offset, base_timestamp, log_append_time, topic,
                 partition, out) -> int:
    # Hot loop: one- and two-byte varints inline; IndexError means truncation.
    CR = ConsumerRecord
    new = _tuple_new
    rd = _read_uvarint
    corrupt = errors.CorruptMessageError
    append = out.append
    size = len(data)
    for _ in range(count):
        b = data[pos]                                       # length
        if b < 0x80:
            pos += 1
        else:
            c = data[pos + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 2
            else:
                b, pos = rd(data, pos)
        end = pos + ((b >> 1) ^ -(b & 1))
        if end > size or end < pos + 6:
            raise corrupt(f"record length at position {pos}")
        b = data[pos + 1]                                   # attributes, timestampDelta
        if b < 0x80:
            pos += 2
        else:
            c = data[pos + 2]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 3
            else:
                b, pos = rd(data, pos + 1)
        ts = base_timestamp + ((b >> 1) ^ -(b & 1)) if log_append_time is None else log_append_time
        b = data[pos]                                       # offsetDelta
        if b < 0x80:
            pos += 1
        else:
            c = data[pos + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 2
            else:
                b, pos = rd(data, pos)
        offset = base_offset + ((b >> 1) ^ -(b & 1))
        b = data[pos]                                       # key
        if b == 1:
            key = None
            pos += 1
        else:
            if b < 0x80:
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    b, pos = rd(data, pos)
            n = (b >> 1) ^ -(b & 1)
            if n < 0:
                raise corrupt(f"key length {n}")
            key = data[pos:pos + n]
            pos += n
        b = data[pos]                                       # value
        if b == 1:
            value = None
            pos += 1
        else:
            if b < 0x80:
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    b, pos = rd(data, pos)
            n = (b >> 1) ^ -(b & 1)
            if n < 0:
                raise corrupt(f"value length {n}")
            value = data[pos:pos + n]
            pos += n
        if data[pos] == 0:                                  # headers
            pos += 1
            headers = ()
        else:
            headers, pos = _decode_headers(data, pos, end)
        if pos != end:
            raise corrupt(f"record ends at {pos}, its length says {end}")
        append(new(CR, (topic, partition, offset, ts, key, value, headers)))
    return pos


class CompletedFetch:
    """One partition's answer to one FETCH: whole batches (positions + headers), decoded one
    batch at a time as records are taken."""

    __slots__ = ("tp", "buf", "batches", "records", "index", "next_fetch_offset",
                 "high_watermark", "check_crcs", "aborted", "aborted_pids", "read_committed",
                 "skipped_aborted")

    def __init__(self, tp: TopicPartition, buf, batches: list[tuple[int, BatchHeader]],
                 next_fetch_offset: int, high_watermark: int, check_crcs: bool = True,
                 aborted: list[tuple[int, int]] | None = None, read_committed: bool = False):
        self.tp = tp
        self.buf = buf
        self.batches = collections.deque(batches)
        self.records: list = []
        self.index = 0
        self.next_fetch_offset = next_fetch_offset
        self.high_watermark = high_watermark
        self.check_crcs = check_crcs
        self.read_committed = read_committed
        # (first offset, producer id) of the aborted transactions, oldest first
        self.aborted = collections.deque(sorted((first, pid) for pid, first in aborted or ()))
        self.aborted_pids: set[int] = set()
        self.skipped_aborted = 0          # records of aborted transactions skipped

    def _decode_next(self) -> list:
        pos, header = self.batches.popleft()
        buf = self.buf
        if self.check_crcs:
            header = validate_batch(buf, pos)
        attributes = header.attributes
        if self.read_committed and header.producer_id >= 0:
            aborted = self.aborted
            while aborted and aborted[0][0] <= header.base_offset + header.last_offset_delta:
                self.aborted_pids.add(aborted.popleft()[1])
            if attributes & CONTROL_MASK:
                if header.producer_id in self.aborted_pids and \
                        read_control_record(buf, pos).control_type == ABORT:
                    self.aborted_pids.discard(header.producer_id)
                return []
            if attributes & TRANSACTIONAL_MASK and header.producer_id in self.aborted_pids:
                self.skipped_aborted += header.records_count
                return []
        if attributes & CONTROL_MASK:
            return []
        end = pos + header.batch_length + LOG_OVERHEAD
        body = memoryview(buf)[pos + HEADER_SIZE:end]
        codec = attributes & COMPRESSION_MASK
        data = decompress(codec, body) if codec else bytes(body)
        log_append_time = header.max_timestamp if attributes & TIMESTAMP_TYPE_MASK else None
        return decode_records(data, header.records_count, header.base_offset,
                              header.base_timestamp, log_append_time, self.tp.topic,
                              self.tp.partition)

    def take(self, position: int, max_records: int,
             convert: Callable | None = None) -> tuple[list, int]:
        """Records at offset >= position, at most max_records; returns (records, new position).
        convert, if given, maps each ConsumerRecord (deserializers)."""
        out: list = []
        left = max_records
        while left > 0:
            recs = self.records
            i = self.index
            if i >= len(recs):
                if not self.batches:
                    break
                recs = self.records = self._decode_next()
                i = self.index = 0
                if recs and recs[0][2] < position:
                    # the batch starts before the position (after a seek): trim
                    while i < len(recs) and recs[i][2] < position:
                        i += 1
                    self.index = i
                continue
            n = len(recs) - i
            if n <= left:
                out += recs if i == 0 else recs[i:]
                self.index = len(recs)
                left -= n
            else:
                out += recs[i:i + left]
                self.index = i + left
                left = 0
        if out:
            position = out[-1][2] + 1
            if convert is not None:
                out = [convert(r) for r in out]
        return out, position

    @property
    def exhausted(self) -> bool:
        return self.index >= len(self.records) and not self.batches
