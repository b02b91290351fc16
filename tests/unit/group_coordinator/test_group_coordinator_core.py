"""Group coordinator core: (state, input) -> (state, effects), driven like a shell would."""
import random

import pytest

from riverbed._proto.v1 import group_pb2 as g
from riverbed.coordinator import offsets_topic as ot
from riverbed.coordinator.consumer_protocol import decode_assignment
from riverbed.errors import ErrorCode as E
from services.group_coordinator.config import GroupCoordinatorConfig
from services.group_coordinator.core.coordinator import GroupCoordinatorCore
from services.group_coordinator.core.effects import AppendRecords, Reply
from services.group_coordinator.core.events import (
    RequestReceived, ShardLoadCompleted, ShardLoadStarted, ShardUnloaded, TopicMetadataChanged,
    WriteCompleted,
)
from services.group_coordinator.core.states import TRANSITIONS, GroupState, IllegalTransition, check_transition

SESSION = 10_000
GID = "billing"


class Harness:
    def __init__(self, *, shards=(0,), num_partitions=1, topics=None, **cfg):
        cfg.setdefault("group_initial_rebalance_delay_ms", 0)   # tested on its own below
        self.core = GroupCoordinatorCore(
            GroupCoordinatorConfig(offsets_topic_num_partitions=num_partitions, **cfg), random.Random(7))
        self.now = 1_000
        self.rid = 0
        self.log: list[tuple[int, bytes, bytes | None]] = []     # the shard's "log"
        for s in shards:
            self.core.handle(ShardLoadStarted(s), self.now)
            self.core.handle(ShardLoadCompleted(s), self.now)
        self.core.handle(TopicMetadataChanged(topics or {"t": 4}), self.now)

    def send(self, body, client_id="cli"):
        self.rid += 1
        out = self.core.handle(RequestReceived(self.rid, body, client_id), self.now)
        self.core.check_invariants()
        return self.rid, out

    def ack(self, out, error=E.NONE):
        """Complete every AppendRecords in `out`; returns the effects."""
        effects = []
        for e in out:
            if isinstance(e, AppendRecords):
                base = len(self.log)
                if error == E.NONE:
                    self.log.extend((e.shard, k, v) for k, v in e.records)
                effects += self.core.handle(WriteCompleted(e.write_id, error, base), self.now)
                self.core.check_invariants()
        return effects

    def tick(self, advance_ms):
        self.now += advance_ms
        out = self.core.tick(self.now)
        self.core.check_invariants()
        return out


def join(member_id="", topics=("t",), protocols=("range",), session=SESSION, rebalance=None, group=GID,
         pattern=""):
    return g.JoinGroupRequest(
        group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance or session,
        member_id=member_id, protocol_type="consumer", client_host="/127.0.0.1",
        protocols=[g.JoinGroupProtocol(name=n, subscription=g.ConsumerSubscription(
            topics=list(topics), topic_pattern=pattern)) for n in protocols])


def replies(out):
    return {e.request_id: e.body for e in out if isinstance(e, Reply)}


def writes(out):
    return [e for e in out if isinstance(e, AppendRecords)]


def assigned(resp):
    return sorted((tp.topic, p) for tp in resp.assignment.partitions for p in tp.partitions)


def stable_group(h, n=2, protocols=("range",), topics=("t",)):
    """n members join in turn; returns their member ids (the first is the leader)."""
    rid, out = h.send(join(protocols=protocols, topics=topics))
    r = replies(h.ack(out))[rid]
    ids = [r.member_id]
    for _ in range(n - 1):
        rid, out = h.send(join(protocols=protocols, topics=topics))      # -> PreparingRebalance
        assert h.core.groups[GID].state is GroupState.PREPARING_REBALANCE
        hb = [h.send(g.HeartbeatRequest(group_id=GID, generation_id=h.core.groups[GID].generation_id,
                                        member_id=m)) for m in ids]
        assert all(replies(o)[i].error_code == E.REBALANCE_IN_PROGRESS for i, o in hb)
        rids = [rid]
        outs = [out]
        for m in ids:
            rj, oj = h.send(join(member_id=m, protocols=protocols, topics=topics))
            rids.append(rj)
            outs.append(oj)
        effects = h.ack([e for o in outs for e in o])
        got = replies(effects)
        ids = [got[r].member_id for r in rids[1:]] + [got[rids[0]].member_id]
    assert h.core.groups[GID].state is GroupState.STABLE
    return ids


