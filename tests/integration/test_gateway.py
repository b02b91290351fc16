"""The gateway as a real process against a real ZooKeeper.

First against test-side stand-ins (RpcServers in threads acting as storage nodes and the
controller; the test writes /controller and publishes UpdateMetadataRequest snapshots), to check
routing, splitting, merging, timeouts and admin forwarding over real sockets; then, when the
controller and storage node can run, a whole fleet: ZooKeeper + controller + 2 storage nodes + 2
gateways.
"""
from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys
import time

import pytest
import zmq
from node_helpers import NONE, REPO, ServiceProcess

from riverbed import errors
from riverbed._proto.v1 import (controller_pb2, fetch_pb2, list_offsets_pb2, metadata_pb2,
                                produce_pb2)
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel

from services.common import rpc
from services.common import znodes
from services.common.runtime import ServerThread

pytestmark = pytest.mark.integration

E = errors.ErrorCode


def wait_until(fn, timeout_s: float = 20.0, what: str = "condition", tail=lambda: ""):
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{tail()}")
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# processes

class GatewayProcess(ServiceProcess):
    """One gateway subprocess (gateway-<id>.log), given 15 s to stop on SIGTERM."""

    def __init__(self, tmp: pathlib.Path, gateway_id: int, port: int, zk_connect: str, **extra):
        self.gateway_id = gateway_id
        self.endpoint = f"tcp://127.0.0.1:{port}"
        props = {"gateway.id": gateway_id, "port": port, "host.name": "127.0.0.1",
                 "zookeeper.connect": zk_connect, **extra}
        super().__init__(tmp, "services.gateway", f"gateway-{gateway_id}", props,
                         stop_timeout_s=15)


@pytest.fixture
def gateway(tmp_path, free_ports, zk_chroot, processes):
    def make(gateway_id: int = 1, **extra) -> GatewayProcess:
        gw = GatewayProcess(tmp_path, gateway_id, free_ports(1)[0], zk_chroot, **extra)
        processes.append(gw)
        return gw.start()
    return make


@pytest.fixture
def channels():
    opened: list[Channel] = []

    def make(endpoint: str) -> Channel:
        ch = Channel(endpoint, client_id="test")
        opened.append(ch)
        return ch
    yield make
    for ch in opened:
        ch.close()


# --------------------------------------------------------------------------------------------
# stand-ins

class FakeNode:
    """A storage node stand-in: PRODUCE answers base_offset = 1000*node + position of the
    partition in its sub-request; FETCH answers payload b"n<id>:<topic>-<p>@<offset>"."""

    def __init__(self, node_id: int):
        self.node_id = node_id
        self.received: list[tuple[int, list[tuple[str, int]], list[bytes]]] = []
        self.not_leader: set[tuple[str, int]] = set()
        self.delay_s = 0.0
        self.thread = ServerThread(lambda: rpc.RpcServer("tcp://127.0.0.1:*", {
            ApiKey.PRODUCE: self._produce, ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets}, name=f"fake-node-{node_id}"))

    def start(self) -> "FakeNode":
        self.thread.start()
        self.endpoint = self.thread.endpoint
        return self

    def _record(self, req) -> list:
        entries = [(t.name, p) for t in req.body.topics for p in t.partitions]
        self.received.append((req.api, [(n, p.partition) for n, p in entries],
                              [bytes(f.buffer if hasattr(f, "buffer") else f) for f in req.payloads]))
        return entries

    def _code(self, name, p):
        return E.NOT_LEADER_FOR_PARTITION if (name, p) in self.not_leader else NONE

    async def _produce(self, req):
        entries = self._record(req)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if req.body.acks == 0:
            return None
        resp = produce_pb2.ProduceResponse()
        for i, (name, p) in enumerate(entries):
            resp.topics.add(name=name).partitions.add(
                partition=p.partition, error_code=self._code(name, p.partition),
                base_offset=1000 * self.node_id + i)
        return rpc.Reply(resp)

    async def _fetch(self, req):
        entries = self._record(req)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        resp = fetch_pb2.FetchResponse()
        payloads = []
        for name, p in entries:
            resp.topics.add(name=name).partitions.add(partition=p.partition, high_watermark=99)
            payloads.append(f"n{self.node_id}:{name}-{p.partition}@{p.fetch_offset}".encode())
        return rpc.Reply(resp, payloads)

    async def _list_offsets(self, req):
        entries = self._record(req)
        resp = list_offsets_pb2.ListOffsetsResponse()
        for name, p in entries:
            resp.topics.add(name=name).partitions.add(partition=p.partition,
                                                      offset=100 * self.node_id + p.partition)
        return rpc.Reply(resp)


