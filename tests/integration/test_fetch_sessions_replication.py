"""Incremental fetch sessions (KIP-227) between real storage-node processes: followers name only
the partitions whose fetch state changed, yet idle partitions stay in the ISR over several
replica.lag.time.max.ms periods, an append to a partition the session does not name wakes the
long poll, acks=all writes to many partitions complete, and a restarted leader (which has no
session) makes its follower fall back to a full fetch.

The test plays the controller, as test_replication_node does (its ControllerStandIn commits
ALTER_PARTITION proposals); the followers' fetch counts come from each node's Prometheus
endpoint (riverbed.server.replica_fetches, replica_fetch.partitions_named).
"""
from __future__ import annotations

import re
import signal
import time
import urllib.request

import pytest
from node_helpers import NONE, wait_registered
from test_replication_node import (  # noqa: F401 (cluster: a fixture used here)
    WAIT_S, ControllerStandIn, Node, cluster, wait_until)

from riverbed import errors
from riverbed._proto.v1 import fetch_pb2, produce_pb2
from riverbed.records import build_batch, decode_batches
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel

pytestmark = pytest.mark.integration

TOPIC = "sessions"
LAG_MS = 1000          # replica.lag.time.max.ms of test_replication_node.Node


@pytest.fixture
def fleet(cluster, free_ports):
    """test_replication_node's cluster, each node with a metrics endpoint (`metrics_port`)."""
    make, ctl = cluster

    def make_with_metrics(broker_id: int, **extra) -> Node:
        metrics_port = free_ports(1)[0]
        node = make(broker_id, **{"metrics.port": metrics_port, **extra})
        node.metrics_port = metrics_port
        return node
    return make_with_metrics, ctl


def leader_and_isr(ctl: ControllerStandIn, node: Node, tps, replicas, leaders) -> None:
    """One LEADER_AND_ISR naming every partition in `tps` with the stand-in's state."""
    ctl.leader_and_isr(node, replicas, leaders, tps=tps)


def produce(node: Node, tps, value: bytes, timeout_ms=10000):
    """One acks=-1 batch to each partition in one request: {tp: (error, base offset)}."""
    req = produce_pb2.ProduceRequest(acks=-1, timeout_ms=timeout_ms)
    t = req.topics.add(name=TOPIC)
    for tp in tps:
        t.partitions.add(partition=tp[1])
    batch = build_batch([(1_700_000_000_000, None, value)])
    with Channel(node.endpoint) as ch:
        resp = ch.call(ApiKey.PRODUCE, req, payloads=[batch] * len(tps),
                       timeout_ms=timeout_ms + 10000)
    return {(TOPIC, p.partition): (p.error_code, p.base_offset)
            for p in resp.body.topics[0].partitions}


def metrics(node: Node) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics",
                                  timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(riverbed_server_(?:replica_fetch\w*|fetch_sessions\w*|purgatory_size)"
                     r"(?:\{[^}]*\})?)\s+(\S+)$", line)
        if m:
            name = re.sub(r',?(job|instance|service_\w+|otel_\w+)="[^"]*"', "", m.group(1))
            out[name.replace("{}", "")] = float(m.group(2))
    return out


def fetch_counts(node: Node) -> tuple[float, float, float, float]:
    """(full fetches, incremental fetches, partitions named, session errors) of a follower."""
    m = metrics(node)

    def pick(prefix, label=""):
        return sum(v for k, v in m.items() if k.startswith(prefix) and label in k)
    return (pick("riverbed_server_replica_fetches", 'kind="full"'),
            pick("riverbed_server_replica_fetches", 'kind="incremental"'),
            pick("riverbed_server_replica_fetch_partitions_named"),
            pick("riverbed_server_replica_fetch_session_errors"))


def opened(node: Node, replica_id: int) -> int:
    """Fetch sessions the node opened for a replica, over its whole log (restarts included)."""
    return node.out.read_text(errors="replace").count(f"opened for replica {replica_id} ")