def test_transition_table_is_kafkas():
    S = GroupState
    assert TRANSITIONS[S.STABLE] == {S.PREPARING_REBALANCE, S.DEAD}
    assert S.STABLE not in TRANSITIONS[S.PREPARING_REBALANCE]
    with pytest.raises(IllegalTransition):
        check_transition(S.EMPTY, S.STABLE)
    for src, dsts in TRANSITIONS.items():
        assert S.DEAD in dsts


def test_first_join_waits_for_the_write_then_answers_generation_1():
    h = Harness()
    rid, out = h.send(join())
    assert not replies(out)                         # not answered before the write
    (w,) = writes(out)
    assert w.shard == 0
    key, value = w.records[0]
    assert ot.decode_key(key) == ot.GroupMetadataKey(GID)
    v = ot.decode_group_value(value)
    assert (v.generation, v.protocol, len(v.members)) == (1, "range", 1)
    assert h.core.groups[GID].state is GroupState.COMPLETING_REBALANCE
    r = replies(h.ack(out))[rid]
    assert r.error_code == E.NONE and r.generation_id == 1 and r.protocol_name == "range"
    assert r.member_id.startswith("cli-") and r.leader == r.member_id
    assert [m.member_id for m in r.members] == [r.member_id]        # the leader sees members
    rid, out = h.send(g.SyncGroupRequest(group_id=GID, generation_id=1, member_id=r.member_id))
    s = replies(out)[rid]
    assert s.error_code == E.NONE and assigned(s) == [("t", p) for p in range(4)]
    assert decode_assignment(v.members[0].assignment).partitions == tuple(("t", p) for p in range(4))


def test_member_ids_come_from_the_injected_rng():
    a, b = Harness(), Harness()
    ra, oa = a.send(join())
    rb, ob = b.send(join())
    assert replies(a.ack(oa))[ra].member_id == replies(b.ack(ob))[rb].member_id


def test_second_member_triggers_rebalance_and_range_split():
    h = Harness()
    ids = stable_group(h, 2)
    grp = h.core.groups[GID]
    assert grp.generation_id == 2
    first, second = sorted(ids)
    assert grp.members[first].assignment == (("t", 0), ("t", 1))
    assert grp.members[second].assignment == (("t", 2), ("t", 3))


@pytest.mark.parametrize("session,ok", [(5_999, False), (6_000, True), (1_800_000, True), (1_800_001, False)])
def test_session_timeout_bounds(session, ok):
    h = Harness()
    rid, out = h.send(join(session=session))
    if ok:
        assert writes(out)
    else:
        assert replies(out)[rid].error_code == E.INVALID_SESSION_TIMEOUT
        assert GID not in h.core.groups


def test_inconsistent_protocols():
    h = Harness()
    stable_group(h, 1, protocols=("range",))
    rid, out = h.send(join(protocols=("roundrobin",)))
    assert replies(out)[rid].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    rid, out = h.send(join(protocols=("nonesuch",), group="other"))
    assert replies(out)[rid].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    req = join(group="third")
    req.protocol_type = "connect"
    rid, out = h.send(req)
    assert replies(out)[rid].error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_chosen_by_vote_among_common_ones():
    h = Harness()
    rid, out = h.send(join(protocols=("sticky", "roundrobin")))
    assert replies(h.ack(out))[rid].protocol_name == "sticky"
    m1 = h.core.groups[GID].members
    (m1,) = list(m1)
    r2, o2 = h.send(join(protocols=("roundrobin", "range")))
    r1, o1 = h.send(join(member_id=m1, protocols=("sticky", "roundrobin")))
    got = replies(h.ack(o1 + o2))
    assert got[r1].protocol_name == got[r2].protocol_name == "roundrobin"


