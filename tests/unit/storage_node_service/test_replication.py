"""Replication decisions of the storage node's core: ISR shrink/expand over a virtual clock, the
high watermark across ISR changes, leader-epoch divergence (leader's answer and the follower's
truncation point), min.insync.replicas, fetcher assignment."""
from __future__ import annotations

import pytest

from riverbed import errors
from riverbed.records import build_batch

from services.storage_node.core import divergence as dv
from services.storage_node.core import isr as isr_mod
from services.storage_node.core.produce_admission import (
    NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND, acks_all_result, admit_partition,
    check_min_insync, min_insync_replicas)
from services.storage_node.core.replica_state import (
    NONE, AlterIsr, AlterPartitionResult, BecomeFollower, BecomeLeader, LocalLog,
    PartitionStateIn, ReplicaManager, fetcher_id)

T = ("t", 0)
LAG = 1000


def leader(isr=(1, 2, 3), replicas=(1, 2, 3), leo=0, hw=0, epoch=0, zk_version=0, now=0):
    rm = ReplicaManager(1)
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("t", 0, 1, epoch, isr, replicas,
                                                       zk_version=zk_version)])
    effects = rm.apply_leader_and_isr(plan, {T: LocalLog(leo, hw, epoch)}, now)
    assert effects == [BecomeLeader(T, epoch, leo)]
    return rm


def committed(eff: AlterIsr, zk_version: int) -> AlterPartitionResult:
    return AlterPartitionResult(eff.tp, NONE, eff.leader_id, eff.leader_epoch, eff.new_isr,
                                zk_version)


# ---- ISR shrink / expand ---------------------------------------------------------------------

def test_lagging_follower_is_proposed_out_after_lag_time_and_hw_moves_once_committed():
    rm = leader(now=0)
    rm.on_local_append(T, 10)
    for t in (100, 600, 1100):          # follower 2 keeps up; 3 never fetches past 0
        assert rm.on_follower_fetch(T, 2, 10, t) in (True, False)
        rm.on_follower_fetch(T, 3, 0, t)
    assert rm.get(T).high_watermark == 0            # 3 holds it
    assert rm.isr_tick(LAG, LAG) == []              # exactly lag ms: not yet
    [eff] = rm.isr_tick(LAG + 1, LAG)
    assert eff == AlterIsr(T, 1, 0, (1, 2), 0)
    assert rm.isr_tick(LAG + 500, LAG) == []        # at most one change in flight
    assert rm.get(T).isr == (1, 2, 3)               # not applied before the controller commits
    assert rm.get(T).high_watermark == 0
    assert rm.on_alter_partition_result(eff, committed(eff, 1)) is True
    r = rm.get(T)
    assert (r.isr, r.zk_version, r.high_watermark, r.pending_isr) == ((1, 2), 1, 10, None)
    rm.check_invariants()


def test_caught_up_follower_is_never_dropped_even_if_it_fetches_rarely():
    rm = leader(now=0)
    rm.on_local_append(T, 5)
    rm.on_follower_fetch(T, 2, 5, 10)
    rm.on_follower_fetch(T, 3, 5, 10)
    assert rm.isr_tick(50_000, LAG) == []    # both at the leader's LEO


def test_follower_reaching_previous_leader_leo_counts_as_caught_up_at_that_fetch():
    st = isr_mod.FollowerState()
    isr_mod.update_follower_fetch_state(st, 0, 10, now_ms=100)      # behind: not caught up
    assert st.last_caught_up_ms == 0
    isr_mod.update_follower_fetch_state(st, 10, 20, now_ms=900)     # reached LEO of t=100
    assert st.last_caught_up_ms == 100
    isr_mod.update_follower_fetch_state(st, 20, 20, now_ms=1500)    # at the LEO now
    assert st.last_caught_up_ms == 1500
    isr_mod.update_follower_fetch_state(st, 20, 30, now_ms=1600)    # behind again: kept
    assert st.last_caught_up_ms == 1500
    assert isr_mod.out_of_sync_replicas(1, (1, 2), 30, {2: st}, 1500 + LAG, LAG) == ()
    assert isr_mod.out_of_sync_replicas(1, (1, 2), 30, {2: st}, 1501 + LAG, LAG) == (2,)


