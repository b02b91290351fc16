"""Group coordinators and offset managers on a real fleet (ZooKeeper, 1 controller, 3 storage
nodes, 2 group coordinators, 2 offset managers, 1 gateway), spoken to through the gateway with
the raw wire channel: joins, assignments, commits, and shard takeover after a SIGKILL."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from kazoo.exceptions import NoNodeError

from deploy.fleet import Fleet, free_base_port
from deploy.process import free_port, port_accepts, wait_for
from riverbed import errors
from riverbed._proto.v1 import controller_pb2, group_pb2, header_pb2, offset_pb2
from riverbed.coordinator.offsets_topic import partition_for
from riverbed.wire.client import Channel
from services.common import zk as zkmod
from services.common import znodes

pytestmark = pytest.mark.integration

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
SHARDS = 6
TOPIC = "grp-topic"
SESSION_TIMEOUT_MS = 30000        # members outlive a coordinator takeover without heartbeats
RETRIABLE = {E.OFFSETS_LOAD_IN_PROGRESS, E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE,
             E.REQUEST_TIMED_OUT}
TAKEOVER_WAIT_S = 60              # session expiry (6 s) + load, with room on a busy machine


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("groups-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=1,
              counts={"group_coordinator": 2, "offset_manager": 2},
              config_overrides={"group_coordinator": {"offsets.topic.num.partitions": str(SHARDS)},
                                "offset_manager": {"offsets.topic.num.partitions": str(SHARDS)}})
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture
def chan(fleet):
    ch = Channel(fleet.gateway_endpoint, client_id="grp-test")
    try:
        yield ch
    finally:
        ch.close()


@pytest.fixture(scope="module")
def zk(fleet):
    client = zkmod.connect(fleet.zk_connect, timeout_s=10, auth=fleet.zk_auth)
    try:
        yield client
    finally:
        zkmod.close(client)


def call(ch, api, body, timeout_ms=20000):
    resp = ch.call(api, body, timeout_ms=timeout_ms)
    resp.raise_for_error()
    return resp.body


def retry(fn, what, timeout_s=TAKEOVER_WAIT_S):
    """fn() -> (done, value); retried while not done, at most timeout_s."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        done, last = fn()
        if done:
            return last
        time.sleep(0.2)
    raise AssertionError(f"{what}: still not done after {timeout_s} s; last answer {last}")


def ensure_topic(ch):
    resp = call(ch, ApiKey.CREATE_TOPICS, controller_pb2.CreateTopicsRequest(
        timeout_ms=10000, topics=[controller_pb2.CreatableTopic(name=TOPIC, num_partitions=6,
                                                                replication_factor=2)]))
    assert resp.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS)


def join_request(group, member_id=""):
    return group_pb2.JoinGroupRequest(
        group_id=group, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=10000,
        member_id=member_id, protocol_type="consumer",
        protocols=[group_pb2.JoinGroupProtocol(
            name="range", subscription=group_pb2.ConsumerSubscription(topics=[TOPIC]))])


def wait_coordinators_ready(ch, group):
    """Until both roles serve the group's shard (the offsets topic is created and loaded)."""
    def probe():
        body = call(ch, ApiKey.OFFSET_FETCH, offset_pb2.OffsetFetchRequest(group_id=group))
        if body.error_code in RETRIABLE:
            return False, E.Name(body.error_code)
        d = call(ch, ApiKey.DESCRIBE_GROUPS, group_pb2.DescribeGroupsRequest(groups=[group]))
        return d.groups[0].error_code not in RETRIABLE, d
    retry(probe, f"coordinators for {group}")


def join_three(ch, group):
    """Three members join (pipelined), then sync; returns {member_id: [(topic, p)...]}, gen."""
    corrs = [ch.send(ApiKey.JOIN_GROUP, join_request(group), timeout_ms=30000) for _ in range(3)]
    joins = {}
    while len(joins) < 3:
        resp = ch.recv(30000)
        assert resp is not None, "no join answer"
        resp.raise_for_error()
        assert resp.header.correlation_id in corrs
        joins[resp.header.correlation_id] = resp.body
    bodies = list(joins.values())
    assert all(b.error_code == E.NONE for b in bodies), [E.Name(b.error_code) for b in bodies]
    gens = {b.generation_id for b in bodies}
    assert len(gens) == 1
    gen = gens.pop()
    assert {b.protocol_name for b in bodies} == {"range"}
    leaders = [b for b in bodies if b.members]
    assert len(leaders) == 1 and len(leaders[0].members) == 3
    assignments = {}
    for b in bodies:
        s = call(ch, ApiKey.SYNC_GROUP, group_pb2.SyncGroupRequest(
            group_id=group, generation_id=gen, member_id=b.member_id))
        assert s.error_code == E.NONE, E.Name(s.error_code)
        assignments[b.member_id] = [(tp.topic, p) for tp in s.assignment.partitions for p in tp.partitions]
    return assignments, gen