def test_unknown_member_and_illegal_generation():
    h = Harness()
    (m,) = stable_group(h, 1)
    cases = [
        (g.HeartbeatRequest(group_id=GID, generation_id=1, member_id="nobody"), E.UNKNOWN_MEMBER_ID),
        (g.HeartbeatRequest(group_id=GID, generation_id=0, member_id=m), E.ILLEGAL_GENERATION),
        (g.HeartbeatRequest(group_id=GID, generation_id=1, member_id=m), E.NONE),
        (g.HeartbeatRequest(group_id="nogroup", generation_id=1, member_id=m), E.UNKNOWN_MEMBER_ID),
        (g.SyncGroupRequest(group_id=GID, generation_id=5, member_id=m), E.ILLEGAL_GENERATION),
        (g.LeaveGroupRequest(group_id=GID, member_id="nobody"), E.UNKNOWN_MEMBER_ID),
        (g.HeartbeatRequest(group_id="", generation_id=1, member_id=m), E.INVALID_GROUP_ID),
    ]
    for body, code in cases:
        rid, out = h.send(body)
        assert replies(out)[rid].error_code == code, body
    rid, out = h.send(join(member_id="ghost"))
    assert replies(out)[rid].error_code == E.UNKNOWN_MEMBER_ID


def test_not_coordinator_and_loading():
    h = Harness(shards=(), num_partitions=50)
    shard = ot.partition_for(GID, 50)
    rid, out = h.send(join())
    assert replies(out)[rid].error_code == E.NOT_COORDINATOR
    h.core.handle(ShardLoadStarted(shard), h.now)
    rid, out = h.send(join())
    assert replies(out)[rid].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    rid, out = h.send(g.FindCoordinatorRequest(key=GID, key_type=g.GROUP))
    r = replies(out)[rid]
    assert r.error_code == E.NONE and r.shard == shard and r.endpoint == "tcp://127.0.0.1:9095"
    h.core.handle(ShardLoadCompleted(shard), h.now)
    rid, out = h.send(join())
    assert writes(out) and writes(out)[0].shard == shard


def test_leave_triggers_rebalance_and_survivor_gets_everything():
    h = Harness()
    a, b = stable_group(h, 2)
    rid, out = h.send(g.LeaveGroupRequest(group_id=GID, member_id=b))
    assert replies(out)[rid].error_code == E.NONE
    assert h.core.groups[GID].state is GroupState.PREPARING_REBALANCE
    rid, out = h.send(join(member_id=a))
    r = replies(h.ack(out))[rid]
    assert r.generation_id == 3
    rid, out = h.send(g.SyncGroupRequest(group_id=GID, generation_id=3, member_id=a))
    assert assigned(replies(out)[rid]) == [("t", p) for p in range(4)]


def test_session_expiry_removes_member_and_rebalance_timeout_removes_laggards():
    h = Harness()
    a, b = stable_group(h, 2)
    h.tick(SESSION - 1)
    h.send(g.HeartbeatRequest(group_id=GID, generation_id=2, member_id=a))
    out = h.tick(2)                                  # b's session is over, a's is not
    grp = h.core.groups[GID]
    assert set(grp.members) == {a}
    assert grp.state is GroupState.PREPARING_REBALANCE
    # a never rejoins: the rebalance timeout removes it and the group empties.
    h.tick(SESSION - 100)
    assert h.core.groups[GID].state is GroupState.PREPARING_REBALANCE  # a heartbeated, no deadline yet
    out = h.tick(200)
    assert h.core.groups[GID].state is GroupState.EMPTY
    (w,) = writes(out)
    v = ot.decode_group_value(w.records[0][1])
    assert v.members == () and v.protocol is None and v.generation == 3


def test_topic_gaining_partitions_triggers_rebalance():
    h = Harness()
    (m,) = stable_group(h, 1)
    assert not writes(h.core.handle(TopicMetadataChanged({"t": 4, "other": 3}), h.now))
    assert h.core.groups[GID].state is GroupState.STABLE          # unrelated topic: no rebalance
    h.core.handle(TopicMetadataChanged({"t": 6}), h.now)
    assert h.core.groups[GID].state is GroupState.PREPARING_REBALANCE
    rid, out = h.send(g.HeartbeatRequest(group_id=GID, generation_id=1, member_id=m))
    assert replies(out)[rid].error_code == E.REBALANCE_IN_PROGRESS
    rid, out = h.send(join(member_id=m))
    h.ack(out)
    assert len(h.core.groups[GID].members[m].assignment) == 6


