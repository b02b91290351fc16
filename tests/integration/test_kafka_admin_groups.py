"""Kafka clients, unmodified, against a real fleet's Kafka listeners (issue 25, phase 2b): the
admin APIs (AlterConfigs, IncrementalAlterConfigs, DeleteRecords, the ACL APIs, DescribeLogDirs,
OffsetDelete, DeleteGroups, ElectLeaders) through confluent-kafka's AdminClient and
kafka-python's KafkaAdminClient, and Kafka's group protocol: the leader's assignor decides
(librdkafka's cooperative-sticky, kafka-python's round robin and sticky), and a group of another
protocol type (Kafka Connect's, Schema Registry's) gets its leader's opaque bytes.

One fleet for the module, as `riverbed fleet up` makes it (the PLAINTEXT listeners on 127.0.0.1
whose User:ANONYMOUS the fleet grants from 127.0.0.1), with two gateways.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from deploy.fleet import Fleet, free_base_port
from tests.integration.test_kafka_clients import create_topic, kafka_call, wait_for_leaders

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("kafka-admin-fleet"), free_base_port(), storage_nodes=3,
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


def produce(bootstrap: str, topic: str, n: int, partition: int | None = None) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        if partition is None:
            p.produce(topic, key=b"%d" % i, value=b"v-%d" % i)
        else:
            p.produce(topic, key=b"%d" % i, value=b"v-%d" % i, partition=partition)
    assert p.flush(60) == 0


def topic_with_leaders(bootstrap: str, prefix: str, partitions: int) -> str:
    topic = name(prefix)
    create_topic(bootstrap, topic, partitions)
    wait_for_leaders(bootstrap, topic, partitions)
    return topic


# -- configs --------------------------------------------------------------------------------------

def test_confluent_incremental_and_legacy_alter_configs(bootstrap):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = topic_with_leaders(bootstrap, "cfg", 1)

    def describe():
        (f,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
        return f.result(30)

    ops = [ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET),
           ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)]
    (f,) = admin.incremental_alter_configs([ConfigResource("topic", topic,
                                                           incremental_configs=ops)]).values()
    f.result(30)
    c = describe()
    assert c["retention.ms"].value == "123456" and not c["retention.ms"].is_default
    assert c["cleanup.policy"].value == "delete,compact"
    ops = [ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
           ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)]
    (f,) = admin.incremental_alter_configs([ConfigResource("topic", topic,
                                                           incremental_configs=ops)]).values()
    f.result(30)
    c = describe()
    assert c["cleanup.policy"].value == "compact" and c["retention.ms"].is_default
    # APPEND to a config that is not a list: INVALID_CONFIG, nothing changes
    ops = [ConfigEntry("segment.ms", "1", incremental_operation=AlterConfigOpType.APPEND)]
    (f,) = admin.incremental_alter_configs([ConfigResource("topic", topic,
                                                           incremental_configs=ops)]).values()
    with pytest.raises(Exception, match="INVALID_CONFIG|list configs"):
        f.result(30)
    # Kafka's legacy AlterConfigs replaces the whole set: cleanup.policy goes back to default
    (f,) = admin.alter_configs([ConfigResource("topic", topic,
                                               set_config={"segment.ms": "600000"})]).values()
    f.result(30)
    c = describe()
    assert c["segment.ms"].value == "600000" and c["cleanup.policy"].is_default
    # broker configs are not served: the resource says so
    (f,) = admin.incremental_alter_configs([ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])]).values()
    with pytest.raises(Exception, match="INVALID_REQUEST|topic configs"):
        f.result(30)


def test_kafka_python_alter_configs(bootstrap):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType
    topic = topic_with_leaders(bootstrap, "kpcfg", 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                            configs={"retention.ms": "5000"})])
        got = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        assert got["topic"][topic]["retention.ms"]["value"] == "5000"   # the modified keys
    finally:
        admin.close()


# -- records, log dirs, leaders ------------------------------------------------------------------

def test_delete_records_moves_the_log_start_for_every_client(bootstrap):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    topic = topic_with_leaders(bootstrap, "delrec", 2)
    produce(bootstrap, topic, 100, partition=0)
    produce(bootstrap, topic, 50, partition=1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (f,) = admin.delete_records([TopicPartition(topic, 0, 40)]).values()
    assert f.result(30).low_watermark == 40
    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        got = kp_admin.delete_records({KTP(topic, 1): -1})    # -1: everything committed
        assert got[KTP(topic, 1)]["low_watermark"] == 50
        with pytest.raises(Exception):                        # past the high watermark
            kp_admin.delete_records({KTP(topic, 0): 1000})
    finally:
        kp_admin.close()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": name("g"),
                  "auto.offset.reset": "earliest"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        assert (low, high) == (40, 100)
        c.assign([TopicPartition(topic, 0, 0)])     # below the log start: reset to earliest
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                first = m.offset()
        assert first == 40
    finally:
        c.close()


def test_kafka_python_describe_log_dirs_describes_every_storage_node_once(bootstrap, fleet):
    from kafka import KafkaAdminClient
    topic = topic_with_leaders(bootstrap, "logdirs", 2)
    produce(bootstrap, topic, 20)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        answers = admin.describe_log_dirs()
    finally:
        admin.close()
    dirs = [d["log_dir"] for a in answers for d in a["log_dirs"]]
    # each of the 3 storage nodes' one log dir, described by one gateway or the other
    assert sorted(d.split(":")[0] for d in dirs) == ["storage-node-1", "storage-node-2",
                                                     "storage-node-3"]
    sizes = [p["partition_size"] for a in answers for d in a["log_dirs"] for t in d["topics"]
             if t["name"] == topic for p in t["partitions"]]
    assert len(sizes) == 6 and sum(sizes) > 0               # 2 partitions x 3 replicas


def test_elect_leaders(bootstrap):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    topic = topic_with_leaders(bootstrap, "elect", 1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    (err,) = result.values()            # the preferred replica already leads
    assert err is not None and err.name() == "ELECTION_NOT_NEEDED"
    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        resp = kp_admin.elect_leaders(0, {topic: [0]})
        assert resp.replica_election_results[0].partition_result[0].error_code == 84
    finally:
        kp_admin.close()


# -- ACLs -----------------------------------------------------------------------------------------

def test_acls_created_described_and_deleted_through_the_same_store(bootstrap, fleet):
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
        ResourcePatternType, ResourceType,
    )
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KRT
    topic = topic_with_leaders(bootstrap, "acl", 1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    alice = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    prefixed = AclBinding(ResourceType.GROUP, "etl-", ResourcePatternType.PREFIXED, "User:alice",
                          "*", AclOperation.DESCRIBE, AclPermissionType.DENY)
    for f in admin.create_acls([alice, prefixed]).values():
        f.result(30)
    only_alice = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                  None, AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(only_alice).result(30)) == {alice, prefixed}
    # what applies to group etl-7 (pattern type MATCH): the prefixed one
    match = AclBindingFilter(ResourceType.GROUP, "etl-7", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert prefixed in admin.describe_acls(match).result(30)
    # the `riverbed acls` tool reads the same znodes
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "riverbed.cli", "acls", "--zookeeper",
                          fleet.zk_connect, "--list", "--topic", topic],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "User:alice" in out.stdout, out.stderr
    # kafka-python sees and deletes them
    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        kflt = ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ANY,
                         ResourcePatternFilter(KRT.ANY, None, ACLResourcePatternType.ANY))
        acls, _err = kp_admin.describe_acls(kflt)
        assert len(acls) == 2
        kp_admin.create_acls([ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.DENY,
                                  ResourcePattern(KRT.TOPIC, topic,
                                                  ACLResourcePatternType.LITERAL))])
        ((_f, deleted, _e),) = kp_admin.delete_acls([kflt])
        assert len(deleted) == 2
    finally:
        kp_admin.close()
    (f,) = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                               "User:bob", None, AclOperation.ANY,
                                               AclPermissionType.ANY)]).values()
    assert len(f.result(30)) == 1
    assert admin.describe_acls(only_alice).result(30) == []
    # a binding that cannot be stored: refused, nothing written
    bad = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:carol", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)   # Write does not apply to groups
    (f,) = admin.create_acls([bad]).values()
    with pytest.raises(Exception):
        f.result(30)


# -- groups ---------------------------------------------------------------------------------------

def consume(c, n: int, seconds: float = 60) -> int:
    got = 0
    deadline = time.monotonic() + seconds
    while got < n and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got += 1
    return got


def test_delete_groups_and_offset_delete(bootstrap):
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    topic = topic_with_leaders(bootstrap, "delgrp", 2)
    produce(bootstrap, topic, 40)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    group = name("g")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    assert consume(c, 40) == 40
    c.commit(asynchronous=False)
    (f,) = admin.delete_consumer_groups([group]).values()
    with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty"):
        f.result(30)                                    # it has a member
    c.close()
    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        # OffsetDelete: partition 0's offset goes, partition 1's stays
        from kafka.errors import NoError
        assert kp_admin.delete_group_offsets(group, [KTP(topic, 0)]) == {KTP(topic, 0): NoError}
        left = kp_admin.list_group_offsets(group)[group]
        assert list(left) == [KTP(topic, 1)]
    finally:
        kp_admin.close()
    (f,) = admin.delete_consumer_groups([group]).values()
    f.result(30)
    (f,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])]).values()
    assert [tp.offset for tp in f.result(30).topic_partitions] == [-1001, -1001]
    (f,) = admin.delete_consumer_groups([group]).values()
    with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND|does not exist"):
        f.result(30)
    # kafka-python's DeleteGroups of a group with only offsets (a standalone consumer's)
    standalone = name("standalone")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": standalone,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    c.close()
    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        assert kp_admin.list_group_offsets(standalone)[standalone]
        assert kp_admin.delete_groups([standalone]) == {standalone: "OK"}
        assert kp_admin.list_group_offsets(standalone)[standalone] == {}
    finally:
        kp_admin.close()


def test_each_group_is_listed_once_by_its_coordinator_with_two_gateways(bootstrap, fleet):
    """Every gateway can ask every group coordinator, but ListGroups at a gateway answers only
    the groups it coordinates (Kafka's answer), so kafka-python's list_groups() and librdkafka's
    list_consumer_groups(), which ask every broker and add the answers up, list each group
    once; list_groups(broker_ids=[b]) lists the groups whose FindCoordinator names b."""
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, KafkaConsumer
    admin = AdminClient({"bootstrap.servers": bootstrap})
    gateways = sorted(b.id for b in admin.list_topics(timeout=30).brokers.values())
    assert len(gateways) == 2
    prefix = name("listed")

    def coordinator(group: str) -> int:       # FindCoordinator's answer, through librdkafka
        (f,) = admin.describe_consumer_groups([group]).values()
        return f.result(30).coordinator.id
    groups: dict[str, int] = {}               # two groups coordinated by each gateway
    for i in range(64):
        g = f"{prefix}-{i}"
        c = coordinator(g)
        if sum(1 for x in groups.values() if x == c) < 2:
            groups[g] = c
        if len(groups) == 4:
            break
    assert sorted(groups.values()) == [gateways[0]] * 2 + [gateways[1]] * 2
    topic = topic_with_leaders(bootstrap, "listed", 1)
    for g in groups:                           # a member joins and leaves: an Empty group
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=g,
                                 enable_auto_commit=False)
        try:
            while not consumer.assignment():
                consumer.poll(timeout_ms=200)
        finally:
            consumer.close()

    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        ours = sorted(x["group_id"] for x in kp_admin.list_groups()
                      if x["group_id"].startswith(prefix))
        assert ours == sorted(groups)                               # once each
        for gw in gateways:
            at = sorted(x["group_id"] for x in kp_admin.list_groups(broker_ids=[gw])
                        if x["group_id"].startswith(prefix))
            assert at == sorted(g for g, c in groups.items() if c == gw)
    finally:
        kp_admin.close()
    listed = admin.list_consumer_groups().result(30)
    assert not listed.errors
    assert sorted(x.group_id for x in listed.valid if x.group_id.startswith(prefix)) == \
        sorted(groups)


def test_librdkafka_cooperative_sticky_moves_only_what_it_must(bootstrap):
    """Two librdkafka consumers with cooperative-sticky only (KIP-429; phase 1 refused it): the
    second one's arrival revokes only the partitions that move, each partition is read by one
    member, and no record is lost."""
    from confluent_kafka import Consumer
    topic = topic_with_leaders(bootstrap, "coop", 6)
    produce(bootstrap, topic, 600)
    group = name("g")
    lock = threading.Lock()
    assigned: dict[str, set[int]] = {}
    revoked: dict[str, list[list[int]]] = {}
    seen: dict[bytes, str] = {}
    stop = threading.Event()

    def member(who: str) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest",
                      "partition.assignment.strategy": "cooperative-sticky"})

        def on_assign(_c, parts):
            with lock:
                assigned.setdefault(who, set()).update(tp.partition for tp in parts)

        def on_revoke(_c, parts):
            with lock:
                assigned.setdefault(who, set()).difference_update(tp.partition for tp in parts)
                revoked.setdefault(who, []).append(sorted(tp.partition for tp in parts))

        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set():
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                with lock:
                    seen[m.key()] = who
        c.close()

    t1 = threading.Thread(target=member, args=("a",))
    t1.start()
    deadline = time.monotonic() + 60
    while assigned.get("a") != set(range(6)):
        assert time.monotonic() < deadline, assigned
        time.sleep(0.2)
    t2 = threading.Thread(target=member, args=("b",))
    t2.start()
    try:
        deadline = time.monotonic() + 90
        while True:
            with lock:
                a, b = set(assigned.get("a", ())), set(assigned.get("b", ()))
                done = len(seen) == 600
            if a and b and not a & b and a | b == set(range(6)) and done:
                break
            assert time.monotonic() < deadline, (assigned, len(seen))
            time.sleep(0.2)
        # incremental: "a" gave up only what "b" now has, never everything
        assert revoked["a"][0] == sorted(b) and len(b) == 3
    finally:
        stop.set()
        t1.join(30)
        t2.join(30)


def test_kafka_python_members_use_their_own_assignors(bootstrap):
    """kafka-python's RoundRobin and Sticky assignors run in its group leader; every member
    gets what the leader gave it (phase 1 handed out the coordinator's range assignment). One
    thread per consumer, as applications run them (a kafka-python poll blocks in a rebalance)."""
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    topic = topic_with_leaders(bootstrap, "kpgrp", 4)
    for assignor in (RoundRobinPartitionAssignor, StickyPartitionAssignor):
        group = name("g")
        parts: dict[int, set[int]] = {}
        stop = threading.Event()

        def member(i: int) -> None:
            c = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=group,
                              partition_assignment_strategy=[assignor],
                              auto_offset_reset="earliest")
            try:
                while not stop.is_set():
                    c.poll(timeout_ms=200)
                    parts[i] = {tp.partition for tp in c.assignment()}
            finally:
                c.close()

        threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 90
            while True:
                got = [set(parts.get(i, ())) for i in range(2)]
                if all(got) and not got[0] & got[1] and got[0] | got[1] == set(range(4)):
                    break
                assert time.monotonic() < deadline, got
                time.sleep(0.2)
            if assignor is RoundRobinPartitionAssignor:
                assert sorted(map(sorted, got)) == [[0, 2], [1, 3]]   # range: 0,1 / 2,3
        finally:
            stop.set()
            for t in threads:
                t.join(30)


def test_a_group_of_another_protocol_type_gets_its_leaders_opaque_bytes(bootstrap):
    """Kafka Connect ("connect") and Schema Registry ("sr") use the group protocol with their
    own metadata and assignments: the coordinator picks the protocol all members support and
    hands out the leader's bytes unchanged."""
    import datetime

    from kio.schema.errors import ErrorCode
    from kio.schema.join_group.v9 import request as jg
    from kio.schema.sync_group.v5 import request as sg
    group = name("connect-cluster")

    def join(member_id: str):
        return kafka_call(bootstrap, jg.JoinGroupRequest(
            group_id=group, session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10), member_id=member_id,
            group_instance_id=None, protocol_type="connect", reason=None, protocols=(
                jg.JoinGroupRequestProtocol(name="sessioned", metadata=b"\x00\x02worker-1"),
                jg.JoinGroupRequestProtocol(name="default", metadata=b"\x00\x01worker-1"))),
            (11, 9))

    resp = join("")
    assert resp.error_code == ErrorCode.none, resp
    assert resp.protocol_type == "connect" and resp.protocol_name == "sessioned"
    assert resp.leader == resp.member_id
    assert [(m.member_id, m.metadata) for m in resp.members] == [(resp.member_id,
                                                                 b"\x00\x02worker-1")]
    sync = kafka_call(bootstrap, sg.SyncGroupRequest(
        group_id=group, generation_id=resp.generation_id, member_id=resp.member_id,
        group_instance_id=None, protocol_type="connect", protocol_name="sessioned",
        assignments=(sg.SyncGroupRequestAssignment(member_id=resp.member_id,
                                                   assignment=b"\x00\x01connectors:[a,b]"),)),
        (14, 5))
    assert sync.error_code == ErrorCode.none
    assert sync.assignment == b"\x00\x01connectors:[a,b]"
    assert (sync.protocol_type, sync.protocol_name) == ("connect", "sessioned")
