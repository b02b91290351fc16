"""Eligible Leader Replicas (KIP-966) in the controller core: the pure rules
(services/controller/core/eligible_leaders.py) and the core's transitions, as tables of
(state, input) -> (state, effects). No sockets, threads or clocks."""
import dataclasses
import random

import pytest

from riverbed._proto.v1 import controller_pb2, header_pb2, replication_pb2
from services.common import znodes
from services.controller.config import ControllerConfig
from services.controller.core import eligible_leaders as el
from services.controller.core.controller import ControllerCore
from services.controller.core.effects import (
    PublishMetadata, SendLeaderAndIsr, WritePartitionState)
from services.controller.core.events import BrokersChanged, ElectedAsController, RequestReceived
from services.controller.core.model import BrokerInfo, LeaderIsr, TopicSnapshot

Api = header_pb2.ApiKey
MIN2 = {"min.insync.replicas": "2"}


# ---- the rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("old_isr, old_elr, old_last, new_isr, unclean, expected", [
    # still at min.insync.replicas (2): nobody left while it was below, nothing eligible
    ((1, 2, 3), (), (), (1, 2), (), ((), ())),
    # below it: who was in the ISR when it fell stays eligible
    ((1, 2), (), (), (1,), (), ((2,), ())),
    ((1, 2, 3), (), (), (1,), (), ((2, 3), ())),
    # further below: the ELR keeps its members and gains the new leavers
    ((1, 2), (3,), (), (1,), (), ((2, 3), ())),
    # an election from the ELR: the new leader leaves it, the old leader joins it
    ((1,), (2, 3), (), (2,), (), ((1, 3), ())),
    # back at min.insync.replicas: ELR and LastKnownElr emptied
    ((1,), (2, 3), (4,), (1, 2), (), ((), ())),
    # a replica that shut down uncleanly is not eligible: it is last known
    ((1, 2, 3), (), (), (1,), (3,), ((2,), (3,))),
    ((1,), (2, 3), (), (1,), (2,), ((3,), (2,))),
])
def test_next_elr(old_isr, old_elr, old_last, new_isr, unclean, expected):
    assert el.next_elr(old_isr, old_elr, old_last, new_isr, 2, (1, 2, 3, 4),
                       unclean_shutdown=unclean) == expected


def test_only_replicas_of_the_partition_stay_eligible():
    # a reassignment moved replica 3 away
    assert el.next_elr((1, 2, 3), (), (), (1,), 2, (1, 2, 4)) == ((2,), ())


def test_effective_min_isr_is_at_most_the_replication_factor():
    assert el.min_isr({}, 1, 3) == 1
    assert el.min_isr(MIN2, 1, 3) == 2
    assert el.min_isr({"min.insync.replicas": "3"}, 1, 2) == 2
    assert el.min_isr({"min.insync.replicas": "x"}, 2, 3) == 2      # unreadable: the default


def test_elect_isr_then_elr_then_unclean_then_none():
    replicas = (1, 2, 3)
    assert el.elect(replicas, (1, 2), (), {1, 2, 3}, unclean_enabled=False) == \
        el.Election(1, (1, 2), "isr")
    assert el.elect(replicas, (1,), (2, 3), {2, 3}, unclean_enabled=False) == \
        el.Election(2, (2,), "elr")
    assert el.elect(replicas, (1,), (), {3}, unclean_enabled=True) == \
        el.Election(3, (3,), "unclean")
    assert el.elect(replicas, (1,), (2,), {3}, unclean_enabled=False) == \
        el.Election(-1, (1,), "")


# ---- the core ----------------------------------------------------------------------------------
def broker(i, epoch=None, unclean=False):
    return BrokerInfo(i, "127.0.0.1", 9100 + i, f"tcp://127.0.0.1:{9100 + i}", "",
                      1000 + i if epoch is None else epoch, unclean_shutdown=unclean)


def new_core(states, live=(1, 2, 3), configs=MIN2, **cfg):
    cfg.setdefault("broker_session_timeout_ms", 0)
    core = ControllerCore(ControllerConfig(controller_id=100, **cfg), random.Random(0))
    topics = (TopicSnapshot("t", {0: (1, 2, 3)}, dict(configs), 0, 0, {0: states}),)
    core.handle(ElectedAsController(5, "cid", tuple(broker(i) for i in live), topics), 0)
    core.check_invariants()
    return core


