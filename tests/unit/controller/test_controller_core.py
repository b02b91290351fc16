"""The controller core as a table of (state, input) -> effects. No sockets, threads or clocks."""
import random

import pytest

from riverbed import errors
from riverbed._proto.v1 import controller_pb2, header_pb2, metadata_pb2
from services.controller.config import ControllerConfig
from services.controller.core.controller import ControllerCore
from services.controller.core.effects import (
    DeleteTopicZnodes, MarkTopicForDeletion, PublishMetadata, Respond, SendLeaderAndIsr,
    SendStopReplica, WritePartitionState, WriteTopicAssignment, WriteTopicConfig, ZkWrite)
from services.controller.core.events import (
    BrokersChanged, ElectedAsController, LeadershipLost, RequestReceived)
from services.controller.core.model import NEW, BrokerInfo, LeaderIsr, TopicSnapshot

Api = header_pb2.ApiKey
E = errors.ErrorCode


def broker(i):
    return BrokerInfo(i, "127.0.0.1", 9100 + i, f"tcp://127.0.0.1:{9100 + i}")


def brokers(*ids):
    return tuple(broker(i) for i in ids)


def new_core(live=(1, 2, 3), topics=(), epoch=5, seed=0, **cfg):
    cfg.setdefault("broker_session_timeout_ms", 0)   # ZooKeeper's view only (see test_broker_liveness)
    core = ControllerCore(ControllerConfig(controller_id=100, **cfg), random.Random(seed))
    core.handle(ElectedAsController(epoch, "cid", brokers(*live), tuple(topics)), 0)
    return core


def snapshot(name, assignment, states, configs=None):
    return TopicSnapshot(name, assignment, configs or {}, 0, 0, states)


def st(leader, isr, epoch=0, zk_version=0, ctrl=1):
    return LeaderIsr(leader, epoch, tuple(isr), ctrl, zk_version)


def create(core, name, partitions=1, rf=1, configs=None, validate_only=False, assignment=None):
    req = controller_pb2.CreateTopicsRequest(validate_only=validate_only)
    t = req.topics.add(name=name, num_partitions=partitions, replication_factor=rf)
    for k, v in (configs or {}).items():
        t.configs[k] = v
    for p, reps in (assignment or {}).items():
        t.assignment[p].replicas.extend(reps)
    return core.handle(RequestReceived(Api.CREATE_TOPICS, req), 10)


def of(effects, cls):
    return [e for e in effects if isinstance(e, cls)]


def reply(effects):
    assert isinstance(effects[-1], Respond)
    return effects[-1]


def lai_by_node(effects):
    sends = of(effects, SendLeaderAndIsr)
    nodes = [s.node_id for s in sends]
    assert len(nodes) == len(set(nodes)), f"more than one LEADER_AND_ISR per node: {nodes}"
    return {s.node_id: s.request for s in sends}


# ---- election / standby ------------------------------------------------------------------------
def test_standby_answers_not_controller_and_changes_nothing():
    core = ControllerCore(ControllerConfig(controller_id=7), random.Random(0))
    out = core.handle(RequestReceived(Api.CREATE_TOPICS, controller_pb2.CreateTopicsRequest()), 0)
    assert len(out) == 1 and isinstance(out[0].error, errors.NotControllerError)
    assert core.handle(BrokersChanged(brokers(1)), 0) == []
    assert core.tick(10_000) == []


def test_election_elects_missing_leaders_and_sends_everything_once_per_node():
    topics = [snapshot("a", {0: (1, 2), 1: (2, 3)}, {0: st(1, [1, 2]), 1: st(4, [4, 2], epoch=3)}),
              snapshot("b", {0: (3,)}, {})]          # b-0's state znode missing
    core = ControllerCore(ControllerConfig(controller_id=100), random.Random(0))
    out = core.handle(ElectedAsController(9, "cid", brokers(1, 2, 3), tuple(topics)), 0)
    writes = {(w.topic, w.partition): w for w in of(out, WritePartitionState)}
    assert set(writes) == {("a", 1), ("b", 0)}
    assert writes[("a", 1)].state == LeaderIsr(2, 4, (2,), 9, 1)
    assert writes[("a", 1)].expected_version == 0
    assert writes[("b", 0)].state.leader == 3 and writes[("b", 0)].expected_version == NEW
    lai = lai_by_node(out)
    assert {n: sorted((p.topic, p.partition) for p in r.partitions) for n, r in lai.items()} == {
        1: [("a", 0)], 2: [("a", 0), ("a", 1)], 3: [("a", 1), ("b", 0)]}
    assert all(r.controller_epoch == 9 for r in lai.values())
    pub = of(out, PublishMetadata)
    assert len(pub) == 1 and pub[0].update.controller_epoch == 9
    assert pub[0].update.metadata_version == 1
    core.check_invariants()