class FakeController:
    """Answers METADATA from `topics` (name -> leaders by partition), CREATE_TOPICS by adding a
    topic led by node 1 (after calling `before_create` once, in a thread, if given); with
    `standby`, answers NOT_CONTROLLER (to CREATE_TOPICS after calling `on_standby`)."""

    def __init__(self, nodes: list[FakeNode], epoch: int = 1, *, controller_id: int = 100,
                 standby: bool = False, on_standby=None, before_create=None):
        self.nodes = nodes
        self.epoch = epoch
        self.version = 1
        self.controller_id = controller_id
        self.topics: dict[str, list[int]] = {}
        self.standby = standby
        self.on_standby = on_standby
        self.before_create = before_create
        self.calls: list[int] = []
        handlers = {api: self._handle for api in (
            ApiKey.METADATA, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.DESCRIBE_CONFIGS)}
        self.thread = ServerThread(lambda: rpc.RpcServer("tcp://127.0.0.1:*", handlers,
                                                         name=f"fake-controller-{controller_id}"))

    def start(self) -> "FakeController":
        self.thread.start()
        self.endpoint = self.thread.endpoint
        return self

    def snapshot(self) -> metadata_pb2.UpdateMetadataRequest:
        u = metadata_pb2.UpdateMetadataRequest(controller_id=self.controller_id,
                                               controller_epoch=self.epoch,
                                               metadata_version=self.version, cluster_id="fake")
        for n in self.nodes:
            host, port = n.endpoint[len("tcp://"):].split(":")
            u.live_brokers.add(node_id=n.node_id, host=host, port=int(port), endpoint=n.endpoint)
        for name, leaders in self.topics.items():
            t = u.topics.add(name=name)
            for p, leader in enumerate(leaders):
                t.partitions.add(partition=p, leader=leader, replicas=[leader], isr=[leader])
        return u

    async def _handle(self, req):
        self.calls.append(req.api)
        if self.standby:
            if self.on_standby and req.api == ApiKey.CREATE_TOPICS:
                await asyncio.to_thread(self.on_standby)
            raise errors.NotControllerError("standby")
        if req.api == ApiKey.METADATA:
            if req.body.allow_auto_topic_creation:
                for name in req.body.topics:
                    if name not in self.topics:
                        self.topics[name] = [1]
                        self.version += 1
            u = self.snapshot()
            resp = metadata_pb2.MetadataResponse(
                controller_id=u.controller_id, controller_epoch=u.controller_epoch,
                metadata_version=u.metadata_version, cluster_id=u.cluster_id)
            resp.brokers.extend(u.live_brokers)
            resp.topics.extend(t for t in u.topics
                               if not req.body.topics or t.name in req.body.topics)
            return rpc.Reply(resp)
        if req.api == ApiKey.CREATE_TOPICS:
            hook, self.before_create = self.before_create, None
            if hook is not None:
                await asyncio.to_thread(hook)
            resp = controller_pb2.CreateTopicsResponse()
            for t in req.body.topics:
                code = E.TOPIC_ALREADY_EXISTS if t.name in self.topics else NONE
                if code == NONE:
                    self.topics[t.name] = [1 + p % len(self.nodes) for p in range(t.num_partitions)]
                    self.version += 1
                resp.topics.add(name=t.name, error_code=code, num_partitions=t.num_partitions)
            return rpc.Reply(resp)
        raise errors.InvalidRequestError("not in this stand-in")


def write_controller(zk, ctl: FakeController, pub_endpoint: str) -> None:
    data = znodes.encode_controller(znodes.ControllerInfo(ctl.controller_id, ctl.endpoint,
                                                          pub_endpoint, int(time.time() * 1000)))
    if zk.exists(znodes.CONTROLLER):
        zk.set(znodes.CONTROLLER, data)
    else:
        zk.create(znodes.CONTROLLER, data, ephemeral=True)


