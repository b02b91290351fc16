"""Replication between real storage-node processes: ISR shrink/expand through ALTER_PARTITION,
acks=-1 with the remaining ISR, a killed follower catching up, an old leader truncating its
uncommitted tail by leader epochs, controlled shutdown.

The test plays the controller: LEADER_AND_ISR over a Channel, and a tiny stand-in RpcServer
(ServerThread) registered in /controller that commits ALTER_PARTITION proposals the way the
real controller must (leader epoch and zk version checked) and answers CONTROLLED_SHUTDOWN.
"""
from __future__ import annotations

import pathlib
import signal
import threading
import time

import pytest
from node_helpers import NONE, StorageNodeProcess, stop_processes, wait_registered

from riverbed import errors
from riverbed._proto.v1 import controller_pb2, produce_pb2, replication_pb2
from riverbed.records import build_batch, decode_batches
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel

from services.common import znodes
from services.common.rpc import Reply, RpcServer
from services.common.runtime import ServerThread

pytestmark = pytest.mark.integration

TOPIC = "events"
TP = (TOPIC, 0)
WAIT_S = 60          # generous bound for polling loops (never a timing assertion)


class Node(StorageNodeProcess):
    def __init__(self, tmp: pathlib.Path, broker_id: int, port: int, zk_connect: str, **extra):
        super().__init__(tmp, broker_id, port, zk_connect, **{
            "replica.lag.time.max.ms": 1000, "alter.partition.retry.backoff.ms": 100,
            "controlled.shutdown.retry.backoff.ms": 100, **extra})

    def segment_bytes(self, topic=TOPIC, partition=0) -> bytes:
        d = self.log_dir / f"{topic}-{partition}"
        return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


class ControllerStandIn:
    """The controller's side of ALTER_PARTITION / CONTROLLED_SHUTDOWN for one partition, as
    the real controller must do it: refuse a stale leader epoch or zk version, else commit
    (zk_version + 1) and answer with the committed state."""

    def __init__(self, zk, endpoint: str, controller_epoch: int = 1):
        self.zk = zk
        self.controller_epoch = controller_epoch
        self.lock = threading.Lock()
        self.state: dict = {}            # tp -> dict(leader, leader_epoch, isr, zk_version)
        self.alters: list[tuple[tuple, list[int], int]] = []   # (tp, new_isr, error)
        self.shutdowns: list[tuple[int, int]] = []
        self.thread = ServerThread(lambda: RpcServer(endpoint, {
            ApiKey.ALTER_PARTITION: self._alter, ApiKey.CONTROLLED_SHUTDOWN: self._shutdown,
        }, name="controller-stand-in"), name="controller-stand-in")

    def __enter__(self):
        self.thread.start()
        self.zk.create(znodes.CONTROLLER, znodes.encode_controller(znodes.ControllerInfo(
            controller_id=100, endpoint=self.thread.endpoint, pub_endpoint="")), ephemeral=True)
        return self

    def __exit__(self, *exc):
        self.thread.stop()

    async def _alter(self, req) -> Reply:
        resp = replication_pb2.AlterPartitionResponse()
        with self.lock:
            for p in req.body.partitions:
                tp = (p.topic, p.partition)
                st = self.state.get(tp)
                out = resp.partitions.add(topic=p.topic, partition=p.partition)
                if st is None:
                    out.error_code = errors.UnknownTopicOrPartitionError.code
                elif p.leader_epoch != st["leader_epoch"] or p.leader_id != st["leader"]:
                    out.error_code = errors.FencedLeaderEpochError.code
                elif p.partition_epoch != st["zk_version"]:
                    out.error_code = errors.InvalidRequestError.code
                else:
                    st["isr"] = list(p.new_isr)
                    st["zk_version"] += 1
                    out.leader_id, out.leader_epoch = st["leader"], st["leader_epoch"]
                    out.isr.extend(st["isr"])
                    out.partition_epoch = st["zk_version"]
                self.alters.append((tp, list(p.new_isr), out.error_code))
        return Reply(resp)

    async def _shutdown(self, req) -> Reply:
        with self.lock:
            self.shutdowns.append((req.body.broker_id, req.body.broker_epoch))
        return Reply(replication_pb2.ControlledShutdownResponse())

    def isr(self, tp=TP) -> list[int]:
        with self.lock:
            return list(self.state[tp]["isr"])

    def elect(self, tp, leader: int, isr: list[int]) -> None:
        with self.lock:
            st = self.state.get(tp)
            if st is None:
                self.state[tp] = dict(leader=leader, leader_epoch=0, isr=list(isr), zk_version=0)
            else:
                st.update(leader=leader, leader_epoch=st["leader_epoch"] + 1, isr=list(isr),
                          zk_version=st["zk_version"] + 1)

    def leader_and_isr(self, node: Node, replicas: list[int], leaders: list[Node], tp=TP, *,
                       tps=None):
        """One LEADER_AND_ISR to `node` naming `tp` (or every partition in `tps`) with this
        stand-in's state."""
        req = controller_pb2.LeaderAndIsrRequest(controller_id=100,
                                                 controller_epoch=self.controller_epoch)
        with self.lock:
            for p in tps or [tp]:
                st = self.state[p]
                req.partitions.add(topic=p[0], partition=p[1],
                                   controller_epoch=self.controller_epoch, leader=st["leader"],
                                   leader_epoch=st["leader_epoch"], isr=st["isr"],
                                   zk_version=st["zk_version"], replicas=replicas)
        for n in leaders:
            req.live_leaders.add(node_id=n.broker_id, host="127.0.0.1", port=n.port,
                                 endpoint=n.endpoint)
        with Channel(node.endpoint) as ch:
            body = ch.call(ApiKey.LEADER_AND_ISR, req, timeout_ms=10000).body
        assert body.error_code == NONE and all(p.error_code == NONE for p in body.partitions), body