def test_new_leader_gives_isr_members_the_lag_time_to_show_up():
    rm = leader(leo=10, hw=10, now=5000)
    rm.on_local_append(T, 12)
    assert rm.isr_tick(5000 + LAG, LAG) == []
    [eff] = rm.isr_tick(5001 + LAG, LAG)
    assert eff.new_isr == (1,)


def test_expand_when_follower_reaches_hw_and_epoch_start_and_hw_counts_it_while_pending():
    rm = leader(isr=(1, 2), leo=4, hw=4, epoch=3, now=0)     # epoch 3 starts at offset 4
    rm.on_local_append(T, 10)
    rm.on_follower_fetch(T, 2, 8, 1)
    assert rm.get(T).high_watermark == 8
    rm.on_follower_fetch(T, 3, 6, 1)
    assert rm.maybe_expand_isr(T, 3) is None            # below the HW
    rm.on_follower_fetch(T, 3, 8, 2)
    eff = rm.maybe_expand_isr(T, 3)
    assert eff == AlterIsr(T, 1, 3, (1, 2, 3), 0)
    assert rm.maybe_expand_isr(T, 3) is None            # one in flight
    rm.on_follower_fetch(T, 2, 10, 3)
    assert rm.get(T).high_watermark == 8                # 3 (pending) holds it
    rm.on_alter_partition_result(eff, committed(eff, 1))
    assert rm.get(T).isr == (1, 2, 3)
    rm.on_follower_fetch(T, 3, 10, 4)
    assert rm.get(T).high_watermark == 10


def test_expand_needs_the_start_of_the_leaders_epoch():
    rm = leader(isr=(1,), leo=7, hw=3, epoch=2, now=0)    # HW 3 from the checkpoint
    rm.on_follower_fetch(T, 2, 5, 1)                      # >= HW but < epoch start 7
    assert rm.maybe_expand_isr(T, 2) is None
    rm.on_follower_fetch(T, 2, 7, 2)
    assert rm.maybe_expand_isr(T, 2).new_isr == (1, 2)


def test_refused_change_blocks_until_leader_and_isr_and_superseded_answers_are_ignored():
    rm = leader(now=0)
    rm.on_local_append(T, 3)
    [eff] = rm.isr_tick(LAG + 1, LAG)
    refused = AlterPartitionResult(T, errors.FencedLeaderEpochError.code)
    assert rm.on_alter_partition_result(eff, refused) is False
    r = rm.get(T)
    assert (r.isr, r.pending_isr, r.isr_change_blocked) == ((1, 2, 3), None, True)
    assert rm.isr_tick(10 * LAG, LAG) == []                    # waits for LEADER_AND_ISR
    # the controller's LEADER_AND_ISR (same epoch, newer zk version) unblocks
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("t", 0, 1, 0, (1, 2, 3), (1, 2, 3),
                                                       zk_version=5)])
    assert rm.apply_leader_and_isr(plan, {T: LocalLog(3, 0, 0)}, 10 * LAG) == []
    [eff2] = rm.isr_tick(10 * LAG, LAG)                        # learned state kept: lagging
    assert eff2.zk_version == 5
    # a LEADER_AND_ISR while eff2 is in flight supersedes it: its answer changes nothing
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("t", 0, 1, 0, (1, 2), (1, 2, 3),
                                                       zk_version=6)])
    rm.apply_leader_and_isr(plan, {T: LocalLog(3, 0, 0)}, 10 * LAG)
    assert rm.on_alter_partition_result(eff2, committed(eff2, 9)) is False
    assert (rm.get(T).isr, rm.get(T).zk_version) == ((1, 2), 6)


