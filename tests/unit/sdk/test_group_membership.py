"""The consumer's group membership and commits against a scripted in-memory group service
(no sockets): join/sync, heartbeats, rebalances, member-id resets, commit retries, auto-commit,
close, positions from committed offsets."""
from __future__ import annotations

import pytest
from sdk_fakes import FakeGateway

from riverbed import errors
from riverbed._proto.v1 import fetch_pb2, group_pb2, header_pb2, list_offsets_pb2, metadata_pb2, offset_pb2
from riverbed.consumer import Consumer
from riverbed.coordinator.assignors import assign
from riverbed.coordinator.consumer_protocol import Subscription
from riverbed.group_membership import (
    CommitFailedError,
    ConsumerRebalanceListener,
    MemberState,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    normalize_strategies,
)
from riverbed.records import BatchBuilder, set_base_offset
from riverbed.structs import TopicPartition

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
TOPIC = "t"
N_PARTS = 4
RECORDS_PER_PARTITION = 10


def batch(base, n):
    b = BatchBuilder()
    for i in range(n):
        b.append(1000, b"k", b"v%d" % (base + i), ())
    buf = bytearray(b.build())
    set_base_offset(buf, 0, base)
    return bytes(buf)


class FakeGroupService:
    """One group coordinator + offset manager + a topic of N_PARTS partitions, 10 records each.
    A join completes at once (the caller is the only one rejoining); other members exist only as
    names in `others` so the assignment splits the partitions."""

    def __init__(self):
        self.generation = 0
        self.members: dict[str, Subscription] = {}
        self.others: list[str] = []
        self.assignment: dict[str, tuple] = {}
        self.committed: dict[tuple[str, int], int] = {}
        self.errors: dict[int, list[int]] = {}      # api -> error codes to answer next
        self.log: list[tuple] = []                  # (api name, summary)
        self.next_member = 0
        self.gw = FakeGateway({
            ApiKey.METADATA: self.metadata, ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets, ApiKey.FIND_COORDINATOR: self.find,
            ApiKey.JOIN_GROUP: self.join, ApiKey.SYNC_GROUP: self.sync,
            ApiKey.HEARTBEAT: self.heartbeat, ApiKey.LEAVE_GROUP: self.leave,
            ApiKey.OFFSET_COMMIT: self.commit, ApiKey.OFFSET_FETCH: self.offset_fetch,
        })

    def _err(self, api):
        q = self.errors.get(api)
        return q.pop(0) if q else 0

    def apis(self):
        return [ApiKey.Name(api) for api, _, _ in self.gw.requests]

    def requests(self, api):
        return [body for a, body, _ in self.gw.requests if a == api]

    # -- topic
    def metadata(self, body, payloads):
        resp = metadata_pb2.MetadataResponse()
        t = resp.topics.add(name=TOPIC)
        for p in range(N_PARTS):
            t.partitions.add(partition=p, leader=1, replicas=[1], isr=[1])
        return resp, []

    def fetch(self, body, payloads):
        resp = fetch_pb2.FetchResponse()
        out = []
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                rt.partitions.add(partition=p.partition, high_watermark=RECORDS_PER_PARTITION)
                off = p.fetch_offset
                out.append(batch(off, RECORDS_PER_PARTITION - off) if off < RECORDS_PER_PARTITION else b"")
        return resp, out

    def list_offsets(self, body, payloads):
        resp = list_offsets_pb2.ListOffsetsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                rt.partitions.add(partition=p.partition,
                                  offset=0 if p.timestamp == -2 else RECORDS_PER_PARTITION)
        return resp, []

    # -- group
    def find(self, body, payloads):
        self.log.append(("find", body.key))
        return group_pb2.FindCoordinatorResponse(error_code=self._err(ApiKey.FIND_COORDINATOR)), []

    def join(self, body, payloads):
        code = self._err(ApiKey.JOIN_GROUP)
        if code:
            return group_pb2.JoinGroupResponse(error_code=code, generation_id=-1), []
        mid = body.member_id
        if not mid:
            self.next_member += 1
            mid = f"m{self.next_member}"
        elif mid not in self.members:
            return group_pb2.JoinGroupResponse(error_code=E.Value("UNKNOWN_MEMBER_ID")), []
        p = body.protocols[0]
        self.members[mid] = Subscription(tuple(p.subscription.topics))
        self.generation += 1
        subs = dict(self.members)
        for o in self.others:
            subs[o] = Subscription((TOPIC,))
        self.assignment = assign(p.name, subs, {TOPIC: N_PARTS})
        self.log.append(("join", mid, self.generation))
        return group_pb2.JoinGroupResponse(generation_id=self.generation, member_id=mid,
                                           protocol_type="consumer", protocol_name=p.name,
                                           leader=mid), []

    def sync(self, body, payloads):
        code = self._err(ApiKey.SYNC_GROUP)
        if code:
            return group_pb2.SyncGroupResponse(error_code=code), []
        resp = group_pb2.SyncGroupResponse(protocol_type="consumer", protocol_name="range")
        parts = [p for t, p in self.assignment.get(body.member_id, ())]
        if parts:
            resp.assignment.partitions.add(topic=TOPIC, partitions=parts)
        self.log.append(("sync", body.member_id, parts))
        return resp, []

    def heartbeat(self, body, payloads):
        code = self._err(ApiKey.HEARTBEAT)
        if code == E.Value("UNKNOWN_MEMBER_ID"):
            self.members.pop(body.member_id, None)
        elif not code and body.generation_id != self.generation:
            code = E.Value("ILLEGAL_GENERATION")
        self.log.append(("heartbeat", body.member_id, code))
        return group_pb2.HeartbeatResponse(error_code=code), []

    def leave(self, body, payloads):
        self.members.pop(body.member_id, None)
        self.log.append(("leave", body.member_id))
        return group_pb2.LeaveGroupResponse(), []

    def commit(self, body, payloads):
        code = self._err(ApiKey.OFFSET_COMMIT)
        if not code and body.member_id and (body.member_id not in self.members):
            code = E.Value("UNKNOWN_MEMBER_ID")
        elif not code and body.member_id and body.generation_id != self.generation:
            code = E.Value("ILLEGAL_GENERATION")
        offs = {(t.name, p.partition_index): p.committed_offset for t in body.topics for p in t.partitions}
        self.log.append(("commit", body.generation_id, body.member_id, offs, code))
        resp = offset_pb2.OffsetCommitResponse(error_code=code)
        if not code:
            self.committed.update(offs)
        return resp, []

    def offset_fetch(self, body, payloads):
        code = self._err(ApiKey.OFFSET_FETCH)
        resp = offset_pb2.OffsetFetchResponse(error_code=code)
        if not code:
            for t in body.topics:
                rt = resp.topics.add(name=t.name)
                for p in t.partition_indexes:
                    rt.partitions.add(partition_index=p, committed_offset=self.committed.get((t.name, p), -1),
                                      committed_leader_epoch=-1)
        self.log.append(("offset_fetch", code))
        return resp, []


