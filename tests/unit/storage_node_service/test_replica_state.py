"""Unit tests of the storage node's replica state: epoch fencing, roles, high watermark."""
from riverbed import errors

from services.storage_node.core.replica_state import (
    NONE, BecomeFollower, BecomeLeader, LocalLog, PartitionStateIn, ReplicaManager, Role,
    compute_high_watermark)

STALE = errors.StaleControllerEpochError.code
T = ("orders", 0)


def state(leader, epoch, isr=(1, 2, 3), replicas=(1, 2, 3), tp=T):
    return PartitionStateIn(tp[0], tp[1], leader, epoch, tuple(isr), tuple(replicas))


def apply(rm, cepoch, *states, leo=0, hw=0):
    plan = rm.plan_leader_and_isr(cepoch, states)
    effects = rm.apply_leader_and_isr(plan, {s.tp: LocalLog(leo, hw) for s in plan.accepted})
    return plan, effects


def test_stale_controller_epoch_is_refused_and_changes_nothing():
    rm = ReplicaManager(1)
    apply(rm, 5, state(1, 0))
    plan, effects = apply(rm, 4, state(2, 9))
    assert plan.error_code == STALE
    assert plan.partition_errors == ((T, STALE),)
    assert effects == []
    assert rm.get(T).role is Role.LEADER and rm.get(T).leader_epoch == 0
    assert rm.controller_epoch == 5
    assert rm.check_controller_epoch(5) == NONE
    assert rm.check_controller_epoch(4) == STALE


def test_newer_controller_epoch_is_remembered():
    rm = ReplicaManager(1)
    apply(rm, 3, state(1, 0))
    apply(rm, 7, state(1, 1))
    assert rm.controller_epoch == 7


def test_older_leader_epoch_is_ignored_per_partition():
    rm = ReplicaManager(1)
    other = ("orders", 1)
    apply(rm, 1, state(1, 4))
    plan, effects = apply(rm, 2, state(2, 3), state(2, 0, tp=other))
    assert dict(plan.partition_errors) == {T: STALE, other: NONE}
    assert rm.get(T).role is Role.LEADER and rm.get(T).leader_epoch == 4
    assert rm.get(other).role is Role.FOLLOWER
    assert effects == [BecomeFollower(other, 2, 0, 0)]


def test_state_not_naming_this_node_is_rejected():
    rm = ReplicaManager(9)
    plan, effects = apply(rm, 1, state(1, 0))
    assert plan.partition_errors[0][1] == errors.UnknownTopicOrPartitionError.code
    assert effects == [] and rm.get(T) is None


def test_become_leader_then_follower_truncates_to_high_watermark():
    rm = ReplicaManager(1)
    _, effects = apply(rm, 1, state(1, 0, isr=(1,)), leo=0)
    assert effects == [BecomeLeader(T, 0)]
    rm.on_local_append(T, 10)
    assert rm.get(T).high_watermark == 10    # ISR of one: HW follows the log end
    _, effects = apply(rm, 1, state(2, 1, isr=(1, 2)), leo=15, hw=0)
    assert effects == [BecomeFollower(T, 2, 1, 10)]
    assert rm.get(T).log_end_offset == 10
    assert rm.leader_check(T) == errors.NotLeaderForPartitionError.code


def test_restart_follower_truncates_to_checkpointed_high_watermark():
    rm = ReplicaManager(3)
    _, effects = apply(rm, 1, state(1, 2), leo=50, hw=42)
    assert effects == [BecomeFollower(T, 1, 2, 42)]
    assert rm.followed_leaders() == {1: [T]}


def test_same_state_again_keeps_follower_progress():
    rm = ReplicaManager(1)
    apply(rm, 1, state(1, 0, isr=(1, 2)))
    rm.on_local_append(T, 5)
    rm.on_follower_fetch(T, 2, 5)
    assert rm.get(T).high_watermark == 5
    _, effects = apply(rm, 2, state(1, 0, isr=(1, 2)), leo=5)
    assert effects == []
    assert rm.get(T).follower_leos == {2: 5} and rm.get(T).high_watermark == 5


def test_high_watermark_is_min_leo_over_isr():
    assert compute_high_watermark(1, 10, (1, 2, 3), {2: 7, 3: 9}) == 7
    assert compute_high_watermark(1, 10, (1, 3), {2: 0, 3: 9}) == 9   # 2 not in ISR
    assert compute_high_watermark(1, 10, (1, 2), {}) == -1            # 2 not heard from
    assert compute_high_watermark(1, 10, (1,), {}) == 10