def test_older_state_of_the_same_leader_epoch_does_not_undo_a_committed_isr_change():
    """A new controller's election LEADER_AND_ISR, built before it committed our shrink and
    delivered after its answer, restates the older ISR with the older zk_version: ignored."""
    rm = leader(now=0, zk_version=0)
    rm.on_local_append(T, 3)
    [eff] = rm.isr_tick(LAG + 1, LAG)
    rm.on_alter_partition_result(eff, committed(eff, 1))
    assert (rm.get(T).isr, rm.get(T).zk_version) == (eff.new_isr, 1)
    plan = rm.plan_leader_and_isr(2, [PartitionStateIn("t", 0, 1, 0, (1, 2, 3), (1, 2, 3),
                                                       zk_version=0)])
    assert plan.accepted == () and dict(plan.partition_errors) == {T: NONE}
    assert rm.apply_leader_and_isr(plan, {}, LAG + 2) == []
    assert (rm.get(T).isr, rm.get(T).zk_version) == (eff.new_isr, 1)
    assert rm.controller_epoch == 2                      # the new controller is still known


def test_the_state_a_proposal_was_made_against_does_not_supersede_it():
    """A new controller's election LEADER_AND_ISR (the state our shrink was proposed against,
    same zk_version) arrives while the shrink travels to that controller, which commits it:
    the answer applies, so the leader knows the ISR ZooKeeper holds (it used to be dropped as
    superseded, leaving the leader with the old ISR and nothing to propose)."""
    rm = leader(now=0, zk_version=0)
    rm.on_local_append(T, 3)
    [eff] = rm.isr_tick(LAG + 1, LAG)
    plan = rm.plan_leader_and_isr(2, [PartitionStateIn("t", 0, 1, 0, (1, 2, 3), (1, 2, 3),
                                                       zk_version=0)])
    rm.apply_leader_and_isr(plan, {T: LocalLog(3, 0, 0)}, LAG + 2)
    assert rm.pending_alter(T) == eff                    # still in flight
    rm.on_alter_partition_result(eff, committed(eff, 1))
    assert (rm.get(T).isr, rm.get(T).zk_version) == (eff.new_isr, 1)
    assert rm.pending_alter(T) is None


def test_a_newer_state_supersedes_the_proposal_in_flight():
    rm = leader(now=0, zk_version=0)
    rm.on_local_append(T, 3)
    [eff] = rm.isr_tick(LAG + 1, LAG)
    plan = rm.plan_leader_and_isr(2, [PartitionStateIn("t", 0, 1, 0, (1, 2), (1, 2, 3),
                                                       zk_version=1)])
    rm.apply_leader_and_isr(plan, {T: LocalLog(3, 0, 0)}, LAG + 2)
    assert rm.pending_alter(T) is None
    rm.on_alter_partition_result(eff, committed(eff, 2))     # superseded: not applied
    assert (rm.get(T).isr, rm.get(T).zk_version) == ((1, 2), 1)


def test_answer_naming_another_leader_epoch_is_not_applied():
    rm = leader(now=0)
    rm.on_local_append(T, 3)
    [eff] = rm.isr_tick(LAG + 1, LAG)
    other = AlterPartitionResult(T, NONE, 2, 1, (2, 3), 4)
    rm.on_alter_partition_result(eff, other)
    assert rm.get(T).isr == (1, 2, 3) and rm.get(T).isr_change_blocked


def test_followers_do_not_propose():
    rm = ReplicaManager(2)
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("t", 0, 1, 0, (1, 2), (1, 2))])
    rm.apply_leader_and_isr(plan, {T: LocalLog(0, 0)}, 0)
    assert rm.isr_tick(10 * LAG, LAG) == []
    assert rm.maybe_expand_isr(T, 1) is None


