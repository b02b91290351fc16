"""Records of the compacted `__consumer_offsets` topic, byte for byte Kafka's.

Kafka's GroupMetadataManager (kafka/coordinator/group/GroupMetadataManager.scala and the
generated OffsetCommitKey/Value, GroupMetadataKey/Value) defines the layout. All integers are
big-endian; `string` = int16 length + UTF-8 bytes; `nullable string` uses length -1 for null;
`bytes` = int32 length + bytes; arrays = int32 count + elements.

    key   = int16 key_version + fields
      version 0/1  offset commit key:   group string, topic string, partition int32
      version 2    group metadata key:  group string

    offset commit value = int16 version + fields
      v0: offset int64, metadata string, commit_timestamp int64
      v1: offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
      v2: offset int64, metadata string, commit_timestamp int64
      v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    Written: v1 when the commit carries an explicit retention (expire timestamp), else v3 —
    Kafka's rule.

    group metadata value = int16 version + fields
      v3: protocol_type string, generation int32, protocol nullable string,
          leader nullable string, current_state_timestamp int64 (-1 = none),
          members array of:
            member_id string, group_instance_id nullable string, client_id string,
            client_host string, rebalance_timeout int32, session_timeout int32,
            subscription bytes, assignment bytes
      (v0 lacks current_state_timestamp, rebalance_timeout, group_instance_id; v1 adds
       rebalance_timeout; v2 adds current_state_timestamp; v3 adds group_instance_id.)

A tombstone is a record with a key and a null value (the offset or group is deleted).
The partition (shard) of a group is `partition_for(group_id, offsets.topic.num.partitions)`.
Decoders raise `OffsetsTopicFormatError` on malformed bytes, never anything else.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


class OffsetsTopicFormatError(ValueError):
    """Bytes that are not a valid __consumer_offsets key or value (CORRUPT_MESSAGE)."""


# ---------------------------------------------------------------------------- shard rule

def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's GroupMetadataManager.partitionFor: Utils.abs(hashCode) % offsets.topic.num.partitions.

    Kafka's Utils.abs maps Integer.MIN_VALUE to 0 (it is `n & 0x7fffffff`), not to 2^31.
    """
    if num_partitions < 1:
        raise ValueError("num_partitions must be >= 1")
    return (java_string_hashcode(group_id) & 0x7FFFFFFF) % num_partitions


# ---------------------------------------------------------------------------- primitives

class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> "_Writer":
        self.parts.append(struct.pack(">h", v))
        return self

    def int32(self, v: int) -> "_Writer":
        self.parts.append(struct.pack(">i", v))
        return self

    def int64(self, v: int) -> "_Writer":
        self.parts.append(struct.pack(">q", v))
        return self

    def string(self, s: str | None) -> "_Writer":
        if s is None:
            return self.int16(-1)
        b = s.encode("utf-8")
        if len(b) > 0x7FFF:
            raise ValueError(f"string of {len(b)} bytes does not fit an int16 length")
        self.int16(len(b))
        self.parts.append(b)
        return self

    def bytes_(self, b: bytes | None) -> "_Writer":
        if b is None:
            return self.int32(-1)
        self.int32(len(b))
        self.parts.append(bytes(b))
        return self

    def build(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = bytes(buf)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise OffsetsTopicFormatError(f"truncated at byte {self.pos} (need {n})")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise OffsetsTopicFormatError(f"negative string length {n}")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise OffsetsTopicFormatError(f"string is not UTF-8: {e}") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise OffsetsTopicFormatError("null where a string is required")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise OffsetsTopicFormatError(f"negative bytes length {n}")
        return self._take(n)

    def array_len(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.buf) - self.pos:   # each element takes at least one byte
            raise OffsetsTopicFormatError(f"bad array length {n}")
        return n

    def done(self) -> None:
        # Kafka readers ignore trailing bytes of a newer minor layout; we do too.
        return None


# ---------------------------------------------------------------------------- keys

@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


Key = OffsetCommitKey | GroupMetadataKey


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return (_Writer().int16(OFFSET_COMMIT_KEY_VERSION).string(key.group).string(key.topic)
                .int32(key.partition).build())
    return _Writer().int16(GROUP_METADATA_KEY_VERSION).string(key.group).build()


def decode_key(buf: bytes) -> Key:
    r = _Reader(buf)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupMetadataKey(r.string())
    raise OffsetsTopicFormatError(f"unknown key version {version}")


# ---------------------------------------------------------------------------- offset values

@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp_ms: int = -1
    leader_epoch: int = -1                  # -1 = unknown (v3 only)
    expire_timestamp_ms: int | None = None  # explicit retention (v1 only)


def encode_offset_value(v: OffsetCommitValue) -> bytes:
    w = _Writer()
    if v.expire_timestamp_ms is not None:
        w.int16(1).int64(v.offset).string(v.metadata).int64(v.commit_timestamp_ms)
        w.int64(v.expire_timestamp_ms)
    else:
        w.int16(3).int64(v.offset).int32(v.leader_epoch).string(v.metadata)
        w.int64(v.commit_timestamp_ms)
    return w.build()


def decode_offset_value(buf: bytes) -> OffsetCommitValue:
    r = _Reader(buf)
    version = r.int16()
    if version == 0 or version == 2:
        return OffsetCommitValue(offset=r.int64(), metadata=r.string(), commit_timestamp_ms=r.int64())
    if version == 1:
        off, md, ts, exp = r.int64(), r.string(), r.int64(), r.int64()
        return OffsetCommitValue(off, md, ts, -1, exp)
    if version == 3:
        off, epoch, md, ts = r.int64(), r.int32(), r.string(), r.int64()
        return OffsetCommitValue(off, md, ts, epoch, None)
    raise OffsetsTopicFormatError(f"unknown offset commit value version {version}")


# ---------------------------------------------------------------------------- group values

@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes            # consumer_protocol.encode_subscription(...)
    assignment: bytes              # consumer_protocol.encode_assignment(...)
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberMetadata, ...] = ()


