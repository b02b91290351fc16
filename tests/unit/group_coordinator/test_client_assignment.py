"""Client assignment (Kafka's classic protocol, JoinGroup/SyncGroup v1) and DeleteGroups in the
group coordinator core: the coordinator picks a protocol every member supports, hands the leader
every member's metadata, writes the leader's assignments as opaque bytes and hands each member
its own; SDK (coordinator-assigned) groups keep their flow (test_group_coordinator_core.py)."""
from riverbed._proto.v1 import group_pb2 as g
from riverbed.coordinator import offsets_topic as ot
from riverbed.errors import ErrorCode as E
from services.group_coordinator.core.states import GroupState as S

from tests.unit.group_coordinator.test_group_coordinator_core import (
    GID, SESSION, Harness, join, replies, writes,
)


def kjoin(member_id="", protocols=(("cooperative-sticky", b"meta-cs"), ("range", b"meta-r")),
          protocol_type="consumer", group=GID, session=SESSION):
    return g.JoinGroupRequest(
        group_id=group, session_timeout_ms=session, rebalance_timeout_ms=session,
        member_id=member_id, protocol_type=protocol_type, client_host="/127.0.0.1",
        client_assignment=True,
        protocols=[g.JoinGroupProtocol(name=n, metadata=m) for n, m in protocols])


def sync(member_id, generation, assignments=None, group=GID, **kw):
    return g.SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                              assignments=[g.SyncGroupAssignment(member_id=m, assignment=a)
                                           for m, a in (assignments or {}).items()], **kw)


def two_members(h, p1=(("cooperative-sticky", b"a-cs"), ("range", b"a-r")),
                p2=(("range", b"b-r"), ("cooperative-sticky", b"b-cs")), protocol_type="consumer"):
    """Two members join (the first alone, then both): the joins of generation 2 answered."""
    r1, out = h.send(kjoin(protocols=p1, protocol_type=protocol_type))
    first = replies(out)[r1]
    assert not writes(out)                              # nothing is written at join time
    assert first.error_code == E.NONE and first.leader == first.member_id
    m1 = first.member_id
    assert [(m.member_id, m.metadata) for m in first.members] == [(m1, p1[0][1])]
    # the leader assigns, syncs: generation 1 written, then answered
    rs, out = h.send(sync(m1, first.generation_id, {m1: b"all-to-a"}))
    (w,) = writes(out)
    assert not replies(out)
    got = replies(h.ack(out))
    assert got[rs].assignment_data == b"all-to-a"
    assert h.core.groups[GID].state is S.STABLE
    r2, out = h.send(kjoin(protocols=p2, protocol_type=protocol_type))
    assert h.core.groups[GID].state is S.PREPARING_REBALANCE
    r1b, out1 = h.send(kjoin(member_id=m1, protocols=p1, protocol_type=protocol_type))
    got = replies(out + out1)
    return got[r1b], got[r2]


def test_the_leader_gets_every_members_metadata_and_its_assignments_are_handed_out():
    h = Harness()
    leader, follower = two_members(h)
    group = h.core.groups[GID]
    assert group.state is S.COMPLETING_REBALANCE
    # both support both; one vote each: the tie goes to the name first in order
    assert leader.protocol_name == follower.protocol_name == "cooperative-sticky"
    assert leader.leader == leader.member_id == follower.leader
    assert sorted((m.member_id, m.metadata) for m in leader.members) == sorted(
        [(leader.member_id, b"a-cs"), (follower.member_id, b"b-cs")])
    assert not follower.members
    gen = leader.generation_id
    # heartbeats between the join answer and the sync answer are fine (Kafka)
    rh, out = h.send(g.HeartbeatRequest(group_id=GID, generation_id=gen, member_id=follower.member_id))
    assert replies(out)[rh].error_code == E.NONE
    rf, out = h.send(sync(follower.member_id, gen))          # waits for the leader's
    assert not replies(out) and not writes(out)
    rl, out = h.send(sync(leader.member_id, gen, {leader.member_id: b"\x00A",
                                                  follower.member_id: b"\x00B"}))
    (w,) = writes(out)
    value = ot.decode_group_value(w.records[0][1])
    assert value.protocol == "cooperative-sticky" and value.leader == leader.member_id
    assert {(m.member_id, m.subscription, m.assignment) for m in value.members} == {
        (leader.member_id, b"a-cs", b"\x00A"), (follower.member_id, b"b-cs", b"\x00B")}
    got = replies(h.ack(out))
    assert got[rl].assignment_data == b"\x00A" and got[rf].assignment_data == b"\x00B"
    assert got[rf].protocol_name == "cooperative-sticky" and not got[rf].assignment.partitions
    assert group.state is S.STABLE
    # a later sync in the same generation gets the same bytes; describe shows Kafka's bytes
    rs, out = h.send(sync(follower.member_id, gen))
    assert replies(out)[rs].assignment_data == b"\x00B"
    rd, out = h.send(g.DescribeGroupsRequest(groups=[GID]))
    (d,) = replies(out)[rd].groups
    assert {(m.member_id, m.member_metadata, m.member_assignment) for m in d.members} == {
        (leader.member_id, b"a-cs", b"\x00A"), (follower.member_id, b"b-cs", b"\x00B")}