def alter(core, leader, new_isr):
    st = core.topics["t"].states[0]
    req = replication_pb2.AlterPartitionRequest(broker_id=leader, broker_epoch=1000 + leader)
    req.partitions.add(topic="t", partition=0, leader_id=leader, leader_epoch=st.leader_epoch,
                       new_isr=new_isr, partition_epoch=st.zk_version)
    out = core.handle(RequestReceived(Api.ALTER_PARTITION, req), 10)
    core.check_invariants()
    return out


def state(core):
    return core.topics["t"].states[0]


def of(effects, cls):
    return [e for e in effects if isinstance(e, cls)]


def test_leader_cut_off_from_its_followers_then_dead_a_clean_election_from_the_elr():
    core = new_core(LeaderIsr(1, 4, (1, 2, 3), 1, 7))
    # the leader, cut off from both followers, shrinks the ISR to itself (below min ISR 2)
    out = alter(core, 1, [1])
    (w,) = of(out, WritePartitionState)
    assert (w.state.isr, w.state.elr, w.state.last_known_elr) == ((1,), (2, 3), ())
    assert w.state.leader_epoch == 4                 # an ISR change: no leader epoch bump
    # the lone leader dies: a follower of the ELR is elected, cleanly
    out = core.handle(BrokersChanged((broker(2), broker(3))), 20)
    core.check_invariants()
    (w,) = of(out, WritePartitionState)
    assert w.state == LeaderIsr(2, 5, (2,), 5, 9, (1, 3), ())
    assert (core.leader_elections, core.elr_elections, core.unclean_elections) == (1, 1, 0)
    assert {s.node_id for s in of(out, SendLeaderAndIsr)} == {2, 3}
    # the new leader takes its follower back: at min ISR, nothing is merely "eligible" now
    out = alter(core, 2, [2, 3])
    assert (state(core).isr, state(core).elr, state(core).last_known_elr) == ((2, 3), (), ())
    # the metadata shows it all along
    snap = of(out, PublishMetadata)[0].update.topics[0].partitions[0]
    assert list(snap.eligible_leader_replicas) == [] and list(snap.isr) == [2, 3]


def test_elr_in_the_metadata_and_no_election_without_a_live_eligible_replica():
    core = new_core(LeaderIsr(1, 4, (1, 2, 3), 1, 7))
    alter(core, 1, [1])
    snap = core.snapshot().topics[0].partitions[0]
    assert (list(snap.isr), list(snap.eligible_leader_replicas)) == ([1], [2, 3])
    # the leader and both eligible replicas are gone: offline, the ISR kept (as before ELR)
    out = core.handle(BrokersChanged(()), 20)
    (w,) = of(out, WritePartitionState)
    assert (w.state.leader, w.state.isr, w.state.elr) == (-1, (1,), (2, 3))
    # an eligible replica returns: elected
    out = core.handle(BrokersChanged((broker(3),)), 30)
    (w,) = of(out, WritePartitionState)
    assert (w.state.leader, w.state.isr, w.state.elr) == (3, (3,), (1, 2))


def test_a_replica_back_from_an_unclean_shutdown_is_no_longer_eligible():
    core = new_core(LeaderIsr(1, 4, (1, 2, 3), 1, 7))
    alter(core, 1, [1])
    # node 3 restarts after a crash that may have cost it unflushed records
    out = core.handle(BrokersChanged((broker(1), broker(2),
                                      broker(3, epoch=2000, unclean=True))), 20)
    core.check_invariants()
    (w,) = of(out, WritePartitionState)
    assert (w.state.isr, w.state.elr, w.state.last_known_elr) == ((1,), (2,), (3,))
    assert w.state.leader_epoch == 4                # an ELR change alone: no epoch bump
    assert 1 in {s.node_id for s in of(out, SendLeaderAndIsr)}   # the leader learns the version
    assert of(out, PublishMetadata)
    # the leader and node 2 die: 3 is not eligible, so no clean election is possible
    out = core.handle(BrokersChanged((broker(3, epoch=2000, unclean=True),)), 30)
    (w,) = of(out, WritePartitionState)
    assert (w.state.leader, w.state.elr, w.state.last_known_elr) == (-1, (2,), (3,))
    # the same registration seen again (a zk.set of its data, or no change) changes nothing
    out = core.handle(BrokersChanged((broker(3, epoch=2000, unclean=True),)), 40)
    assert of(out, WritePartitionState) == []