def test_pattern_subscription_picks_up_new_topics():
    h = Harness(topics={"orders-eu": 2, "payments": 2, "__consumer_offsets": 50})
    rid, out = h.send(join(topics=(), pattern=r"orders-.*"))
    m = replies(h.ack(out))[rid].member_id
    assert h.core.groups[GID].members[m].assignment == (("orders-eu", 0), ("orders-eu", 1))
    h.core.handle(TopicMetadataChanged({"orders-eu": 2, "payments": 2, "orders-us": 1}), h.now)
    assert h.core.groups[GID].state is GroupState.PREPARING_REBALANCE
    rid, out = h.send(join(member_id=m, topics=(), pattern=r"orders-.*"))
    h.ack(out)
    assert ("orders-us", 0) in h.core.groups[GID].members[m].assignment


def test_failed_write_answers_error_and_keeps_old_assignment():
    h = Harness()
    a, b = stable_group(h, 2)
    before = {m: h.core.groups[GID].members[m].assignment for m in (a, b)}
    h.send(g.LeaveGroupRequest(group_id=GID, member_id=b))
    rid, out = h.send(join(member_id=a))
    effects = h.ack(out, error=E.REQUEST_TIMED_OUT)
    assert replies(effects)[rid].error_code == E.COORDINATOR_NOT_AVAILABLE
    grp = h.core.groups[GID]
    assert grp.state is GroupState.PREPARING_REBALANCE
    assert grp.members[a].assignment == before[a]
    rid, out = h.send(join(member_id=a))
    r = replies(h.ack(out))[rid]
    assert r.error_code == E.NONE and r.generation_id == 4        # generations never reused


def test_new_member_during_write_waits_for_next_generation():
    h = Harness()
    (a,) = stable_group(h, 1)
    h.send(g.LeaveGroupRequest(group_id=GID, member_id=a))        # -> Empty, generation 2 written
    ra, oa = h.send(join())                                      # fresh member, write in flight
    rb, ob = h.send(join())
    assert not replies(ob)
    got = replies(h.ack(oa))
    assert ra in got and rb not in got
    assert h.core.groups[GID].state is GroupState.PREPARING_REBALANCE
    a2 = got[ra].member_id
    ra2, oa2 = h.send(join(member_id=a2))
    got = replies(h.ack(oa2 + ob))
    assert got[ra2].generation_id == got[rb].generation_id


def test_sync_waits_in_completing_rebalance_and_gets_rebalance_in_progress_while_preparing():
    h = Harness()
    a, b = stable_group(h, 2)
    h.core.handle(TopicMetadataChanged({"t": 8}), h.now)
    rid, out = h.send(g.SyncGroupRequest(group_id=GID, generation_id=2, member_id=a))
    assert replies(out)[rid].error_code == E.REBALANCE_IN_PROGRESS


def test_replay_rebuilds_groups_after_failover():
    h = Harness()
    a, b = stable_group(h, 2)
    old = h.core.groups[GID]
    fresh = Harness(shards=())
    fresh.core.handle(ShardLoadStarted(0), fresh.now)
    for off, (shard, k, v) in enumerate(h.log):
        fresh.core.replay(ot.StoredRecord(shard, off, k, v))
    rid, out = fresh.send(g.HeartbeatRequest(group_id=GID, generation_id=2, member_id=a))
    assert replies(out)[rid].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    fresh.core.handle(ShardLoadCompleted(0), fresh.now)
    grp = fresh.core.groups[GID]
    assert (grp.state, grp.generation_id, grp.protocol, grp.leader_id) == \
        (GroupState.STABLE, 2, "range", old.leader_id)
    assert {m: x.assignment for m, x in grp.members.items()} == \
        {m: x.assignment for m, x in old.members.items()}
    rid, out = fresh.send(g.SyncGroupRequest(group_id=GID, generation_id=2, member_id=b))
    assert assigned(replies(out)[rid]) == list(old.members[b].assignment)
    # and sessions restart at load: without heartbeats both expire
    fresh.tick(SESSION + 1)
    assert fresh.core.groups[GID].state is not GroupState.STABLE