def records(node: Node, tp) -> list[bytes]:
    """A consumer's fetch of the partition from its leader (sessionless)."""
    req = fetch_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0)
    req.topics.add(name=tp[0]).partitions.add(partition=tp[1], fetch_offset=0,
                                              partition_max_bytes=1 << 20)
    with Channel(node.endpoint) as ch:
        resp = ch.call(ApiKey.FETCH, req, timeout_ms=10000)
    assert resp.body.session_id == 0            # consumers fetch without a session
    return [r.value for r in decode_batches(bytes(resp.payloads[0]))]


def replicating_in_sessions(fleet, zk, tps, value: bytes, **extra) -> list[Node]:
    """Nodes 1, 2, 3 (node 1 leads `tps`, all three replicas, `extra` config), one acks=-1
    `value` in each partition, and the followers' fetches incremental: returns the nodes."""
    make, ctl = fleet
    nodes = [make(i, **extra).start() for i in (1, 2, 3)]
    for n in nodes:
        wait_registered(zk, n, WAIT_S)
    for tp in tps:
        ctl.elect(tp, 1, [1, 2, 3])
    for n in nodes:
        leader_and_isr(ctl, n, tps, [1, 2, 3], [nodes[0]])
    assert produce(nodes[0], tps, value) == {tp: (NONE, 0) for tp in tps}
    # sessions are open: the followers' fetches are incremental from now on
    wait_until(lambda: all(fetch_counts(f)[1] > 0 for f in nodes[1:]), "incremental fetches",
               nodes)
    return nodes


def test_idle_partitions_stay_in_the_isr_while_the_session_omits_them(fleet, zk):
    _, ctl = fleet
    tps = [(TOPIC, p) for p in range(20)]
    # A long poll of 30 s: an append to a partition the session does not name must wake it,
    # or the acks=-1 produces below (timeout 10 s) would time out.
    nodes = replicating_in_sessions(fleet, zk, tps, b"first",
                                    **{"replica.fetch.wait.max.ms": 30000})
    a, b, c = nodes
    before = {f.broker_id: fetch_counts(f) for f in (b, c)}

    # several lag periods with only partition 0 written: the others are idle and not named
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < 4 * LAG_MS / 1000:
        i += 1
        assert produce(a, [tps[0]], b"busy-%d" % i) == {tps[0]: (NONE, i)}
        time.sleep(0.05)
    for f in (b, c):
        full, inc, named, errs = fetch_counts(f)
        full0, inc0, named0, errs0 = before[f.broker_id]
        assert (full, errs) == (full0, errs0), f.log_tail()     # no fallback to full fetches
        assert inc > inc0
        assert named - named0 <= inc - inc0      # each names partition 0 at most
    assert all(ctl.isr(tp) == [1, 2, 3] for tp in tps)
    assert [x for x in ctl.alters if x[1] != [1, 2, 3]] == []  # no shrink was ever proposed

    # every partition, idle until now, takes an acks=-1 write at once (whole ISR, long poll
    # woken by partitions the fetches in flight do not name)
    for k, tp in enumerate(tps[1:], start=1):
        assert produce(a, [tp], b"late-%d" % k) == {tp: (NONE, 1)}
    assert produce(a, tps, b"last") == {tp: (NONE, (i + 1) if tp == tps[0] else 2)
                                        for tp in tps}
    assert all(ctl.isr(tp) == [1, 2, 3] for tp in tps)
    # the followers hold exactly the leader's records
    wait_until(lambda: all(f.segment_bytes(*tp) == a.segment_bytes(*tp)
                           for f in (b, c) for tp in tps), "followers' logs equal the leader's",
               nodes)
    assert records(a, tps[7]) == [b"first", b"late-7", b"last"]
    assert records(a, tps[0]) == [b"first"] + [b"busy-%d" % k for k in range(1, i + 1)] \
        + [b"last"]