# ---- becoming follower: truncation by epochs, not by the high watermark -----------------------

def test_follower_with_epochs_keeps_its_tail_for_the_leader_to_judge():
    rm = ReplicaManager(2)
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("t", 0, 1, 4, (1, 2), (1, 2))])
    assert rm.apply_leader_and_isr(plan, {T: LocalLog(10, 6, latest_epoch=3)}) == \
        [BecomeFollower(T, 1, 4, 10)]
    rm = ReplicaManager(2)
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("t", 0, 1, 4, (1, 2), (1, 2))])
    assert rm.apply_leader_and_isr(plan, {T: LocalLog(10, 6, latest_epoch=-1)}) == \
        [BecomeFollower(T, 1, 4, 6)]


# ---- divergence --------------------------------------------------------------------------------

LEADER_EPOCHS = [(0, 0), (2, 5), (4, 12)]     # leader LEO 20


@pytest.mark.parametrize("epoch, expected", [
    (-1, (-1, -1)),          # undefined
    (0, (0, 5)),             # ends where epoch 2 starts
    (1, (0, 5)),             # unknown here: the floor epoch 0, which ends at 5
    (2, (2, 12)),
    (3, (2, 12)),
    (4, (4, 20)),            # the current epoch ends at the LEO
    (5, (-1, -1)),           # newer than anything known
])
def test_epoch_end_offset(epoch, expected):
    assert dv.epoch_end_offset(LEADER_EPOCHS, epoch, 20) == expected


def test_epoch_end_offset_below_first_and_empty_cache():
    assert dv.epoch_end_offset([(3, 10), (5, 14)], 1, 20) == (1, 10)
    assert dv.epoch_end_offset([], 1, 7) == (-1, 7)


@pytest.mark.parametrize("last_epoch, fetch_offset, expected", [
    (4, 20, None),           # in sync with the current epoch
    (4, 15, None),
    (2, 12, None),           # finished epoch 2 exactly: fine
    (2, 9, None),
    (2, 14, (2, 12)),        # has epoch-2 records the leader does not have
    (3, 14, (2, 12)),        # epoch 3 never reached the leader: cut to epoch 2's end
    (1, 5, (0, 5)),          # epoch unknown here: the answer names the floor epoch
    (-1, 7, None),           # a follower without epochs: only the range check
    (6, 25, (-1, 3)),        # newer than the leader's epochs: keep the leader's HW
])
def test_leader_answer_to_a_follower(last_epoch, fetch_offset, expected):
    assert dv.diverging_epoch(LEADER_EPOCHS, 20, last_epoch, fetch_offset, 3) == expected


def test_follower_truncation_point():
    follower = [(0, 0), (2, 5), (3, 13)]      # follower LEO 16, HW 4
    # the leader says epoch 2 ends at 12: keep [0, 12)
    assert dv.follower_truncation_offset(follower, 16, 4, 2, 12) == 12
    # the leader's epoch 2 ends later than ours (we were cut short): ours wins
    assert dv.follower_truncation_offset(follower, 16, 4, 2, 14) == 13
    # the leader names an epoch we do not have (1): our end for the floor epoch (0) -> 5
    assert dv.follower_truncation_offset(follower, 16, 4, 1, 9) == 5
    # no epoch from the leader: its end offset, capped by our LEO
    assert dv.follower_truncation_offset(follower, 16, 4, -1, 9) == 9
    assert dv.follower_truncation_offset(follower, 16, 4, -1, 99) == 16
    # no end offset at all: the high watermark
    assert dv.follower_truncation_offset(follower, 16, 4, 2, -1) == 4
    # a follower without epochs: the leader's end offset
    assert dv.follower_truncation_offset([], 16, 4, 2, 12) == 12