def test_high_watermark_advances_with_followers_and_never_moves_back():
    rm = ReplicaManager(1)
    apply(rm, 1, state(1, 0))
    assert rm.on_local_append(T, 10) is False
    assert rm.on_follower_fetch(T, 2, 10) is False   # 3 still unknown
    assert rm.get(T).high_watermark == 0
    assert rm.on_follower_fetch(T, 3, 6) is True
    assert rm.get(T).high_watermark == 6
    assert rm.on_follower_fetch(T, 3, 4) is False     # a stale fetch offset
    assert rm.get(T).high_watermark == 6
    assert rm.on_follower_fetch(T, 3, 99) is True     # capped at the leader's LEO
    assert rm.get(T).high_watermark == 10
    rm.check_invariants()


def test_follower_high_watermark_is_min_of_leader_hw_and_own_leo():
    rm = ReplicaManager(2)
    apply(rm, 1, state(1, 0))
    assert rm.on_follower_appended(T, 5, 8) is True
    assert rm.get(T).high_watermark == 5
    assert rm.on_follower_appended(T, 9, 8) is True
    assert rm.get(T).high_watermark == 8
    assert rm.on_follower_fetch(T, 3, 9) is False   # followers do not track others
    rm.check_invariants()


def test_stop_replica_epoch_checked():
    rm = ReplicaManager(1)
    apply(rm, 4, state(1, 0))
    code, perrs, removed = rm.stop_replica(3, [T])
    assert code == STALE and removed == [] and rm.get(T) is not None
    code, perrs, removed = rm.stop_replica(4, [T, ("nope", 0)])
    assert code == NONE and removed == [T] and rm.get(T) is None
    assert rm.leader_check(T) == errors.UnknownTopicOrPartitionError.code


def test_a_controller_request_meant_for_an_earlier_registration_is_stale():
    from services.storage_node.core.replica_state import stale_broker_epoch
    assert stale_broker_epoch(100, 200)      # the old process's request, resent to its successor
    assert not stale_broker_epoch(200, 200)
    assert not stale_broker_epoch(300, 200)      # the controller saw our registration first
    assert not stale_broker_epoch(0, 200)        # not stamped (an older controller)
    assert not stale_broker_epoch(100, -1)       # not registered yet: nothing to compare with


def test_high_watermark_holds_while_the_isr_is_below_min_insync_replicas():
    """KIP-966's strict min ISR: what the controller keeps as eligible leaders (the ISR when it
    fell below min.insync.replicas) has every record below the high watermark."""
    from services.storage_node.core.replica_state import AlterPartitionResult
    rm = ReplicaManager(1, min_insync_of=lambda topic: 2)
    apply(rm, 1, state(1, 0))
    rm.on_local_append(T, 10)
    rm.on_follower_fetch(T, 2, 10)
    rm.on_follower_fetch(T, 3, 10)
    assert rm.get(T).high_watermark == 10
    # the followers are cut off: the ISR shrinks to the leader alone
    sent = rm._propose(rm.get(T), (1,))
    assert rm.on_alter_partition_result(sent, AlterPartitionResult(T, NONE, 1, 0, (1,), 1)) \
        is False
    assert rm.under_min_isr(rm.get(T))
    assert rm.on_local_append(T, 15) is False        # appended (acks=1), not committed
    assert rm.get(T).high_watermark == 10
    # a follower catches up and is taken back: at min.insync.replicas the HW moves again
    rm.on_follower_fetch(T, 2, 15)
    assert rm.get(T).high_watermark == 10
    sent = rm.maybe_expand_isr(T, 2)
    assert sent is not None and sent.new_isr == (1, 2)
    assert rm.on_alter_partition_result(sent, AlterPartitionResult(T, NONE, 1, 0, (1, 2), 2)) \
        is True
    assert rm.get(T).high_watermark == 15
    rm.check_invariants()


def test_min_insync_above_the_replication_factor_counts_as_the_replication_factor():
    rm = ReplicaManager(1, min_insync_of=lambda topic: 3)
    apply(rm, 1, state(1, 0, isr=(1, 2), replicas=(1, 2)))
    rm.on_local_append(T, 5)
    assert rm.on_follower_fetch(T, 2, 5) is True
    assert rm.get(T).high_watermark == 5
