"""Records of the compacted `__transaction_state` topic, byte for byte Kafka's (TransactionLog).

All integers big-endian; `string` = int16 length + UTF-8; arrays = int32 count (-1 = null).

    key   = int16 key_version (0) + transactional_id string
    value = int16 value_version (0) +
              producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
              transaction_status int8 (TxnStatus ids below),
              transaction_partitions nullable array of {topic string, partition_ids [int32]}
                  (null when the status is Empty),
              transaction_last_update_timestamp_ms int64,
              transaction_start_timestamp_ms int64 (-1 when no transaction is open)

A tombstone (null value) removes the transactional id (expired: transactional.id.expiration.ms).
The partition (shard) of a transactional id is Kafka's TransactionStateManager.partitionFor:
`Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions` (`partition_for`).
Decoders raise `TransactionLogFormatError` on malformed bytes, never anything else.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from riverbed.coordinator.offsets_topic import (
    OffsetsTopicFormatError, _Reader, _Writer, partition_for,
)

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnStatus", "TxnLogValue", "TransactionLogFormatError",
           "encode_key", "decode_key", "encode_value", "decode_value", "partition_for"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0


class TransactionLogFormatError(OffsetsTopicFormatError):
    """Bytes that are not a valid __transaction_state key or value (CORRUPT_MESSAGE)."""


class TxnStatus(enum.IntEnum):
    """Kafka's TransactionState ids (persisted: never renumber) and names (DescribeTransactions)."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> "TxnStatus":
        for s, n in _NAMES.items():
            if n == name:
                return s
        raise ValueError(f"unknown transaction state {name!r}")


_NAMES = {TxnStatus.EMPTY: "Empty", TxnStatus.ONGOING: "Ongoing",
          TxnStatus.PREPARE_COMMIT: "PrepareCommit", TxnStatus.PREPARE_ABORT: "PrepareAbort",
          TxnStatus.COMPLETE_COMMIT: "CompleteCommit", TxnStatus.COMPLETE_ABORT: "CompleteAbort",
          TxnStatus.DEAD: "Dead", TxnStatus.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    status: TxnStatus
    partitions: frozenset[tuple[str, int]]
    last_update_timestamp_ms: int
    start_timestamp_ms: int


def encode_key(transactional_id: str) -> bytes:
    return _Writer().int16(KEY_VERSION).string(transactional_id).build()


def decode_key(buf: bytes) -> str:
    try:
        r = _Reader(buf)
        version = r.int16()
        if version != KEY_VERSION:
            raise TransactionLogFormatError(f"unknown key version {version}")
        return r.string()
    except TransactionLogFormatError:
        raise
    except OffsetsTopicFormatError as e:
        raise TransactionLogFormatError(str(e)) from None


def encode_value(v: TxnLogValue) -> bytes:
    if v.status is TxnStatus.EMPTY and v.partitions:
        raise ValueError("an Empty transaction has no partitions")
    w = (_Writer().int16(VALUE_VERSION).int64(v.producer_id).int16(v.producer_epoch)
         .int32(v.transaction_timeout_ms))
    w.parts.append(struct.pack(">b", int(v.status)))
    if v.status is TxnStatus.EMPTY:
        w.int32(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(v.partitions):
            by_topic.setdefault(topic, []).append(p)
        w.int32(len(by_topic))
        for topic, ps in by_topic.items():
            w.string(topic).int32(len(ps))
            for p in ps:
                w.int32(p)
    return w.int64(v.last_update_timestamp_ms).int64(v.start_timestamp_ms).build()


def decode_value(buf: bytes) -> TxnLogValue:
    try:
        r = _Reader(buf)
        version = r.int16()
        if version != VALUE_VERSION:
            raise TransactionLogFormatError(f"unknown value version {version}")
        pid, epoch, timeout = r.int64(), r.int16(), r.int32()
        status_id = struct.unpack(">b", r._take(1))[0]
        try:
            status = TxnStatus(status_id)
        except ValueError:
            raise TransactionLogFormatError(f"unknown transaction status {status_id}") from None
        partitions: set[tuple[str, int]] = set()
        n = r.int32()
        if n != -1:
            if n < 0 or n > len(r.buf) - r.pos:
                raise TransactionLogFormatError(f"bad array length {n}")
            for _ in range(n):
                topic = r.string()
                for _ in range(r.array_len()):
                    partitions.add((topic, r.int32()))
        last_update, start = r.int64(), r.int64()
    except TransactionLogFormatError:
        raise
    except OffsetsTopicFormatError as e:
        raise TransactionLogFormatError(str(e)) from None
    return TxnLogValue(pid, epoch, timeout, status, frozenset(partitions), last_update, start)