@pytest.fixture
def fake_cluster(zk):
    """Two fake storage nodes, an active fake controller registered in /controller, and a PUB."""
    nodes = [FakeNode(1).start(), FakeNode(2).start()]
    ctl = FakeController(nodes).start()
    ctl.topics = {"orders": [1, 2, 1], "logs": [2]}
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    pub_endpoint = f"tcp://127.0.0.1:{pub_port}"
    write_controller(zk, ctl, pub_endpoint)
    cluster = type("FakeCluster", (), {})()
    cluster.nodes, cluster.controller, cluster.pub, cluster.pub_endpoint = nodes, ctl, pub, pub_endpoint
    cluster.extra: list = []
    yield cluster
    pub.close(0)
    for s in [ctl, *nodes, *cluster.extra]:
        s.thread.stop()


def metadata(ch: Channel, topics=(), auto=False, timeout_ms=10000):
    return ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(
        topics=list(topics), allow_auto_topic_creation=auto), timeout_ms=timeout_ms).body


def produce_req(entries, acks=1):
    req = produce_pb2.ProduceRequest(acks=acks, timeout_ms=1000)
    for name, parts in entries:
        t = req.topics.add(name=name)
        for p in parts:
            t.partitions.add(partition=p)
    return req


def parts_of(body):
    return [(t.name, p.partition, p.error_code) for t in body.topics for p in t.partitions]


def wait_gateway_ready(ch: Channel, gw: GatewayProcess, topic: str):
    def ready():
        assert gw.proc.poll() is None, f"gateway exited:\n{gw.log_tail()}"
        try:
            md = metadata(ch, timeout_ms=2000)
        except errors.KafkaError:
            return None
        return md if any(t.name == topic for t in md.topics) else None
    return wait_until(ready, 30, f"gateway {gw.gateway_id} to know {topic}", gw.log_tail)


# --------------------------------------------------------------------------------------------
# tests against stand-ins

