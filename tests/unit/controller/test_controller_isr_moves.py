"""Issue 4 decisions of the controller core: ALTER_PARTITION, unclean election, controlled
shutdown, preferred leaders (on demand, /admin znode, automatic on tick) and reassignment."""
import random

from riverbed import errors
from riverbed._proto.v1 import admin_ops_pb2, common_pb2, header_pb2, metadata_pb2, replication_pb2
from services.controller.config import ControllerConfig
from services.controller.core import leader_balance
from services.controller.core.controller import ControllerCore
from services.controller.core.effects import (
    DeletePreferredElection, PublishMetadata, Respond, SendLeaderAndIsr, SendStopReplica,
    WritePartitionState, WriteReassignments, WriteTopicAssignment, ZkWrite)
from services.controller.core.events import (
    BrokersChanged, ElectedAsController, GatewaysChanged, PreferredElectionZnodeChanged,
    ReassignmentsZnodeChanged, RequestReceived)
from services.controller.core.model import (
    NEW, BrokerInfo, GatewayInfo, LeaderIsr, Reassignment, TopicSnapshot)
from services.controller.core.reassignment import Step, next_step

Api = header_pb2.ApiKey
E = errors.ErrorCode
NONE = 0


def broker(i, epoch=-1):
    return BrokerInfo(i, "127.0.0.1", 9100 + i, f"tcp://127.0.0.1:{9100 + i}", "", epoch)


def brokers(*ids):
    return tuple(broker(i, epoch=1000 + i) for i in ids)


def st(leader, isr, epoch=0, zk_version=0):
    return LeaderIsr(leader, epoch, tuple(isr), 1, zk_version)


def topic(name, assignment, states, configs=None):
    return TopicSnapshot(name, assignment, configs or {}, 0, 0, states)


def new_core(topics, live=(1, 2, 3), reassignments=(), reassign_version=NEW, **cfg):
    cfg.setdefault("broker_session_timeout_ms", 0)   # ZooKeeper's view only (see test_broker_liveness)
    core = ControllerCore(ControllerConfig(controller_id=100, **cfg), random.Random(0))
    core.handle(ElectedAsController(5, "cid", brokers(*live), tuple(topics),
                                    reassignments=tuple(reassignments),
                                    reassignments_version=reassign_version), 0)
    core.check_invariants()
    return core


def of(effects, cls):
    return [e for e in effects if isinstance(e, cls)]


def body(effects):
    assert isinstance(effects[-1], Respond) and effects[-1].error is None
    return effects[-1].body


def state(core, t, p):
    return core.topics[t].states[p]


def alter(core, leader, tp, new_isr, leader_epoch, zk_version, broker_epoch=None):
    req = replication_pb2.AlterPartitionRequest(
        broker_id=leader, broker_epoch=1000 + leader if broker_epoch is None else broker_epoch)
    req.partitions.add(topic=tp[0], partition=tp[1], leader_id=leader, leader_epoch=leader_epoch,
                       new_isr=new_isr, partition_epoch=zk_version)
    out = core.handle(RequestReceived(Api.ALTER_PARTITION, req), 10)
    core.check_invariants()
    return out


# ---- ALTER_PARTITION ---------------------------------------------------------------------------
def test_alter_partition_commits_an_isr_shrink_from_the_leader_with_a_versioned_write():
    core = new_core([topic("a", {0: (1, 2, 3)}, {0: st(1, [1, 2, 3], epoch=4, zk_version=7)})])
    out = alter(core, 1, ("a", 0), [1, 3], 4, 7)
    (w,) = of(out, WritePartitionState)
    assert w.expected_version == 7 and w.state.isr == (1, 3) and w.state.leader_epoch == 4
    res = body(out).partitions[0]
    assert (res.error_code, res.leader_id, res.leader_epoch, list(res.isr), res.partition_epoch) \
        == (NONE, 1, 4, [1, 3], 8)
    assert of(out, PublishMetadata)
    assert state(core, "a", 0).isr == (1, 3) and state(core, "a", 0).zk_version == 8