def test_any_protocol_type_and_unknown_strategies_are_the_clients_business():
    h = Harness()
    leader, follower = two_members(h, p1=(("v0", b"worker-1"),), p2=(("v0", b"worker-2"),),
                                   protocol_type="connect")
    assert leader.protocol_type == "connect" and leader.protocol_name == "v0"
    rl, out = h.send(sync(leader.member_id, leader.generation_id, {leader.member_id: b"x"}))
    rf, out2 = h.send(sync(follower.member_id, leader.generation_id))
    got = replies(h.ack(out + out2))
    assert got[rl].assignment_data == b"x"
    assert got[rf].assignment_data == b""            # left out by the leader: empty, as Kafka


def test_no_common_protocol_and_a_mismatched_mode_are_refused():
    h = Harness()
    two_members(h)
    r, out = h.send(kjoin(protocols=(("roundrobin", b"z"),)))
    assert replies(out)[r].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r, out = h.send(join())                               # an SDK member: coordinator-assigned
    assert replies(out)[r].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert "leader" in replies(out)[r].error_message
    # and the other way round
    h2 = Harness()
    r, out = h2.send(join())
    h2.ack(out)
    r, out = h2.send(kjoin())
    assert replies(out)[r].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r, out = h2.send(kjoin(protocols=()))
    assert replies(out)[r].error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_member_joining_before_the_leader_syncs_sends_the_waiting_syncs_back_to_rejoin():
    h = Harness()
    leader, follower = two_members(h)
    gen = leader.generation_id
    rf, out = h.send(sync(follower.member_id, gen))
    r3, out3 = h.send(kjoin())
    assert replies(out3)[rf].error_code == E.REBALANCE_IN_PROGRESS
    assert h.core.groups[GID].state is S.PREPARING_REBALANCE
    # the leader's late sync is refused too; rejoining completes the next generation
    rl, out = h.send(sync(leader.member_id, gen, {leader.member_id: b"a"}))
    assert replies(out)[rl].error_code == E.REBALANCE_IN_PROGRESS and not writes(out)
    ra, oa = h.send(kjoin(member_id=leader.member_id))
    rb, ob = h.send(kjoin(member_id=follower.member_id))
    got = replies(out3 + oa + ob)
    assert got[ra].generation_id == gen + 1 and len(got[ra].members) == 3


def test_the_leader_rejoining_rebalances_an_unchanged_follower_gets_the_generation_back():
    h = Harness()
    leader, follower = two_members(h)
    gen = leader.generation_id
    rl, out = h.send(sync(leader.member_id, gen, {leader.member_id: b"a", follower.member_id: b"b"}))
    h.ack(out)
    rf, out = h.send(kjoin(member_id=follower.member_id,
                           protocols=(("range", b"b-r"), ("cooperative-sticky", b"b-cs"))))
    resp = replies(out)[rf]
    assert resp.generation_id == gen and h.core.groups[GID].state is S.STABLE
    # the leader rejoins (e.g. a topic got partitions): a new generation
    rl, out = h.send(kjoin(member_id=leader.member_id))
    assert h.core.groups[GID].state is S.PREPARING_REBALANCE