def test_routes_splits_and_merges_over_real_sockets(fake_cluster, gateway, channels, zk):
    n1, n2 = fake_cluster.nodes
    gw = gateway(1)
    ch = channels(gw.endpoint)
    md = wait_gateway_ready(ch, gw, "orders")
    assert [b.node_id for b in md.brokers] == [1, 2]
    wait_until(lambda: [g.gateway_id for g in metadata(ch).gateways] == [1], what="gateway list")
    assert metadata(ch).gateways[0].endpoint == gw.endpoint
    assert zk.exists(znodes.gateway_path(1))

    # PRODUCE over two leaders, topics interleaved: answers in request order, frames aligned
    req = produce_req([("orders", [2, 1]), ("logs", [0]), ("orders", [0]), ("nope!", [0])])
    frames = [b"orders-2", b"orders-1", b"logs-0", b"orders-0", b"bad"]
    resp = ch.call(ApiKey.PRODUCE, req, payloads=frames, timeout_ms=10000).body
    got = [(t.name, p.partition, p.error_code, p.base_offset) for t in resp.topics
           for p in t.partitions]
    assert got == [("orders", 2, NONE, 1000), ("orders", 1, NONE, 2000), ("logs", 0, NONE, 2001),
                   ("orders", 0, NONE, 1001), ("nope!", 0, E.INVALID_TOPIC_EXCEPTION, -1)]
    assert n1.received[-1] == (ApiKey.PRODUCE, [("orders", 2), ("orders", 0)],
                               [b"orders-2", b"orders-0"])
    assert n2.received[-1] == (ApiKey.PRODUCE, [("orders", 1), ("logs", 0)],
                               [b"orders-1", b"logs-0"])

    # FETCH: response payload frames follow the request's partition order
    freq = fetch_pb2.FetchRequest(replica_id=-1, max_wait_ms=0)
    t = freq.topics.add(name="logs")
    t.partitions.add(partition=0, fetch_offset=7)
    t = freq.topics.add(name="orders")
    for p, off in ((1, 3), (0, 5), (2, -1)):
        t.partitions.add(partition=p, fetch_offset=off)
    fresp = ch.call(ApiKey.FETCH, freq, timeout_ms=10000)
    assert parts_of(fresp.body) == [("logs", 0, NONE), ("orders", 1, NONE), ("orders", 0, NONE),
                                    ("orders", 2, E.OFFSET_OUT_OF_RANGE)]
    assert [bytes(f) for f in fresp.payloads] == [b"n2:logs-0@7", b"n2:orders-1@3",
                                                  b"n1:orders-0@5", b""]

    # LIST_OFFSETS
    lreq = list_offsets_pb2.ListOffsetsRequest(replica_id=-1)
    t = lreq.topics.add(name="orders")
    for p in (1, 2):
        t.partitions.add(partition=p, timestamp=-1)
    lresp = ch.call(ApiKey.LIST_OFFSETS, lreq, timeout_ms=10000).body
    assert [(p.partition, p.offset) for p in lresp.topics[0].partitions] == [(1, 201), (2, 102)]

    # bad input: an envelope error, nothing forwarded, and the gateway keeps serving
    seen = (len(n1.received), len(n2.received))
    with pytest.raises(errors.InvalidRequestError):
        ch.call(ApiKey.PRODUCE, produce_req([("orders", [0, 1])]), payloads=[b"x"],
                timeout_ms=10000)
    bad_fetch = fetch_pb2.FetchRequest(replica_id=0)
    bad_fetch.topics.add(name="orders").partitions.add(partition=0)
    with pytest.raises(errors.InvalidRequestError):
        ch.call(ApiKey.FETCH, bad_fetch, timeout_ms=10000)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(gw.endpoint)
    sock.send_multipart([b"\xff\xff garbage", b"\x00"])
    assert sock.poll(10000), "no answer to a malformed request"
    assert len(sock.recv_multipart()) >= 2
    sock.close()
    neg = ch.call(ApiKey.PRODUCE, produce_req([("orders", [-1])]), payloads=[b"x"],
                  timeout_ms=10000).body
    assert parts_of(neg) == [("orders", -1, E.INVALID_REQUEST)]
    assert (len(n1.received), len(n2.received)) == seen

    # acks=0: forwarded one-way, no reply
    corr = ch.send(ApiKey.PRODUCE, produce_req([("logs", [0])], acks=0), payloads=[b"fire"],
                   expect_response=False)
    assert corr is not None
    wait_until(lambda: n2.received[-1][2] == [b"fire"], what="acks=0 produce at node 2")
    assert ch.recv(200) is None

    # DESCRIBE_CLUSTER from the cache
    dc = ch.call(ApiKey.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest(),
                 timeout_ms=10000).body
    assert (dc.cluster_id, dc.controller_id) == ("fake", 100)
    assert [b.node_id for b in dc.brokers] == [1, 2] and [g.gateway_id for g in dc.gateways] == [1]

    assert gw.stop() == 0
    wait_until(lambda: not zk.exists(znodes.gateway_path(1)), what="the gateway znode to go")


def test_a_clients_requests_reach_each_leader_in_the_order_sent(fake_cluster, gateway, channels):
    """A request over two leaders and the next one over one of them, sent back to back: the
    leader they share gets them in that order (a producer's batches for one partition stay in
    sequence), also when the gateway reads both at once."""
    n1, n2 = fake_cluster.nodes
    gw = gateway(1)
    ch = channels(gw.endpoint)
    wait_gateway_ready(ch, gw, "orders")
    pairs = 60
    corrs = []
    for i in range(pairs):
        corrs.append(ch.send(ApiKey.PRODUCE, produce_req([("orders", [0, 1])]),
                             payloads=[b"A%d" % i, b"a%d" % i]))        # orders-0 at 1, -1 at 2
        corrs.append(ch.send(ApiKey.PRODUCE, produce_req([("orders", [0])]),
                             payloads=[b"B%d" % i]))                    # orders-0 at 1 only
    answered = set()
    deadline = time.monotonic() + 30
    while len(answered) < len(corrs) and time.monotonic() < deadline:
        resp = ch.recv(1000)
        if resp is not None:
            answered.add(resp.header.correlation_id)
    assert answered == set(corrs)
    at_node1 = [f for api, _, frames in n1.received if api == ApiKey.PRODUCE for f in frames]
    want = [f for i in range(pairs) for f in (b"A%d" % i, b"B%d" % i)]
    assert at_node1[-len(want):] == want