class Clock:
    def __init__(self):
        # far above any monotonic clock in ms: a deadline taken on another clock shows at once
        self.t = 1e12

    def __call__(self):
        return self.t


class Recorder(ConsumerRebalanceListener):
    def __init__(self, svc, consumer_ref=None, commit_on_revoke=False):
        self.svc = svc
        self.events = []
        self.consumer_ref = consumer_ref
        self.commit_on_revoke = commit_on_revoke

    def on_partitions_revoked(self, revoked):
        self.svc.log.append(("revoked", sorted(p for _, p in revoked)))
        self.events.append(("revoked", set(revoked)))
        if self.commit_on_revoke:
            self.consumer_ref[0].commit()

    def on_partitions_assigned(self, assigned):
        self.svc.log.append(("assigned", sorted(p for _, p in assigned)))
        self.events.append(("assigned", set(assigned)))

    def on_partitions_lost(self, lost):
        self.svc.log.append(("lost", sorted(p for _, p in lost)))
        self.events.append(("lost", set(lost)))


def make(svc, clock=None, **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("enable_auto_commit", False)
    c = Consumer(bootstrap=["tcp://gw:1"], group_id="g", client_id="c1",
                 _channel_factory=svc.gw.factory, **kw)
    clock = clock or Clock()
    c._group._clock = clock
    c._group._sleep = lambda s: None
    return c, clock


def joined(svc, listener=False, **kw):
    """make() a consumer, subscribe it to TOPIC (with a Recorder as its rebalance listener when
    `listener`) and poll until it owns its partitions: (consumer, clock, recorder or None)."""
    c, clock = make(svc, **kw)
    rec = Recorder(svc) if listener else None
    c.subscribe([TOPIC], **({"listener": rec} if rec else {}))
    poll_all(c)
    return c, clock, rec


def poll_all(c, rounds=5):
    got = {}
    for _ in range(rounds):
        for tp, recs in c.poll(timeout_ms=0).items():
            got.setdefault(tp, []).extend(r.offset for r in recs)
    return got


def kinds(log):
    return [e[0] for e in log]


# ---------------------------------------------------------------------------------------- tests

def test_join_sync_assigns_and_positions_come_from_committed_offsets_else_reset():
    svc = FakeGroupService()
    svc.committed[(TOPIC, 1)] = 7
    c, _ = make(svc, partition_assignment_strategy=["sticky", "range"])
    listener = Recorder(svc)
    c.subscribe([TOPIC], listener=listener)
    got = poll_all(c)
    assert c.assignment() == {TopicPartition(TOPIC, p) for p in range(N_PARTS)}
    join = svc.requests(ApiKey.JOIN_GROUP)[0]
    assert [p.name for p in join.protocols] == ["sticky", "range"]
    assert list(join.protocols[0].subscription.topics) == [TOPIC]
    assert join.member_id == "" and join.protocol_type == "consumer"
    assert join.session_timeout_ms == 10000 and join.rebalance_timeout_ms == 300000
    assert listener.events == [("assigned", set(c.assignment()))]
    # committed offset 7 for partition 1, earliest (0) elsewhere
    assert got[TopicPartition(TOPIC, 1)][0] == 7
    assert got[TopicPartition(TOPIC, 0)] == list(range(RECORDS_PER_PARTITION))
    assert c._group.state is MemberState.STABLE and c._group.member_id == "m1"
    c.close()


def test_heartbeats_only_when_due_and_poll_bounds_its_wait_by_them():
    svc = FakeGroupService()
    c, clock = make(svc, heartbeat_interval_ms=3000)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    assert "HEARTBEAT" not in svc.apis()
    clock.t += 2999
    c.poll(timeout_ms=0)
    assert "HEARTBEAT" not in svc.apis()
    assert 0 < c._group.time_to_next_ms() <= 1
    clock.t += 1
    c.poll(timeout_ms=0)
    assert svc.apis().count("HEARTBEAT") == 1
    assert c._group.time_to_next_ms() == 3000
    c.close()


def test_rebalance_in_progress_commits_revokes_then_rejoins_with_same_member_id():
    svc = FakeGroupService()
    c, clock = make(svc, enable_auto_commit=True)
    listener = Recorder(svc)
    c.subscribe([TOPIC], listener=listener)
    poll_all(c)                    # consumes every record: positions at 10
    svc.others = ["zz-other"]      # a second member: range gives m1 partitions 0,1
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("REBALANCE_IN_PROGRESS")]
    clock.t += 3000
    del svc.log[:]
    c.poll(timeout_ms=0)           # heartbeat says rebalance; commit, revoke, join, sync, assign
    assert kinds(svc.log)[:5] == ["heartbeat", "commit", "revoked", "join", "sync"]
    commit = svc.log[1]
    assert commit[3] == {(TOPIC, p): RECORDS_PER_PARTITION for p in range(N_PARTS)}
    assert svc.log[3][1] == "m1"                  # same member id
    assert c.assignment() == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
    assert listener.events[-1] == ("assigned", {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)})
    # positions restart from the committed offsets, so nothing is re-read
    assert poll_all(c) == {}
    assert c.position(TopicPartition(TOPIC, 0)) == RECORDS_PER_PARTITION
    c.close()