def test_a_client_assigned_group_is_not_rebalanced_by_topic_changes():
    from services.group_coordinator.core.events import TopicMetadataChanged
    h = Harness()
    leader, follower = two_members(h)
    rl, out = h.send(sync(leader.member_id, leader.generation_id, {leader.member_id: b"a"}))
    h.ack(out)
    h.core.handle(TopicMetadataChanged({"t": 8, "u": 2}), h.now)
    assert h.core.groups[GID].state is S.STABLE


def test_the_leader_dying_before_its_sync_rebalances_the_rest():
    h = Harness()
    leader, follower = two_members(h)
    rf, out = h.send(sync(follower.member_id, leader.generation_id))
    out = h.tick(SESSION + 1)                           # the leader never syncs nor beats
    assert replies(out)[rf].error_code == E.REBALANCE_IN_PROGRESS
    assert list(h.core.groups[GID].members) == [follower.member_id]


def test_a_reloaded_client_assigned_group_keeps_its_bytes_and_mode():
    h = Harness()
    leader, follower = two_members(h, protocol_type="connect", p1=(("v0", b"m1"),),
                                   p2=(("v0", b"m2"),))
    rl, out = h.send(sync(leader.member_id, leader.generation_id,
                          {leader.member_id: b"A", follower.member_id: b"B"}))
    h.ack(out)
    # another instance loads the shard from the log
    h2 = Harness(shards=())
    from services.group_coordinator.core.events import ShardLoadCompleted, ShardLoadStarted
    h2.core.handle(ShardLoadStarted(0), h2.now)
    for i, (shard, k, v) in enumerate(h.log):
        h2.core.replay(ot.StoredRecord(shard, i, k, v))
    h2.core.handle(ShardLoadCompleted(0), h2.now)
    grp = h2.core.groups[GID]
    assert grp.client_assignment and grp.state is S.STABLE
    rs, out = h2.send(sync(follower.member_id, leader.generation_id))
    assert replies(out)[rs].assignment_data == b"B"
    rd, out = h2.send(g.DescribeGroupsRequest(groups=[GID]))
    (d,) = replies(out)[rd].groups
    assert {m.member_metadata for m in d.members} == {b"m1", b"m2"}


def test_delete_groups_kafkas_semantics():
    h = Harness()
    two_members(h)
    rid, out = h.send(g.DeleteGroupsRequest(group_ids=[GID, "nobody"]))
    res = {r.group_id: r for r in replies(out)[rid].results}
    assert res[GID].error_code == E.NON_EMPTY_GROUP
    assert res["nobody"].error_code == E.GROUP_ID_NOT_FOUND
    # members leave: the group is Empty; its delete writes a tombstone, then answers
    for m in list(h.core.groups[GID].members):
        h.ack(h.send(g.LeaveGroupRequest(group_id=GID, member_id=m))[1])
    out = h.tick(0)
    h.ack(out)
    assert h.core.groups[GID].state is S.EMPTY
    rid, out = h.send(g.DeleteGroupsRequest(group_ids=[GID]))
    (w,) = writes(out)
    assert w.records[0][1] is None and not replies(out)
    # a join meanwhile: the group is being deleted (Kafka's Dead group)
    rj, outj = h.send(kjoin())
    assert replies(outj)[rj].error_code == E.COORDINATOR_NOT_AVAILABLE
    got = replies(h.ack(out))
    (r,) = got[rid].results
    assert r.error_code == E.NONE and r.tombstone_offset == len(h.log) - 1
    assert GID not in h.core.groups
    rid, out = h.send(g.DeleteGroupsRequest(group_ids=[GID]))
    assert replies(out)[rid].results[0].error_code == E.GROUP_ID_NOT_FOUND


def test_delete_groups_failed_tombstone_keeps_the_group():
    h = Harness()
    rid, out = h.send(join())
    h.ack(out)
    m = h.core.groups[GID].leader_id
    h.ack(h.send(g.LeaveGroupRequest(group_id=GID, member_id=m))[1])
    h.ack(h.tick(0))
    rid, out = h.send(g.DeleteGroupsRequest(group_ids=[GID]))
    got = replies(h.ack(out, error=E.NOT_ENOUGH_REPLICAS))
    assert got[rid].results[0].error_code != E.NONE
    assert h.core.groups[GID].state is S.EMPTY and not h.core.groups[GID].delete_waiters