def encode_group_value(v: GroupMetadataValue) -> bytes:
    w = _Writer().int16(GROUP_METADATA_VALUE_VERSION)
    w.string(v.protocol_type).int32(v.generation).string(v.protocol).string(v.leader)
    w.int64(v.current_state_timestamp_ms).int32(len(v.members))
    for m in v.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return w.build()


def decode_group_value(buf: bytes) -> GroupMetadataValue:
    r = _Reader(buf)
    version = r.int16()
    if not 0 <= version <= 3:
        raise OffsetsTopicFormatError(f"unknown group metadata value version {version}")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        host = r.string()
        rebalance = r.int32() if version >= 1 else -1
        session = r.int32()
        if version == 0:
            rebalance = session
        sub = r.nullable_bytes() or b""
        assignment = r.nullable_bytes() or b""
        members.append(MemberMetadata(member_id, client_id, host, rebalance, session, sub,
                                      assignment, instance))
    return GroupMetadataValue(protocol_type, generation, protocol, leader, ts, tuple(members))


# ---------------------------------------------------------------------------- whole records

Value = OffsetCommitValue | GroupMetadataValue


@dataclass(frozen=True, slots=True)
class OffsetsRecord:
    """One decoded record of __consumer_offsets. `value` None = tombstone."""
    key: Key
    value: Value | None


def encode_record(rec: OffsetsRecord) -> tuple[bytes, bytes | None]:
    key = encode_key(rec.key)
    if rec.value is None:
        return key, None
    if isinstance(rec.key, OffsetCommitKey):
        if not isinstance(rec.value, OffsetCommitValue):
            raise TypeError("offset commit key needs an OffsetCommitValue")
        return key, encode_offset_value(rec.value)
    if not isinstance(rec.value, GroupMetadataValue):
        raise TypeError("group metadata key needs a GroupMetadataValue")
    return key, encode_group_value(rec.value)


def decode_record(key: bytes, value: bytes | None) -> OffsetsRecord:
    k = decode_key(key)
    if value is None:
        return OffsetsRecord(k, None)
    if isinstance(k, OffsetCommitKey):
        return OffsetsRecord(k, decode_offset_value(value))
    return OffsetsRecord(k, decode_group_value(value))


# ---------------------------------------------------------------------------- write errors

def coordinator_error_for_append(code: int) -> int:
    """The error a coordinator answers when appending to __consumer_offsets failed with `code`.

    Kafka's mapping (GroupMetadataManager.storeGroup / storeOffsets): the log's errors are not
    the client's business; they become coordinator errors the client knows how to retry.
    Kafka's coordinators append to a local log; ours append over the network to the
    partition's leader, so a leader lost mid-append (NETWORK_EXCEPTION: maybe written, as a
    REQUEST_TIMED_OUT) or between leaders (LEADER_NOT_AVAILABLE, BROKER_NOT_AVAILABLE) is
    COORDINATOR_NOT_AVAILABLE too: retriable, where UNKNOWN_SERVER_ERROR was fatal to a
    transactional producer.
    """
    from riverbed.errors import ErrorCode as E
    if code == E.NONE:
        return E.NONE
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT,
                E.NETWORK_EXCEPTION, E.LEADER_NOT_AVAILABLE, E.BROKER_NOT_AVAILABLE):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_FOR_PARTITION, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return E.UNKNOWN_SERVER_ERROR


# ---------------------------------------------------------------------------- stored records

@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record as read back from (or acknowledged by) partition `shard` of a coordinator's
    topic: what the coordinators' `replay(record)` takes. `offset` is its log offset (-1
    unknown). `producer_id` >= 0: a transactional record of that producer and epoch (a
    TXN_OFFSET_COMMIT's offsets, counted only once the transaction's COMMIT marker follows)."""
    shard: int
    offset: int
    key: bytes
    value: bytes | None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class StoredControl:
    """A transaction marker read from partition `shard` at log offset `offset`: the producer's
    transaction there is committed (`commit`) or aborted."""
    shard: int
    offset: int
    producer_id: int
    producer_epoch: int
    commit: bool