def test_unknown_member_id_resets_member_id_and_reports_partitions_lost_without_committing():
    svc = FakeGroupService()
    c, clock, listener = joined(svc, listener=True, enable_auto_commit=True)
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("UNKNOWN_MEMBER_ID")]
    clock.t += 3000
    del svc.log[:]
    c.poll(timeout_ms=0)
    assert "commit" not in kinds(svc.log)
    assert kinds(svc.log)[:4] == ["heartbeat", "lost", "join", "sync"]
    assert svc.requests(ApiKey.JOIN_GROUP)[-1].member_id == ""
    assert c._group.member_id == "m2"
    c.close()


def test_illegal_generation_on_heartbeat_rejoins_keeping_member_id():
    svc = FakeGroupService()
    c, clock = make(svc)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    svc.generation += 1            # someone else's join bumped it
    clock.t += 3000
    c.poll(timeout_ms=0)
    assert ("heartbeat", "m1", E.Value("ILLEGAL_GENERATION")) in svc.log
    c.poll(timeout_ms=0)
    assert svc.requests(ApiKey.JOIN_GROUP)[-1].member_id == "m1"
    assert c._group.generation_id == svc.generation
    c.close()


def test_join_errors_retried_unknown_member_resets_and_fatal_ones_raise():
    svc = FakeGroupService()
    c, _ = make(svc)
    c.subscribe([TOPIC])
    svc.errors[ApiKey.JOIN_GROUP] = [E.Value("COORDINATOR_LOAD_IN_PROGRESS"), E.Value("NOT_COORDINATOR")]
    c.poll(timeout_ms=1000)        # retried within the poll's time (the fake clock stands still)
    assert c._group.state is MemberState.STABLE
    assert svc.apis().count("JOIN_GROUP") == 3
    assert svc.apis().count("FIND_COORDINATOR") == 2      # rediscovered after NOT_COORDINATOR
    c.close()

    svc2 = FakeGroupService()
    c2, _ = make(svc2)
    c2.subscribe([TOPIC])
    svc2.errors[ApiKey.JOIN_GROUP] = [E.Value("INCONSISTENT_GROUP_PROTOCOL")]
    with pytest.raises(errors.InconsistentGroupProtocolError):
        c2.poll(timeout_ms=0)
    c2.close()