def commit(ch, group, gen, member, offsets, metadata="meta"):
    return call(ch, ApiKey.OFFSET_COMMIT, offset_pb2.OffsetCommitRequest(
        group_id=group, generation_id=gen, member_id=member, retention_time_ms=-1,
        topics=[offset_pb2.OffsetCommitTopic(name=TOPIC, partitions=[
            offset_pb2.OffsetCommitPartition(partition_index=p, committed_offset=o,
                                             committed_leader_epoch=-1,
                                             committed_metadata=metadata)
            for p, o in offsets.items()])]))


def fetch_offsets(ch, group):
    return call(ch, ApiKey.OFFSET_FETCH, offset_pb2.OffsetFetchRequest(
        group_id=group, topics=[offset_pb2.OffsetFetchTopic(name=TOPIC, partition_indexes=list(range(6)))]))


def owner_of(zk, root, group):
    shard = partition_for(group, SHARDS)
    data, _ = zk.get(znodes.shard_owner_path(root, shard))
    return znodes.decode_shard_owner(shard, data).owner_id


def test_find_coordinator_names_the_gateway(fleet, chan):
    ensure_topic(chan)
    wait_coordinators_ready(chan, "g-find")
    r = call(chan, ApiKey.FIND_COORDINATOR, group_pb2.FindCoordinatorRequest(key="g-find"))
    assert r.error_code == E.NONE
    assert r.endpoint == fleet.gateway_endpoint
    assert r.shard == partition_for("g-find", SHARDS)


def test_join_sync_assigns_every_partition_once_and_commits_round_trip(fleet, chan, zk):
    ensure_topic(chan)
    group = "g-range"
    wait_coordinators_ready(chan, group)
    assignments, gen = join_three(chan, group)
    assert sorted(len(a) for a in assignments.values()) == [2, 2, 2]
    assert sorted(tp for a in assignments.values() for tp in a) == [(TOPIC, p) for p in range(6)]

    member = next(iter(assignments))
    r = commit(chan, group, gen, member, {p: 100 + p for p in range(6)}, metadata="hello")
    assert r.error_code == E.NONE, r
    assert all(p.error_code == E.NONE for t in r.topics for p in t.partitions)
    f = fetch_offsets(chan, group)
    got = {p.partition_index: (p.committed_offset, p.metadata) for t in f.topics for p in t.partitions}
    assert got == {p: (100 + p, "hello") for p in range(6)}

    # An old generation is refused.
    r = commit(chan, group, gen - 1, member, {0: 1})
    assert r.error_code == E.ILLEGAL_GENERATION
    assert fetch_offsets(chan, group).topics[0].partitions[0].committed_offset == 100

    # The group coordinator describes what it assigned.
    d = call(chan, ApiKey.DESCRIBE_GROUPS, group_pb2.DescribeGroupsRequest(groups=[group])).groups[0]
    assert (d.error_code, d.group_state, d.generation_id, d.protocol_data) == (E.NONE, "Stable", gen, "range")
    assert {m.member_id for m in d.members} == set(assignments)
    listed = call(chan, ApiKey.LIST_GROUPS, group_pb2.ListGroupsRequest())
    assert group in {g.group_id for g in listed.groups}


def heartbeat(group, gen, member, max_wait_ms):
    return group_pb2.HeartbeatRequest(group_id=group, generation_id=gen, member_id=member,
                                      max_wait_ms=max_wait_ms)


def answer_to(ch, corr, timeout_s):
    """The answer to request `corr` and the seconds it took from now (nothing else is in flight)."""
    t0 = time.monotonic()
    resp = ch.recv(int(timeout_s * 1000))
    assert resp is not None, f"no answer in {timeout_s} s"
    assert resp.header.correlation_id == corr
    resp.raise_for_error()
    return resp.body, time.monotonic() - t0


