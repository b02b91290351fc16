"""Kafka's ConsumerProtocol: the subscription and assignment bytes of protocol type "consumer".

They are what `__consumer_offsets` group-metadata values carry per member (offsets_topic.py)
so Kafka's own tools could read them. Big-endian, int16-length strings, int32-count arrays:

    Subscription v1: version int16 (=1), topics array[string], user_data nullable bytes,
                     owned_partitions array[topic string, partitions array[int32]]
                     + Riverbed extension: topic_pattern nullable string, appended only when a
                       pattern is set. Kafka readers ignore trailing bytes of a known version,
                       as ConsumerProtocol's compatibility rule (append-only fields) allows.
    Assignment v0:   version int16 (=0), assigned_partitions array[topic string,
                     partitions array[int32]], user_data nullable bytes
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from riverbed.coordinator.offsets_topic import OffsetsTopicFormatError, _Reader, _Writer

TopicPartition = tuple[str, int]

SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...] = ()
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    topic_pattern: str | None = None       # Riverbed: matched by the coordinator (re.fullmatch)


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None


def group_by_topic(tps: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """[(topic, [partitions ascending])] in topic order: the wire's and Kafka's grouping."""
    by: dict[str, list[int]] = {}
    for t, p in tps:
        by.setdefault(t, []).append(p)
    return [(t, sorted(by[t])) for t in sorted(by)]


def _write_tps(w: _Writer, tps: Iterable[TopicPartition]) -> None:
    grouped = group_by_topic(tps)
    w.int32(len(grouped))
    for topic, parts in grouped:
        w.string(topic).int32(len(parts))
        for p in parts:
            w.int32(p)


def _read_tps(r: _Reader) -> tuple[TopicPartition, ...]:
    out = []
    for _ in range(r.array_len()):
        topic = r.string()
        for _ in range(r.array_len()):
            out.append((topic, r.int32()))
    return tuple(out)


def encode_subscription(s: Subscription) -> bytes:
    w = _Writer().int16(SUBSCRIPTION_VERSION).int32(len(s.topics))
    for t in s.topics:
        w.string(t)
    w.bytes_(s.user_data)
    _write_tps(w, s.owned_partitions)
    if s.topic_pattern:
        w.string(s.topic_pattern)
    return w.build()


def decode_subscription(buf: bytes) -> Subscription:
    r = _Reader(buf)
    version = r.int16()
    if version < 0:
        raise OffsetsTopicFormatError(f"bad subscription version {version}")
    topics = tuple(r.string() for _ in range(r.array_len()))
    user_data = r.nullable_bytes()
    owned: tuple[TopicPartition, ...] = ()
    pattern = None
    if version >= 1:
        owned = _read_tps(r)
        if r.pos < len(r.buf):
            pattern = r.nullable_string()
    return Subscription(topics, user_data, owned, pattern)


def encode_assignment(a: Assignment) -> bytes:
    w = _Writer().int16(ASSIGNMENT_VERSION)
    _write_tps(w, a.partitions)
    w.bytes_(a.user_data)
    return w.build()


def decode_assignment(buf: bytes) -> Assignment:
    r = _Reader(buf)
    version = r.int16()
    if version < 0:
        raise OffsetsTopicFormatError(f"bad assignment version {version}")
    tps = _read_tps(r)
    user_data = r.nullable_bytes()
    return Assignment(tps, user_data)