def test_leadership_lost_stops_acting():
    core = new_core()
    core.handle(LeadershipLost("session lost"), 0)
    assert not core.active and core.topics == {}
    out = core.handle(RequestReceived(Api.METADATA, metadata_pb2.MetadataRequest()), 0)
    assert isinstance(out[0].error, errors.NotControllerError)


# ---- topic creation ----------------------------------------------------------------------------
def test_create_topic_writes_assignment_configs_states_then_leader_and_isr_then_reply():
    core = new_core(live=(1, 2, 3), seed=4)
    start = random.Random(4).randrange(3)
    out = create(core, "orders", partitions=6, rf=2, configs={"retention.ms": " 1000"})
    assignment = of(out, WriteTopicAssignment)[0]
    nodes = [1, 2, 3]
    assert assignment.assignment == {
        i: (nodes[(start + i) % 3], nodes[(start + i + 1) % 3]) for i in range(6)}
    assert assignment.expected_version == NEW
    assert of(out, WriteTopicConfig)[0].configs == {"retention.ms": "1000"}
    states = of(out, WritePartitionState)
    assert [(s.partition, s.state.leader, s.state.isr, s.state.leader_epoch) for s in states] == [
        (i, r[0], r, 0) for i, r in assignment.assignment.items()]
    # Leaders spread evenly: each node leads 2 of 6.
    assert sorted(s.state.leader for s in states) == [1, 1, 2, 2, 3, 3]
    lai = lai_by_node(out)
    assert set(lai) == {1, 2, 3}
    assert all(len(r.partitions) == 4 for r in lai.values())
    assert all(p.is_new and p.topic_configs == {"retention.ms": "1000"}
               for r in lai.values() for p in r.partitions)
    # ZooKeeper writes come before any send, the reply last.
    kinds = [isinstance(e, ZkWrite) for e in out]
    assert kinds.index(False) > max(i for i, k in enumerate(kinds) if k)
    res = reply(out).body.topics[0]
    assert (res.error_code, res.num_partitions, res.replication_factor) == (0, 6, 2)
    core.check_invariants()


@pytest.mark.parametrize("name,partitions,rf,configs,code", [
    ("bad name", 1, 1, {}, "INVALID_TOPIC_EXCEPTION"),
    ("..", 1, 1, {}, "INVALID_TOPIC_EXCEPTION"),
    ("x" * 250, 1, 1, {}, "INVALID_TOPIC_EXCEPTION"),
    ("t", -5, 1, {}, "INVALID_PARTITIONS"),
    ("t", 100_000, 1, {}, "INVALID_PARTITIONS"),
    ("t", 1, 4, {}, "INVALID_REPLICATION_FACTOR"),
    ("t", 1, -3, {}, "INVALID_REPLICATION_FACTOR"),
    ("t", 1, 1, {"retention.ms": "soon"}, "INVALID_CONFIG"),
    ("t", 1, 1, {"bogus": "1"}, "INVALID_CONFIG"),
    ("t", 1, 1, {"cleanup.policy": "shred"}, "INVALID_CONFIG"),
    ("existing", 1, 1, {}, "TOPIC_ALREADY_EXISTS"),
])
def test_invalid_creates_get_typed_errors_and_no_effects(name, partitions, rf, configs, code):
    core = new_core(live=(1, 2, 3), topics=[snapshot("existing", {0: (1,)}, {0: st(1, [1])})])
    before = dict(core.topics)
    out = create(core, name, partitions, rf, configs)
    assert len(out) == 1, out
    assert reply(out).body.topics[0].error_code == E.Value(code)
    assert core.topics.keys() == before.keys()


