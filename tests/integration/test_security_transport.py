"""CurveZMQ on a real CURVE fleet (issue 14): real processes, real keys, real ZooKeeper.

- The STOP_REPLICA attack (controller epoch read from ZooKeeper, STOP_REPLICA with
  delete_partitions to each storage node of an RF3 topic holding acknowledged records) replayed
  with no key, an unknown key and the client's valid key deletes nothing.
- A client key sending each inter-service API gets CLUSTER_AUTHORIZATION_FAILED; leaders, ISR and
  high watermarks do not change.
- A key rotation (new client key added, old one removed, SIGHUP) while producing loses nothing;
  the removed key is refused at its next connection.
- An anonymous ZooKeeper client can read but cannot write /controller or a partition state.
"""
from __future__ import annotations

import pathlib
import signal
import threading
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, Consumer, Producer, errors
from riverbed._proto.v1 import (
    common_pb2,
    controller_pb2,
    fetch_pb2,
    metadata_pb2,
    produce_pb2,
    replication_pb2,
)
from riverbed.structs import NewTopic, TopicPartition
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel
from riverbed.wire.security import ClientSecurity, client_security, create_keypair
from services.common import znodes as zn

pytestmark = pytest.mark.integration

TOPIC = "attacked"
RECORDS = 1000
CLUSTER_AUTHORIZATION_FAILED = errors.ClusterAuthorizationFailedError.code


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("curve-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def acked(fleet):
    """An RF3 topic holding RECORDS acknowledged records (acks=all)."""
    bs = fleet.gateway_endpoint
    with Admin(bs, request_timeout_ms=20000) as admin:
        admin.create_topics([NewTopic(TOPIC, 3, 3)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            parts = [p for p in fleet.status()["partitions"] if p["topic"] == TOPIC]
            if len(parts) == 3 and all(p["leader"] is not None and len(p["isr"]) == 3
                                       for p in parts):
                break
            time.sleep(0.2)
    with Producer(bs, acks="all", linger_ms=5) as p:
        futs = [p.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i) for i in range(RECORDS)]
        p.flush()
        for f in futs:
            f.get(timeout=30)
    return RECORDS


def anonymous_zk(fleet) -> KazooClient:
    c = KazooClient(hosts=fleet.zk_connect, timeout=10)
    c.start(timeout=15)
    return c


def unknown_key(tmp: pathlib.Path, fleet) -> ClientSecurity:
    """A well-formed CURVE key the fleet has never seen (its server keys are public)."""
    _, secret = create_keypair(tmp / "stranger-pub", "stranger", secret_dir=tmp / "stranger-sec")
    return client_security(security_protocol="CURVE", curve_secret_key_file=str(secret),
                           curve_server_keys_dir=str(fleet.security.trust_dir))


def storage_endpoints(fleet) -> list[str]:
    return [r["endpoint"] for r in fleet.status()["processes"] if r["role"] == "storage_node"]


def cluster_state(fleet) -> dict:
    """Leaders, ISR and high watermarks of TOPIC."""
    parts = {(p["topic"], p["partition"]): (p["leader"], sorted(p["isr"]))
             for p in fleet.status()["partitions"] if p["topic"] == TOPIC}
    with Consumer(bootstrap_servers=fleet.gateway_endpoint) as c:
        hw = c.end_offsets([TopicPartition(TOPIC, p) for p in range(3)])
    return {"partitions": parts, "hw": {tp.partition: o for tp, o in hw.items()}}


def consume_count(fleet) -> int:
    n = 0
    with Consumer(bootstrap_servers=fleet.gateway_endpoint, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(TOPIC, p) for p in range(3)])
        deadline = time.monotonic() + 60
        while n < RECORDS and time.monotonic() < deadline:
            n += sum(len(v) for v in c.poll(timeout_ms=500).values())
    return n


def stop_replica(epoch: int) -> controller_pb2.StopReplicaRequest:
    req = controller_pb2.StopReplicaRequest(controller_id=1, controller_epoch=epoch,
                                            delete_partitions=True)
    for p in range(3):
        req.partitions.add(topic=TOPIC, partition=p)
    return req


def test_stop_replica_attack_deletes_nothing(fleet, acked, tmp_path):
    zk = anonymous_zk(fleet)
    try:   # what the attacker can read: public metadata, the controller epoch among it
        epoch = zn.decode_controller_epoch(zk.get(zn.CONTROLLER_EPOCH)[0])
    finally:
        zk.stop()
        zk.close()
    before = cluster_state(fleet)
    attackers = {"no key": ClientSecurity(), "unknown key": unknown_key(tmp_path, fleet),
                 "client key": None}       # None: the fleet's client key (RIVERBED_* env)
    for who, sec in attackers.items():
        for ep in storage_endpoints(fleet):
            ch = Channel(ep, client_id=f"attacker-{who}", security=sec)
            try:
                if sec is None:
                    with pytest.raises(errors.ClusterAuthorizationFailedError):
                        ch.call(ApiKey.STOP_REPLICA, stop_replica(epoch), timeout_ms=20000)
                else:   # no handshake completes: the request never reaches the node
                    with pytest.raises(errors.RequestTimedOutError):
                        ch.call(ApiKey.STOP_REPLICA, stop_replica(epoch), timeout_ms=2000)
            finally:
                ch.close()
        if sec is not None:     # nor does a produce through the gateway append anything
            ch = Channel(fleet.gateway_endpoint, client_id=f"attacker-{who}", security=sec)
            produce = produce_pb2.ProduceRequest(acks=1, timeout_ms=1000)
            produce.topics.add(name=TOPIC).partitions.add(partition=0)
            try:
                with pytest.raises(errors.RequestTimedOutError):
                    ch.call(ApiKey.PRODUCE, produce, payloads=(b"\0" * 61,), timeout_ms=2000)
            finally:
                ch.close()
    for i in (1, 2, 3):
        for p in range(3):
            assert (fleet.data_dir / f"storage-{i}" / "logs" / f"{TOPIC}-{p}").is_dir()
    assert cluster_state(fleet) == before
    assert consume_count(fleet) == acked


def _inter_service_calls(epoch: int):
    lai = controller_pb2.LeaderAndIsrRequest(controller_id=1, controller_epoch=epoch + 1)
    lai.partitions.add(topic=TOPIC, partition=0, controller_epoch=epoch + 1, leader=3,
                       leader_epoch=99, isr=[3], replicas=[1, 2, 3])
    um = metadata_pb2.UpdateMetadataRequest(controller_id=1, controller_epoch=epoch + 1,
                                            metadata_version=1 << 40)
    alter = replication_pb2.AlterPartitionRequest(broker_id=1, broker_epoch=-1)
    alter.partitions.add(topic=TOPIC, partition=0, leader_id=1)
    fetch = fetch_pb2.FetchRequest(replica_id=2, max_wait_ms=0)
    fetch.topics.add(name=TOPIC).partitions.add(partition=0, fetch_offset=0,
                                                partition_max_bytes=1 << 20,
                                                current_leader_epoch=-1)
    produce = produce_pb2.ProduceRequest(acks=1, timeout_ms=1000)
    produce.topics.add(name="__consumer_offsets").partitions.add(partition=0)
    return [
        ("storage", ApiKey.LEADER_AND_ISR, lai, ()),
        ("storage", ApiKey.STOP_REPLICA, stop_replica(epoch), ()),
        ("storage", ApiKey.FETCH, fetch, ()),
        ("storage", ApiKey.PRODUCE, produce, (b"\0" * 61,)),
        ("gateway", ApiKey.UPDATE_METADATA, um, ()),
        ("gateway", ApiKey.FETCH, fetch, ()),
        ("gateway", ApiKey.PRODUCE, produce, (b"\0" * 61,)),
        ("controller", ApiKey.ALTER_PARTITION, alter, ()),
        ("controller", ApiKey.CONTROLLED_SHUTDOWN,
         replication_pb2.ControlledShutdownRequest(broker_id=1, broker_epoch=-1), ()),
    ]


def test_client_key_gets_cluster_authorization_failed(fleet, acked):
    zk = anonymous_zk(fleet)
    try:
        epoch = zn.decode_controller_epoch(zk.get(zn.CONTROLLER_EPOCH)[0])
    finally:
        zk.stop()
        zk.close()
    before = cluster_state(fleet)
    procs = fleet.status()["processes"]
    endpoint = {"storage": next(p["endpoint"] for p in procs if p["name"] == "storage-1"),
                "gateway": fleet.gateway_endpoint,
                "controller": next(p["endpoint"] for p in procs if p["role"] == "controller")}
    for target, api, body, payloads in _inter_service_calls(epoch):
        ch = Channel(endpoint[target], client_id="not-a-service")   # the fleet's client key
        try:
            with pytest.raises(errors.ClusterAuthorizationFailedError) as e:
                ch.call(api, body, payloads=payloads, timeout_ms=20000)
        finally:
            ch.close()
        assert e.value.code == CLUSTER_AUTHORIZATION_FAILED, (target, api)
    assert cluster_state(fleet) == before
    assert consume_count(fleet) == acked


def test_key_rotation_under_load_loses_nothing(fleet, acked, tmp_path):
    sec = fleet.security
    # a new key for the same principal (User:client: its ACLs carry over), shipped to the
    # services under another file name beside the old one
    new_pub, new_secret = create_keypair(tmp_path / "pub", "client",
                                         secret_dir=tmp_path / "sec")
    old = dict(curve_secret_key_file=str(sec.secret_key_file("client")),
               curve_server_keys_dir=str(sec.trust_dir), security_protocol="CURVE")
    new = dict(old, curve_secret_key_file=str(new_secret))
    bs = fleet.gateway_endpoint
    topic = "rotation"
    with Admin(bs, request_timeout_ms=20000) as admin:
        admin.create_topics([NewTopic(topic, 3, 3)])
    sent: list = []
    stop = threading.Event()
    failures: list = []

    def produce(settings, tag):
        try:
            with Producer(bs, acks="all", linger_ms=2, **settings) as p:
                i = 0
                while not stop.is_set():
                    sent.append(p.send(topic, value=b"%s-%d" % (tag, i)))
                    i += 1
                    if i % 200 == 0:
                        p.flush()
                p.flush()
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    t_old = threading.Thread(target=produce, args=(old, b"old"))
    t_old.start()
    try:
        time.sleep(1.0)
        # the rollout: admit the new key, move a client over, then retire the old key
        (sec.trust_dir / "client-2.key").write_text(new_pub.read_text())
        for p in fleet.status()["processes"]:
            if p["role"] != "zookeeper" and p["pid"]:
                fleet.signal(p["name"], signal.SIGHUP)
        t_new = threading.Thread(target=produce, args=(new, b"new"))
        t_new.start()
        time.sleep(2.0)
        (sec.trust_dir / "client.key").rename(tmp_path / "client.key.retired")
        for p in fleet.status()["processes"]:
            if p["role"] != "zookeeper" and p["pid"]:
                fleet.signal(p["name"], signal.SIGHUP)
        time.sleep(1.0)
    finally:
        stop.set()
        t_old.join(60)
        if "t_new" in locals():
            t_new.join(60)
    try:
        assert not failures, failures
        acked_values = {f.get(timeout=30) and None for f in sent}  # every send acknowledged
        assert acked_values == {None}
        with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                      **new) as c:
            c.assign([TopicPartition(topic, p) for p in range(3)])
            got = set()
            deadline = time.monotonic() + 60
            while len(got) < len(sent) and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=500).values():
                    got.update(r.value for r in recs)
        assert len(got) == len(sent)
        assert any(v.startswith(b"old-") for v in got) and any(v.startswith(b"new-") for v in got)
        # the retired key is refused at its next connection
        ch = Channel(bs, client_id="retired", security=client_security(**old))
        try:
            with pytest.raises(errors.RequestTimedOutError):
                ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(), timeout_ms=3000)
        finally:
            ch.close()
    finally:
        (tmp_path / "client.key.retired").rename(sec.trust_dir / "client.key")
        (sec.trust_dir / "client-2.key").unlink()
        for p in fleet.status()["processes"]:
            if p["role"] != "zookeeper" and p["pid"]:
                fleet.signal(p["name"], signal.SIGHUP)


def test_anonymous_zookeeper_client_cannot_write(fleet, acked):
    zk = anonymous_zk(fleet)
    try:
        state_path = zn.partition_state_path(TOPIC, 0)
        data, _ = zk.get(state_path)                          # public metadata: readable
        assert zn.decode_partition_state(data).leader >= 0
        with pytest.raises(NoAuthError):
            zk.set(state_path, data)
        with pytest.raises(NoAuthError):
            zk.delete(zn.CONTROLLER)
        with pytest.raises(NoAuthError):
            zk.set(zn.CONTROLLER_EPOCH, b"999")
        with pytest.raises(NoAuthError):
            zk.create(zn.topic_path("planted"), b"{}")
    finally:
        zk.stop()
        zk.close()
    # the fleet's own credentials may
    from services.common import zk as zkmod
    c = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False, auth=fleet.zk_auth)
    try:
        c.create("/security-probe", b"")
        c.delete("/security-probe")
    finally:
        zkmod.close(c)