def test_commit_defaults_to_positions_and_retries_retriable_errors():
    svc = FakeGroupService()
    c, _ = make(svc)
    c.subscribe([TOPIC])
    poll_all(c)
    c.seek(TopicPartition(TOPIC, 2), 4)
    svc.errors[ApiKey.OFFSET_COMMIT] = [E.Value("COORDINATOR_LOAD_IN_PROGRESS"),
                                        E.Value("NOT_COORDINATOR"),
                                        E.Value("COORDINATOR_NOT_AVAILABLE")]
    c.commit()
    commits = [e for e in svc.log if e[0] == "commit"]
    assert len(commits) == 4 and commits[-1][4] == 0
    assert svc.committed == {(TOPIC, 0): 10, (TOPIC, 1): 10, (TOPIC, 2): 4, (TOPIC, 3): 10}
    assert commits[-1][1] == svc.generation and commits[-1][2] == "m1"
    assert c.committed(TopicPartition(TOPIC, 2)) == 4
    assert c.committed(TopicPartition(TOPIC, 2), metadata=True) == OffsetAndMetadata(4, "", -1)
    c.commit({TopicPartition(TOPIC, 3): OffsetAndMetadata(5, "meta")})
    assert svc.committed[(TOPIC, 3)] == 5
    c.close()


