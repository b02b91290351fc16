import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_murmur2

from riverbed.partitioner import DefaultPartitioner, murmur2, partition_for_key, to_positive


def _signed(n):
    return n - (1 << 32) if n >= 1 << 31 else n


# Kafka's own UtilsTest.testMurmur2 cases (signed Java ints).
JAVA_CASES = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key,expected", sorted(JAVA_CASES.items()))
def test_murmur2_matches_kafka_java_test_vectors(key, expected):
    assert _signed(murmur2(key)) == expected


def test_murmur2_matches_kafka_python_oracle_on_random_keys():
    rng = random.Random(7)
    for n in list(range(0, 40)) + [100, 1000]:
        for _ in range(5):
            key = bytes(rng.getrandbits(8) for _ in range(n))
            assert murmur2(key) == kafka_murmur2(key) & 0xFFFFFFFF, key


def test_partition_for_key_uses_to_positive_not_abs():
    rng = random.Random(3)
    for _ in range(500):
        key = rng.randbytes(rng.randrange(1, 20))
        for n in (1, 3, 7, 50):
            expected = (kafka_murmur2(key) & 0x7FFFFFFF) % n
            assert partition_for_key(key, n) == expected
    assert to_positive(-1 & 0xFFFFFFFF) == 0x7FFFFFFF


def test_keyed_partition_is_stable_and_keyless_is_sticky_until_new_batch():
    part = DefaultPartitioner(random.Random(1))
    assert part.partition("t", b"user-1", 12) == partition_for_key(b"user-1", 12)
    first = part.partition("t", None, 12)
    assert all(part.partition("t", None, 12) == first for _ in range(20))
    moved = part.on_new_batch("t", 12, (), first)
    assert moved != first
    assert part.partition("t", None, 12) == moved


def test_keyless_prefers_available_partitions():
    part = DefaultPartitioner(random.Random(2))
    for _ in range(20):
        p = part.on_new_batch("t", 6, (2, 4), None)
        assert p in (2, 4)
