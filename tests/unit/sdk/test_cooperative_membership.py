"""Cooperative rebalancing (KIP-429) in the consumer's group membership, against the scripted
in-memory group service of test_group_membership (no sockets): the rejoin is sent without
waiting and the owned partitions keep being fetched until the SyncGroup answer; only the
partitions the new assignment lacks are revoked, then the member rejoins at once; a member that
loses its generation reports its partitions lost and joins afresh."""
from __future__ import annotations

from test_group_membership import N_PARTS, TOPIC, FakeGroupService, Recorder, make

from riverbed import errors
from riverbed._proto.v1 import group_pb2, header_pb2
from riverbed.coordinator.assignors import assign
from riverbed.coordinator.consumer_protocol import Subscription
from riverbed.group_membership import MemberState
from riverbed.structs import TopicPartition

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode


class CooperativeGroupService(FakeGroupService):
    """Like the coordinator: each member owns its assignment of the previous generation."""

    def join(self, body, payloads):
        code = self._err(ApiKey.JOIN_GROUP)
        if code:
            if code == E.Value("UNKNOWN_MEMBER_ID"):     # removed: it owns nothing any more
                self.members.pop(body.member_id, None)
                self.assignment.pop(body.member_id, None)
            return group_pb2.JoinGroupResponse(error_code=code, generation_id=-1), []
        mid = body.member_id
        if not mid:
            self.next_member += 1
            mid = f"m{self.next_member}"
        p = body.protocols[0]
        self.members[mid] = Subscription(tuple(p.subscription.topics))
        self.owned_sent = sorted((t.topic, q) for t in p.subscription.owned_partitions
                                 for q in t.partitions)
        self.generation += 1
        subs = {m: Subscription((TOPIC,), None, self.assignment.get(m, ()))
                for m in [*self.members, *self.others]}
        self.assignment = assign(p.name, subs, {TOPIC: N_PARTS})
        self.log.append(("join", mid, self.generation))
        return group_pb2.JoinGroupResponse(generation_id=self.generation, member_id=mid,
                                           protocol_type="consumer", protocol_name=p.name,
                                           leader=mid), []


def tp(p):
    return TopicPartition(TOPIC, p)


def coordinator_channel(c):
    return c._group._conn.channel


def test_kept_partitions_are_fetched_through_the_rebalance_and_only_moving_ones_revoked():
    svc = CooperativeGroupService()
    c, clock = make(svc, partition_assignment_strategy="CooperativeStickyAssignor",
                    max_poll_records=1)
    assert c._group.cooperative
    listener = Recorder(svc)
    c.subscribe([TOPIC], listener=listener)
    c.poll(timeout_ms=0)
    assert c.assignment() == {tp(p) for p in range(N_PARTS)}
    # a second member joins: the heartbeat says so
    svc.others = ["zz-other"]
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("REBALANCE_IN_PROGRESS")]
    clock.t += 3000
    c.poll(timeout_ms=0)
    assert c._group.rejoin_needed
    chan = coordinator_channel(c)
    chan.hold = True                          # the JoinGroup answer is not there yet
    del svc.log[:], svc.gw.requests[:]
    seen = set()
    for _ in range(12):                       # the join is in flight: records keep coming
        for t, recs in c.poll(timeout_ms=0).items():
            seen.add(t)
    assert svc.apis().count("JOIN_GROUP") == 1 and "SYNC_GROUP" not in svc.apis()
    assert seen == {tp(p) for p in range(N_PARTS)}
    assert c.assignment() == {tp(p) for p in range(N_PARTS)}
    assert not [e for e in listener.events if e[0] == "revoked"]
    assert svc.owned_sent == [(TOPIC, p) for p in range(N_PARTS)]
    positions = {t: c.position(t) for t in c.assignment()}
    chan.release()
    c.poll(timeout_ms=0)                      # join answered: SyncGroup sent (held)
    assert "SYNC_GROUP" in svc.apis() and c.assignment() == {tp(p) for p in range(N_PARTS)}
    chan.release()
    chan.hold = False
    c.poll(timeout_ms=0)                      # sync answered: revoke only what moves
    kept = {tp(p) for _, p in svc.assignment["m1"]}
    assert len(kept) == N_PARTS // 2 and c.assignment() == kept
    assert listener.events[-2:] == [("revoked", {tp(p) for p in range(N_PARTS)} - kept),
                                    ("assigned", set())]
    assert svc.assignment["zz-other"] == ()   # withheld until m1 revoked (first round)
    for t in kept:                            # kept partitions keep their positions
        assert c.position(t) >= positions[t]
    assert c._group.rejoin_needed             # revoked something: rejoin at once
    for _ in range(3):
        c.poll(timeout_ms=0)                  # second round
    assert len(svc.assignment["zz-other"]) == N_PARTS // 2
    assert c.assignment() == kept and not c._group.rejoin_needed
    assert [e[0] for e in listener.events].count("revoked") == 1
    assert c._group.state is MemberState.STABLE
    c.close()


def test_a_member_that_loses_its_generation_reports_partitions_lost_and_joins_afresh():
    svc = CooperativeGroupService()
    c, clock = make(svc, partition_assignment_strategy="cooperative-sticky")
    listener = Recorder(svc)
    c.subscribe([TOPIC], listener=listener)
    c.poll(timeout_ms=0)
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("ILLEGAL_GENERATION")]
    svc.errors[ApiKey.JOIN_GROUP] = [E.Value("UNKNOWN_MEMBER_ID")]
    clock.t += 3000
    for _ in range(4):
        c.poll(timeout_ms=0)
    kinds = [e[0] for e in listener.events]
    assert kinds == ["assigned", "lost", "assigned"]
    assert c.assignment() == {tp(p) for p in range(N_PARTS)}
    assert c._group.member_id == "m2" and c._group.state is MemberState.STABLE
    c.close()


def test_eager_strategies_still_revoke_everything_before_joining():
    svc = CooperativeGroupService()
    c, clock = make(svc, partition_assignment_strategy=["cooperative-sticky", "range"])
    assert not c._group.cooperative           # mixed: eager until every member upgrades
    listener = Recorder(svc)
    c.subscribe([TOPIC], listener=listener)
    c.poll(timeout_ms=0)
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("REBALANCE_IN_PROGRESS")]
    clock.t += 3000
    c.poll(timeout_ms=0)
    assert [e[0] for e in listener.events] == ["assigned", "revoked", "assigned"]
    assert listener.events[1][1] == {tp(p) for p in range(N_PARTS)}
    c.close()


def test_heartbeat_if_due_sends_one_only_when_due_and_stable():
    svc = CooperativeGroupService()
    c, clock = make(svc, heartbeat_interval_ms=3000)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    c._group.heartbeat_if_due()
    assert "HEARTBEAT" not in svc.apis()
    clock.t += 3000
    c._group.heartbeat_if_due()
    assert svc.apis().count("HEARTBEAT") == 1
    c._group.rejoin_needed = True         # rebalancing: the next poll rejoins, not this
    clock.t += 3000
    c._group.heartbeat_if_due()
    assert svc.apis().count("HEARTBEAT") == 1
    c.close()