def test_defaults_used_for_minus_one():
    core = new_core(live=(1, 2), num_partitions=3, default_replication_factor=2)
    out = create(core, "d", partitions=-1, rf=-1)
    a = of(out, WriteTopicAssignment)[0].assignment
    assert len(a) == 3 and all(len(r) == 2 for r in a.values())


def test_validate_only_changes_nothing():
    core = new_core()
    out = create(core, "v", 2, 2, validate_only=True)
    assert len(out) == 1 and reply(out).body.topics[0].error_code == 0
    assert "v" not in core.topics


def test_explicit_assignment():
    core = new_core(live=(1, 2, 3))
    out = create(core, "ex", partitions=-1, rf=-1, assignment={0: [3, 1], 1: [2, 3]})
    assert of(out, WriteTopicAssignment)[0].assignment == {0: (3, 1), 1: (2, 3)}
    bad = create(core, "ex2", partitions=-1, rf=-1, assignment={0: [3, 3]})
    assert reply(bad).body.topics[0].error_code == E.Value("INVALID_REPLICA_ASSIGNMENT")
    dead = create(core, "ex3", partitions=-1, rf=-1, assignment={0: [9]})
    assert reply(dead).body.topics[0].error_code == E.Value("INVALID_REPLICA_ASSIGNMENT")


def test_duplicate_topic_in_one_request_is_invalid_request():
    core = new_core()
    req = controller_pb2.CreateTopicsRequest()
    req.topics.add(name="dup", num_partitions=1, replication_factor=1)
    req.topics.add(name="dup", num_partitions=1, replication_factor=1)
    out = core.handle(RequestReceived(Api.CREATE_TOPICS, req), 0)
    assert [t.error_code for t in reply(out).body.topics] == [E.Value("INVALID_REQUEST")] * 2
    assert len(out) == 1


# ---- node failure -------------------------------------------------------------------------------
def test_node_death_moves_every_leadership_in_one_batch():
    topics = [
        snapshot("a", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)},
                 {0: st(1, [1, 2, 3], 2, 5), 1: st(2, [2, 3, 1]), 2: st(3, [3, 1, 2])}),
        snapshot("b", {0: (1, 3), 1: (1,)}, {0: st(1, [1, 3]), 1: st(1, [1], 7)}),
        snapshot("c", {0: (2, 3)}, {0: st(2, [2, 3])}),           # node 1 not involved
    ]
    core = new_core(live=(1, 2, 3), topics=topics, epoch=6)
    out = core.handle(BrokersChanged(brokers(2, 3)), 100)
    writes = {(w.topic, w.partition): w for w in of(out, WritePartitionState)}
    # Led by 1: a-0 -> 2 (first live ISR member in replica order), b-0 -> 3, b-1 -> none.
    assert writes[("a", 0)].state == LeaderIsr(2, 3, (2, 3), 6, 6)
    assert writes[("a", 0)].expected_version == 5
    assert writes[("b", 0)].state.leader == 3 and writes[("b", 0)].state.isr == (3,)
    assert writes[("b", 1)].state.leader == -1
    assert writes[("b", 1)].state.isr == (1,)        # kept: the last in-sync replica
    assert writes[("b", 1)].state.leader_epoch == 8
    # Followers on 1 leave the ISR; leaders stay.
    assert writes[("a", 1)].state.leader == 2 and writes[("a", 1)].state.isr == (2, 3)
    assert writes[("a", 2)].state.leader == 3 and writes[("a", 2)].state.isr == (3, 2)
    assert ("c", 0) not in writes
    # One LEADER_AND_ISR per affected live node, nothing to the dead one.
    lai = lai_by_node(out)
    assert set(lai) == {2, 3}
    assert sorted((p.topic, p.partition) for p in lai[3].partitions) == [
        ("a", 0), ("a", 1), ("a", 2), ("b", 0)]
    a0 = next(p for p in lai[2].partitions if (p.topic, p.partition) == ("a", 0))
    assert (a0.leader, a0.leader_epoch, list(a0.isr), a0.zk_version) == (2, 3, [2, 3], 6)
    assert {b.node_id for b in lai[2].live_leaders} == {2, 3}
    assert len(of(out, PublishMetadata)) == 1
    assert len(out) == len(writes) + 2 + 1           # writes, 2 sends, 1 publish
    core.check_invariants()
    # The published snapshot shows b-1 offline.
    b = next(t for t in of(out, PublishMetadata)[0].update.topics if t.name == "b")
    assert b.partitions[1].leader == -1
    assert b.partitions[1].error_code == E.Value("LEADER_NOT_AVAILABLE")
    assert list(b.partitions[1].offline_replicas) == [1]