def test_unload_answers_waiters_with_not_coordinator():
    h = Harness()
    rid, out = h.send(join())
    effects = h.core.handle(ShardUnloaded(0), h.now)
    assert replies(effects)[rid].error_code == E.NOT_COORDINATOR
    assert GID not in h.core.groups
    assert h.ack(out) == []                      # the late ack is ignored


def test_describe_and_list():
    h = Harness()
    a, b = stable_group(h, 2)
    rid, out = h.send(g.DescribeGroupsRequest(groups=[GID, "nope"]))
    d = replies(out)[rid]
    assert d.groups[0].group_state == "Stable" and d.groups[0].protocol_data == "range"
    assert {m.member_id for m in d.groups[0].members} == {a, b}
    assert all(m.client_id == "cli" and m.client_host == "/127.0.0.1" for m in d.groups[0].members)
    assert sum(len(tp.partitions) for m in d.groups[0].members for tp in m.assignment.partitions) == 4
    assert d.groups[1].group_state == "Dead" and d.groups[1].error_code == E.NONE
    rid, out = h.send(g.ListGroupsRequest())
    assert [(x.group_id, x.group_state) for x in replies(out)[rid].groups] == [(GID, "Stable")]
    rid, out = h.send(g.ListGroupsRequest(states_filter=["Empty"]))
    assert list(replies(out)[rid].groups) == []


def test_empty_group_expires_after_retention():
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    (a,) = stable_group(h, 1)
    out = h.send(g.LeaveGroupRequest(group_id=GID, member_id=a))[1]
    h.ack(out)
    assert h.core.groups[GID].state is GroupState.EMPTY
    assert not writes(h.tick(30_000))
    out = h.tick(31_000)
    (w,) = writes(out)
    assert w.records[0][1] is None                              # tombstone
    h.ack(out)
    assert GID not in h.core.groups


def test_existing_member_rejoin_in_stable_without_change_gets_current_generation():
    h = Harness()
    a, b = stable_group(h, 2)
    rid, out = h.send(join(member_id=b))
    r = replies(out)[rid]
    assert r.generation_id == 2 and not writes(out)
    assert h.core.groups[GID].state is GroupState.STABLE
    rid, out = h.send(join(member_id=b, topics=("t", "u")))
    assert h.core.groups[GID].state is GroupState.PREPARING_REBALANCE


@pytest.mark.parametrize("seed", range(15))
def test_random_walk_keeps_invariants(seed):
    """Random joins, leaves, heartbeats, metadata changes, acks and ticks: invariants hold and a
    stable group always gives each partition to exactly one member."""
    rng = random.Random(seed)
    h = Harness(topics={"t": 5, "u": 3})
    pending: list = []
    known: list[str] = []
    for _ in range(120):
        op = rng.choice(["join", "rejoin", "leave", "hb", "ack", "fail", "tick", "meta"])
        if op == "join":
            rid, out = h.send(join(topics=rng.choice([("t",), ("t", "u")]), protocols=("sticky", "range")))
            pending += out
        elif op == "rejoin" and known:
            rid, out = h.send(join(member_id=rng.choice(known), protocols=("sticky", "range")))
            pending += out
        elif op == "leave" and known:
            pending += h.send(g.LeaveGroupRequest(group_id=GID, member_id=rng.choice(known)))[1]
        elif op == "hb" and known and GID in h.core.groups:
            pending += h.send(g.HeartbeatRequest(group_id=GID, member_id=rng.choice(known),
                                                 generation_id=h.core.groups[GID].generation_id))[1]
        elif op in ("ack", "fail"):
            effects = h.ack(pending, E.NONE if op == "ack" else E.NOT_ENOUGH_REPLICAS)
            pending = [e for e in effects if isinstance(e, AppendRecords)]
            for body in replies(effects).values():
                if isinstance(body, g.JoinGroupResponse) and body.error_code == E.NONE:
                    known.append(body.member_id)
        elif op == "tick":
            pending += h.tick(rng.choice([100, 3000, 11000]))
        elif op == "meta":
            h.core.handle(TopicMetadataChanged({"t": rng.randint(5, 7), "u": 3}), h.now)
        grp = h.core.groups.get(GID)
        if grp is not None and grp.state is GroupState.STABLE:
            owned = [tp for m in grp.members.values() for tp in m.assignment]
            assert len(owned) == len(set(owned))


