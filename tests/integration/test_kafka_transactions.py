"""Transactions through the gateways' Kafka listeners (issue 26 phase 2a), with real clients,
unmodified, against a real fleet: librdkafka's (confluent-kafka) transactional producer and
read_committed consumer, kafka-python 3.0.12's transactional producer and read_committed
consumer, and Kafka's own request bytes (kio) for what the clients do not expose.

One fleet for the module (3 storage nodes, 2 gateways: both are brokers and partitions' leaders
are spread over them; a transaction coordinator; CurveZMQ for the SDK path, the PLAINTEXT
listeners granted to User:ANONYMOUS from 127.0.0.1).

Every test that writes ends with a checker reading everything back with a read_committed
consumer of the same kind: each committed record is read exactly once, no aborted record ever,
nothing committed is lost, and each producer's records keep their order per partition. A
read_uncommitted reader sees the aborted records too (they were written: the filtering is real).
"""
from __future__ import annotations

import collections
import pathlib
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

import pytest

from deploy.fleet import Fleet, free_base_port
from tests.integration import test_kafka_clients as kafka_clients

pytestmark = pytest.mark.integration

WAIT_S = 120.0
WORKER = str(pathlib.Path(__file__).with_name("kafka_txn_worker.py"))
PARTITION_EOF = -191             # librdkafka's _PARTITION_EOF


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("kafka-txn-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=2)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def bootstrap(fleet):
    return fleet.kafka_bootstrap_servers


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int = 3) -> None:
    """test_kafka_clients' CreateTopics through confluent-kafka, then every partition led."""
    kafka_clients.create_topic(bootstrap, topic, partitions, rf)
    wait_for_leaders(bootstrap, topic, partitions)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll_until(lambda: (lambda t: t is not None and not t.error and len(t.partitions) == partitions
                        and all(p.leader >= 0 for p in t.partitions.values()))(
        admin.list_topics(topic, timeout=30).topics.get(topic)), f"leaders of {topic}")


def poll_until(fn, what, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def read_all(bootstrap: str, topic: str, partitions: int, *, committed: bool = True
             ) -> dict[int, list[tuple[int, bytes | None, bytes]]]:
    """Every record of the topic from the beginning, per partition in offset order, read by a
    librdkafka consumer (read_committed: up to each partition's last stable offset)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": name("reader"),
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list] = collections.defaultdict(list)
        eof: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"reading {topic}: only {sorted(eof)} at the end"
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out[m.partition()].append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """Each partition's end as a consumer of that isolation level sees it (ListOffsets latest:
    the last stable offset for read_committed, the high watermark otherwise)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": name("ends"),
                  "isolation.level": isolation})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in range(partitions)]
    finally:
        c.close()


def wait_stable(bootstrap: str, topic: str, partitions: int) -> None:
    """Until no transaction is open or completing on the topic (the last one's markers are
    written once commit_transaction() returned, a moment later)."""
    poll_until(lambda: end_offsets(bootstrap, topic, partitions, "read_committed")
               == end_offsets(bootstrap, topic, partitions, "read_uncommitted"),
               f"the last stable offsets of {topic} to reach the high watermarks")


def check_read_back(bootstrap, topic, partitions, committed, aborted):
    """The checker: `committed` and `aborted` are sets of values b"<producer>:<n>"; every
    committed value is read exactly once by read_committed, no aborted one ever, and per
    partition each producer's values keep their order. read_uncommitted reads the aborted ones
    too (they are in the log)."""
    wait_stable(bootstrap, topic, partitions)
    got = read_all(bootstrap, topic, partitions)
    values = [v for recs in got.values() for _, _, v in recs]
    counts = collections.Counter(values)
    assert [v for v, n in counts.items() if n > 1] == [], "duplicates"
    assert not set(values) & set(aborted), "aborted records were read"
    assert set(values) == set(committed), f"lost: {sorted(set(committed) - set(values))[:5]}"
    for recs in got.values():
        last: dict[bytes, int] = {}
        for _, _, v in recs:
            producer, _, n = v.rpartition(b":")
            assert int(n) > last.get(producer, -1), f"order broken at {v!r}"
            last[producer] = int(n)
    if aborted:
        raw = {v for recs in read_all(bootstrap, topic, partitions, committed=False).values()
               for _, _, v in recs}
        assert set(aborted) <= raw and set(committed) <= raw
    return got


def kafka_call(bootstrap: str, body, version_of_response: tuple[int, int]):
    """One request (kio entity) over a raw socket to the first gateway; the decoded response."""
    from tests.unit.gateway.test_kafka_protocol import decode_response, encode_request
    host, port = bootstrap.split(",")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=60) as s:
        frame = encode_request(body, 11)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        corr, resp = decode_response(*version_of_response, struct.pack(">i", size)
                                     + s.recv(size, socket.MSG_WAITALL))
    assert corr == 11
    return resp