def test_a_long_polled_heartbeat_is_held_then_answered_at_once_when_the_group_rebalances(
        fleet, chan, zk):
    """HeartbeatRequest.max_wait_ms through the gateway: held for its wait and answered NONE;
    answered REBALANCE_IN_PROGRESS as soon as a member leaves; answered at once when its
    coordinator stops (SIGTERM), not when its wait ends. The bounds are halves of the waits."""
    ensure_topic(chan)
    group = "g-hb-wait"
    wait_coordinators_ready(chan, group)
    assignments, gen = join_three(chan, group)
    a, b, c = assignments
    corr = chan.send(ApiKey.HEARTBEAT, heartbeat(group, gen, a, 1500), timeout_ms=30000)
    body, took = answer_to(chan, corr, 20)
    assert body.error_code == E.NONE and took >= 1.5 - 0.05       # held for its wait
    # held (no answer for a while), then another member leaves: told at once
    corr = chan.send(ApiKey.HEARTBEAT, heartbeat(group, gen, a, 10000), timeout_ms=30000)
    assert chan.recv(500) is None
    chan_b = Channel(fleet.gateway_endpoint, client_id="grp-test-b")
    try:
        assert call(chan_b, ApiKey.LEAVE_GROUP, group_pb2.LeaveGroupRequest(
            group_id=group, member_id=c)).error_code == E.NONE
    finally:
        chan_b.close()
    body, took = answer_to(chan, corr, 20)
    assert body.error_code == E.REBALANCE_IN_PROGRESS and took < 5.0
    # a Stable group again (a and b rejoin), a held heartbeat, then its coordinator stops
    corrs = [chan.send(ApiKey.JOIN_GROUP, join_request(group, m), timeout_ms=30000) for m in (a, b)]
    joins = [answer for answer, _ in (answer_to_any(chan, corrs) for _ in corrs)]
    assert {j.error_code for j in joins} == {E.NONE}
    gen = joins[0].generation_id
    for m in (a, b):
        assert call(chan, ApiKey.SYNC_GROUP, group_pb2.SyncGroupRequest(
            group_id=group, generation_id=gen, member_id=m)).error_code == E.NONE
    victim = owner_of(zk, znodes.GROUP_COORDINATORS, group)
    corr = chan.send(ApiKey.HEARTBEAT, heartbeat(group, gen, a, 10000), timeout_ms=30000)
    assert chan.recv(500) is None
    t0 = time.monotonic()
    fleet.stop(f"group-coordinator-{victim}")                      # SIGTERM
    try:
        body, _ = answer_to(chan, corr, 20)
        took = time.monotonic() - t0
        assert body.error_code == E.COORDINATOR_NOT_AVAILABLE and took < 5.0
    finally:
        fleet.start(f"group-coordinator-{victim}")


def answer_to_any(ch, corrs, timeout_s=30):
    resp = ch.recv(int(timeout_s * 1000))
    assert resp is not None and resp.header.correlation_id in corrs
    resp.raise_for_error()
    return resp.body, resp.header.correlation_id


def test_offset_manager_killed_survivor_serves_committed_offsets(fleet, chan, zk):
    ensure_topic(chan)
    group = "g-om-kill"
    wait_coordinators_ready(chan, group)
    # a standalone consumer's commit (generation -1, no member)
    r = commit(chan, group, -1, "", {1: 41, 4: 44}, metadata="before-kill")
    assert r.error_code == E.NONE, r
    victim = owner_of(zk, znodes.OFFSET_MANAGERS, group)
    fleet.stop(f"offset-manager-{victim}", kill=True)

    def fetched():
        body = fetch_offsets(chan, group)
        if body.error_code in RETRIABLE:
            return False, E.Name(body.error_code)
        return True, body
    body = retry(fetched, "offsets after the offset manager's death")
    got = {p.partition_index: (p.committed_offset, p.metadata) for t in body.topics for p in t.partitions
           if p.committed_offset >= 0}
    assert got == {1: (41, "before-kill"), 4: (44, "before-kill")}
    assert owner_of(zk, znodes.OFFSET_MANAGERS, group) != victim
    fleet.start(f"offset-manager-{victim}")


def test_group_coordinator_killed_survivor_keeps_the_generation(fleet, chan, zk):
    ensure_topic(chan)
    group = "g-gc-kill"
    wait_coordinators_ready(chan, group)
    assignments, gen = join_three(chan, group)
    victim = owner_of(zk, znodes.GROUP_COORDINATORS, group)
    fleet.stop(f"group-coordinator-{victim}", kill=True)

    def described():
        d = call(chan, ApiKey.DESCRIBE_GROUPS, group_pb2.DescribeGroupsRequest(groups=[group])).groups[0]
        if d.error_code in RETRIABLE:
            return False, E.Name(d.error_code)
        return True, d
    d = retry(described, "the group after its coordinator's death")
    assert d.error_code == E.NONE
    assert d.generation_id == gen
    assert d.group_state == "Stable"
    assert {m.member_id for m in d.members} == set(assignments)
    try:
        assert owner_of(zk, znodes.GROUP_COORDINATORS, group) != victim
    except NoNodeError:
        pytest.fail("the group's shard has no owner although it was just served")
    # the members still hold the generation: a heartbeat is accepted by the new owner
    member = next(iter(assignments))
    hb = call(chan, ApiKey.HEARTBEAT, group_pb2.HeartbeatRequest(group_id=group, generation_id=gen,
                                                                  member_id=member))
    assert hb.error_code == E.NONE
    fleet.start(f"group-coordinator-{victim}")


@pytest.mark.parametrize("module,id_key", [("services.group_coordinator", "group.coordinator.id"),
                                            ("services.offset_manager", "offset.manager.id")])
def test_sigterm_exits_cleanly(fleet, module, id_key):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", module, "--override", f"{id_key}=9",
                             "--override", f"port={port}",
                             "--override", f"zookeeper.connect={fleet.zk_connect}",
                             "--override", f"offsets.topic.num.partitions={SHARDS}",
                             # the fleet's keys and ZooKeeper credentials (CURVE fleet)
                             *[a for k, v in fleet.security.service_properties(
                                 "group-coordinator-1").items()
                               for a in ("--override", f"{k}={v}")]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: port_accepts("127.0.0.1", port), lambda: proc.poll() is None,
                 timeout_s=30, what=module, log_path=None)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err.decode()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