@pytest.fixture
def cluster(tmp_path, free_ports, zk_chroot, zk, processes):
    started: list[Node] = []

    def make(broker_id: int, **extra) -> Node:
        node = Node(tmp_path, broker_id, free_ports(1)[0], zk_chroot, **extra)
        started.append(node)
        processes.append(node)
        return node
    with ControllerStandIn(zk, f"tcp://127.0.0.1:{free_ports(1)[0]}") as ctl:
        try:
            yield make, ctl
        finally:
            stop_processes(started)      # before the stand-in controller goes


def wait_until(cond, what: str, nodes=()) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}\n" +
                         "\n".join(f"--- node {n.broker_id}\n{n.log_tail()}" for n in nodes))


def produce(node: Node, values, acks=-1, timeout_ms=15000):
    req = produce_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
    req.topics.add(name=TOPIC).partitions.add(partition=0)
    batch = build_batch([(1_700_000_000_000 + i, None, v) for i, v in enumerate(values)])
    with Channel(node.endpoint) as ch:
        resp = ch.call(ApiKey.PRODUCE, req, payloads=[batch], timeout_ms=timeout_ms + 10000)
    return resp.body.topics[0].partitions[0]


def log_end(node: Node) -> int:
    from riverbed._proto.v1 import list_offsets_pb2
    req = list_offsets_pb2.ListOffsetsRequest(replica_id=node.broker_id)
    req.topics.add(name=TOPIC).partitions.add(partition=0, timestamp=-1)
    with Channel(node.endpoint) as ch:
        return ch.call(ApiKey.LIST_OFFSETS, req).body.topics[0].partitions[0].offset


def records(data: bytes):
    return [(r.offset, r.value) for r in decode_batches(data)]


