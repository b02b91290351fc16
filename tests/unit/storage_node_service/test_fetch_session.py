"""Incremental fetch sessions (KIP-227) of the storage node's core: the follower's
FetchSessionHandler, the leader's FetchSessionCache (epochs, errors, slots, eviction) and what an
incremental answer holds; a property test drives a follower through a session beside one doing
full fetches and checks they see the same per-partition state and that the leader's cached
fetch state is the follower's own (what the ISR is judged on)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riverbed import errors

from services.storage_node.core.fetch_session import (
    FETCH_SESSION_ID_NOT_FOUND, FINAL_EPOCH, INITIAL_EPOCH, INVALID_FETCH_SESSION_EPOCH,
    MAX_EPOCH, ContextKind, FetchSessionCache, FetchSessionHandler, PartitionFetchState,
    next_epoch)
from services.storage_node.core.replica_state import NONE

A, B, C = ("t", 0), ("t", 1), ("u", 0)
NOT_LEADER = errors.NotLeaderForPartitionError.code


def ids(start=100):
    counter = itertools.count(start)
    return lambda: next(counter)


@dataclass
class P:                      # what a FetchPartition carries
    partition: int
    fetch_offset: int
    partition_max_bytes: int = 1024
    current_leader_epoch: int = 0
    log_start_offset: int = -1
    last_fetched_epoch: int = 0


def named(*pairs):
    return [(tp[0], P(tp[1], off)) for tp, off in pairs]


def state(off, epoch=0):
    return PartitionFetchState(off, epoch, epoch, -1, 1024)


def test_error_codes_are_kafkas():
    assert FETCH_SESSION_ID_NOT_FOUND == 70 == errors.FetchSessionIdNotFoundError.code
    assert INVALID_FETCH_SESSION_EPOCH == 71 == errors.InvalidFetchSessionEpochError.code
    assert errors.error_class(70) is errors.FetchSessionIdNotFoundError
    assert errors.InvalidFetchSessionEpochError.retriable


def test_epochs_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(1) == 2
    assert next_epoch(MAX_EPOCH) == 1


# ---- the follower's handler ------------------------------------------------------------------

def test_handler_full_then_only_changes_and_forgotten():
    h = FetchSessionHandler()
    req = h.build({A: state(0), B: state(5)})
    assert (req.session_id, req.session_epoch, req.full) == (0, INITIAL_EPOCH, True)
    assert dict(req.to_send) == {A: state(0), B: state(5)} and req.forgotten == ()
    assert h.handle_response(NONE, 42)
    req = h.build({A: state(0), B: state(5)})
    assert (req.session_id, req.session_epoch, req.to_send, req.forgotten) == (42, 1, (), ())
    assert h.handle_response(NONE, 42)
    # A appended (offset 3), B removed, C added
    req = h.build({A: state(3), C: state(0)})
    assert (req.session_epoch, dict(req.to_send), req.forgotten) == (2, {A: state(3),
                                                                          C: state(0)}, (B,))
    assert h.handle_response(NONE, 42)
    # a new leader epoch is a change too
    req = h.build({A: state(3, epoch=1), C: state(0)})
    assert dict(req.to_send) == {A: state(3, epoch=1)}


def test_handler_without_room_keeps_doing_full_fetches():
    h = FetchSessionHandler()
    h.build({A: state(0)})
    assert h.handle_response(NONE, 0)            # answered, no session
    req = h.build({A: state(0)})
    assert (req.session_id, req.session_epoch, req.to_send) == (0, INITIAL_EPOCH, ((A, state(0)),))


@pytest.mark.parametrize("code,keeps_id", [(FETCH_SESSION_ID_NOT_FOUND, False),
                                           (INVALID_FETCH_SESSION_EPOCH, True)])
def test_handler_session_errors_fall_back_to_a_full_fetch(code, keeps_id):
    h = FetchSessionHandler()
    h.build({A: state(0), B: state(0)})
    h.handle_response(NONE, 7)
    h.build({A: state(1), B: state(0)})
    assert not h.handle_response(code, 0)        # nothing of the answer applies
    req = h.build({A: state(1), B: state(0)})
    # not found: ask for a new session; a wrong epoch: close this one and start over (Kafka)
    assert (req.session_id, req.session_epoch) == (7 if keeps_id else 0, INITIAL_EPOCH)
    assert dict(req.to_send) == {A: state(1), B: state(0)}


def test_handler_failed_call_and_foreign_session_reset():
    h = FetchSessionHandler()
    h.build({A: state(0)})
    h.handle_response(NONE, 7)
    h.build({A: state(0)})
    h.handle_error()                             # the answer was lost
    req = h.build({A: state(0)})
    assert (req.session_id, req.session_epoch, len(req.to_send)) == (7, INITIAL_EPOCH, 1)
    h.handle_response(NONE, 8)
    h.build({A: state(0)})
    assert not h.handle_response(NONE, 9)        # an answer in another session: dropped
    assert h.build({A: state(0)}).session_epoch == INITIAL_EPOCH


# ---- the leader's cache ----------------------------------------------------------------------

def test_full_fetch_opens_a_session_and_incremental_ones_update_it():
    cache = FetchSessionCache(10, ids())
    ctx = cache.new_context(2, 0, INITIAL_EPOCH, named((A, 0), (B, 0)), (), now_ms=0)
    assert ctx.kind is ContextKind.FULL and ctx.session_id == 100
    assert [(t, p.partition) for t, p in ctx.entries] == [A, B]
    # epoch 1: names A at a new offset, forgets B, adds C; every session partition evaluated
    ctx = cache.new_context(2, 100, 1, named((A, 4), (C, 0)), [B], now_ms=10)
    assert ctx.kind is ContextKind.INCREMENTAL
    assert [((t, p.partition), p.fetch_offset) for t, p in ctx.entries] == [(A, 4), (C, 0)]
    # epoch 2 names nothing: still A and C, at their cached offsets
    ctx = cache.new_context(2, 100, 2, [], (), now_ms=20)
    assert [((t, p.partition), p.fetch_offset) for t, p in ctx.entries] == [(A, 4), (C, 0)]
    assert cache.get(100).epoch == 3


def test_session_errors():
    cache = FetchSessionCache(10, ids())
    cache.new_context(2, 0, INITIAL_EPOCH, named((A, 0)), (), now_ms=0)
    for sid, epoch, replica, code in [(100, 2, 2, INVALID_FETCH_SESSION_EPOCH),
                                      (100, -5, 2, INVALID_FETCH_SESSION_EPOCH),
                                      (555, 1, 2, FETCH_SESSION_ID_NOT_FOUND),
                                      (0, 1, 2, FETCH_SESSION_ID_NOT_FOUND),
                                      (100, 1, 3, FETCH_SESSION_ID_NOT_FOUND)]:
        ctx = cache.new_context(replica, sid, epoch, named((A, 9)), (), now_ms=1)
        assert (ctx.kind, ctx.error_code) == (ContextKind.ERROR, code)
    # errors change nothing: epoch 1 still works and A is still at 0 until named
    ctx = cache.new_context(2, 100, 1, [], (), now_ms=2)
    assert [p.fetch_offset for _, p in ctx.entries] == [0]


def test_epoch_zero_with_an_id_replaces_the_session_and_minus_one_closes_it():
    cache = FetchSessionCache(10, ids())
    cache.new_context(2, 0, INITIAL_EPOCH, named((A, 0)), (), now_ms=0)
    ctx = cache.new_context(2, 100, INITIAL_EPOCH, named((A, 3)), (), now_ms=1)
    assert ctx.kind is ContextKind.FULL and ctx.session_id == 101
    assert cache.get(100) is None and len(cache) == 1
    ctx = cache.new_context(2, 101, FINAL_EPOCH, named((A, 3)), (), now_ms=2)
    assert ctx.kind is ContextKind.SESSIONLESS and ctx.session_id == 0 and len(cache) == 0


def test_a_full_fetch_closes_only_its_own_replicas_session():
    cache = FetchSessionCache(10, ids())
    cache.new_context(2, 0, INITIAL_EPOCH, named((A, 0)), (), now_ms=0)         # 100, replica 2
    cache.new_context(3, 100, INITIAL_EPOCH, named((A, 0)), (), now_ms=1)       # replica 3
    cache.new_context(3, 100, FINAL_EPOCH, named((A, 0)), (), now_ms=2)
    assert cache.get(100) is not None and cache.new_context(2, 100, 1, [], (),
                                                            now_ms=3).kind is ContextKind.INCREMENTAL


def test_consumers_never_open_sessions():
    cache = FetchSessionCache(10, ids())
    ctx = cache.new_context(-1, 0, INITIAL_EPOCH, named((A, 0)), (), now_ms=0, may_create=False)
    assert ctx.kind is ContextKind.SESSIONLESS and len(cache) == 0


def test_slots_bound_sessions_and_stale_ones_are_evicted():
    cache = FetchSessionCache(2, ids(), eviction_ms=1000)
    assert cache.new_context(2, 0, 0, named((A, 0)), (), now_ms=0).session_id == 100
    assert cache.new_context(3, 0, 0, named((A, 0)), (), now_ms=0).session_id == 101
    # full: no room (both followers' and fresh) -> answered without a session
    assert cache.new_context(4, 0, 0, named((A, 0)), (), now_ms=500).session_id == 0
    cache.new_context(2, 100, 1, [], (), now_ms=900)          # 100 used, 101 idle
    ctx = cache.new_context(4, 0, 0, named((A, 0)), (), now_ms=1600)
    assert ctx.session_id == 102 and cache.get(101) is None and cache.get(100) is not None
    # the evicted session's follower hears FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(3, 101, 1, [], (), now_ms=1600).error_code == \
        FETCH_SESSION_ID_NOT_FOUND
    assert cache.expire(3000) == 2 and len(cache) == 0


def test_zero_slots_means_full_fetches_only():
    cache = FetchSessionCache(0, ids())
    assert cache.new_context(2, 0, 0, named((A, 0)), (), now_ms=0).kind is ContextKind.SESSIONLESS


def test_a_followers_session_evicts_a_consumers_never_the_reverse():
    cache = FetchSessionCache(1, ids(), eviction_ms=10**9)
    cache.new_context(-1, 0, 0, named((A, 0), (B, 0)), (), now_ms=0)   # a consumer session
    assert cache.new_context(-1, 0, 0, named((A, 0)), (), now_ms=1).session_id == 0  # smaller
    assert cache.new_context(2, 0, 0, named((A, 0)), (), now_ms=1).session_id == 101
    assert cache.new_context(-1, 0, 0, named((A, 0), (B, 0), (C, 0)), (),
                             now_ms=2).session_id == 0


def test_session_ids_skip_zero_and_ids_in_use():
    seq = iter([0, 100, 100, 5])
    cache = FetchSessionCache(10, lambda: next(seq))
    assert cache.new_context(2, 0, 0, named((A, 0)), (), now_ms=0).session_id == 100
    assert cache.new_context(3, 0, 0, named((A, 0)), (), now_ms=0).session_id == 5


def test_incremental_answer_holds_only_what_changed():
    cache = FetchSessionCache(10, ids())
    ctx = cache.new_context(2, 0, 0, named((A, 0), (B, 0)), (), now_ms=0)
    kw = dict(has_data=False, error_code=NONE, high_watermark=5, log_start_offset=0,
              leader_epoch=0, diverging=False)
    assert ctx.include(A, **kw) and ctx.include(B, **kw)        # full: everything, told
    ctx = cache.new_context(2, 100, 1, [], (), now_ms=1)
    assert not ctx.include(A, **kw) and not ctx.include(B, **kw)
    assert ctx.include(A, **{**kw, "has_data": True})
    assert ctx.include(A, **{**kw, "high_watermark": 6})        # once per change
    assert not ctx.include(A, **{**kw, "high_watermark": 6})
    assert ctx.include(B, **{**kw, "log_start_offset": 2})
    assert ctx.include(B, **{**kw, "log_start_offset": 2, "leader_epoch": 1})
    assert ctx.include(B, **{**kw, "log_start_offset": 2, "leader_epoch": 1,
                             "diverging": True})
    for _ in range(2):                                          # errors: every time
        assert ctx.include(A, **{**kw, "high_watermark": 6, "error_code": NOT_LEADER})


def test_partitions_answered_go_to_the_end_of_the_session():
    cache = FetchSessionCache(10, ids())
    ctx = cache.new_context(2, 0, 0, named((A, 0), (B, 0), (C, 0)), (), now_ms=0)
    kw = dict(has_data=False, error_code=NONE, high_watermark=0, log_start_offset=0,
              leader_epoch=0, diverging=False)
    for tp in (A, B, C):
        ctx.include(tp, **kw)
    assert list(cache.get(100).partitions) == [A, B, C]           # a full fetch: no move
    ctx = cache.new_context(2, 100, 1, [], (), now_ms=1)
    assert ctx.include(A, **{**kw, "has_data": True}) and not ctx.include(B, **kw)
    assert list(cache.get(100).partitions) == [B, C, A]
    ctx = cache.new_context(2, 100, 2, [], (), now_ms=2)
    assert [(t, p.partition) for t, p in ctx.entries] == [B, C, A]


# ---- a follower driving a session sees what full fetches see ---------------------------------

TPS = [("t", i) for i in range(4)] + [("u", 0)]
MAX_RECORDS = 3                   # per partition per answer: catching up takes several rounds


class Leader:
    def __init__(self):
        self.leo = {tp: 0 for tp in TPS}
        self.hw = {tp: 0 for tp in TPS}
        self.log_start = {tp: 0 for tp in TPS}
        self.epoch = {tp: 0 for tp in TPS}
        self.leading = {tp: True for tp in TPS}
        self.new_cache()

    def new_cache(self):                 # a restart: every session gone
        self.cache = FetchSessionCache(10, ids(int(1e6) + len(getattr(self, "restarts", []))))
        self.restarts = getattr(self, "restarts", []) + [1]

    def fetch(self, replica_id, session_id, epoch, to_send, forgotten, now):
        """The leader's part of a FETCH (the shell's, stripped of I/O): (error, session id,
        {tp: answer}, the fetch state of every partition evaluated)."""
        entries = [(tp[0], P(tp[1], s.fetch_offset, s.partition_max_bytes,
                             s.current_leader_epoch, s.log_start_offset, s.last_fetched_epoch))
                   for tp, s in to_send]
        ctx = self.cache.new_context(replica_id, session_id, epoch, entries, forgotten, now)
        if ctx.kind is ContextKind.ERROR:
            return ctx.error_code, 0, {}, {}
        answers, evaluated = {}, {}
        for topic, p in ctx.entries:
            tp = (topic, p.partition)
            evaluated[tp] = p.fetch_offset
            if not self.leading[tp]:
                a = dict(error=NOT_LEADER, hw=-1, log_start=-1, epoch=-1, records=0)
            elif p.current_leader_epoch != self.epoch[tp]:
                a = dict(error=errors.FencedLeaderEpochError.code, hw=self.hw[tp],
                         log_start=self.log_start[tp], epoch=self.epoch[tp], records=0)
            else:
                a = dict(error=NONE, hw=self.hw[tp], log_start=self.log_start[tp],
                         epoch=self.epoch[tp],
                         records=min(MAX_RECORDS, max(0, self.leo[tp] - p.fetch_offset)))
            if ctx.include(tp, has_data=a["records"] > 0, error_code=a["error"],
                           high_watermark=a["hw"], log_start_offset=a["log_start"],
                           leader_epoch=a["epoch"], diverging=False):
                answers[tp] = a
        return NONE, ctx.session_id, answers, evaluated


class Follower:
    def __init__(self, use_session: bool):
        self.use_session = use_session
        self.handler = FetchSessionHandler()
        self.followed: set = set()
        self.leo = {tp: 0 for tp in TPS}
        self.hw = {tp: -1 for tp in TPS}
        self.epoch = {tp: 0 for tp in TPS}
        self.errors: dict = {}

    def states(self):
        return {tp: PartitionFetchState(self.leo[tp], self.epoch[tp], self.epoch[tp], -1, 1024)
                for tp in TPS if tp in self.followed}

    def round(self, leader: Leader, replica_id: int, now: int, lose_answer: bool):
        states = self.states()
        if self.use_session:
            req = self.handler.build(states)
            sid, epoch, to_send, forgotten = (req.session_id, req.session_epoch, req.to_send,
                                              req.forgotten)
        else:
            sid, epoch, to_send, forgotten = 0, FINAL_EPOCH, tuple(states.items()), ()
        error, rsid, answers, evaluated = leader.fetch(replica_id, sid, epoch, to_send,
                                                       forgotten, now)
        if error == NONE:
            # what the leader judged this follower on is exactly its own state now
            assert evaluated == {tp: s.fetch_offset for tp, s in states.items()}
        if lose_answer:
            if self.use_session:
                self.handler.handle_error()
            return
        if self.use_session and not self.handler.handle_response(error, rsid):
            # a session error: the fetcher goes straight on with a full fetch (no backoff)
            assert error != NONE and not self.handler.in_session
            return self.round(leader, replica_id, now, lose_answer=False)
        self.errors = {}
        for tp, a in answers.items():
            if a["error"] != NONE:
                self.errors[tp] = a["error"]
                continue
            self.leo[tp] += a["records"]
            self.hw[tp] = min(a["hw"], self.leo[tp])


ops = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(TPS), st.integers(1, 5)),
    st.tuples(st.just("hw"), st.sampled_from(TPS), st.integers(0, 10)),
    st.tuples(st.just("fetch"), st.booleans()),
    st.tuples(st.just("follow"), st.sampled_from(TPS)),
    st.tuples(st.just("unfollow"), st.sampled_from(TPS)),
    st.tuples(st.just("new_epoch"), st.sampled_from(TPS)),
    st.tuples(st.just("lose_leadership"), st.sampled_from(TPS)),
    st.tuples(st.just("restart")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=60))
def test_a_session_sees_what_full_fetches_see(steps):
    leader = Leader()
    sess, full = Follower(True), Follower(False)
    for f in (sess, full):
        f.followed = {TPS[0], TPS[1], TPS[4]}
    now = 0
    for step in steps:
        now += 100
        kind = step[0]
        if kind == "append":
            leader.leo[step[1]] += step[2]
        elif kind == "hw":
            tp = step[1]
            leader.hw[tp] = max(leader.hw[tp], min(leader.leo[tp], step[2]))
        elif kind == "fetch":
            # both fetch in the same state of the leader; the session one may lose its answer
            sess.round(leader, 2, now, lose_answer=step[1])
            if not step[1]:
                full.round(leader, 3, now, lose_answer=False)
        elif kind in ("follow", "unfollow"):
            for f in (sess, full):
                (f.followed.add if kind == "follow" else f.followed.discard)(step[1])
        elif kind == "new_epoch":            # LEADER_AND_ISR reaches leader and followers
            tp = step[1]
            leader.epoch[tp] += 1
            leader.leading[tp] = True
            for f in (sess, full):
                f.epoch[tp] = leader.epoch[tp]
        elif kind == "lose_leadership":
            leader.leading[step[1]] = False
        elif kind == "restart":
            leader.new_cache()
        if kind == "fetch" and step[1]:
            continue       # the lost answer: the full-fetch follower skipped this round
        if kind == "fetch":
            for tp in sess.followed:
                assert (sess.leo[tp], sess.hw[tp]) == (full.leo[tp], full.hw[tp]), tp
            assert sess.errors == {tp: e for tp, e in full.errors.items()}
    # and with the leader quiet, a few more rounds bring both to the leader's state
    for _ in range(10):
        now += 100
        sess.round(leader, 2, now, lose_answer=False)
        full.round(leader, 3, now, lose_answer=False)
    for tp in sess.followed:
        assert (sess.leo[tp], sess.hw[tp]) == (full.leo[tp], full.hw[tp])
        if leader.leading[tp]:
            assert sess.leo[tp] == leader.leo[tp]


def test_a_partition_in_error_waits_longer_each_time_up_to_the_backoff():
    from services.storage_node.core.fetch_session import FIRST_ERROR_BACKOFF_MS, error_backoff_ms
    waits = [error_backoff_ms(k, 1000) for k in range(1, 9)]
    assert waits[0] == FIRST_ERROR_BACKOFF_MS
    assert all(b == min(2 * a, 1000) for a, b in zip(waits, waits[1:]))
    assert waits[-1] == 1000 and error_backoff_ms(10_000, 1000) == 1000
    assert error_backoff_ms(1, 10) == 10          # never above replica.fetch.backoff.ms