def test_unclean_election_is_kept_and_empties_the_elr():
    core = new_core(LeaderIsr(1, 4, (1, 2, 3), 1, 7),
                    configs={**MIN2, "unclean.leader.election.enable": "true"})
    alter(core, 1, [1])
    core.handle(BrokersChanged((broker(1), broker(2), broker(3, epoch=2000, unclean=True))), 20)
    assert (state(core).elr, state(core).last_known_elr) == ((2,), (3,))
    # the leader and the eligible replica die: only unclean election brings 3 in
    out = core.handle(BrokersChanged((broker(3, epoch=2000, unclean=True),)), 30)
    (w,) = of(out, WritePartitionState)
    assert (w.state.leader, w.state.isr, w.state.elr, w.state.last_known_elr) == (
        3, (3,), (), ())
    assert core.unclean_elections == 1 and core.elr_elections == 0


def test_changing_min_insync_replicas_empties_the_elr():
    core = new_core(LeaderIsr(1, 4, (1, 2, 3), 1, 7))
    alter(core, 1, [1])
    req = controller_pb2.AlterConfigsRequest()
    a = req.topics.add(name="t")
    a.set["min.insync.replicas"] = "1"
    out = core.handle(RequestReceived(Api.ALTER_CONFIGS, req), 20)
    core.check_invariants()
    assert (state(core).elr, state(core).last_known_elr) == ((), ())
    assert state(core).leader_epoch == 4
    assert of(out, SendLeaderAndIsr)


def test_min_isr_one_shrinks_leave_no_elr_and_the_last_member_still_leads_again():
    core = new_core(LeaderIsr(1, 4, (1, 2, 3), 1, 7), configs={})
    alter(core, 1, [1])
    assert state(core).elr == ()
    core.handle(BrokersChanged((broker(2), broker(3))), 20)
    assert (state(core).leader, state(core).isr, state(core).elr) == (-1, (1,), ())
    core.handle(BrokersChanged((broker(1), broker(2), broker(3))), 30)
    assert (state(core).leader, state(core).isr) == (1, (1,))


def test_elr_disabled_tracks_nothing():
    core = new_core(LeaderIsr(1, 4, (1, 2, 3), 1, 7), eligible_leader_replicas_enable=False)
    alter(core, 1, [1])
    assert state(core).elr == ()
    core.handle(BrokersChanged((broker(2), broker(3))), 20)
    assert (state(core).leader, state(core).isr) == (-1, (1,))


def test_a_new_controller_elects_from_the_elr_it_read():
    core = new_core(LeaderIsr(1, 6, (1,), 1, 9, (2, 3), ()), live=(2, 3))
    st = state(core)
    assert (st.leader, st.isr, st.elr) == (2, (2,), (1, 3))
    assert core.elr_elections == 1


def test_the_state_znode_keeps_the_elr_and_stays_readable_both_ways():
    s = znodes.PartitionState(leader=2, leader_epoch=5, isr=(2,), controller_epoch=3,
                              elr=(3, 1), last_known_elr=(4,))
    data = znodes.encode_partition_state(s)
    assert znodes.decode_partition_state(data) == s
    # without ELR: what older writers wrote, byte for byte; older states read with none
    plain = dataclasses.replace(s, elr=(), last_known_elr=())
    assert znodes.encode_partition_state(plain) == (
        b'{"version":1,"controller_epoch":3,"leader":2,"leader_epoch":5,"isr":[2]}')
    assert znodes.decode_partition_state(znodes.encode_partition_state(plain)) == plain
    # the registration's unclean-shutdown flag, written only when set
    b = znodes.BrokerInfo(3, "h", 1, ("tcp://h:1",), unclean_shutdown=True)
    assert znodes.decode_broker(3, znodes.encode_broker(b)).unclean_shutdown
    assert b"unclean" not in znodes.encode_broker(dataclasses.replace(b, unclean_shutdown=False))
