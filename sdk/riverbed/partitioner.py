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
import threading
from typing import Sequence

__all__ = ["murmur2", "to_positive", "partition_for_key", "DefaultPartitioner"]

_SEED = 0x9747B28C


_UNPACK = [struct.Struct(f"<{n}I").unpack_from for n in range(65)]   # up to 256-byte keys


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2) as an unsigned 32-bit int."""
    length = len(data)
    h = _SEED ^ length
    n4 = length >> 2
    if n4:
        words = _UNPACK[n4](data) if n4 <= 64 else struct.unpack_from(f"<{n4}I", data)
        for k in words:
            k = (k * 0x5BD1E995) & 0xFFFFFFFF
            k ^= k >> 24
            h = ((h * 0x5BD1E995) & 0xFFFFFFFF) ^ ((k * 0x5BD1E995) & 0xFFFFFFFF)
    extra = length & 3
    if extra:
        tail = length & ~3
        if extra == 3:
            h ^= data[tail + 2] << 16
        if extra >= 2:
            h ^= data[tail + 1] << 8
        h ^= data[tail]
        h = (h * 0x5BD1E995) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0x5BD1E995) & 0xFFFFFFFF
    return h ^ (h >> 15)


def to_positive(n: int) -> int:
    """Kafka's Utils.toPositive: clear the sign bit (not abs(): abs(MIN_VALUE) is negative)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


# Keys seen recently -> toPositive(murmur2(key)). Real workloads repeat keys (user ids, symbols);
# a dict hit (~50 ns) is ~20x cheaper than pure-Python murmur2. Cleared when it reaches this size.
_KEY_CACHE_MAX = 65536


class DefaultPartitioner:
    """murmur2 for keyed records; sticky per batch for keyless ones. Thread-safe: the keyed path
    and reading the sticky partition take no lock (dict operations are atomic); moving the
    sticky partition does."""

    def __init__(self, rng: random.Random | None = None):
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}
        self._hashes: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def hash_key(self, key: bytes) -> int:
        """toPositive(murmur2(key)), cached."""
        h = self._hashes.get(key)
        if h is None:
            h = murmur2(key) & 0x7FFFFFFF
            if len(self._hashes) >= _KEY_CACHE_MAX:
                self._hashes = {}
            self._hashes[key] = h
        return h

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int] = ()) -> int:
        if key is not None:
            return self.hash_key(key) % num_partitions
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            with self._lock:
                p = self._sticky.get(topic)
                if p is None or p >= num_partitions:
                    p = self._pick(topic, num_partitions, available, None)
        return p

    def sticky_partition(self, topic: str) -> int | None:
        return self._sticky.get(topic)

    def on_new_batch(self, topic: str, num_partitions: int, available: Sequence[int] = (),
                     previous: int | None = None) -> int:
        """The sticky partition's batch is full (or was sent): move to another partition
        (unless another thread already moved it away from `previous`)."""
        with self._lock:
            current = self._sticky.get(topic)
            if previous is not None and current is not None and current != previous \
                    and current < num_partitions:
                return current
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


def _bench(n: int = 200_000) -> None:
    """python -m riverbed.partitioner: records/s of partition selection for 12-byte keys."""
    import os
    import time
    keys = [os.urandom(12) for _ in range(n)]
    t = time.perf_counter()
    for k in keys:
        murmur2(k)
    dt = time.perf_counter() - t
    print(f"murmur2, 12-byte keys, all distinct:        {n / dt:12,.0f} keys/s")
    part = DefaultPartitioner()
    t = time.perf_counter()
    for k in keys:
        part.partition("t", k, 12)
    dt = time.perf_counter() - t
    print(f"DefaultPartitioner.partition, all distinct: {n / dt:12,.0f} records/s")
    hot = keys[:1000] * (n // 1000)
    t = time.perf_counter()
    for k in hot:
        part.partition("t", k, 12)
    dt = time.perf_counter() - t
    print(f"DefaultPartitioner.partition, 1,000 keys:   {len(hot) / dt:12,.0f} records/s")


if __name__ == "__main__":
    _bench()
