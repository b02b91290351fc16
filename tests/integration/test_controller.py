"""The controller as real processes against a real ZooKeeper (one chroot per test).

Storage nodes are stand-ins: the test writes ephemeral /brokers/ids/<id> znodes from its own
kazoo session (nothing listens on their endpoints, so LEADER_AND_ISR sends just retry).
Every process started here is stopped in a finally block, by its own PID.
"""
from __future__ import annotations

import functools

import os
import pathlib
import signal
import subprocess
import sys
import time

import node_helpers
import pytest
import zmq

from deploy.process import spawn
from riverbed import errors
from riverbed._proto.v1 import controller_pb2, header_pb2, metadata_pb2
from riverbed.wire.client import Channel
from services.common import zk as zkmod
from services.common import znodes

pytestmark = pytest.mark.integration
Api = header_pb2.ApiKey
E = errors.ErrorCode
WAIT_S = 30.0           # bound on every wait; never a pass/fail threshold on speed


wait_until = functools.partial(node_helpers.wait_until, timeout_s=WAIT_S, interval_s=0.05)


class Controllers:
    """Controller processes started by this test, stopped (by PID) on exit.

    The storage nodes these tests register are znodes only: nothing sends BROKER_HEARTBEAT, so
    the controllers run on ZooKeeper's view alone (broker.session.timeout.ms 0). With the
    default (2000 ms) they fence every node two seconds after they start, and a test slower than
    that on a busy machine sees no live nodes."""

    def __init__(self, tmp: pathlib.Path, zk_connect: str):
        self.tmp = tmp
        self.zk_connect = zk_connect
        self.procs: dict[int, subprocess.Popen] = {}
        self.ports: dict[int, tuple[int, int]] = {}

    def start(self, cid: int, port: int, pub_port: int, **overrides) -> subprocess.Popen:
        props = {"controller.id": cid, "host.name": "127.0.0.1", "port": port,
                 "pub.port": pub_port, "zookeeper.connect": self.zk_connect,
                 "zookeeper.session.timeout.ms": 4000, "controller.socket.timeout.ms": 1000,
                 "broker.session.timeout.ms": 0, **overrides}
        cfg = self.tmp / f"controller-{cid}.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        proc = spawn([sys.executable, "-m", "services.controller", "--config", str(cfg)],
                     self.tmp / f"controller-{cid}.log")
        self.procs[cid] = proc
        self.ports[cid] = (port, pub_port)
        return proc

    def endpoint(self, cid: int) -> str:
        return f"tcp://127.0.0.1:{self.ports[cid][0]}"

    def log(self, cid: int) -> str:
        return (self.tmp / f"controller-{cid}.log").read_text()

    def kill(self, cid: int, sig=signal.SIGKILL) -> int:
        proc = self.procs[cid]
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        return proc.wait(timeout=20)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def zk_client(zk_chroot):
    client = zkmod.connect(zk_chroot, timeout_s=10)
    try:
        for p in znodes.PERSISTENT_PATHS:
            client.ensure_path(p)
        yield client
    finally:
        zkmod.close(client)


@pytest.fixture
def controllers(tmp_path, zk_chroot):
    c = Controllers(tmp_path, zk_chroot)
    try:
        yield c
    finally:
        c.stop_all()


def register_node(client, node_id: int, port: int) -> None:
    client.create(znodes.broker_path(node_id), znodes.encode_broker(znodes.BrokerInfo(
        node_id, "127.0.0.1", port, (f"tcp://127.0.0.1:{port}",))), ephemeral=True)


def active_controller(client):
    try:
        data, _ = client.get(znodes.CONTROLLER)
    except Exception:  # noqa: BLE001 - NoNode while nobody leads
        return None
    return znodes.decode_controller(data).controller_id


def controller_epoch(client) -> int:
    return znodes.decode_controller_epoch(client.get(znodes.CONTROLLER_EPOCH)[0])


