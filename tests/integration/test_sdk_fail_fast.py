"""Fail fast, recover fast (issue 16, point 5) with real processes.

- An unreachable bootstrap raises NoBrokersAvailable naming the address and "connection
  refused" from the Admin, the Producer's send() and a group Consumer's poll(), although their
  request timeouts are two minutes: the socket monitor, not a timeout, ended the call.
- A fleet with two gateways: each gateway in turn is SIGKILLed and restarted while an idempotent
  producer sends and an assigned consumer reads; every record is in the log exactly once and
  the consumer saw each exactly once. (The gap is measured by loadgen.gateway_failover_bench.)
"""
from __future__ import annotations

import socket
import threading
import time

import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors

pytestmark = pytest.mark.integration

LONG_TIMEOUT_MS = 120_000      # what the old behaviour would have waited


def _refused_endpoint() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                  # nothing listens there now: connects are refused
    return f"127.0.0.1:{port}"


def test_unreachable_bootstrap_raises_no_brokers_available_naming_it():
    a, b = _refused_endpoint(), _refused_endpoint()
    with pytest.raises(errors.NoBrokersAvailable) as exc:
        with Admin(bootstrap_servers=[a, b], request_timeout_ms=LONG_TIMEOUT_MS) as admin:
            admin.list_topics()
    msg = str(exc.value)
    assert f"tcp://{a} (connection refused)" in msg and f"tcp://{b} (connection refused)" in msg

    p = Producer(bootstrap_servers=a, request_timeout_ms=LONG_TIMEOUT_MS,
                 max_block_ms=LONG_TIMEOUT_MS)
    try:
        with pytest.raises(errors.NoBrokersAvailable, match="connection refused") as exc:
            p.send("t", b"x")
        assert a in str(exc.value)
    finally:
        p.close(timeout=1)

    with Consumer("t", bootstrap_servers=a, group_id="g", request_timeout_ms=LONG_TIMEOUT_MS) as c:
        with pytest.raises(errors.NoBrokersAvailable, match="connection refused"):
            c.poll(timeout_ms=LONG_TIMEOUT_MS)


@pytest.fixture(scope="module")
def fleet2(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("ff-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=2)
    try:
        f.up()
        yield f
    finally:
        f.down()


def _gateways(fleet) -> list[str]:
    return [fleet.process(n).endpoint for n in fleet.names()
            if fleet.process(n).role == "gateway"]


def _wait_for_leaders(admin, topic, partitions, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            (desc,) = admin.describe_topics([topic])
            if len(desc.partitions) == partitions and all(p.leader >= 0 for p in desc.partitions):
                return
        except errors.RiverbedError:
            pass
        assert time.monotonic() < deadline, f"{topic}: no leaders"
        time.sleep(0.1)


def test_gateway_killed_and_restarted_loses_and_duplicates_nothing(fleet2):
    gateways = _gateways(fleet2)
    assert len(gateways) == 2
    names = [n for n in fleet2.names() if fleet2.process(n).role == "gateway"]
    topic, partitions = "failfast", 3
    with Admin(bootstrap_servers=gateways) as admin:
        admin.create_topics([NewTopic(topic, partitions, 3)])
        _wait_for_leaders(admin, topic, partitions)

    seen: list[bytes] = []
    stop = threading.Event()
    consumer_errors: list[BaseException] = []

    def consume():
        try:
            with Consumer(bootstrap_servers=gateways, auto_offset_reset="earliest",
                          fetch_max_wait_ms=100) as c:
                c.assign([TopicPartition(topic, p) for p in range(partitions)])
                while not stop.is_set():
                    for recs in c.poll(timeout_ms=200).values():
                        seen.extend(r.value for r in recs)
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            consumer_errors.append(e)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    sent = 0
    futures = []
    with Producer(bootstrap_servers=gateways, acks="all", enable_idempotence=True,
                  linger_ms=5, request_timeout_ms=30000) as p:
        def send(n):
            nonlocal sent
            for _ in range(n):
                futures.append(p.send(topic, b"v%06d" % sent, key=b"k%d" % (sent % 7)))
                sent += 1
                if sent % 50 == 0:
                    time.sleep(0.005)       # a steady stream, in flight while gateways die
        send(1000)
        for name in names:               # each gateway in turn: the clients are on one of them
            fleet2.stop(name, kill=True)
            send(1000)
            fleet2.start(name)
            send(500)
        p.flush(timeout=120)
    for f in futures:
        f.get(timeout=60)                # every record acknowledged

    expected = {b"v%06d" % i for i in range(sent)}
    deadline = time.monotonic() + 90
    while len(seen) < sent and time.monotonic() < deadline and not consumer_errors:
        time.sleep(0.1)
    stop.set()
    reader.join(timeout=30)
    assert not consumer_errors, consumer_errors
    assert len(seen) == len(set(seen)), "the live consumer saw duplicates"
    assert set(seen) == expected, f"missing {len(expected - set(seen))}"

    # the log itself: each record exactly once
    in_log: list[bytes] = []
    with Consumer(bootstrap_servers=gateways, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 60
        while len(in_log) < sent and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                in_log.extend(r.value for r in recs)
        for recs in c.poll(timeout_ms=500).values():    # nothing beyond
            in_log.extend(r.value for r in recs)
    assert len(in_log) == sent and set(in_log) == expected