def test_node_return_elects_leaderless_partitions_and_gets_its_partitions():
    topics = [snapshot("b", {0: (1,), 1: (1, 2)}, {0: st(-1, [1], 4), 1: st(2, [2], 1)})]
    core = new_core(live=(2,), topics=topics)
    out = core.handle(BrokersChanged(brokers(1, 2)), 0)
    writes = {(w.topic, w.partition): w.state for w in of(out, WritePartitionState)}
    assert writes == {("b", 0): LeaderIsr(1, 5, (1,), 5, 1)}
    lai = lai_by_node(out)
    assert sorted(p.partition for p in lai[1].partitions) == [0, 1]


def test_node_return_tells_the_leaders_of_partitions_whose_isr_it_is_out_of():
    """A leader whose ISR expansion was refused while the node was away waits for a
    LEADER_AND_ISR; the node's return sends it one (the same state), only for partitions the
    node replicates (the election had shrunk c-1's ISR to [3] while node 1 was away)."""
    topics = [snapshot("c", {0: (2, 1), 1: (3, 1), 2: (2, 3)},
                       {0: st(2, [2]), 1: st(3, [3, 1]), 2: st(2, [2, 3])})]
    core = new_core(live=(2, 3), topics=topics)
    out = core.handle(BrokersChanged(brokers(1, 2, 3)), 0)
    assert of(out, WritePartitionState) == []
    lai = lai_by_node(out)
    assert sorted(p.partition for p in lai[1].partitions) == [0, 1]
    assert [(p.partition, p.leader, list(p.isr)) for p in lai[2].partitions] == [(0, 2, [2])]
    assert [(p.partition, p.leader, list(p.isr)) for p in lai[3].partitions] == [(1, 3, [3])]


def test_unclean_election_when_enabled():
    topics = [snapshot("u", {0: (1, 2)}, {0: st(1, [1])},
                       configs={"unclean.leader.election.enable": "true"})]
    core = new_core(live=(1, 2), topics=topics)
    out = core.handle(BrokersChanged(brokers(2)), 0)
    assert of(out, WritePartitionState)[0].state.leader == 2


def test_no_change_no_effects():
    core = new_core(live=(1, 2), topics=[snapshot("a", {0: (1, 2)}, {0: st(1, [1, 2])})])
    assert core.handle(BrokersChanged(brokers(1, 2)), 0) == []


# ---- delete, partitions, configs, metadata -------------------------------------------------
def test_delete_topic():
    core = new_core(live=(1, 2), topics=[snapshot("a", {0: (1, 2), 1: (2, 1)},
                                                  {0: st(1, [1, 2]), 1: st(2, [2, 1])})])
    out = core.handle(RequestReceived(Api.DELETE_TOPICS,
                                      controller_pb2.DeleteTopicsRequest(names=["a", "zz"])), 0)
    assert isinstance(out[0], MarkTopicForDeletion)
    stops = of(out, SendStopReplica)
    assert {s.node_id for s in stops} == {1, 2}
    assert all(s.request.delete_partitions for s in stops)
    assert of(out, DeleteTopicZnodes)[0].partitions == (0, 1)
    assert [t.error_code for t in reply(out).body.topics] == [
        0, E.Value("UNKNOWN_TOPIC_OR_PARTITION")]
    assert "a" not in core.topics


def test_delete_disabled():
    core = new_core(topics=[snapshot("a", {0: (1,)}, {0: st(1, [1])})], delete_topic_enable=False)
    out = core.handle(RequestReceived(Api.DELETE_TOPICS,
                                      controller_pb2.DeleteTopicsRequest(names=["a"])), 0)
    assert len(out) == 1
    assert reply(out).body.topics[0].error_code == E.Value("TOPIC_DELETION_DISABLED")