def test_commit_during_rebalance_raises_commit_failed_and_triggers_rejoin():
    svc = FakeGroupService()
    c, _ = make(svc)
    c.subscribe([TOPIC])
    poll_all(c)
    svc.errors[ApiKey.OFFSET_COMMIT] = [E.Value("REBALANCE_IN_PROGRESS")]
    with pytest.raises(CommitFailedError):
        c.commit()
    assert c._group.rejoin_needed
    c.poll(timeout_ms=0)
    assert svc.apis().count("JOIN_GROUP") == 2
    c.close()


def test_commit_async_completes_in_a_later_poll_with_callback():
    svc = FakeGroupService()
    c, _ = make(svc)
    c.subscribe([TOPIC])
    poll_all(c)
    seen = []
    fut = c.commit_async(callback=lambda offsets, exc: seen.append((dict(offsets), exc)))
    assert not fut.done() and seen == []
    c.poll(timeout_ms=0)
    assert fut.done() and fut.exception() is None
    assert seen == [({TopicPartition(TOPIC, p): OffsetAndMetadata(10) for p in range(N_PARTS)}, None)]
    svc.errors[ApiKey.OFFSET_COMMIT] = [E.Value("ILLEGAL_GENERATION")]
    fut2 = c.commit_async()
    c.poll(timeout_ms=0)
    assert isinstance(fut2.exception(), CommitFailedError)
    c.close()


def test_auto_commit_in_poll_at_its_interval_and_at_close_before_leave():
    svc = FakeGroupService()
    c, clock = make(svc, enable_auto_commit=True, auto_commit_interval_ms=5000,
                    heartbeat_interval_ms=3000)
    c.subscribe([TOPIC])
    poll_all(c)
    assert "commit" not in kinds(svc.log)
    clock.t += 5000
    c.poll(timeout_ms=0)          # sends the auto-commit
    c.poll(timeout_ms=0)          # completes it
    assert svc.committed == {(TOPIC, p): 10 for p in range(N_PARTS)}
    c.seek(TopicPartition(TOPIC, 0), 3)
    del svc.log[:]
    c.close()
    assert kinds(svc.log) == ["commit", "leave"]
    assert svc.committed[(TOPIC, 0)] == 3 and svc.members == {}


def test_no_committed_offset_and_reset_none_raises_no_offset_for_partition():
    svc = FakeGroupService()
    c, _ = make(svc, auto_offset_reset="none")
    c.subscribe([TOPIC])
    with pytest.raises(NoOffsetForPartitionError) as ei:
        c.poll(timeout_ms=0)
    assert isinstance(ei.value, errors.OffsetOutOfRangeError)
    c.close()


def test_pause_survives_a_rebalance_for_partitions_kept():
    svc = FakeGroupService()
    c, clock = make(svc)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    c.pause(TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 3))
    svc.others = ["zz-other"]
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("REBALANCE_IN_PROGRESS")]
    clock.t += 3000
    got = poll_all(c)
    assert c.assignment() == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
    assert c.paused() == {TopicPartition(TOPIC, 0)}
    assert set(got) == {TopicPartition(TOPIC, 1)}
    c.close()


def test_revoke_listener_can_commit_with_the_old_generation():
    svc = FakeGroupService()
    ref = []
    c, clock = make(svc)
    ref.append(c)
    c.subscribe([TOPIC], listener=Recorder(svc, ref, commit_on_revoke=True))
    poll_all(c)
    gen = svc.generation
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("REBALANCE_IN_PROGRESS")]
    clock.t += 3000
    c.poll(timeout_ms=0)
    c.poll(timeout_ms=0)
    commits = [e for e in svc.log if e[0] == "commit"]
    assert len(commits) == 1 and commits[0][1] == gen and commits[0][4] == 0
    assert svc.committed == {(TOPIC, p): 10 for p in range(N_PARTS)}
    c.close()