def test_initial_rebalance_delay_puts_members_starting_together_in_one_generation():
    h = Harness(group_initial_rebalance_delay_ms=3000)
    r1, o1 = h.send(join())
    assert not writes(o1) and not replies(o1)        # waiting for more members
    h.now += 100
    r2, o2 = h.send(join())
    assert not writes(o2) and not replies(o2)
    assert not writes(h.tick(1000))                  # still inside the delay
    out = h.tick(2000)                               # the delay (3000 ms after the first) is over
    (w,) = writes(out)
    assert len(ot.decode_group_value(w.records[0][1]).members) == 2
    got = replies(h.ack(out))
    assert {got[r1].generation_id, got[r2].generation_id} == {1}
    assert h.core.groups[GID].state is GroupState.STABLE


def test_initial_rebalance_delay_is_capped_by_the_rebalance_timeout():
    h = Harness(group_initial_rebalance_delay_ms=60_000)
    rid, out = h.send(join(rebalance=6000, session=6000))
    assert not writes(out)
    out = h.tick(6000)
    assert writes(out)
    assert replies(h.ack(out))[rid].generation_id == 1


# ------------------------------------------------------------- long-polled heartbeats (max_wait_ms)

def hb(member_id, generation, max_wait_ms=3000, group=GID):
    return g.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                              max_wait_ms=max_wait_ms)


def test_held_heartbeat_renews_the_session_on_arrival_and_is_answered_when_its_wait_ends():
    h = Harness()
    (m,) = stable_group(h, 1)
    member = h.core.groups[GID].members[m]
    h.now += 5000
    rid, out = h.send(hb(m, 1, max_wait_ms=3000))
    assert not replies(out)                                  # parked
    assert member.heartbeat_deadline_ms == h.now + SESSION   # renewed on arrival, as today
    assert h.core.parked_heartbeats == 1
    assert not replies(h.tick(2999))
    got = replies(h.tick(1))                                 # the wait is over (tick granularity)
    assert got[rid].error_code == E.NONE
    assert h.core.parked_heartbeats == 0 and member.heartbeat_request is None
    # the member's next heartbeat keeps the session past the first deadline
    rid, out = h.send(hb(m, 1))
    h.tick(SESSION - 3000 - 1)
    assert m in h.core.groups[GID].members


def test_zero_or_unset_max_wait_answers_at_once_as_kafka():
    h = Harness()
    (m,) = stable_group(h, 1)
    for body in (hb(m, 1, max_wait_ms=0), hb(m, 1, max_wait_ms=-5),
                 g.HeartbeatRequest(group_id=GID, generation_id=1, member_id=m)):
        rid, out = h.send(body)
        assert replies(out)[rid].error_code == E.NONE
    assert h.core.parked_heartbeats == 0


def test_held_heartbeats_are_answered_at_once_when_a_member_joins():
    h = Harness()
    a, b = stable_group(h, 2)
    ra, _ = h.send(hb(a, 2))
    rb, _ = h.send(hb(b, 2))
    h.now += 10
    rj, out = h.send(join())                                 # a third member: Stable -> Preparing
    got = replies(out)
    assert got[ra].error_code == E.REBALANCE_IN_PROGRESS
    assert got[rb].error_code == E.REBALANCE_IN_PROGRESS
    assert rj not in got                                     # the join itself waits for the others
    assert h.core.parked_heartbeats == 0