def test_pending_deletion_completed_at_election():
    core = ControllerCore(ControllerConfig(), random.Random(0))
    out = core.handle(ElectedAsController(
        3, "c", brokers(1), (snapshot("gone", {0: (1,)}, {0: st(1, [1])}),), ("gone",)), 0)
    assert of(out, DeleteTopicZnodes) and not of(out, MarkTopicForDeletion)
    assert core.topics == {}


def test_create_partitions():
    core = new_core(live=(1, 2, 3), topics=[snapshot("a", {0: (2, 3)}, {0: st(2, [2, 3])})])
    req = controller_pb2.CreatePartitionsRequest()
    req.topics.add(name="a", count=3)
    out = core.handle(RequestReceived(Api.CREATE_PARTITIONS, req), 0)
    w = of(out, WriteTopicAssignment)[0]
    assert w.assignment == {0: (2, 3), 1: (3, 1), 2: (1, 2)} and w.expected_version == 0
    assert [s.partition for s in of(out, WritePartitionState)] == [1, 2]
    assert reply(out).body.topics[0].error_code == 0
    for count, code in [(2, "INVALID_PARTITIONS"), (3, "INVALID_PARTITIONS")]:
        req = controller_pb2.CreatePartitionsRequest()
        req.topics.add(name="a", count=count)
        out = core.handle(RequestReceived(Api.CREATE_PARTITIONS, req), 0)
        assert len(out) == 1 and reply(out).body.topics[0].error_code == E.Value(code)


def test_describe_and_alter_configs():
    core = new_core(live=(1,), topics=[snapshot("a", {0: (1,)}, {0: st(1, [1])},
                                                configs={"retention.ms": "5"})])
    alter = controller_pb2.AlterConfigsRequest()
    t = alter.topics.add(name="a", delete=["retention.ms"])
    t.set["cleanup.policy"] = "compact"
    out = core.handle(RequestReceived(Api.ALTER_CONFIGS, alter), 0)
    w = of(out, WriteTopicConfig)[0]
    assert w.configs == {"cleanup.policy": "compact"} and w.expected_version == 0
    assert lai_by_node(out)[1].partitions[0].topic_configs == {"cleanup.policy": "compact"}
    bad = controller_pb2.AlterConfigsRequest()
    bad.topics.add(name="a").set["segment.ms"] = "-4"
    out = core.handle(RequestReceived(Api.ALTER_CONFIGS, bad), 0)
    assert len(out) == 1 and reply(out).body.topics[0].error_code == E.Value("INVALID_CONFIG")
    desc = core.handle(RequestReceived(Api.DESCRIBE_CONFIGS, controller_pb2.DescribeConfigsRequest(
        topics=["a", "nope"], include_defaults=True)), 0)
    res = reply(desc).body.results
    entries = {e.name: (e.value, e.is_default) for e in res[0].entries}
    assert entries["cleanup.policy"] == ("compact", False)
    assert entries["retention.ms"] == ("604800000", True)
    assert res[1].error_code == E.Value("UNKNOWN_TOPIC_OR_PARTITION")


@pytest.mark.parametrize("auto_enabled,allow,expected", [
    (True, True, 0), (True, False, "UNKNOWN_TOPIC_OR_PARTITION"),
    (False, True, "UNKNOWN_TOPIC_OR_PARTITION"),
])
def test_metadata_auto_create(auto_enabled, allow, expected):
    core = new_core(live=(1, 2), auto_create_topics_enable=auto_enabled)
    out = core.handle(RequestReceived(Api.METADATA, metadata_pb2.MetadataRequest(
        topics=["fresh", "bad name"], allow_auto_topic_creation=allow)), 0)
    topics = reply(out).body.topics
    code = expected if isinstance(expected, int) else E.Value(expected)
    assert topics[0].error_code == code
    assert topics[1].error_code == E.Value("INVALID_TOPIC_EXCEPTION")
    assert ("fresh" in core.topics) == (code == 0)
    assert bool(of(out, WriteTopicAssignment)) == (code == 0)
    if code == 0:
        assert topics[0].partitions[0].leader in (1, 2)