def test_unsubscribe_leaves_and_mixing_assign_and_subscribe_is_refused():
    svc = FakeGroupService()
    c, _ = make(svc)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    with pytest.raises(errors.ClientError):
        c.assign([TopicPartition(TOPIC, 0)])
    c.unsubscribe()
    assert ("leave", "m1") in svc.log and c.assignment() == set()
    # standalone: assign() with a group id commits with generation -1, no member id
    c.assign([TopicPartition(TOPIC, 0)])
    c.commit({TopicPartition(TOPIC, 0): 2})
    assert svc.log[-1][:4] == ("commit", -1, "", {(TOPIC, 0): 2})
    c.close()


def test_pattern_subscription_is_sent_to_the_coordinator():
    svc = FakeGroupService()
    c, _ = make(svc)
    c.subscribe(pattern=r"t.*")
    c.poll(timeout_ms=0)
    p = svc.requests(ApiKey.JOIN_GROUP)[0].protocols[0]
    assert p.subscription.topic_pattern == "t.*" and list(p.subscription.topics) == []
    c.close()


def test_strategy_names():
    assert normalize_strategies("range") == ("range",)
    assert normalize_strategies(["StickyAssignor", "RoundRobinPartitionAssignor", "range"]) == \
        ("sticky", "roundrobin", "range")
    assert normalize_strategies(["CooperativeStickyAssignor", "cooperative_sticky"]) == \
        ("cooperative-sticky",)
    with pytest.raises(ValueError):
        normalize_strategies(["fair-share"])
    with pytest.raises(errors.ClientError):
        Consumer(bootstrap=["tcp://gw:1"], _channel_factory=FakeGroupService().gw.factory).commit()


# ------------------------------------------------------------- long-polled heartbeats (max_wait_ms)

def coordinator_channel(c):
    return c._group._conn.channel


def test_heartbeat_asks_to_be_held_for_the_interval_unless_long_poll_is_off():
    svc = FakeGroupService()
    c, clock = make(svc, heartbeat_interval_ms=3000)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    clock.t += 3000
    c.poll(timeout_ms=0)
    (hb,) = svc.requests(ApiKey.HEARTBEAT)
    assert hb.max_wait_ms == 3000 and hb.generation_id == 1 and hb.member_id == "m1"
    c.close()
    svc = FakeGroupService()
    c, clock = make(svc, heartbeat_interval_ms=3000, heartbeat_long_poll=False)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    clock.t += 3000
    c.poll(timeout_ms=0)
    assert [h.max_wait_ms for h in svc.requests(ApiKey.HEARTBEAT)] == [0]
    c.close()


def test_a_held_heartbeat_blocks_nothing_and_its_answer_is_followed_by_the_next_at_once():
    svc = FakeGroupService()
    c, clock, _ = joined(svc, heartbeat_interval_ms=3000)
    svc.gw.hold_apis = {ApiKey.HEARTBEAT}          # the coordinator holds it
    clock.t += 3000
    c.poll(timeout_ms=0)
    assert svc.apis().count("HEARTBEAT") == 1 and c._group.heartbeat_in_flight
    assert c._group.time_to_next_ms() == 50         # poll looks for the answer meanwhile
    clock.t += 1000
    c.poll(timeout_ms=0)
    assert svc.apis().count("HEARTBEAT") == 1       # one at a time
    c.commit()                                       # not behind the held heartbeat
    assert svc.log[-1][0] == "commit"
    clock.t += 2000                                  # the coordinator answers when its wait ends
    svc.gw.hold_apis = set()
    coordinator_channel(c).release()
    c.poll(timeout_ms=0)
    assert svc.apis().count("HEARTBEAT") == 2       # the answer came after the interval: at once
    assert c._group.time_to_next_ms() == 3000       # (answered at once this time)
    assert c._group.last_heartbeat_ok_ms == clock.t
    c.close()