def test_unknown_session_and_wrong_epoch_are_refused(fleet, zk):
    make, ctl = fleet
    a = make(1).start()
    wait_registered(zk, a, WAIT_S)
    tp = (TOPIC, 0)
    ctl.elect(tp, 1, [1])
    leader_and_isr(ctl, a, [tp], [1], [a])

    def fetch(session_id, epoch, replica_id=2):
        req = fetch_pb2.FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=0,
                                     session_id=session_id, session_epoch=epoch)
        req.topics.add(name=TOPIC).partitions.add(partition=0, fetch_offset=0,
                                                  partition_max_bytes=1024,
                                                  current_leader_epoch=0, last_fetched_epoch=-1,
                                                  log_start_offset=-1)
        with Channel(a.endpoint) as ch:
            return ch.call(ApiKey.FETCH, req, timeout_ms=10000).body

    body = fetch(12345, 1)
    assert (body.error_code, len(body.topics)) == (errors.FetchSessionIdNotFoundError.code, 0)
    body = fetch(0, 0)                                   # full: opens a session
    sid = body.session_id
    assert sid != 0 and body.error_code == NONE and len(body.topics[0].partitions) == 1
    body = fetch(sid, 5)
    assert body.error_code == errors.InvalidFetchSessionEpochError.code
    body = fetch(sid, 1)                                 # incremental, nothing changed
    assert (body.error_code, body.session_id, len(body.topics)) == (NONE, sid, 0)
    body = fetch(sid, 2, replica_id=3)                   # another replica's id: not its session
    assert body.error_code == errors.FetchSessionIdNotFoundError.code


def test_a_restarted_leader_makes_its_follower_fall_back_to_a_full_fetch(fleet, zk):
    make, ctl = fleet
    a = make(1).start()
    b = make(2, **{"replica.socket.timeout.ms": 2000}).start()
    for n in (a, b):
        wait_registered(zk, n, WAIT_S)
    tps = [(TOPIC, p) for p in range(5)]
    for tp in tps:
        ctl.elect(tp, 1, [1, 2])
    for n in (a, b):
        leader_and_isr(ctl, n, tps, [1, 2], [a])
    assert produce(a, tps, b"v0") == {tp: (NONE, 0) for tp in tps}
    wait_until(lambda: fetch_counts(b)[1] > 0, "incremental fetches", [a, b])

    # The leader restarts: it has no session now. The follower's fetch in flight is lost with
    # the old process (it fails after replica.socket.timeout.ms) or, had it been answered, the
    # next incremental one meets FETCH_SESSION_ID_NOT_FOUND; either way the follower's next
    # fetch is a full one, which opens a new session.
    full0, _, _, errs0 = fetch_counts(b)
    assert a.stop(signal.SIGTERM) == 0, a.log_tail()
    a.start()
    wait_registered(zk, a, WAIT_S)
    leader_and_isr(ctl, a, tps, [1, 2], [a])
    wait_until(lambda: fetch_counts(b)[0] > full0, "a full fetch at the follower", [a, b])
    wait_until(lambda: opened(a, 2) >= 2,
               "a new session on the restarted leader", [a, b])
    inc1 = fetch_counts(b)[1]
    wait_until(lambda: fetch_counts(b)[1] > inc1 and metrics(a).get(
        "riverbed_server_fetch_sessions") == 1, "incremental fetches in the new session",
        [a, b])
    # replication goes on, acks=-1 with both replicas, order kept
    assert produce(a, tps, b"v1") == {tp: (NONE, 1) for tp in tps}
    wait_until(lambda: all(b.segment_bytes(*tp) == a.segment_bytes(*tp) for tp in tps),
               "the follower has every record", [a, b])
    assert [records(a, tp) for tp in tps] == [[b"v0", b"v1"]] * len(tps)
    assert all(ctl.isr(tp) == [1, 2] for tp in tps)