def test_offsets_topic_auto_created_compacted_and_internal():
    core = new_core(live=(1, 2), offsets_topic_num_partitions=4)
    out = core.handle(RequestReceived(Api.METADATA, metadata_pb2.MetadataRequest(
        topics=["__consumer_offsets"], allow_auto_topic_creation=True)), 0)
    t = reply(out).body.topics[0]
    assert t.is_internal and len(t.partitions) == 4 and len(t.partitions[0].replicas) == 2
    assert of(out, WriteTopicConfig)[0].configs == {"cleanup.policy": "compact"}


def test_metadata_version_increases_and_tick_publishes_every_second():
    core = new_core()
    v0 = core.metadata_version
    assert core.tick(500) == []
    [p1] = core.tick(1000)
    assert p1.update.metadata_version == v0 + 1
    assert core.tick(1500) == []
    [p2] = core.tick(2000)
    assert p2.update.metadata_version == v0 + 2
    out = create(core, "x")
    assert of(out, PublishMetadata)[0].update.metadata_version == v0 + 3


def test_describe_cluster():
    core = new_core(live=(3, 1))
    out = core.handle(RequestReceived(Api.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest()), 0)
    body = reply(out).body
    assert [b.node_id for b in body.brokers] == [1, 3] and body.controller_id == 100


def test_broker_changes_count_each_node_joining_or_leaving_however_the_events_coalesce():
    core = new_core(live=())
    core.handle(BrokersChanged(brokers(1, 2, 3)), 0)     # three joins in one ZooKeeper event
    assert core.broker_changes == 3
    core.handle(BrokersChanged(brokers(1, 2, 3)), 10)    # nothing changed
    assert core.broker_changes == 3
    core.handle(BrokersChanged(brokers(1)), 20)          # two leave at once
    assert core.broker_changes == 5
    standby = ControllerCore(ControllerConfig(controller_id=7), random.Random(0))
    standby.handle(BrokersChanged(brokers(1, 2)), 0)     # a standby counts nothing
    assert standby.broker_changes == 0


# ---- requests name the registration they are meant for (issue 24, KIP-380) -----------------
def test_requests_to_a_node_carry_its_broker_epoch_and_a_new_registration_gets_its_own():
    import dataclasses
    core = new_core(live=())
    first = tuple(dataclasses.replace(broker(i), epoch=100 + i) for i in (1, 2, 3))
    core.handle(BrokersChanged(first), 0)
    create(core, "t", partitions=2, rf=3)
    out = create(core, "u", partitions=1, rf=3)
    assert {n: r.broker_epoch for n, r in lai_by_node(out).items()} == {1: 101, 2: 102, 3: 103}
    # node 3 restarts: its new registration has a new czxid; what it is sent names that one
    again = first[:2] + (dataclasses.replace(broker(3), epoch=200),)
    out = core.handle(BrokersChanged(again), 10)
    assert lai_by_node(out)[3].broker_epoch == 200
    assert {(p.topic, p.partition) for p in lai_by_node(out)[3].partitions} == {
        ("t", 0), ("t", 1), ("u", 0)}
    out = core.handle(RequestReceived(Api.DELETE_TOPICS,
                                      controller_pb2.DeleteTopicsRequest(names=["u"])), 20)
    assert {s.node_id: s.request.broker_epoch for s in of(out, SendStopReplica)} == {
        1: 101, 2: 102, 3: 200}
    # a registration whose epoch is unknown (-1): not stamped, the node does not check
    core.handle(BrokersChanged(again[:2] + (broker(3),)), 30)
    assert lai_by_node(create(core, "v", partitions=1, rf=3))[3].broker_epoch == 0


def test_create_topic_spreads_replicas_over_racks():
    racks = {1: "h2", 5: "h2", 2: "h3", 3: "h4"}
    core = ControllerCore(ControllerConfig(controller_id=100, broker_session_timeout_ms=0),
                          random.Random(0))
    core.handle(ElectedAsController(5, "cid", tuple(
        BrokerInfo(i, "127.0.0.1", 9100 + i, f"tcp://127.0.0.1:{9100 + i}", racks[i])
        for i in sorted(racks)), ()), 0)
    out = create(core, "t", partitions=12, rf=3)
    assert reply(out).body.topics[0].error_code == 0
    (write,) = [e for e in of(out, WriteTopicAssignment) if e.topic == "t"]
    for replicas in write.assignment.values():
        assert len({racks[r] for r in replicas}) == 3, write.assignment
