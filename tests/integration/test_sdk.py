"""The SDK clients against a real fleet (ZooKeeper, 2 controllers, 3 storage nodes, 1 gateway)."""
from __future__ import annotations

import time

import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors
from riverbed.partitioner import partition_for_key

pytestmark = pytest.mark.integration

N = 10_000


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("sdk-fleet"), free_base_port(), storage_nodes=3,
              controllers=2, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture
def bootstrap(fleet):
    return [fleet.gateway_endpoint]


def wait_for_leaders(admin, topic, partitions, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            (desc,) = admin.describe_topics([topic])
            if len(desc.partitions) == partitions and all(p.leader >= 0 for p in desc.partitions):
                return desc
        except errors.RiverbedError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: no leaders after {timeout_s} s")
        time.sleep(0.1)


def consume_all(bootstrap, topic, partitions, expected):
    got: dict[int, list] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap=bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 60
        total = 0
        while total < expected and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=500).items():
                got[tp.partition] += recs
                total += len(recs)
    return got


def test_create_produce_keys_and_consume_back_in_order(bootstrap):
    topic = "sdk-keys"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 3, 2)])
        desc = wait_for_leaders(admin, topic, 3)
        assert desc.replication_factor == 2
        assert all(len(p.replicas) == 2 for p in desc.partitions)
        assert topic in admin.list_topics()
    sent = []
    with Producer(bootstrap, acks=-1, linger_ms=5) as producer:
        futs = []
        for i in range(N):
            key = b"key-%d" % (i % 97)
            futs.append(producer.send(topic, b"value-%d" % i, key=key))
        producer.flush(timeout=60)
        for i, f in enumerate(futs):
            md = f.result(timeout=0)
            key = b"key-%d" % (i % 97)
            assert md.partition == partition_for_key(key, 3)       # murmur2, like Kafka
            sent.append((md.partition, md.offset, key, b"value-%d" % i))
    got = consume_all(bootstrap, topic, 3, N)
    assert sum(len(v) for v in got.values()) == N
    by_pos = {(p, r.offset): (r.key, r.value) for p, recs in got.items() for r in recs}
    for p, offset, key, value in sent:
        assert by_pos[(p, offset)] == (key, value)
    for p, recs in got.items():
        assert [r.offset for r in recs] == list(range(len(recs)))   # in order, no gaps


def test_send_many_round_trip(bootstrap):
    topic = "sdk-bulk"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        wait_for_leaders(admin, topic, 2)
    values = [b"bulk-%05d" % i for i in range(N)]
    with Producer(bootstrap, compression_type="lz4") as producer:
        futs = producer.send_many(topic, values[: N // 2], partition=0)
        futs += producer.send_many(topic, values[N // 2:], partition=1)
        producer.flush(timeout=60)
        assert all(f.result(timeout=0).offset >= 0 for f in futs)
    got = consume_all(bootstrap, topic, 2, N)
    assert [r.value for r in got[0]] == values[: N // 2]
    assert [r.value for r in got[1]] == values[N // 2:]


def test_admin_errors_configs_and_partitions(bootstrap):
    topic = "sdk-admin"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, {"retention.ms": "86400000"})])
        with pytest.raises(errors.TopicAlreadyExistsError, match=topic):
            admin.create_topics([NewTopic(topic, 1, 1)])
        with pytest.raises(errors.InvalidReplicationFactorError):
            admin.create_topics([NewTopic("sdk-too-many-replicas", 1, 9)])
        admin.alter_configs(topic, set={"retention.ms": "1000"})
        configs = admin.describe_configs(topic)
        assert configs["retention.ms"].value == "1000"
        admin.create_partitions(topic, 3)
        assert len(wait_for_leaders(admin, topic, 3).partitions) == 3
        cluster = admin.describe_cluster()
        assert len(cluster.brokers) == 3 and cluster.controller_id >= 0
        admin.delete_topics([topic])


def test_seek_and_position(bootstrap):
    topic = "sdk-seek"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        wait_for_leaders(admin, topic, 1)
    tp = TopicPartition(topic, 0)
    with Producer(bootstrap) as producer:
        for i in range(100):
            producer.send(topic, b"%d" % i, partition=0)
        producer.flush(timeout=30)
    with Consumer(bootstrap=bootstrap, consumer_timeout_ms=2000) as c:
        c.assign([tp])
        assert c.position(tp) == 100                    # latest by default
        c.seek(tp, 42)
        recs = []
        for rec in c:
            recs.append(rec)
            if len(recs) == 58:
                break
        assert [r.offset for r in recs] == list(range(42, 100))
        assert recs[0].value == b"42"
        assert c.position(tp) == 100