def txn_producer(bootstrap: str, tid: str, **conf):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **conf})
    p.init_transactions(120)
    return p


# ---- librdkafka ---------------------------------------------------------------------------------

def test_librdkafka_commits_and_aborts_and_read_committed_sees_committed_only(bootstrap):
    topic = name("ck-txn")
    create_topic(bootstrap, topic, 3)
    committed: set[bytes] = set()
    aborted: set[bytes] = set()
    a = txn_producer(bootstrap, name("ck-a"), **{"linger.ms": 2})
    b = txn_producer(bootstrap, name("ck-b"), **{"linger.ms": 2})
    n = {b"a": 0, b"b": 0}
    for round_ in range(8):
        for who, p in ((b"a", a), (b"b", b)):
            p.begin_transaction()
            values = []
            for i in range(25):
                v = who + b":%d" % n[who]
                n[who] += 1
                values.append(v)
                p.produce(topic, key=b"k%d" % (i % 5), value=v, partition=i % 3)
            if (round_ + (who == b"b")) % 3 == 2:
                p.flush(60)                       # written, then aborted
                p.abort_transaction(60)
                aborted.update(values)
            else:
                p.commit_transaction(60)
                committed.update(values)
    assert aborted and committed
    check_read_back(bootstrap, topic, 3, committed, aborted)


def test_an_open_librdkafka_transaction_holds_read_committed_at_the_lso(bootstrap):
    topic = name("ck-lso")
    create_topic(bootstrap, topic, 1)
    p = txn_producer(bootstrap, name("ck-lso"))
    p.begin_transaction()
    p.produce(topic, value=b"before:0", partition=0)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"open:%d" % i, partition=0)
    assert p.flush(60) == 0                    # in the log, not committed yet

    # ListOffsets with read_committed answers the last stable offset: the open transaction's
    # first offset (the first transaction: a record and its marker)
    poll_until(lambda: end_offsets(bootstrap, topic, 1, "read_committed") == [2],
               "the first transaction's marker")
    assert end_offsets(bootstrap, topic, 1, "read_uncommitted") == [7]
    # Fetch with read_committed stops there (librdkafka's end of partition is the LSO)
    assert [v for recs in read_all(bootstrap, topic, 1).values() for _, _, v in recs] == \
        [b"before:0"]
    p.commit_transaction(60)
    poll_until(lambda: end_offsets(bootstrap, topic, 1, "read_committed") == [8],
               "the commit marker")
    check_read_back(bootstrap, topic, 1, {b"before:0"} | {b"open:%d" % i for i in range(5)},
                    set())


def test_a_librdkafka_zombie_is_fenced_and_its_transaction_aborted(bootstrap):
    from confluent_kafka import KafkaException
    topic = name("ck-zombie")
    create_topic(bootstrap, topic, 2)
    tid = name("ck-zombie")
    zombie = txn_producer(bootstrap, tid)
    zombie.begin_transaction()
    for i in range(10):
        zombie.produce(topic, value=b"zombie:%d" % i, partition=i % 2)
    assert zombie.flush(60) == 0
    successor = txn_producer(bootstrap, tid)     # fences the zombie, aborts its transaction
    successor.begin_transaction()
    for i in range(10):
        successor.produce(topic, value=b"successor:%d" % i, partition=i % 2)
    successor.commit_transaction(60)
    with pytest.raises(KafkaException) as e:
        zombie.produce(topic, value=b"zombie:10", partition=0)
        zombie.commit_transaction(60)
    err = e.value.args[0]
    assert err.fatal(), err
    assert "fenced" in err.str().lower() or err.code() in (47, 90), err
    check_read_back(bootstrap, topic, 2, {b"successor:%d" % i for i in range(10)},
                    {b"zombie:%d" % i for i in range(10)})


