"""Real Kafka clients, unmodified, against a real fleet's Kafka listeners (issue 25, phase 1):
librdkafka (confluent-kafka: idempotent producer with acks=all and lz4, a group consumer with
commits, AdminClient), kcat (Debian's, librdkafka 2.0: metadata, produce, consume),
kafka-python and aiokafka (producer, group consumer, commits, admin).

One fleet for the module, as `riverbed fleet up` makes it (CurveZMQ for the SDK path; the
PLAINTEXT listeners on 127.0.0.1 whose User:ANONYMOUS the fleet grants from 127.0.0.1), with two
gateways: both are brokers, partitions' leaders are spread over them.
"""
from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import sys
import time
import uuid

import pytest

from deploy.fleet import Fleet, free_base_port

pytestmark = pytest.mark.integration

N = 1000


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("kafka-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=2)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def bootstrap(fleet):
    return fleet.kafka_bootstrap_servers


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int, rf: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, num_partitions=partitions,
                                           replication_factor=rf)]).values():
        f.result(timeout=60)


def kcat(*args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=input, capture_output=True, text=True,
                          timeout=timeout)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int) -> dict:
    """kcat -L -J until every partition of `topic` has a leader (the controller elects them
    just after CreateTopics answers)."""
    deadline = time.monotonic() + 60
    while True:
        proc = kcat("-b", bootstrap, "-L", "-J", "-t", topic)
        if proc.returncode == 0:
            md = json.loads(proc.stdout)
            parts = md["topics"][0]["partitions"] if md["topics"] else []
            if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                return md
        assert time.monotonic() < deadline, proc.stdout + proc.stderr
        time.sleep(0.5)


def test_fleet_status_lists_each_gateways_kafka_listener(fleet):
    gws = [p for p in fleet.status(with_zk=False)["processes"] if p["role"] == "gateway"]
    assert len(gws) == 2
    for p in gws:
        assert p["kafka_listeners"] == [
            f"PLAINTEXT://127.0.0.1:{fleet.base_port + 49 + p['id']}",
            f"SASL_SSL://127.0.0.1:{fleet.base_port + 59 + p['id']}"]
    out = subprocess.run([sys.executable, "-m", "riverbed.cli", "fleet", "status", "--json",
                          "--data-dir", str(fleet.data_dir)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    listed = {p["name"]: p["kafka_listeners"] for p in json.loads(out.stdout)["processes"]
              if p["role"] == "gateway"}
    assert listed == {p["name"]: p["kafka_listeners"] for p in gws}


def test_kcat_metadata_names_the_gateways_as_brokers_and_spreads_leaders(bootstrap):
    topic = topic_name("spread")
    create_topic(bootstrap, topic, 6)
    md = wait_for_leaders(bootstrap, topic, 6)
    assert sorted(b["id"] for b in md["brokers"]) == [1, 2]
    assert md["controllerid"] == 1
    leaders = [p["leader"] for p in md["topics"][0]["partitions"]]
    assert sorted(leaders.count(g) for g in (1, 2)) == [3, 3]
    for p in md["topics"][0]["partitions"]:
        assert [r["id"] for r in p["replicas"]][0] == p["leader"]
    # Asked through the other gateway: the same answer (every gateway computes it alike).
    other = bootstrap.split(",")[1]
    again = wait_for_leaders(other, topic, 6)
    assert [p["leader"] for p in again["topics"][0]["partitions"]] == leaders


def test_kcat_produces_and_consumes(bootstrap):
    topic = topic_name("kcat")
    create_topic(bootstrap, topic, 2)
    wait_for_leaders(bootstrap, topic, 2)
    lines = [f"k{i}:value-{i}" for i in range(50)]
    proc = kcat("-P", "-b", bootstrap, "-t", topic, "-K:", "-X", "acks=all",
                input="\n".join(lines) + "\n")
    assert proc.returncode == 0, proc.stderr
    proc = kcat("-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                "-f", "%k:%s\n")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == sorted(lines)


def test_confluent_kafka_idempotent_producer_group_consumer_and_admin(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = topic_name("ck")
    create_topic(bootstrap, topic, 3)
    assert topic in admin.list_topics(timeout=30).topics
    wait_for_leaders(bootstrap, topic, 3)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "compression.type": "lz4"})
    delivered, failed = [], []

    def report(err, msg):
        (failed if err else delivered).append(err or (msg.partition(), msg.offset()))

    for i in range(N):
        producer.produce(topic, key=b"%d" % i, value=b"value-%d" % i, on_delivery=report)
    assert producer.flush(60) == 0
    assert failed == [] and len(delivered) == N
    per_partition: dict[int, list[int]] = {}
    for p, o in delivered:
        per_partition.setdefault(p, []).append(o)
    for offsets in per_partition.values():   # each partition's offsets: 0..n-1, no duplicate
        assert sorted(offsets) == list(range(len(offsets)))

    group = f"g-{topic}"

    def consumer():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        return c

    c = consumer()
    seen: dict[bytes, bytes] = {}
    deadline = time.monotonic() + 90
    while len(seen) < N and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            seen[m.key()] = m.value()
    assert len(seen) == N and seen[b"7"] == b"value-7"
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
    assert sum(tp.offset for tp in committed) == N
    c.close()

    # A new member of the group starts from the committed offsets: nothing left to read.
    producer.produce(topic, key=b"after", value=b"after-commit", partition=0)
    assert producer.flush(30) == 0
    c = consumer()
    late = []
    deadline = time.monotonic() + 60
    while not late and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            late.append(m.key())
    c.close()
    assert late == [b"after"]

    for f in admin.delete_topics([topic]).values():
        f.result(timeout=60)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=30).topics:
        assert time.monotonic() < deadline
        time.sleep(0.5)


def test_kafka_python_producer_consumer_and_admin(bootstrap):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    topic = topic_name("kp")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="kp-admin")
    admin.create_topics([NewTopic(name=topic, num_partitions=2, replication_factor=3)])
    assert topic in admin.list_topics()
    wait_for_leaders(bootstrap, topic, 2)

    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
    futures = [producer.send(topic, key=b"%d" % i, value=b"kp-%d" % i) for i in range(300)]
    producer.flush(60)
    assert all(f.get(timeout=60).offset >= 0 for f in futures)
    producer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","),
                             group_id=f"g-{topic}", auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20000)
    got = set()
    for m in consumer:
        got.add(m.key)
        if len(got) == 300:
            break
    assert len(got) == 300
    consumer.commit()
    assert sum(consumer.committed(tp) for tp in consumer.assignment()) == 300
    consumer.close()
    admin.delete_topics([topic])
    admin.close()