def states(client, topic: str) -> dict[int, znodes.PartitionState]:
    assignment = znodes.decode_topic_assignment(client.get(znodes.topic_path(topic))[0])
    return {p: znodes.decode_partition_state(client.get(znodes.partition_state_path(topic, p))[0])
            for p in assignment}


def create_topics(ch: Channel, *topics, validate_only=False):
    req = controller_pb2.CreateTopicsRequest(validate_only=validate_only, timeout_ms=5000)
    for name, parts, rf, configs in topics:
        t = req.topics.add(name=name, num_partitions=parts, replication_factor=rf)
        t.configs.update(configs)
    return ch.call(Api.CREATE_TOPICS, req, timeout_ms=10_000).body.topics


def metadata(ch: Channel, topics=(), auto=False):
    return ch.call(Api.METADATA, metadata_pb2.MetadataRequest(
        topics=list(topics), allow_auto_topic_creation=auto), timeout_ms=10_000).body


def test_election_create_failover_and_node_death(zk_client, controllers, free_ports):
    p1, pub1, p2, pub2, n1, n2, n3 = free_ports(7)
    for node_id, port in ((1, n1), (2, n2), (3, n3)):
        register_node(zk_client, node_id, port)
    controllers.start(1, p1, pub1)
    controllers.start(2, p2, pub2)

    first = wait_until(lambda: active_controller(zk_client), "an active controller")
    standby = 2 if first == 1 else 1
    # The winner bumps /controller_epoch right after creating /controller.
    epoch1 = wait_until(lambda: zk_client.exists(znodes.CONTROLLER_EPOCH)
                        and controller_epoch(zk_client), "/controller_epoch written")
    assert epoch1 >= 1

    with Channel(controllers.endpoint(first)) as active, \
            Channel(controllers.endpoint(standby)) as other:
        # The active one answers once it has read the cluster (retry while it is still starting).
        results = wait_until(
            lambda: _try(lambda: create_topics(active, ("orders", 6, 2, {"retention.ms": "60000"}))),
            "CREATE_TOPICS answered")
        assert [(r.name, r.error_code, r.num_partitions, r.replication_factor)
                for r in results] == [("orders", 0, 6, 2)]

        # Znodes: seed 002's assignment over nodes [1, 2, 3], leaders first replicas.
        assignment = znodes.decode_topic_assignment(zk_client.get(znodes.topic_path("orders"))[0])
        nodes = [1, 2, 3]
        start = nodes.index(assignment[0][0])
        assert assignment == {i: (nodes[(start + i) % 3], nodes[(start + i + 1) % 3])
                              for i in range(6)}
        st = states(zk_client, "orders")
        assert {p: (s.leader, s.isr, s.leader_epoch) for p, s in st.items()} == {
            p: (r[0], r, 0) for p, r in assignment.items()}
        assert all(s.controller_epoch == epoch1 for s in st.values())
        assert znodes.decode_topic_config(
            zk_client.get(znodes.topic_config_path("orders"))[0]) == {"retention.ms": "60000"}

        # Invalid creates: typed errors, nothing written.
        bad = create_topics(active, ("bad name", 1, 1, {}), ("ok-name", -3, 1, {}),
                            ("rf", 1, 4, {}), ("cfg", 1, 1, {"cleanup.policy": "shred"}),
                            ("orders", 1, 1, {}))
        assert [r.error_code for r in bad] == [
            E.Value("INVALID_TOPIC_EXCEPTION"), E.Value("INVALID_PARTITIONS"),
            E.Value("INVALID_REPLICATION_FACTOR"), E.Value("INVALID_CONFIG"),
            E.Value("TOPIC_ALREADY_EXISTS")]
        assert sorted(zk_client.get_children(znodes.BROKER_TOPICS)) == ["orders"]

        # The standby answers NOT_CONTROLLER.
        with pytest.raises(errors.NotControllerError):
            metadata(other)

        # A storage node dies: every leadership it had moves to a live ISR member, one pass.
        led_by_1 = {p for p, s in st.items() if s.leader == 1}
        assert led_by_1
        zk_client.delete(znodes.broker_path(1))
        moved = wait_until(lambda: (lambda s: s if all(x.leader != 1 and 1 not in x.isr
                                                       for x in s.values()) else None)(
            states(zk_client, "orders")), "leaderships moved off node 1")
        for p in led_by_1:
            assert moved[p].leader == assignment[p][1]
            assert moved[p].leader_epoch == 1
            assert moved[p].isr == (assignment[p][1],)
        md = metadata(active, ["orders"])
        assert {b.node_id for b in md.brokers} == {2, 3}
        assert all(pm.leader in (2, 3) for pm in md.topics[0].partitions)

    # SIGKILL the active one: the standby takes over with a higher epoch and knows the topic.
    controllers.kill(first)
    wait_until(lambda: active_controller(zk_client) == standby, "the standby takes over")
    # It bumps /controller_epoch right after creating /controller.
    wait_until(lambda: controller_epoch(zk_client) > epoch1, "a higher controller epoch")
    with Channel(controllers.endpoint(standby)) as now_active:
        md = wait_until(lambda: _try(lambda: metadata(now_active, ["orders"])),
                        "METADATA from the new active controller")
        assert md.topics[0].name == "orders" and md.topics[0].error_code == 0
        assert len(md.topics[0].partitions) == 6
        assert md.controller_id == standby and md.controller_epoch > epoch1
    # A clean stop exits 0.
    assert controllers.kill(standby, signal.SIGTERM) == 0, controllers.log(standby)[-3000:]