def test_isr_shrinks_on_a_stopped_follower_acks_continue_and_it_rejoins(cluster, zk):
    make, ctl = cluster
    nodes = [make(i).start() for i in (1, 2, 3)]
    epochs = {n.broker_id: wait_registered(zk, n, WAIT_S).stat.czxid for n in nodes}
    a, b, c = nodes
    ctl.elect(TP, 1, [1, 2, 3])
    for n in nodes:
        ctl.leader_and_isr(n, [1, 2, 3], [a])
    p = produce(a, [b"r0", b"r1"])
    assert (p.error_code, p.base_offset) == (NONE, 0)

    c.signal(signal.SIGSTOP)
    try:
        # acks=-1 keeps being acknowledged: the stopped follower is dropped after the lag time
        for i in range(2, 8):
            p = produce(a, [f"r{i}".encode()])
            assert (p.error_code, p.base_offset) == (NONE, i), p.error_message
        assert ctl.isr() == [1, 2]
        assert ([tp for tp, isr, code in ctl.alters if isr == [1, 2] and code == NONE]
                == [TP])
    finally:
        c.signal(signal.SIGCONT)
    # it catches up and is added back (the leader proposes, the controller commits)
    produce(a, [b"r8"])
    wait_until(lambda: sorted(ctl.isr()) == [1, 2, 3], "node 3 back in the ISR", nodes)
    p = produce(a, [b"r9"])                  # the whole ISR acknowledges again
    assert (p.error_code, p.base_offset) == (NONE, 9)
    wait_until(lambda: log_end(c) == 10, "node 3 caught up", nodes)

    # controlled shutdown: the leader asks the controller before it stops, then exits 0
    assert a.stop(signal.SIGTERM) == 0, a.log_tail()
    assert ctl.shutdowns == [(1, epochs[1])]
    for n in (b, c):
        assert n.stop(signal.SIGTERM) == 0, n.log_tail()
    want = [(i, f"r{i}".encode()) for i in range(10)]
    assert records(a.segment_bytes()) == want
    assert b.segment_bytes() == a.segment_bytes() == c.segment_bytes()


def test_killed_follower_catches_up_and_old_leader_truncates_its_uncommitted_tail(cluster, zk):
    make, ctl = cluster
    a, b = make(1).start(), make(2).start()
    wait_registered(zk, a, WAIT_S)
    wait_registered(zk, b, WAIT_S)
    ctl.elect(TP, 1, [1, 2])                                  # epoch 0, leader 1
    ctl.leader_and_isr(a, [1, 2], [a])
    ctl.leader_and_isr(b, [1, 2], [a])
    assert produce(a, [b"c0", b"c1", b"c2"]).error_code == NONE      # committed on both

    # 1. the follower dies; the leader goes on with acks=1; the follower comes back and catches up
    b.stop(signal.SIGKILL)
    assert produce(a, [b"c3", b"c4"], acks=1).base_offset == 3
    b.start()
    wait_registered(zk, b, WAIT_S)
    ctl.leader_and_isr(b, [1, 2], [a])
    wait_until(lambda: log_end(b) == 5, "node 2 caught up after restart", [a, b])
    wait_until(lambda: sorted(ctl.isr()) == [1, 2], "node 2 back in the ISR", [a, b])
    assert produce(a, [b"c5"]).base_offset == 5                      # acks=-1 with both

    # 2. the follower dies again; the leader takes writes that never reach it (acks=1)
    b.stop(signal.SIGKILL)
    for v in (b"x6", b"x7", b"x8"):
        assert produce(a, [v], acks=1).error_code == NONE
    assert log_end(a) == 9
    # the follower comes back as the new leader (epoch 1): x6..x8 were never committed
    b.start()
    wait_registered(zk, b, WAIT_S)
    ctl.elect(TP, 2, [2])
    ctl.leader_and_isr(b, [1, 2], [b])
    assert produce(b, [b"y6", b"y7"], acks=1).base_offset == 6
    # the old leader follows at epoch 1: the new leader's epochs say epoch 0 ended at 6, so it
    # truncates x6..x8 (its own high watermark could not tell) and replicates y6, y7
    ctl.leader_and_isr(a, [1, 2], [b])
    wait_until(lambda: log_end(a) == 8 and sorted(ctl.isr()) == [1, 2],
               "old leader converged and rejoined", [a, b])
    assert "diverg" in a.log_tail()
    p = produce(b, [b"y8"])
    assert (p.error_code, p.base_offset) == (NONE, 8)

    for n in (a, b):
        assert n.stop(signal.SIGTERM) == 0, n.log_tail()
    want = [(0, b"c0"), (1, b"c1"), (2, b"c2"), (3, b"c3"), (4, b"c4"), (5, b"c5"),
            (6, b"y6"), (7, b"y7"), (8, b"y8")]
    assert records(b.segment_bytes()) == want
    assert a.segment_bytes() == b.segment_bytes()
    # both replicas' leader-epoch checkpoints agree: epoch 0 from 0, epoch 1 from 6
    ep_a = (a.log_dir / f"{TOPIC}-0" / "leader-epoch-checkpoint").read_text().split("\n")
    ep_b = (b.log_dir / f"{TOPIC}-0" / "leader-epoch-checkpoint").read_text().split("\n")
    assert ep_a == ep_b and "1 6" in ep_b