def test_alter_partition_refusals_change_nothing():
    start = st(1, [1, 2], epoch=4, zk_version=7)
    cases = [
        (dict(leader=2, new_isr=[2]), "NOT_LEADER_FOR_PARTITION"),
        (dict(leader_epoch=3), "FENCED_LEADER_EPOCH"),
        (dict(leader_epoch=5), "FENCED_LEADER_EPOCH"),
        (dict(zk_version=6), "INVALID_REQUEST"),                 # stale partition epoch
        (dict(new_isr=[2]), "INVALID_REQUEST"),                  # leader missing
        (dict(new_isr=[1, 2, 9]), "INVALID_REQUEST"),            # not a replica
        (dict(new_isr=[1, 1]), "INVALID_REQUEST"),
        (dict(tp=("zz", 0)), "UNKNOWN_TOPIC_OR_PARTITION"),
        (dict(tp=("a", 5)), "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    for change, code in cases:
        core = new_core([topic("a", {0: (1, 2, 3)}, {0: start})])
        args = dict(leader=1, tp=("a", 0), new_isr=[1, 2, 3], leader_epoch=4, zk_version=7)
        args.update(change)
        out = alter(core, **args)
        assert body(out).partitions[0].error_code == E.Value(code), change
        assert not of(out, ZkWrite), change
        assert state(core, "a", 0) == start, change


def test_alter_partition_refuses_a_dead_or_stopping_replica_joining_and_a_stale_broker_epoch():
    core = new_core([topic("a", {0: (1, 2, 3)}, {0: st(1, [1], zk_version=2)})], live=(1, 2))
    out = alter(core, 1, ("a", 0), [1, 3], 0, 2)               # 3 is not live
    assert body(out).partitions[0].error_code == E.Value("INVALID_REQUEST")
    out = alter(core, 1, ("a", 0), [1, 2], 0, 2, broker_epoch=999)
    assert body(out).error_code == E.Value("INVALID_REQUEST") and not of(out, ZkWrite)
    core.handle(RequestReceived(Api.CONTROLLED_SHUTDOWN, replication_pb2.ControlledShutdownRequest(
        broker_id=2, broker_epoch=1002)), 10)
    out = alter(core, 1, ("a", 0), [1, 2], 0, 2)               # 2 is shutting down
    assert body(out).partitions[0].error_code == E.Value("INVALID_REQUEST")
    assert state(core, "a", 0).isr == (1,)


def test_alter_partition_retry_of_a_committed_isr_answers_with_the_state():
    core = new_core([topic("a", {0: (1, 2)}, {0: st(1, [1, 2], zk_version=3)})])
    alter(core, 1, ("a", 0), [1], 0, 3)
    out = alter(core, 1, ("a", 0), [1], 0, 3)                    # same proposal, stale version
    res = body(out).partitions[0]
    assert res.error_code == NONE and res.partition_epoch == 4 and not of(out, ZkWrite)


# ---- unclean leader election --------------------------------------------------------------------
def test_no_live_isr_member_leaves_the_partition_offline_until_one_returns():
    core = new_core([topic("a", {0: (1, 2)}, {0: st(1, [1], epoch=2)})], live=(1, 2))
    core.handle(BrokersChanged(brokers(2)), 10)
    assert state(core, "a", 0).leader == -1 and state(core, "a", 0).isr == (1,)
    out = core.handle(BrokersChanged(brokers(1, 2)), 20)
    assert state(core, "a", 0).leader == 1 and state(core, "a", 0).leader_epoch == 4
    assert of(out, WritePartitionState)


def test_unclean_election_by_topic_config_or_controller_default():
    for configs, default, expect in [({}, False, -1),
                                     ({"unclean.leader.election.enable": "true"}, False, 2),
                                     ({}, True, 2),
                                     ({"unclean.leader.election.enable": "false"}, True, -1)]:
        core = new_core([topic("a", {0: (1, 2)}, {0: st(1, [1])}, configs)], live=(1, 2),
                        unclean_leader_election_enable=default)
        core.handle(BrokersChanged(brokers(2)), 10)
        s = state(core, "a", 0)
        assert s.leader == expect, (configs, default)
        assert s.isr == ((2,) if expect == 2 else (1,))


# ---- controlled shutdown ----------------------------------------------------------------------
def test_controlled_shutdown_moves_leadership_and_shrinks_isrs_in_one_batch():
    core = new_core([topic("a", {0: (1, 2, 3), 1: (2, 1, 3), 2: (1, 3), 3: (1,)},
                           {0: st(1, [1, 2, 3]), 1: st(2, [2, 1, 3]), 2: st(1, [1]),
                            3: st(1, [1])})])
    out = core.handle(RequestReceived(Api.CONTROLLED_SHUTDOWN,
                                      replication_pb2.ControlledShutdownRequest(
                                          broker_id=1, broker_epoch=1001)), 10)
    core.check_invariants()
    resp = body(out)
    assert resp.error_code == NONE
    assert sorted((p.topic, p.partition) for p in resp.remaining_partitions) == [("a", 2), ("a", 3)]
    assert (state(core, "a", 0).leader, state(core, "a", 0).isr) == (2, (2, 3))
    assert state(core, "a", 0).leader_epoch == 1
    assert (state(core, "a", 1).leader, state(core, "a", 1).isr) == (2, (2, 3))
    assert state(core, "a", 2).leader == 1 and state(core, "a", 3).leader == 1
    sends = {s.node_id: s.request for s in of(out, SendLeaderAndIsr)}
    assert sorted(sends) == [1, 2, 3]
    assert sorted(p.partition for p in sends[1].partitions) == [0, 1]
    assert of(out, PublishMetadata)
    # a stopping node is not elected again (here: a-0's leader dies; 1 is still registered)
    core.handle(BrokersChanged(brokers(1, 3)), 20)
    assert state(core, "a", 0).leader == 3


def test_controlled_shutdown_of_an_unknown_node_or_stale_epoch_changes_nothing():
    core = new_core([topic("a", {0: (1, 2)}, {0: st(1, [1, 2])})])
    for node, epoch, code in [(9, -1, "BROKER_NOT_AVAILABLE"), (1, 5, "INVALID_REQUEST")]:
        out = core.handle(RequestReceived(Api.CONTROLLED_SHUTDOWN,
                                          replication_pb2.ControlledShutdownRequest(
                                              broker_id=node, broker_epoch=epoch)), 10)
        assert body(out).error_code == E.Value(code) and not of(out, ZkWrite)
    assert state(core, "a", 0).leader == 1 and not core.shutting_down


# ---- preferred leaders ----------------------------------------------------------------------
def elect(core, *tps):
    req = admin_ops_pb2.ElectLeadersRequest(
        partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in tps])
    out = core.handle(RequestReceived(Api.ELECT_LEADERS, req), 10)
    core.check_invariants()
    return out, {(r.topic, r.partition): E.Name(r.error_code) for r in body(out).results}


def test_elect_leaders_per_partition_results():
    core = new_core([topic("a", {0: (1, 2), 1: (2, 1), 2: (3, 1), 3: (3, 1)},
                           {0: st(2, [1, 2], epoch=1), 1: st(2, [2, 1]), 2: st(1, [1]),
                            3: st(1, [1, 3])})], live=(1, 2))
    out, res = elect(core, ("a", 0), ("a", 1), ("a", 2), ("a", 3), ("a", 9))
    assert res == {("a", 0): "NONE", ("a", 1): "ELECTION_NOT_NEEDED",
                   ("a", 2): "PREFERRED_LEADER_NOT_AVAILABLE",      # 3 not in the ISR
                   ("a", 3): "PREFERRED_LEADER_NOT_AVAILABLE",      # 3 not live
                   ("a", 9): "UNKNOWN_TOPIC_OR_PARTITION"}
    assert state(core, "a", 0).leader == 1 and state(core, "a", 0).leader_epoch == 2
    assert len(of(out, WritePartitionState)) == 1 and of(out, PublishMetadata)
    out, res = elect(core)                                            # all
    assert set(res.values()) == {"ELECTION_NOT_NEEDED", "PREFERRED_LEADER_NOT_AVAILABLE"}
    assert not of(out, ZkWrite)


def test_preferred_election_znode_is_honoured_then_deleted():
    core = new_core([topic("a", {0: (1, 2)}, {0: st(2, [1, 2])})])
    out = core.handle(PreferredElectionZnodeChanged((("a", 0), ("nope", 0)), 3), 10)
    assert state(core, "a", 0).leader == 1
    assert of(out, DeletePreferredElection) == [DeletePreferredElection(3)]
    assert core.handle(PreferredElectionZnodeChanged((), NEW), 20) == []


def test_imbalance_ratio_per_preferred_node():
    parts = [(("a", 0), (1, 2), st(2, [1, 2])), (("a", 1), (1, 2), st(1, [1, 2])),
             (("a", 2), (2, 1), st(2, [2, 1])), (("a", 3), (3, 1), None)]
    b = leader_balance.balance(parts)
    assert (b[1].preferred, b[1].not_led, b[2].not_led, b[3].not_led) == (2, 1, 0, 1)
    assert leader_balance.imbalanced_nodes(b, 10) == [1, 3]
    assert leader_balance.imbalanced_nodes(b, 50) == [3]       # 50% is not above 50%


def test_auto_rebalance_runs_on_tick_at_the_deadline_only():
    topics = [topic("a", {p: (1, 2) if p % 2 == 0 else (2, 1) for p in range(4)},
                    {p: st(2, [1, 2]) for p in range(4)})]
    core = new_core(topics, leader_imbalance_check_interval_seconds=300)
    assert not of(core.tick(299_999), ZkWrite)
    out = core.tick(300_000)
    assert [state(core, "a", p).leader for p in range(4)] == [1, 2, 1, 2]
    assert of(out, PublishMetadata) and of(out, SendLeaderAndIsr)
    off = new_core(topics, auto_leader_rebalance_enable=False)
    assert not of(off.tick(300_000), ZkWrite)
    below = new_core(topics, leader_imbalance_per_broker_percentage=50)   # node 1: 2/2 > 50%
    below.tick(300_000)
    assert state(below, "a", 0).leader == 1


# ---- reassignment ---------------------------------------------------------------------------
def test_next_step_table():
    assert next_step((1, 2), (1, 2), (1, 2), 1, {1, 2}).step is Step.DONE
    d = next_step((1, 2), (2, 3), (1, 2), 1, {1, 2, 3})
    assert (d.step, d.assignment) == (Step.EXPAND, (1, 2, 3))
    assert next_step((1, 2, 3), (2, 3), (1, 2), 1, {1, 2, 3}).step is Step.WAIT
    d = next_step((1, 2, 3), (2, 3), (1, 2, 3), 1, {1, 2, 3})
    assert (d.step, d.assignment, d.leader, d.isr, d.removed) == (
        Step.COMPLETE, (2, 3), 2, (2, 3), (1,))
    d = next_step((1, 2, 3), (3, 2), (1, 2, 3), 2, {1, 2, 3})     # leader 2 stays
    assert (d.leader, d.assignment) == (2, (3, 2))
    assert next_step((1, 2, 3), (2, 3), (1, 2, 3), 1, {1}).step is Step.WAIT   # none can lead


def reassign(core, *items):
    req = admin_ops_pb2.AlterPartitionReassignmentsRequest()
    for t, p, reps in items:
        req.partitions.add(topic=t, partition=p, replicas=reps)
    out = core.handle(RequestReceived(Api.ALTER_PARTITION_REASSIGNMENTS, req), 10)
    core.check_invariants()
    return out, {(r.topic, r.partition): E.Name(r.error_code) for r in body(out).results}


def test_reassignment_state_machine_step_by_step():
    core = new_core([topic("a", {0: (1, 2)}, {0: st(1, [1, 2], epoch=3, zk_version=5)})])
    # 1. request: znode written, assignment OAR + RAR, leader epoch +1, LEADER_AND_ISR to all
    out, res = reassign(core, ("a", 0, [2, 3]))
    assert res == {("a", 0): "NONE"}
    (z,) = of(out, WriteReassignments)
    assert z.expected_version == NEW and z.reassignments == (Reassignment("a", 0, (2, 3)),)
    (a,) = of(out, WriteTopicAssignment)
    assert a.assignment == {0: (1, 2, 3)}
    assert state(core, "a", 0).leader_epoch == 4 and state(core, "a", 0).isr == (1, 2)
    assert sorted(s.node_id for s in of(out, SendLeaderAndIsr)) == [1, 2, 3]
    assert not of(out, SendStopReplica)
    listed = body(core.handle(RequestReceived(
        Api.LIST_PARTITION_REASSIGNMENTS, admin_ops_pb2.ListPartitionReassignmentsRequest()), 10))
    (r,) = listed.reassignments
    assert (list(r.replicas), list(r.target_replicas), list(r.adding_replicas),
            list(r.removing_replicas)) == ([1, 2, 3], [2, 3], [3], [1])
    # 2. waiting: tick and unrelated events change nothing
    assert not of(core.tick(100), ZkWrite)
    # 3. the leader adds 3 to the ISR: the move completes in the same batch
    out = alter(core, 1, ("a", 0), [1, 2, 3], 4, state(core, "a", 0).zk_version)
    assert body(out).partitions[0].error_code == NONE
    assert core.topics["a"].assignment[0] == (2, 3)
    s = state(core, "a", 0)
    assert (s.leader, s.isr, s.leader_epoch) == (2, (2, 3), 5)
    assert of(out, WriteReassignments)[-1].reassignments == ()     # znode removed
    assert core.reassignments == {} and core.reassign_version == NEW
    stops = of(out, SendStopReplica)
    assert [x.node_id for x in stops] == [1] and stops[0].request.delete_partitions
    assert sorted(x.node_id for x in of(out, SendLeaderAndIsr)) == [2, 3]
    # the ISR answer the leader got is the committed state before completion; the next
    # LEADER_AND_ISR (epoch 5) tells it the rest.


def test_reassignment_validation():
    core = new_core([topic("a", {0: (1, 2), 1: (1, 2)}, {0: st(1, [1, 2]), 1: st(1, [1, 2])})])
    out, res = reassign(core, ("a", 0, [2, 3]), ("a", 1, []), ("b", 0, [1]), ("a", 1, [1, 1]))
    assert res[("a", 0)] == "NONE" and res[("b", 0)] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert res[("a", 1)] == "INVALID_REQUEST"                      # named twice
    _, res = reassign(core, ("a", 1, [1, 1]), ("a", 0, [3, 1]))
    assert res == {("a", 1): "INVALID_REPLICA_ASSIGNMENT", ("a", 0): "REASSIGNMENT_IN_PROGRESS"}
    _, res = reassign(core, ("a", 1, [1, 4]))
    assert res == {("a", 1): "INVALID_REPLICA_ASSIGNMENT"}
    assert set(core.reassignments) == {("a", 0)}


def test_reassignment_from_the_znode_and_takeover_resumes_it():
    snap = topic("a", {0: (1, 2, 3)}, {0: st(1, [1, 2], epoch=4, zk_version=6)})
    # a predecessor expanded the assignment; the new replica is not in sync yet
    core = new_core([snap], reassignments=[Reassignment("a", 0, (2, 3))], reassign_version=2)
    assert core.reassignments == {("a", 0): (2, 3)}
    out = alter(core, 1, ("a", 0), [1, 2, 3], 4, 6)
    assert core.topics["a"].assignment[0] == (2, 3) and state(core, "a", 0).leader == 2
    (z,) = of(out, WriteReassignments)
    assert z.expected_version == 2 and z.reassignments == ()
    # a predecessor that had not begun: the successor expands on election
    core = new_core([topic("a", {0: (1, 2)}, {0: st(1, [1, 2])})],
                    reassignments=[Reassignment("a", 0, (2, 3)), Reassignment("zz", 0, (1,))],
                    reassign_version=0)
    assert core.topics["a"].assignment[0] == (1, 2, 3)
    assert core.reassignments == {("a", 0): (2, 3)} and core.reassign_version == 1  # zz dropped
    # the new replica is down when the successor takes over: the move is kept and waits
    core3 = new_core([snap], live=(1, 2), reassignments=[Reassignment("a", 0, (2, 3))],
                    reassign_version=2)
    assert core3.reassignments == {("a", 0): (2, 3)}
    assert core3.topics["a"].assignment[0] == (1, 2, 3)
    out = core3.handle(BrokersChanged(brokers(1, 2, 3)), 10)
    assert 3 in {s.node_id for s in of(out, SendLeaderAndIsr)}      # told to start fetching
    out = alter(core3, 1, ("a", 0), [1, 2, 3], 4, 6)
    assert core3.topics["a"].assignment[0] == (2, 3) and core3.reassignments == {}
    # a tool adds an entry later
    out = core.handle(ReassignmentsZnodeChanged(
        (Reassignment("a", 0, (2, 3)),), 1), 20)
    assert not of(out, ZkWrite)


def test_reassignment_waits_when_no_target_replica_can_lead_and_topic_deletion_drops_it():
    core = new_core([topic("a", {0: (1, 2)}, {0: st(1, [1, 2])})])
    reassign(core, ("a", 0, [3]))
    alter(core, 1, ("a", 0), [1, 2, 3], 1, state(core, "a", 0).zk_version)
    assert core.topics["a"].assignment[0] == (3,) and state(core, "a", 0).leader == 3
    core2 = new_core([topic("a", {0: (1, 2)}, {0: st(1, [1, 2])})])
    reassign(core2, ("a", 0, [2, 3]))
    from riverbed._proto.v1 import controller_pb2
    out = core2.handle(RequestReceived(Api.DELETE_TOPICS, controller_pb2.DeleteTopicsRequest(
        names=["a"])), 30)
    assert core2.reassignments == {} and of(out, WriteReassignments)[-1].reassignments == ()


def test_gateways_are_listed_in_metadata_and_describe_cluster():
    core = new_core([])
    core.handle(GatewaysChanged((GatewayInfo(1, "tcp://127.0.0.1:9092"),)), 0)
    md = body(core.handle(RequestReceived(Api.METADATA, metadata_pb2.MetadataRequest()), 1))
    dc = body(core.handle(RequestReceived(Api.DESCRIBE_CLUSTER,
                                          metadata_pb2.DescribeClusterRequest()), 1))
    assert [(g.gateway_id, g.endpoint) for g in md.gateways] == [(1, "tcp://127.0.0.1:9092")]
    assert [g.gateway_id for g in dc.gateways] == [1]