def test_an_immediate_answer_keeps_the_interval():
    svc = FakeGroupService()
    c, clock = make(svc, heartbeat_interval_ms=3000)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    for _ in range(3):                               # an old coordinator: answered at once
        clock.t += 1500
        c.poll(timeout_ms=0)
        clock.t += 1500
        c.poll(timeout_ms=0)
    assert svc.apis().count("HEARTBEAT") == 3
    c.close()


def test_a_held_heartbeat_answered_rebalance_in_progress_rejoins_in_the_next_poll():
    svc = FakeGroupService()
    c, clock, listener = joined(svc, listener=True, enable_auto_commit=True)
    svc.gw.hold_apis = {ApiKey.HEARTBEAT}
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("REBALANCE_IN_PROGRESS")]
    svc.others = ["zz-other"]
    clock.t += 3000
    c.poll(timeout_ms=0)
    assert not c._group.rejoin_needed and "join" not in kinds(svc.log[2:])
    clock.t += 400                                   # another member's session expired
    del svc.log[:]
    coordinator_channel(c).release()
    c.poll(timeout_ms=0)
    assert kinds(svc.log)[:4] == ["commit", "revoked", "join", "sync"]
    assert c.assignment() == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
    c.close()


def test_a_stale_answer_of_a_heartbeat_held_across_a_rejoin_is_dropped():
    svc = FakeGroupService()
    c, clock, _ = joined(svc)
    svc.gw.hold_apis = {ApiKey.HEARTBEAT}
    svc.errors[ApiKey.HEARTBEAT] = [E.Value("REBALANCE_IN_PROGRESS")]
    clock.t += 3000
    c.poll(timeout_ms=0)                             # held
    svc.errors[ApiKey.OFFSET_COMMIT] = [E.Value("REBALANCE_IN_PROGRESS")]
    with pytest.raises(CommitFailedError):
        c.commit()
    c.poll(timeout_ms=0)                             # rejoins: generation 2
    assert c._group.generation_id == 2 and not c._group.heartbeat_in_flight
    svc.gw.hold_apis = set()
    coordinator_channel(c).release()                 # generation 1's answer arrives late
    del svc.log[:]
    c.poll(timeout_ms=0)
    assert "join" not in kinds(svc.log) and not c._group.rejoin_needed
    c.close()


def test_close_leaves_at_once_with_a_heartbeat_held():
    svc = FakeGroupService()
    c, clock, _ = joined(svc)
    svc.gw.hold_apis = {ApiKey.HEARTBEAT}
    clock.t += 3000
    c.poll(timeout_ms=0)
    assert c._group.heartbeat_in_flight
    del svc.log[:]
    c.close()
    assert kinds(svc.log) == ["leave"] and svc.members == {}


def test_heartbeat_if_due_acts_on_a_held_answer_then_sends_the_next():
    svc = FakeGroupService()
    c, clock = make(svc, heartbeat_interval_ms=3000)
    c.subscribe([TOPIC])
    c.poll(timeout_ms=0)
    svc.gw.hold_apis = {ApiKey.HEARTBEAT}
    clock.t += 3000
    c._group.heartbeat_if_due()
    assert c._group.heartbeat_in_flight
    clock.t += 3000
    c._group.heartbeat_if_due()
    assert svc.apis().count("HEARTBEAT") == 1
    coordinator_channel(c).release()
    c._group.heartbeat_if_due()                      # the answer, then the next one at once
    assert svc.apis().count("HEARTBEAT") == 2 and c._group.heartbeat_in_flight
    c.close()