def test_partitions_moving_to_another_leader_are_forgotten_and_the_session_goes_on(fleet, zk):
    _, ctl = fleet
    tps = [(TOPIC, p) for p in range(6)]
    moved, stay = tps[:3], tps[3:]
    nodes = replicating_in_sessions(fleet, zk, tps, b"v0")
    a, b, c = nodes
    full0 = fetch_counts(c)[0]

    # partitions 0-2 move to node 2 (a new leader epoch); the new leader hears it first
    for tp in moved:
        ctl.elect(tp, 2, [1, 2, 3])
    for n in (b, c, a):
        leader_and_isr(ctl, n, moved, [1, 2, 3], [b])
    assert produce(b, moved, b"v1") == {tp: (NONE, 1) for tp in moved}
    assert produce(a, stay, b"v1") == {tp: (NONE, 1) for tp in stay}
    # node 3 kept its session with node 1 (forgetting 0-2) and opened one with node 2
    wait_until(lambda: opened(b, 3) == 1, "a session on node 2",
               nodes)
    assert opened(a, 3) == 1                        # node 1's session was never reopened
    # full fetches: node 2's first (more when one of them failed and was retried before it
    # opened the session, as happened under load; sessions opened are counted above)
    assert fetch_counts(c)[0] >= full0 + 1
    wait_until(lambda: all(f.segment_bytes(*tp) == ldr.segment_bytes(*tp)
                           for ldr, part in ((a, stay), (b, moved)) for tp in part
                           for f in nodes), "every replica equal to its leader", nodes)
    assert [records(b, tp) for tp in moved] + [records(a, tp) for tp in stay] \
        == [[b"v0", b"v1"]] * len(tps)
    assert all(ctl.isr(tp) == [1, 2, 3] for tp in tps)


def test_partitions_added_to_a_fetcher_do_not_wait_for_its_long_poll(fleet, zk):
    """New partitions for a leader whose followers' fetches are parked in a long poll of 30 s
    (a new topic, or leaders moving here): the fetchers abandon that poll and name them at
    once, so an acks=-1 write to them is acknowledged by the whole ISR. (Waiting out the poll,
    the followers stay away from them longer than replica.lag.time.max.ms, 1 s here: the ISR
    shrinks to the leader, which then acknowledges alone.) Both orders of the LEADER_AND_ISRs:
    the leader's first, then the followers' first (their fetch then meets partitions the leader
    does not know yet, and backs off before it retries)."""
    _, ctl = fleet
    old = [(TOPIC, p) for p in range(3)]
    nodes = replicating_in_sessions(fleet, zk, old, b"old", **{"replica.fetch.wait.max.ms": 30000})
    a, b, c = nodes
    time.sleep(0.5)                      # the followers' fetches are parked at the leader now

    first_new = [(TOPIC, p) for p in range(3, 6)]
    for tp in first_new:
        ctl.elect(tp, 1, [1, 2, 3])
    for n in (a, b, c):                  # the leader learns first
        leader_and_isr(ctl, n, old + first_new, [1, 2, 3], [a])
    assert produce(a, first_new, b"new") == {tp: (NONE, 0) for tp in first_new}
    assert all(ctl.isr(tp) == [1, 2, 3] for tp in first_new)

    time.sleep(0.5)
    second_new = [(TOPIC, p) for p in range(6, 9)]
    for tp in second_new:
        ctl.elect(tp, 1, [1, 2, 3])
    everything = old + first_new + second_new
    for n in (b, c, a):                  # the followers learn first
        leader_and_isr(ctl, n, everything, [1, 2, 3], [a])
    assert produce(a, second_new, b"newer") == {tp: (NONE, 0) for tp in second_new}
    assert all(ctl.isr(tp) == [1, 2, 3] for tp in second_new)

    assert all(ctl.isr(tp) == [1, 2, 3] for tp in everything)
    wait_until(lambda: all(f.segment_bytes(*tp) == a.segment_bytes(*tp)
                           for f in (b, c) for tp in everything),
               "followers' logs equal the leader's", nodes)
    assert [records(a, tp) for tp in first_new] == [[b"new"]] * 3
    assert [records(a, tp) for tp in second_new] == [[b"newer"]] * 3