def test_aiokafka_producer_consumer_and_admin(bootstrap):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = topic_name("ak")

    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        await asyncio.to_thread(wait_for_leaders, bootstrap, topic, 2)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            for i in range(200):
                await producer.send(topic, key=b"%d" % i, value=b"ak-%d" % i)
            md = await producer.send_and_wait(topic, key=b"last", value=b"ak-last")
            assert md.offset >= 0
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got = set()
            async with asyncio.timeout(90):
                while len(got) < 201:
                    batch = await consumer.getmany(timeout_ms=1000)
                    for msgs in batch.values():
                        got.update(m.key for m in msgs)
            await consumer.commit()
            assert sum([await consumer.committed(tp) for tp in consumer.assignment()]) == 201
        finally:
            await consumer.stop()

    asyncio.run(main())


def kafka_call(bootstrap: str, body, version_of_response: tuple[int, int]):
    """One request over a raw socket to the first gateway; the decoded response body."""
    from tests.unit.gateway.test_kafka_protocol import decode_response, encode_request
    host, port = bootstrap.split(",")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        frame = encode_request(body, 11)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        corr, resp = decode_response(*version_of_response, struct.pack(">i", size)
                                     + s.recv(size, socket.MSG_WAITALL))
    assert corr == 11
    return resp


def test_offset_for_leader_epoch_answers_where_the_leaders_epoch_ends(bootstrap):
    from confluent_kafka import Producer
    from kio.schema.errors import ErrorCode
    from kio.schema.offset_for_leader_epoch.v4 import request as m

    topic = topic_name("epochs")
    create_topic(bootstrap, topic, 1)
    wait_for_leaders(bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(25):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(60) == 0

    def ask(leader_epoch, current_leader_epoch=-1):
        resp = kafka_call(bootstrap, m.OffsetForLeaderEpochRequest(replica_id=-1, topics=(
            m.OffsetForLeaderTopic(topic=topic, partitions=(m.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current_leader_epoch,
                leader_epoch=leader_epoch),)),)), (23, 4))
        return resp.topics[0].partitions[0]

    now = ask(0)                  # a new topic's first leader has epoch 0: it ends at the LEO
    assert (now.error_code, now.leader_epoch, now.end_offset) == (ErrorCode.none, 0, 25)
    assert ask(5).end_offset == 25                      # no newer epoch: the latest one's end
    assert ask(0, current_leader_epoch=7).error_code == ErrorCode.unknown_leader_epoch


# -- bad input ----------------------------------------------------------------------------------

def _closed(sock: socket.socket) -> bool:
    sock.settimeout(30)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_bad_input_closes_the_connection_and_the_gateway_serves_on(bootstrap):
    host, port = bootstrap.split(",")[0].split(":")
    addr = (host, int(port))
    # A frame over socket.request.max.bytes (100 MiB): closed without reading it.
    with socket.create_connection(addr) as s:
        s.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 64)
        assert _closed(s)
    # An API the listener does not serve (SaslHandshake) and garbage: closed.
    for frame in (struct.pack(">hhi", 17, 1, 7) + b"\xff\xff",
                  b"\x00\x03\x00\x0c" + b"\xff" * 40, b"\x01"):
        with socket.create_connection(addr) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            assert _closed(s)
    # A truncated frame, then the client goes away: nothing to answer.
    with socket.create_connection(addr) as s:
        s.sendall(struct.pack(">i", 100) + b"\x00\x12\x00")
    # ApiVersions of a version from the future: answered with v0 and UNSUPPORTED_VERSION.
    with socket.create_connection(addr) as s:
        frame = struct.pack(">hhih", 18, 99, 42, -1)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        s.settimeout(30)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        body = s.recv(size, socket.MSG_WAITALL)
        corr, code = struct.unpack_from(">ih", body)
        assert (corr, code) == (42, 35)
    proc = kcat("-b", bootstrap, "-L")
    assert proc.returncode == 0 and "2 brokers" in proc.stdout, proc.stderr