def test_held_heartbeat_of_a_survivor_is_answered_the_moment_a_dead_members_session_expires():
    h = Harness()
    a, b = stable_group(h, 2)                                # both sessions end at now + SESSION
    h.tick(SESSION - 1000)
    ra, out = h.send(hb(a, 2, max_wait_ms=3000))             # a lives on; b is dead (silent)
    assert not replies(out)
    got = replies(h.tick(1000))                              # b's session is over
    assert got[ra].error_code == E.REBALANCE_IN_PROGRESS     # told now, not at a's next heartbeat
    assert set(h.core.groups[GID].members) == {a}


def test_held_heartbeats_answered_when_a_member_leaves_or_topics_change():
    h = Harness()
    a, b = stable_group(h, 2)
    ra, _ = h.send(hb(a, 2))
    rb, _ = h.send(hb(b, 2))
    rl, out = h.send(g.LeaveGroupRequest(group_id=GID, member_id=b))
    got = replies(out)
    assert got[rl].error_code == E.NONE
    assert got[rb].error_code == E.UNKNOWN_MEMBER_ID         # what it would get if sent now
    assert got[ra].error_code == E.REBALANCE_IN_PROGRESS
    # back to Stable with a alone, then the topic gains partitions
    rj, out = h.send(join(member_id=a))
    assert replies(h.ack(out))[rj].error_code == E.NONE
    ra, out = h.send(hb(a, 3))
    assert not replies(out)
    got = replies(h.core.handle(TopicMetadataChanged({"t": 6}), h.now))
    assert got[ra].error_code == E.REBALANCE_IN_PROGRESS