def test_slow_leader_times_out_its_partitions_and_not_leader_refreshes(fake_cluster, gateway,
                                                                       channels):
    n1, n2 = fake_cluster.nodes
    ctl = fake_cluster.controller
    gw = gateway(1, **{"request.timeout.ms": 1500})
    ch = channels(gw.endpoint)
    wait_gateway_ready(ch, gw, "orders")

    req = produce_req([("orders", [0, 1, 2])])
    n2.delay_s = 30.0
    # header timeout 3000 ms: the gateway gives node 2 until 2400 ms, then answers per partition
    resp = ch.call(ApiKey.PRODUCE, req, payloads=[b"a", b"b", b"c"], timeout_ms=3000).body
    assert parts_of(resp) == [("orders", 0, NONE), ("orders", 1, E.REQUEST_TIMED_OUT),
                              ("orders", 2, NONE)]
    n2.delay_s = 0.0

    # node 1 stops leading orders-0; the controller moves it to node 2: the gateway refreshes
    n1.not_leader.add(("orders", 0))
    ctl.topics["orders"] = [2, 2, 1]
    ctl.version += 1
    one = produce_req([("orders", [0])])
    resp = ch.call(ApiKey.PRODUCE, one, payloads=[b"x"], timeout_ms=10000).body
    assert parts_of(resp) == [("orders", 0, E.NOT_LEADER_FOR_PARTITION)]

    def routed_to_node2():
        r = ch.call(ApiKey.PRODUCE, one, payloads=[b"y"], timeout_ms=10000).body
        return parts_of(r) == [("orders", 0, NONE)] and r.topics[0].partitions[0].base_offset == 2000
    wait_until(routed_to_node2, what="orders-0 routed to its new leader", tail=gw.log_tail)
    assert n2.received[-1][1:] == ([("orders", 0)], [b"y"])