def test_old_leader_with_uncommitted_tail_converges_in_one_round():
    """The Jepsen scenario: old leader A wrote offsets 10..14 in epoch 1 that never reached B;
    B became leader in epoch 2 at offset 10 and appended 10..11. A follows B."""
    a_epochs, a_leo = [(0, 0), (1, 6)], 15
    b_epochs, b_leo = [(0, 0), (1, 6), (2, 10)], 12
    answer = dv.diverging_epoch(b_epochs, b_leo, dv.latest_epoch(a_epochs), a_leo, 10)
    assert answer == (1, 10)
    cut = dv.follower_truncation_offset(a_epochs, a_leo, 10, *answer)
    assert cut == 10
    # after truncating, A's next fetch (epoch 1 at offset 10) agrees with B
    assert dv.diverging_epoch(b_epochs, b_leo, 1, cut, 10) is None


@pytest.mark.parametrize("sent, leader_epoch, code", [
    (-1, 5, NONE), (5, 5, NONE),
    (4, 5, errors.FencedLeaderEpochError.code),
    (6, 5, errors.UnknownLeaderEpochError.code),
])
def test_current_leader_epoch_check(sent, leader_epoch, code):
    assert dv.check_current_leader_epoch(sent, leader_epoch) == code


# ---- min.insync.replicas ---------------------------------------------------------------------

def test_min_insync_checks():
    assert min_insync_replicas({"min.insync.replicas": "2"}, 1) == 2
    assert min_insync_replicas({"min.insync.replicas": "zero"}, 1) == 1
    assert min_insync_replicas(None, 3) == 3
    assert check_min_insync(-1, 1, 2) == NOT_ENOUGH_REPLICAS
    assert check_min_insync(1, 1, 2) == NONE               # only acks=all is refused
    assert check_min_insync(-1, 2, 2) == NONE
    assert acks_all_result(NONE, 1, 2) == NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert acks_all_result(NONE, 2, 2) == NONE
    assert acks_all_result(errors.RequestTimedOutError.code, 1, 2) == \
        errors.RequestTimedOutError.code


def test_admission_refuses_acks_all_with_a_small_isr_before_appending():
    rm = leader(isr=(1,), replicas=(1, 2))
    payload = build_batch([(0, None, b"v")])
    adm = admit_partition(rm, T, payload, 1 << 20, acks=-1, min_insync=2)
    assert adm.error_code == NOT_ENOUGH_REPLICAS
    assert admit_partition(rm, T, payload, 1 << 20, acks=1, min_insync=2).ok
    assert admit_partition(rm, T, payload, 1 << 20, acks=-1, min_insync=1).ok


def test_isr_shrink_below_min_insync_fails_waiting_produce_after_append():
    rm = leader(isr=(1, 2), replicas=(1, 2), now=0)
    rm.on_local_append(T, 5)                         # a produce waiting for HW >= 5
    [eff] = rm.isr_tick(LAG + 1, LAG)
    assert rm.on_alter_partition_result(eff, committed(eff, 1)) is True
    assert rm.get(T).high_watermark == 5             # the shrink completes the wait ...
    assert acks_all_result(NONE, rm.isr_size(T), 2) == NOT_ENOUGH_REPLICAS_AFTER_APPEND


# ---- fetchers ---------------------------------------------------------------------------------

def test_fetcher_id_is_stable_and_spreads():
    ids = {fetcher_id(("topic", p), 3) for p in range(30)}
    assert ids == {0, 1, 2}
    assert fetcher_id(("topic", 7), 3) == fetcher_id(("topic", 7), 3)
    assert fetcher_id(("topic", 7), 1) == 0
    rm = ReplicaManager(2)
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("topic", p, 1, 0, (1, 2), (1, 2))
                                      for p in range(6)])
    rm.apply_leader_and_isr(plan, {s.tp: LocalLog(0, 0) for s in plan.accepted})
    groups = rm.followed_fetchers(2)
    assert sorted(tp for tps in groups.values() for tp in tps) == [("topic", p) for p in range(6)]
    assert all(k[0] == 1 for k in groups)
