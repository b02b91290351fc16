"""The producer's and consumer's fast paths against a real fleet (ZooKeeper, 1 controller,
1 storage node, 1 gateway): idempotent producer (or its fallback while the cluster does not serve
INIT_PRODUCER_ID), every codec, sticky send_many, lazy decoding with small polls."""
from __future__ import annotations

import logging
import time

import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("sdk-perf-fleet"), free_base_port(), storage_nodes=1,
              controllers=1, gateways=1)
    try:
        f.up()
        yield [f.gateway_endpoint]
    finally:
        f.down()


def create(bootstrap, topic, partitions):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        deadline = time.monotonic() + 30
        while True:
            try:
                (desc,) = admin.describe_topics([topic])
                if len(desc.partitions) == partitions and all(p.leader >= 0
                                                              for p in desc.partitions):
                    return
            except errors.RiverbedError:
                pass
            assert time.monotonic() < deadline, f"{topic}: no leaders"
            time.sleep(0.1)


def read_all(bootstrap, topic, partitions, expected, **kw):
    got = {p: [] for p in range(partitions)}
    with Consumer(bootstrap=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                  **kw) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 60
        total = 0
        while total < expected and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=500).items():
                got[tp.partition] += recs
                total += len(recs)
    return got


def test_acks_all_producer_is_idempotent_or_falls_back_and_keeps_order(bootstrap, caplog):
    topic = "perf-idem"
    create(bootstrap, topic, 1)
    n = 5000
    with caplog.at_level(logging.WARNING, logger="riverbed.sender"):
        with Producer(bootstrap, acks="all", batch_size=2048, linger_ms=2) as p:
            assert p.config["enable_idempotence"] is True
            futs = [p.send(topic, b"%05d" % i, partition=0) for i in range(n)]
            p.flush(timeout=60)
            offsets = [f.result(timeout=0).offset for f in futs]
            idempotent = p.idempotent
            pid = p.metrics()["producer_id"]
    assert offsets == list(range(n))
    if idempotent:
        assert pid >= 0
    else:   # today's cluster: INIT_PRODUCER_ID not served -> a WARNING and a plain producer
        assert any("idempotence is OFF" in r.getMessage() for r in caplog.records)
    got = read_all(bootstrap, topic, 1, n)
    assert [r.value for r in got[0]] == [b"%05d" % i for i in range(n)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip_with_small_polls(bootstrap, codec):
    topic = f"perf-{codec}"
    create(bootstrap, topic, 1)
    values = [b"%s-%05d" % (codec.encode(), i) for i in range(3000)]
    with Producer(bootstrap, compression_type=codec, batch_size=8192) as p:
        futs = p.send_many(topic, values[:1500], partition=0)
        futs += [p.send(topic, v, key=b"k", partition=0) for v in values[1500:]]
        p.flush(timeout=60)
        assert all(f.succeeded() for f in futs)
    got = read_all(bootstrap, topic, 1, len(values), max_poll_records=7, check_crcs=True)
    assert [r.value for r in got[0]] == values
    assert [r.offset for r in got[0]] == list(range(len(values)))


def test_sticky_send_many_and_keyless_send_spread_over_partitions(bootstrap):
    topic = "perf-sticky"
    create(bootstrap, topic, 3)
    values = [b"v%06d" % i for i in range(20000)]
    with Producer(bootstrap, batch_size=4096) as p:
        futs = p.send_many(topic, values[:10000])
        futs += [p.send(topic, v) for v in values[10000:]]
        p.flush(timeout=60)
        assert all(f.succeeded() for f in futs)
    got = read_all(bootstrap, topic, 3, len(values))
    assert sorted(r.value for recs in got.values() for r in recs) == values
    assert sum(1 for recs in got.values() if recs) >= 2       # sticky moves on per batch
