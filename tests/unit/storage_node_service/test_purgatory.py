"""Unit tests of the delayed produce (acks=-1) and the fetch long-poll decisions."""
from riverbed import errors

from services.storage_node.core.purgatory import (
    FetchDecision, FetchWaiters, ProducePurgatory, decide_fetch)
from services.storage_node.core.replica_state import NONE

A, B = ("t", 0), ("t", 1)
TIMED_OUT = errors.RequestTimedOutError.code


def test_immediately_satisfied_produce_does_not_wait():
    p = ProducePurgatory()
    assert p.add(1, {A: 5}, 1000, {A: 5}) is None
    assert len(p) == 0


def test_produce_completes_when_every_partition_hw_passes():
    p = ProducePurgatory()
    op = p.add(1, {A: 5, B: 3}, 1000, {A: 0, B: 0})
    assert op is not None and len(p) == 1
    assert p.on_high_watermark(A, 4) == []
    assert p.on_high_watermark(A, 5) == []      # B still waits
    done = p.on_high_watermark(B, 7)
    assert [o.op_id for o in done] == [1]
    assert done[0].results == {A: NONE, B: NONE}
    assert len(p) == 0 and p.tick(10**9) == []


def test_produce_times_out_on_tick_with_partial_results():
    p = ProducePurgatory()
    p.add(1, {A: 5, B: 3}, 1000, {A: 0, B: 0})
    p.add(2, {A: 9}, 2000, {A: 0})
    p.on_high_watermark(A, 6)
    assert p.next_deadline_ms() == 1000
    assert p.tick(999) == []
    expired = p.tick(1000)
    assert [o.op_id for o in expired] == [1]
    assert expired[0].results == {A: NONE, B: TIMED_OUT}
    assert p.next_deadline_ms() == 2000
    assert [o.op_id for o in p.on_high_watermark(A, 9)] == [2]
    assert p.next_deadline_ms() is None


def test_leadership_loss_fails_waiting_partitions():
    p = ProducePurgatory()
    p.add(1, {A: 5}, 1000, {A: 0})
    done = p.on_leadership_lost(A)
    assert done[0].results == {A: errors.NotLeaderForPartitionError.code}
    assert p.tick(5000) == []


def test_cancel_removes():
    p = ProducePurgatory()
    p.add(1, {A: 5}, 1000, {A: 0})
    p.cancel(1)
    assert p.on_high_watermark(A, 10) == [] and p.tick(5000) == []


def test_decide_fetch():
    R, W = FetchDecision.RESPOND, FetchDecision.WAIT
    assert decide_fetch([0, 0], min_bytes=1, now_ms=0, deadline_ms=500) is W
    assert decide_fetch([0, 3], min_bytes=1, now_ms=0, deadline_ms=500) is R
    assert decide_fetch([2, 3], min_bytes=10, now_ms=0, deadline_ms=500) is W
    assert decide_fetch([5, 5], min_bytes=10, now_ms=0, deadline_ms=500) is R
    assert decide_fetch([0], min_bytes=10, now_ms=500, deadline_ms=500) is R   # deadline
    assert decide_fetch([0], min_bytes=0, now_ms=0, deadline_ms=500) is R      # min_bytes 0
    assert decide_fetch([0], min_bytes=1, now_ms=0, deadline_ms=500, any_error=True) is R


def test_fetch_waiters_wake_by_partition_and_expire_by_deadline():
    w = FetchWaiters(max_waiting=2)
    w.add(1, [A], 100)
    w.add(2, [A, B], 50)
    assert w.full()
    assert w.on_data(A) == [1, 2]
    assert w.on_data(B) == [2]
    assert w.next_deadline_ms() == 50
    assert w.tick(49) == []
    assert w.tick(50) == [2]
    w.remove(2)
    assert w.on_data(B) == [] and not w.full()
    w.add(1, [B], 300)          # re-registered with a new deadline: the old one is void
    assert w.tick(100) == []
    assert w.on_data(A) == [] and w.on_data(B) == [1]
    assert w.next_deadline_ms() == 300