def _try(fn):
    """fn() or None while the controller is not (yet) active."""
    try:
        return fn()
    except (errors.NotControllerError, errors.RequestTimedOutError):
        return None


def test_admin_apis_and_metadata_publishing(zk_client, controllers, free_ports):
    port, pub, n1, n2 = free_ports(4)
    register_node(zk_client, 1, n1)
    register_node(zk_client, 2, n2)
    controllers.start(7, port, pub, **{"num.partitions": 3, "default.replication.factor": 2})
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"metadata")
    sub.connect(f"tcp://127.0.0.1:{pub}")
    try:
        with Channel(controllers.endpoint(7)) as ch:
            # Auto-creation through METADATA, with num.partitions and default.replication.factor.
            md = wait_until(lambda: _try(lambda: metadata(ch, ["auto-t"], auto=True)),
                            "METADATA answered")
            t = md.topics[0]
            assert t.error_code == 0 and len(t.partitions) == 3
            assert all(len(p.replicas) == 2 and p.leader == p.replicas[0] for p in t.partitions)
            assert zk_client.exists(znodes.topic_path("auto-t")) is not None
            assert metadata(ch, ["nope"]).topics[0].error_code == E.Value(
                "UNKNOWN_TOPIC_OR_PARTITION")

            # CREATE_PARTITIONS grows, never shrinks.
            req = controller_pb2.CreatePartitionsRequest()
            req.topics.add(name="auto-t", count=5)
            req.topics.add(name="missing", count=2)
            res = ch.call(Api.CREATE_PARTITIONS, req).body.topics
            assert [r.error_code for r in res] == [0, E.Value("UNKNOWN_TOPIC_OR_PARTITION")]
            assert len(states(zk_client, "auto-t")) == 5
            req = controller_pb2.CreatePartitionsRequest()
            req.topics.add(name="auto-t", count=2)
            assert ch.call(Api.CREATE_PARTITIONS, req).body.topics[0].error_code == E.Value(
                "INVALID_PARTITIONS")

            # ALTER_CONFIGS validated; DESCRIBE_CONFIGS shows overrides and defaults.
            alter = controller_pb2.AlterConfigsRequest()
            alter.topics.add(name="auto-t").set["cleanup.policy"] = "compact,delete"
            assert ch.call(Api.ALTER_CONFIGS, alter).body.topics[0].error_code == 0
            bad = controller_pb2.AlterConfigsRequest()
            bad.topics.add(name="auto-t").set["retention.ms"] = "-7"
            assert ch.call(Api.ALTER_CONFIGS, bad).body.topics[0].error_code == E.Value(
                "INVALID_CONFIG")
            assert znodes.decode_topic_config(zk_client.get(znodes.topic_config_path("auto-t"))[0]) \
                == {"cleanup.policy": "compact,delete"}
            desc = ch.call(Api.DESCRIBE_CONFIGS, controller_pb2.DescribeConfigsRequest(
                topics=["auto-t"], include_defaults=True)).body.results[0]
            entries = {e.name: (e.value, e.is_default) for e in desc.entries}
            assert entries["cleanup.policy"] == ("compact,delete", False)
            assert entries["min.insync.replicas"] == ("1", True)

            # The PUB socket carries full snapshots with growing metadata_version.
            versions = []
            poller = zmq.Poller()
            poller.register(sub, zmq.POLLIN)
            deadline = time.monotonic() + WAIT_S
            while len(versions) < 2 and time.monotonic() < deadline:
                if poller.poll(500):
                    topic, body = sub.recv_multipart()
                    up = metadata_pb2.UpdateMetadataRequest.FromString(body)
                    assert topic == b"metadata" and up.controller_id == 7
                    names = [t.name for t in up.topics]
                    if not versions and "auto-t" not in names:
                        continue    # a snapshot queued before the topic existed
                    assert "auto-t" in names
                    versions.append(up.metadata_version)
            assert len(versions) == 2 and versions[1] > versions[0]

            # DELETE_TOPICS removes every znode of the topic.
            res = ch.call(Api.DELETE_TOPICS, controller_pb2.DeleteTopicsRequest(
                names=["auto-t"])).body.topics
            assert res[0].error_code == 0
            assert zk_client.exists(znodes.topic_path("auto-t")) is None
            assert zk_client.exists(znodes.topic_config_path("auto-t")) is None
            assert zk_client.get_children(znodes.DELETE_TOPICS) == []
            assert metadata(ch, ["auto-t"]).topics[0].error_code == E.Value(
                "UNKNOWN_TOPIC_OR_PARTITION")
            cl = ch.call(Api.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest()).body
            assert cl.controller_id == 7 and [b.node_id for b in cl.brokers] == [1, 2]
            assert cl.cluster_id
    finally:
        sub.close(0)
    assert controllers.kill(7, signal.SIGTERM) == 0