class Worker:
    def __init__(self, bootstrap: str, *args: str):
        self.proc = subprocess.Popen([sys.executable, WORKER, bootstrap, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def committed(self) -> int:
        return sum(int(x.split()[1]) for x in list(self.lines) if x.startswith("COMMITTED "))

    def stop(self, sig: int = 15) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.thread.join(timeout=10)


def test_librdkafka_read_process_write_is_exactly_once_through_a_worker_sigkill(bootstrap):
    """librdkafka consumes 4 input partitions in a group (read_committed), writes 3 output
    partitions and commits the input offsets in the same transactions (send_offsets_to_transaction
    with consumer_group_metadata), aborting every 4th transaction on purpose; SIGKILLed in the
    middle, a new instance with the same transactional.id fences it and finishes. Everything is
    read back: output = input transformed, exactly once, in input order per key."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    src, dst, group, tid = name("rpw-in"), name("rpw-out"), name("rpw-group"), name("rpw")
    create_topic(bootstrap, src, 4)
    create_topic(bootstrap, dst, 3)
    n = 600
    inputs = [b"in:%d" % i for i in range(n)]
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, v in enumerate(inputs):
        p.produce(src, key=b"k%d" % (i % 13), value=v)
    assert p.flush(60) == 0
    args = (src, dst, group, tid, "--per-transaction", "15", "--sleep-ms", "20",
            "--abort-every", "4")
    first = Worker(bootstrap, *args)
    second = None
    try:
        poll_until(lambda: first.committed() >= n // 4, "the first worker's commits")
        first.stop(sig=9)                        # SIGKILL mid-stream, maybe mid-transaction
        assert first.committed() < n
        second = Worker(bootstrap, *args)

        def all_out() -> bool:
            return sum(end_offsets(bootstrap, dst, 3, "read_committed")) > n and \
                sum(len(r) for r in read_all(bootstrap, dst, 3).values()) >= n
        poll_until(all_out, "the output of every input record", timeout_s=240)
    finally:
        if second is not None:
            second.stop()
        first.stop()
    assert any(x.startswith("ABORTED") for x in first.lines + second.lines)
    wait_stable(bootstrap, dst, 3)
    got = read_all(bootstrap, dst, 3)
    values = [v for recs in got.values() for _, _, v in recs]
    dupes = [v for v, c in collections.Counter(values).items() if c > 1]
    assert dupes == [], f"{len(dupes)} output records twice, e.g. {dupes[:5]}"
    assert set(values) == {b"out:" + v for v in inputs}
    # a key's records come from one input partition in order and go to one output partition
    for recs in got.values():
        last: dict[bytes, int] = {}
        for _, key, v in recs:
            i = int(v.split(b":")[-1])
            assert i > last.get(key, -1), f"order broken at {v!r}"
            last[key] = i
    # the group's committed offsets are at the end of the input (read with require_stable)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed"})
    try:
        ends = {tp.partition: c.get_watermark_offsets(tp, timeout=30)[1]
                for tp in (TopicPartition(src, q) for q in range(4))}
        assert {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition(src, q) for q in range(4)], timeout=30)} == ends
    finally:
        c.close()


# ---- kafka-python 3.0.12 ----------------------------------------------------------------------

def test_kafka_python_transactional_producer(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
    from kafka.errors import ProducerFencedError
    brokers = bootstrap.split(",")
    src, dst = name("kp-in"), name("kp-out")
    create_topic(bootstrap, src, 2)
    create_topic(bootstrap, dst, 2)
    tid = name("kp")
    p = KafkaProducer(bootstrap_servers=brokers, transactional_id=tid)
    p.init_transactions()
    committed, aborted = set(), set()
    for t in range(6):
        p.begin_transaction()
        values = [b"kp:%d" % (t * 10 + i) for i in range(10)]
        for i, v in enumerate(values):
            p.send(src, v, partition=i % 2)
        if t % 3 == 1:
            p.flush()
            p.abort_transaction()
            aborted.update(values)
        else:
            p.commit_transaction()
            committed.update(values)
    # read_committed in a group, offsets committed in a transaction with the copies
    group = name("kp-group")
    c = KafkaConsumer(src, bootstrap_servers=brokers, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", isolation_level="read_committed",
                      consumer_timeout_ms=5000)
    try:
        seen = [m for m in c]
        assert {m.value for m in seen} == committed and len(seen) == len(committed)
        p.begin_transaction()
        for m in seen:
            p.send(dst, b"copy-" + m.value, partition=m.partition)
        p.send_offsets_to_transaction(
            {TopicPartition(src, q): OffsetAndMetadata(c.position(TopicPartition(src, q)), "", -1)
             for q in range(2)}, group)
        p.commit_transaction()
        assert {q: c.committed(TopicPartition(src, q)) for q in range(2)} == \
            {q: c.position(TopicPartition(src, q)) for q in range(2)}
    finally:
        c.close()
    # a new instance fences this one
    successor = KafkaProducer(bootstrap_servers=brokers, transactional_id=tid)
    successor.init_transactions()
    with pytest.raises(ProducerFencedError):
        p.begin_transaction()
        p.send(src, b"kp:999", partition=0)
        p.commit_transaction()
    successor.close()
    p.close(timeout=5)
    check_read_back(bootstrap, src, 2, committed, aborted)    # (kp:999 was never written)
    got = KafkaConsumer(bootstrap_servers=brokers, isolation_level="read_committed",
                        auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        got.assign([TopicPartition(dst, q) for q in range(2)])
        assert sorted(m.value for m in got) == sorted(b"copy-" + v for v in committed)
    finally:
        got.close()


# ---- Kafka's requests, byte for byte (kio) ------------------------------------------------------

def test_init_producer_id_bumps_the_epoch_and_fences_kip_360(bootstrap):
    from kio.schema.errors import ErrorCode
    from kio.schema.init_producer_id.v3 import request as v3
    from kio.schema.init_producer_id.v4 import request as v4
    import datetime
    tid = name("kip360")
    timeout = datetime.timedelta(seconds=60)

    def init(m, version, pid=-1, epoch=-1):
        def once():
            r = kafka_call(bootstrap, m.InitProducerIdRequest(
                transactional_id=tid, transaction_timeout=timeout, producer_id=pid,
                producer_epoch=epoch), (22, version))
            return None if r.error_code in (ErrorCode.coordinator_not_available,
                                            ErrorCode.not_coordinator,
                                            ErrorCode.coordinator_load_in_progress) else r
        return poll_until(once, "InitProducerId")
    first = init(v4, 4)
    assert first.error_code == ErrorCode.none and first.producer_epoch == 0
    pid = first.producer_id
    bumped = init(v4, 4, pid, 0)                       # the current epoch: bumped
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == \
        (ErrorCode.none, pid, 1)
    again = init(v4, 4, pid, 0)                        # a retry of that bump: the same answer
    assert (again.error_code, again.producer_id, again.producer_epoch) == \
        (ErrorCode.none, pid, 1)
    newer = init(v4, 4)                                # a new instance: epoch 2
    assert (newer.producer_id, newer.producer_epoch) == (pid, 2)
    stale = init(v4, 4, pid, 0)                        # neither current nor previous: fenced
    assert stale.error_code == ErrorCode.producer_fenced
    old_client = init(v3, 3, pid, 0)                   # before v4: INVALID_PRODUCER_EPOCH
    assert old_client.error_code == ErrorCode.invalid_producer_epoch


def test_find_coordinator_describe_and_list_transactions(bootstrap):
    import datetime
    from kio.schema.describe_transactions.v0 import request as dt
    from kio.schema.errors import ErrorCode
    from kio.schema.find_coordinator.v4 import request as fc
    from kio.schema.list_transactions.v1 import request as lt
    topic = name("describe")
    create_topic(bootstrap, topic, 2)
    tid = name("described")
    p = txn_producer(bootstrap, tid, **{"transaction.timeout.ms": 60000})
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=1)
    assert p.flush(60) == 0                              # open: Ongoing, partition 1 added
    resp = kafka_call(bootstrap, fc.FindCoordinatorRequest(key_type=1, coordinator_keys=(
        tid, name("other"))), (10, 4))
    brokers = {int(x.split(":")[1]) for x in bootstrap.split(",")}
    assert [(c.key, c.error_code) for c in resp.coordinators][0] == (tid, ErrorCode.none)
    assert all(c.port in brokers for c in resp.coordinators if c.error_code == ErrorCode.none)
    d = kafka_call(bootstrap, dt.DescribeTransactionsRequest(
        transactional_ids=(tid, name("unknown"))), (65, 0)).transaction_states
    assert (d[0].error_code, d[0].transaction_state, d[0].transaction_timeout) == \
        (ErrorCode.none, "Ongoing", datetime.timedelta(seconds=60))
    assert [(t.topic, t.partitions) for t in d[0].topics] == [(topic, (1,))]
    assert d[1].error_code == ErrorCode.transactional_id_not_found

    def listed(**kw):
        r = kafka_call(bootstrap, lt.ListTransactionsRequest(
            state_filters=kw.get("states", ()), producer_id_filters=(),
            duration_filter=kw.get("duration", -1)), (66, 1))
        assert r.error_code == ErrorCode.none
        return {t.transactional_id: t.transaction_state for t in r.transaction_states}
    assert listed()[tid] == "Ongoing"
    assert listed(states=("Ongoing",))[tid] == "Ongoing"
    assert tid not in listed(states=("CompleteCommit",))
    poll_until(lambda: tid in listed(duration=100), "open for 100 ms")
    assert tid not in listed(duration=3_600_000)            # not for an hour
    p.commit_transaction(60)
    poll_until(lambda: listed().get(tid) == "CompleteCommit", "the markers, then CompleteCommit")
    assert tid not in listed(duration=0)                    # no longer open