def test_held_heartbeat_wait_is_capped_at_a_third_of_the_session():
    h = Harness()
    (m,) = stable_group(h, 1)                                # session 10 000 ms
    rid, _ = h.send(hb(m, 1, max_wait_ms=60_000))
    assert h.core.groups[GID].members[m].heartbeat_answer_ms == h.now + SESSION // 3
    assert not replies(h.tick(SESSION // 3 - 1))
    assert replies(h.tick(1))[rid].error_code == E.NONE
    # the member stays alive when it heartbeats again right after each answer
    for _ in range(10):
        rid, _ = h.send(hb(m, 1, max_wait_ms=60_000))
        assert replies(h.tick(SESSION // 3))[rid].error_code == E.NONE
    assert h.core.groups[GID].state is GroupState.STABLE


def test_a_second_heartbeat_answers_the_held_one_first():
    h = Harness()
    (m,) = stable_group(h, 1)
    r1, _ = h.send(hb(m, 1))
    h.now += 100
    r2, out = h.send(hb(m, 1))
    got = replies(out)
    assert got[r1].error_code == E.NONE and r2 not in got    # the newer one is held now
    assert h.core.parked_heartbeats == 1
    assert h.core.groups[GID].members[m].heartbeat_request == r2
    # a newer one that is refused still answers the held one first
    r3, out = h.send(hb(m, 0))
    got = replies(out)
    assert got[r2].error_code == E.NONE and got[r3].error_code == E.ILLEGAL_GENERATION
    assert [e.request_id for e in out if isinstance(e, Reply)] == [r2, r3]
    assert h.core.parked_heartbeats == 0


def test_heartbeats_that_would_fail_today_fail_at_once_with_a_wait():
    h = Harness()
    a, b = stable_group(h, 2)
    cases = [
        (hb("nobody", 2), E.UNKNOWN_MEMBER_ID),
        (hb(a, 1), E.ILLEGAL_GENERATION),
        (hb(a, 2, group="nogroup"), E.UNKNOWN_MEMBER_ID),
        (hb(a, 2, group=""), E.INVALID_GROUP_ID),
    ]
    for body, code in cases:
        rid, out = h.send(body)
        assert replies(out)[rid].error_code == code, body
    h.send(join())                                           # PreparingRebalance
    rid, out = h.send(hb(a, 2))
    assert replies(out)[rid].error_code == E.REBALANCE_IN_PROGRESS
    assert h.core.parked_heartbeats == 0


def test_held_heartbeats_answered_when_the_shard_goes_or_the_coordinator_stops():
    from services.group_coordinator.core.events import CoordinatorStopping
    h = Harness()
    (m,) = stable_group(h, 1)
    rid, _ = h.send(hb(m, 1))
    assert replies(h.core.handle(ShardUnloaded(0), h.now))[rid].error_code == E.NOT_COORDINATOR
    h = Harness()
    (m,) = stable_group(h, 1)
    rid, _ = h.send(hb(m, 1))
    got = replies(h.core.handle(ShardLoadStarted(0), h.now))   # reloading: a heartbeat now gets this
    assert got[rid].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.core.parked_heartbeats == 0
    h = Harness()
    (m,) = stable_group(h, 1)
    rid, _ = h.send(hb(m, 1))
    got = replies(h.core.handle(CoordinatorStopping(), h.now))
    assert got[rid].error_code == E.COORDINATOR_NOT_AVAILABLE
    rid, out = h.send(hb(m, 1))                                 # stopping: none is held any more
    assert replies(out)[rid].error_code == E.NONE


def test_held_heartbeats_are_bounded_by_group_max_parked_heartbeats():
    h = Harness(group_max_parked_heartbeats=1)
    a, b = stable_group(h, 2)
    ra, out = h.send(hb(a, 2))
    assert not replies(out)
    rb, out = h.send(hb(b, 2))
    assert replies(out)[rb].error_code == E.NONE              # no room: answered as Kafka does
    off = Harness(group_max_parked_heartbeats=0)
    (m,) = stable_group(off, 1)
    rid, out = off.send(hb(m, 1))
    assert replies(out)[rid].error_code == E.NONE
    with pytest.raises(ValueError):
        GroupCoordinatorConfig(group_max_parked_heartbeats=500, queued_max_requests=500)


@pytest.mark.parametrize("seed", range(10))
def test_random_walk_answers_every_heartbeat_exactly_once(seed):
    """Random joins, leaves, long-polled and plain heartbeats, metadata changes, acks and ticks:
    invariants hold after every step, no heartbeat is answered twice, a held one is answered at
    most max(wait, session/3) + a tick after it arrived, and all are answered at the end."""
    rng = random.Random(seed)
    h = Harness(topics={"t": 5})
    pending: list = []
    known: list[str] = []
    asked: dict[int, int] = {}            # heartbeat rid -> latest time its answer may come
    answered: dict[int, int] = {}         # rid -> times answered

    def seen(effects):
        for e in effects:
            if isinstance(e, Reply) and e.request_id in asked:
                answered[e.request_id] = answered.get(e.request_id, 0) + 1
                assert h.now <= asked[e.request_id], "held past its wait"
        return effects

    for _ in range(200):
        op = rng.choice(["join", "rejoin", "leave", "meta"] + ["hb"] * 6 + ["ack", "tick"] * 3)
        if op == "join":
            pending += seen(h.send(join(topics=("t",), session=rng.choice([6000, 9000])))[1])
        elif op == "rejoin" and known:
            pending += seen(h.send(join(member_id=rng.choice(known)))[1])
        elif op == "leave" and known:
            pending += seen(h.send(g.LeaveGroupRequest(group_id=GID, member_id=rng.choice(known)))[1])
        elif op == "hb" and known and GID in h.core.groups:
            grp = h.core.groups[GID]
            wait = rng.choice([0, 1000, 3000, 60_000])
            rid, out = h.send(hb(rng.choice(known), grp.generation_id, max_wait_ms=wait))
            asked[rid] = h.now + min(wait, 9000 // 3) + 100
            pending += seen(out)
        elif op == "ack":
            effects = seen(h.ack(pending))
            pending = [e for e in effects if isinstance(e, AppendRecords)]
            for body in replies(effects).values():
                if isinstance(body, g.JoinGroupResponse) and body.error_code == E.NONE:
                    known.append(body.member_id)
        elif op == "tick":
            pending += seen(h.tick(100))
        elif op == "meta":
            seen(h.core.handle(TopicMetadataChanged({"t": rng.randint(5, 7)}), h.now))
        assert all(n == 1 for n in answered.values()), "a heartbeat answered twice"
    seen(h.core.handle(ShardUnloaded(0), h.now))
    assert answered == {rid: 1 for rid in asked}
