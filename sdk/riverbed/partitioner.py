"""Choosing a partition for a record, exactly as Kafka's Java client does.

Keyed records: ``toPositive(murmur2(keyBytes)) % numPartitions`` with Kafka's murmur2 (seed
0x9747b28c), so a key lands on the same partition whichever Kafka client (or Riverbed) wrote it.
Keyless records: "sticky" (Kafka 2.4+, KIP-480): stay on one partition until its batch is sent
or full, then move to another at random, preferring partitions that have a leader. Sticking
fills batches, which is what makes keyless throughput good at linger_ms=0.

A custom partitioner is any callable ``(key_bytes, all_partitions, available_partitions) -> int``
(kafka-python's shape); it is then used for every record without an explicit partition.
"""
from __future__ import annotations

import random
import struct
from typing import Sequence

__all__ = ["murmur2", "to_positive", "partition_for_key", "DefaultPartitioner"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2) as an unsigned 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length >> 2
    if n4:
        for k in struct.unpack_from(f"<{n4}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & ~3
    extra = length & 3
    if extra >= 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def to_positive(n: int) -> int:
    """Kafka's Utils.toPositive: clear the sign bit (not abs(): abs(MIN_VALUE) is negative)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """murmur2 for keyed records; sticky per batch for keyless ones."""

    def __init__(self, rng: random.Random | None = None):
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int] = ()) -> int:
        if key is not None:
            return to_positive(murmur2(key)) % num_partitions
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self._pick(topic, num_partitions, available, None)
        return p

    def on_new_batch(self, topic: str, num_partitions: int, available: Sequence[int] = (),
                     previous: int | None = None) -> int:
        """The sticky partition's batch is full (or was sent): move to another partition."""
        return self._pick(topic, num_partitions, available, previous)

    def _pick(self, topic: str, num_partitions: int, available: Sequence[int],
              previous: int | None) -> int:
        pool = [p for p in available if p != previous] if available else \
            [p for p in range(num_partitions) if p != previous]
        if not pool:
            pool = list(available) or list(range(num_partitions))
        p = self._rng.choice(pool)
        self._sticky[topic] = p
        return p