def test_metadata_updates_admin_forwarding_and_unknown_topics(fake_cluster, gateway, channels,
                                                              zk):
    ctl = fake_cluster.controller
    gw = gateway(1)
    ch = channels(gw.endpoint)
    wait_gateway_ready(ch, gw, "orders")

    # a snapshot on the PUB socket reaches the cache (METADATA for all topics asks nobody)
    ctl.topics["pushed"] = [2]
    ctl.version += 1

    def pushed():
        fake_cluster.pub.send_multipart([b"metadata", ctl.snapshot().SerializeToString()])
        return any(t.name == "pushed" for t in metadata(ch).topics)
    wait_until(pushed, what="the published snapshot")
    # an older snapshot is ignored
    stale = ctl.snapshot()
    stale.metadata_version = 0
    del stale.topics[:]
    fake_cluster.pub.send_multipart([b"metadata", stale.SerializeToString()])
    fake_cluster.pub.send_multipart([b"metadata", b"\xff not a protobuf"])
    assert any(t.name == "pushed" for t in metadata(ch).topics)

    # a topic created behind the gateway's back: the first produce refreshes and succeeds
    ctl.topics["fresh"] = [1]
    ctl.version += 1
    resp = ch.call(ApiKey.PRODUCE, produce_req([("fresh", [0])]), payloads=[b"f"],
                   timeout_ms=10000).body
    assert parts_of(resp) == [("fresh", 0, NONE)]
    # an unknown topic stays unknown
    resp = ch.call(ApiKey.PRODUCE, produce_req([("never", [0])]), payloads=[b"n"],
                   timeout_ms=10000).body
    assert parts_of(resp) == [("never", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
    md = metadata(ch, ["never"])
    assert md.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    md = metadata(ch, ["auto"], auto=True)
    assert [(t.name, t.error_code) for t in md.topics] == [("auto", NONE)]
    assert [g.gateway_id for g in md.gateways] == [1]

    # admin: the first controller is a standby that hands over (rewrites /controller) and
    # answers NOT_CONTROLLER; the gateway re-reads /controller and retries
    active = ctl
    standby = FakeController(fake_cluster.nodes, controller_id=200, standby=True,
                             on_standby=lambda: write_controller(zk, active, fake_cluster.pub_endpoint))
    standby.start()
    fake_cluster.extra.append(standby)
    write_controller(zk, standby, fake_cluster.pub_endpoint)
    wait_until(lambda: metadata(ch).controller_id in (100, 200), what="controller")
    create = controller_pb2.CreateTopicsRequest(timeout_ms=1000)
    create.topics.add(name="admin-made", num_partitions=2, replication_factor=1)

    def created():
        # The gateway may not have seen the standby yet; once it calls it, it must retry.
        r = ch.call(ApiKey.CREATE_TOPICS, create, timeout_ms=10000).body
        return r.topics[0] if ApiKey.CREATE_TOPICS in standby.calls else None
    topic = wait_until(created, what="CREATE_TOPICS through the standby")
    assert topic.name == "admin-made" and topic.error_code in (NONE, E.TOPIC_ALREADY_EXISTS)
    assert standby.calls.count(ApiKey.CREATE_TOPICS) == 1
    assert "admin-made" in active.topics
    # a controller's own envelope error goes back to the client typed
    with pytest.raises(errors.InvalidRequestError):
        ch.call(ApiKey.DESCRIBE_CONFIGS, controller_pb2.DescribeConfigsRequest(topics=["x"]),
                timeout_ms=10000)
    resp = ch.call(ApiKey.PRODUCE, produce_req([("admin-made", [1])]), payloads=[b"m"],
                   timeout_ms=10000).body
    assert parts_of(resp) == [("admin-made", 1, NONE)]


def test_admin_call_survives_a_controller_change_racing_a_resignation(fake_cluster, gateway,
                                                                     channels, zk):
    """/controller moves to a standby while a CREATE_TOPICS is out at the active controller (the
    gateway drops that call), the standby has already resigned (NOT_CONTROLLER, /controller moves
    back): the gateway follows both changes and the client sees one answer, not NOT_CONTROLLER."""
    active = fake_cluster.controller
    gw = gateway(1)
    ch = channels(gw.endpoint)
    wait_gateway_ready(ch, gw, "orders")
    standby = FakeController(fake_cluster.nodes, controller_id=200, standby=True,
                             on_standby=lambda: write_controller(zk, active, fake_cluster.pub_endpoint))
    standby.start()
    fake_cluster.extra.append(standby)

    def move_to_standby_and_wait_for_its_call():
        write_controller(zk, standby, fake_cluster.pub_endpoint)
        wait_until(lambda: ApiKey.CREATE_TOPICS in standby.calls, what="the call at the standby")
    active.before_create = move_to_standby_and_wait_for_its_call
    create = controller_pb2.CreateTopicsRequest(timeout_ms=1000)
    create.topics.add(name="raced", num_partitions=1, replication_factor=1)
    r = ch.call(ApiKey.CREATE_TOPICS, create, timeout_ms=20000).body
    assert [(t.name, t.error_code) for t in r.topics] in ([("raced", NONE)],
                                                           [("raced", E.TOPIC_ALREADY_EXISTS)])
    assert standby.calls.count(ApiKey.CREATE_TOPICS) == 1
    assert active.calls.count(ApiKey.CREATE_TOPICS) == 2
    assert "raced" in active.topics


def test_two_gateways_side_by_side(fake_cluster, gateway, channels, zk):
    g1, g2 = gateway(1), gateway(2)
    c1, c2 = channels(g1.endpoint), channels(g2.endpoint)
    wait_gateway_ready(c1, g1, "orders")
    wait_gateway_ready(c2, g2, "orders")
    for ch in (c1, c2):
        wait_until(lambda: sorted(g.gateway_id for g in metadata(ch).gateways) == [1, 2],
                   what="both gateways listed")
    resp = c2.call(ApiKey.PRODUCE, produce_req([("logs", [0])]), payloads=[b"two"],
                   timeout_ms=10000).body
    assert parts_of(resp) == [("logs", 0, NONE)]
    assert g1.stop() == 0
    wait_until(lambda: [g.gateway_id for g in metadata(c2).gateways] == [2],
               what="gateway 1 to leave the list")


def test_bad_config_exits_2(tmp_path):
    cfg = tmp_path / "gw.properties"
    cfg.write_text("gateway.id=1\nport=banana\n")
    r = subprocess.run([sys.executable, "-m", "services.gateway", "--config", str(cfg)],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "port" in r.stderr


# --------------------------------------------------------------------------------------------
# the real fleet

def test_real_fleet_create_produce_fetch_across_gateways(tmp_path, free_ports, zk_chroot, zk,
                                                         processes, gateway, channels):
    from riverbed.records import build_batch, decode_batches

    ctl_port, pub_port, s1, s2 = free_ports(4)
    zk_keys = {"zookeeper.connect": zk_chroot, "host.name": "127.0.0.1"}
    controller = ServiceProcess(tmp_path, "services.controller", "controller-1", {
        "controller.id": 1, "port": ctl_port, "pub.port": pub_port, **zk_keys}, stop_timeout_s=15)
    nodes = [ServiceProcess(tmp_path, "services.storage_node", f"storage-{i}", {
        "broker.id": i, "port": port, "log.dirs": tmp_path / f"logs-{i}", **zk_keys,
        "replica.fetch.wait.max.ms": 200}, stop_timeout_s=15) for i, port in ((1, s1), (2, s2))]
    for p in (controller, *nodes):
        processes.append(p)
        p.start()
    tails = lambda: "\n".join(f"--- {p.name}\n{p.log_tail()}" for p in processes)  # noqa: E731
    wait_until(lambda: len(zk.get_children(znodes.BROKER_IDS)) == 2 if zk.exists(znodes.BROKER_IDS)
               else False, 60, "both storage nodes registered", tails)
    wait_until(lambda: zk.exists(znodes.CONTROLLER), 60, "an active controller", tails)
    g1, g2 = gateway(1), gateway(2)
    c1, c2 = channels(g1.endpoint), channels(g2.endpoint)

    def brokers_known(ch):
        try:
            return len(metadata(ch, timeout_ms=2000).brokers) == 2
        except errors.KafkaError:
            return False
    wait_until(lambda: brokers_known(c1) and brokers_known(c2), 60, "gateways to see 2 nodes", tails)

    create = controller_pb2.CreateTopicsRequest(timeout_ms=10000)
    create.topics.add(name="events", num_partitions=2, replication_factor=2)
    result = c1.call(ApiKey.CREATE_TOPICS, create, timeout_ms=20000).body.topics[0]
    assert (result.name, result.error_code) == ("events", NONE), result.error_message

    def leaders_known(ch):
        md = metadata(ch, ["events"])
        t = md.topics[0]
        return t.error_code == NONE and len(t.partitions) == 2 and all(
            p.leader >= 1 for p in t.partitions)
    wait_until(lambda: leaders_known(c1) and leaders_known(c2), 60, "leaders for events", tails)

    batches = {p: build_batch([(int(time.time() * 1000), f"k{p}".encode(), f"v{p}-{i}".encode())
                               for i in range(3)]) for p in (0, 1)}

    def produced():
        req = produce_req([("events", [1, 0])])
        body = c1.call(ApiKey.PRODUCE, req, payloads=[batches[1], batches[0]],
                       timeout_ms=20000).body
        codes = [p.error_code for p in body.topics[0].partitions]
        if any(c in (E.NOT_LEADER_FOR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION,
                     E.LEADER_NOT_AVAILABLE) for c in codes):
            return None    # leaders still being told: retriable, as a client would retry
        return body
    body = wait_until(produced, 60, "produce through gateway 1", tails)
    assert [(p.partition, p.error_code) for p in body.topics[0].partitions] == [(1, NONE), (0, NONE)]
    base = {p.partition: p.base_offset for p in body.topics[0].partitions}

    freq = fetch_pb2.FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=0)
    t = freq.topics.add(name="events")
    for p in (0, 1):
        t.partitions.add(partition=p, fetch_offset=base[p], partition_max_bytes=1 << 20)

    def fetched():
        resp = c2.call(ApiKey.FETCH, freq, timeout_ms=20000)
        values = {}
        for part, frame in zip(resp.body.topics[0].partitions, resp.payloads):
            if part.error_code != NONE:
                return None
            values[part.partition] = [r.value for r in decode_batches(bytes(frame))]
        return values if all(values.values()) else None
    values = wait_until(fetched, 60, "records through gateway 2", tails)
    assert values == {0: [b"v0-0", b"v0-1", b"v0-2"], 1: [b"v1-0", b"v1-1", b"v1-2"]}
    assert g1.stop() == 0 and g2.stop() == 0