def test_fenced_write_stops_acting_and_reelects_with_newer_epoch(zk_client, controllers,
                                                                 free_ports):
    port, pub, n1 = free_ports(3)
    register_node(zk_client, 1, n1)
    controllers.start(3, port, pub)
    with Channel(controllers.endpoint(3)) as ch:
        md = wait_until(lambda: _try(lambda: metadata(ch)), "controller active")
        epoch = md.controller_epoch
        # Another writer bumps /controller_epoch behind the controller's back (a newer controller).
        data, stat = zk_client.get(znodes.CONTROLLER_EPOCH)
        zk_client.set(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch + 5),
                      version=stat.version)
        # Its next write is fenced: no topic is written, the answer is NOT_CONTROLLER.
        with pytest.raises(errors.NotControllerError):
            create_topics(ch, ("fenced", 1, 1, {}))
        assert zk_client.exists(znodes.topic_path("fenced")) is None
        # It re-runs the election and acts again with an epoch above the intruder's.
        md = wait_until(lambda: _try(lambda: metadata(ch)), "controller active again")
        assert md.controller_epoch == epoch + 6
        assert [r.error_code for r in create_topics(ch, ("fenced", 1, 1, {}))] == [0]
        assert states(zk_client, "fenced")[0].controller_epoch == epoch + 6
