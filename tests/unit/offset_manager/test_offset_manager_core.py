"""Offset manager core: commits answered after the write, cache from replay, membership checks,
loading, expiry, deletes."""
import pytest

from riverbed._proto.v1 import offset_pb2 as o
from riverbed.coordinator import offsets_topic as ot
from riverbed.coordinator.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from riverbed.errors import ErrorCode as E
from services.offset_manager.config import OffsetManagerConfig
from services.offset_manager.core.effects import AppendRecords, Reply
from services.offset_manager.core.events import (
    GroupMembershipChanged, RequestReceived, ShardLoadCompleted, ShardLoadStarted, ShardUnloaded,
    WriteCompleted,
)
from services.offset_manager.core.manager import OffsetManagerCore

GID = "billing"
MINUTE = 60_000


class Harness:
    def __init__(self, shards=(0,), num_partitions=1, **cfg):
        self.core = OffsetManagerCore(OffsetManagerConfig(offsets_topic_num_partitions=num_partitions, **cfg))
        self.now = 1_000
        self.rid = 0
        self.log: list[tuple[int, bytes, bytes | None]] = []
        for s in shards:
            self.core.handle(ShardLoadStarted(s), self.now)
            self.core.handle(ShardLoadCompleted(s), self.now)

    def send(self, body):
        self.rid += 1
        out = self.core.handle(RequestReceived(self.rid, body), self.now)
        self.core.check_invariants()
        return self.rid, out

    def ack(self, out, error=E.NONE):
        """Complete every AppendRecords in `out`; returns the replies already in `out` plus the
        effects of the completions."""
        effects = [e for e in out if isinstance(e, Reply)]
        for e in out:
            if isinstance(e, AppendRecords):
                base = len(self.log)
                if error == E.NONE:
                    self.log.extend((e.shard, k, v) for k, v in e.records)
                effects += self.core.handle(WriteCompleted(e.write_id, error, base), self.now)
        self.core.check_invariants()
        return effects

    def group_record(self, generation, members, ts=-1):
        """The group coordinator writes a group-metadata record to the same shard; we tail it."""
        value = ot.encode_group_value(ot.GroupMetadataValue(
            "consumer", generation, "range" if members else None, members[0] if members else None, ts,
            tuple(ot.MemberMetadata(m, "c", "h", 1, 1, encode_subscription(Subscription(("t",))),
                                    encode_assignment(Assignment())) for m in members)))
        key = ot.encode_key(ot.GroupMetadataKey(GID))
        self.log.append((0, key, value))
        self.core.replay(ot.StoredRecord(0, len(self.log) - 1, key, value))


def commit(offsets, generation=-1, member="", group=GID, retention=-1, metadata=""):
    by = {}
    for (t, p), off in offsets.items():
        by.setdefault(t, []).append(o.OffsetCommitPartition(partition_index=p, committed_offset=off,
                                                            committed_metadata=metadata))
    return o.OffsetCommitRequest(group_id=group, generation_id=generation, member_id=member,
                                 retention_time_ms=retention,
                                 topics=[o.OffsetCommitTopic(name=t, partitions=ps) for t, ps in by.items()])


def fetch(h, tps=None, group=GID):
    req = o.OffsetFetchRequest(group_id=group)
    if tps:
        req.topics.add(name=tps[0][0], partition_indexes=[p for _, p in tps])
    rid, out = h.send(req)
    r = out[0].body
    return r, {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in r.topics for p in t.partitions}


def codes(resp):
    return [p.error_code for t in resp.topics for p in t.partitions]


def reply(out, rid):
    return {e.request_id: e.body for e in out if isinstance(e, Reply)}[rid]


def test_commit_is_answered_after_the_write_and_then_fetchable():
    h = Harness()
    rid, out = h.send(commit({("t", 0): 42, ("t", 1): 7}, metadata="m"))
    assert not [e for e in out if isinstance(e, Reply)]
    (w,) = [e for e in out if isinstance(e, AppendRecords)]
    recs = [ot.decode_record(k, v) for k, v in w.records]
    assert recs[0].key == ot.OffsetCommitKey(GID, "t", 0)
    assert recs[0].value == ot.OffsetCommitValue(42, "m", 1_000, -1, None)
    assert fetch(h)[1] == {}                                   # not durable yet: not served
    r = reply(h.ack(out), rid)
    assert codes(r) == [E.NONE, E.NONE]
    assert fetch(h)[1] == {("t", 0): (42, "m"), ("t", 1): (7, "m")}
    assert fetch(h, [("t", 1), ("t", 5)])[1] == {("t", 1): (7, "m"), ("t", 5): (-1, "")}


@pytest.mark.parametrize("error,expected", [
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_FOR_PARTITION, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
    (E.CORRUPT_MESSAGE, E.UNKNOWN_SERVER_ERROR),
])
def test_failed_write_returns_error_and_leaves_cache(error, expected):
    h = Harness()
    h.ack(h.send(commit({("t", 0): 1}))[1])
    rid, out = h.send(commit({("t", 0): 99}))
    assert codes(reply(h.ack(out, error), rid)) == [expected]
    assert fetch(h)[1] == {("t", 0): (1, "")}


def test_metadata_too_large_is_per_partition():
    h = Harness(offset_metadata_max_bytes=4)
    req = commit({("t", 0): 5}, metadata="12345")
    req.topics[0].partitions.add(partition_index=1, committed_offset=6, committed_metadata="1234")
    rid, out = h.send(req)
    assert codes(reply(h.ack(out), rid)) == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert fetch(h)[1] == {("t", 1): (6, "1234")}
    rid, out = h.send(commit({("t", 0): 5}, metadata="é" * 3))   # 6 UTF-8 bytes
    assert codes(reply(out, rid)) == [E.OFFSET_METADATA_TOO_LARGE]


def test_not_coordinator_and_loading():
    h = Harness(shards=(), num_partitions=50)
    shard = ot.partition_for(GID, 50)
    rid, out = h.send(commit({("t", 0): 1}))
    assert codes(reply(out, rid)) == [E.NOT_COORDINATOR]
    h.core.handle(ShardLoadStarted(shard), h.now)
    rid, out = h.send(commit({("t", 0): 1}))
    assert reply(out, rid).error_code == E.OFFSETS_LOAD_IN_PROGRESS
    assert fetch(h)[0].error_code == E.OFFSETS_LOAD_IN_PROGRESS
    # the shard's records arrive, then the load completes
    key = ot.encode_key(ot.OffsetCommitKey(GID, "t", 0))
    h.core.replay(ot.StoredRecord(shard, 0, key, ot.encode_offset_value(ot.OffsetCommitValue(10, "a", 5))))
    h.core.replay(ot.StoredRecord(shard, 1, key, ot.encode_offset_value(ot.OffsetCommitValue(11, "b", 6))))
    h.core.handle(ShardLoadCompleted(shard), h.now)
    assert fetch(h)[1] == {("t", 0): (11, "b")}
    assert fetch(h, group="")[0].error_code == E.INVALID_GROUP_ID


@pytest.mark.parametrize("generation,member,expected", [
    (3, "m1", E.NONE),
    (2, "m1", E.ILLEGAL_GENERATION),
    (3, "ghost", E.UNKNOWN_MEMBER_ID),
    (-1, "", E.UNKNOWN_MEMBER_ID),              # standalone commit to an active group
    (4, "m1", E.COORDINATOR_LOAD_IN_PROGRESS),  # the coordinator's record is not read yet
])
def test_commits_checked_against_membership_from_group_records(generation, member, expected):
    h = Harness()
    h.group_record(3, ["m1", "m2"])
    rid, out = h.send(commit({("t", 0): 1}, generation, member))
    if expected == E.NONE:
        out = h.ack(out)
    assert codes(reply(out, rid)) == [expected]


@pytest.mark.parametrize("generation,member,expected", [
    (-1, "", E.NONE),                          # standalone consumer / admin reset
    (3, "m1", E.UNKNOWN_MEMBER_ID),
    (5, "", E.ILLEGAL_GENERATION),
    (5, "m9", E.COORDINATOR_LOAD_IN_PROGRESS),  # a generation this instance has not read yet
])
def test_commits_to_an_empty_group(generation, member, expected):
    h = Harness()
    h.group_record(3, ["m1"])
    h.group_record(4, [])                       # everyone left
    rid, out = h.send(commit({("t", 0): 1}, generation, member))
    out = h.ack(out)
    assert codes(reply(out, rid)) == [expected]


def test_membership_can_also_come_from_an_event():
    h = Harness()
    h.core.handle(GroupMembershipChanged(GID, 2, frozenset({"a"})), h.now)
    rid, out = h.send(commit({("t", 0): 1}))
    assert codes(reply(out, rid)) == [E.UNKNOWN_MEMBER_ID]
    h.core.handle(GroupMembershipChanged(GID, -1, frozenset()), h.now)
    rid, out = h.send(commit({("t", 0): 1}))
    assert codes(reply(h.ack(out), rid)) == [E.NONE]


def test_own_writes_are_not_regressed_by_the_tail():
    h = Harness()
    h.ack(h.send(commit({("t", 0): 1}))[1])
    h.ack(h.send(commit({("t", 0): 2}))[1])
    for off, (shard, k, v) in enumerate(h.log):          # the tail catches up afterwards
        h.core.replay(ot.StoredRecord(shard, off, k, v))
        assert fetch(h)[1] == {("t", 0): (2, "")}


def test_reload_from_log_rebuilds_the_cache():
    h = Harness()
    h.ack(h.send(commit({("t", 0): 5, ("u", 1): 6}, metadata="x"))[1])
    h.ack(h.send(commit({("t", 0): 8}))[1])
    fresh = Harness(shards=())
    fresh.core.handle(ShardLoadStarted(0), fresh.now)
    for off, (shard, k, v) in enumerate(h.log):
        fresh.core.replay(ot.StoredRecord(shard, off, k, v))
    fresh.core.handle(ShardLoadCompleted(0), fresh.now)
    assert fetch(fresh)[1] == fetch(h)[1] == {("t", 0): (8, ""), ("u", 1): (6, "x")}


def test_offsets_of_empty_groups_expire_and_active_ones_do_not():
    h = Harness(offsets_retention_minutes=10, offsets_retention_check_interval_ms=1)
    h.ack(h.send(commit({("t", 0): 1}))[1])                    # standalone, committed at 1_000
    h.group_record(1, ["m"])                                   # then a member joins: active
    h.now += 11 * MINUTE
    assert not [e for e in h.core.tick(h.now) if isinstance(e, AppendRecords)]
    h.group_record(2, [], ts=h.now)                            # group empties now
    h.now += 9 * MINUTE
    assert not h.core.tick(h.now)
    h.now += 1 * MINUTE
    out = h.core.tick(h.now)
    (w,) = out
    assert w.records == ((ot.encode_key(ot.OffsetCommitKey(GID, "t", 0)), None),)
    assert not h.core.tick(h.now + 1)                          # not re-emitted while in flight
    h.ack(out)
    assert fetch(h)[1] == {}
    assert GID not in h.core.offsets


def test_explicit_retention_uses_expire_timestamp():
    h = Harness(offsets_retention_check_interval_ms=1)
    rid, out = h.send(commit({("t", 0): 3}, retention=5_000))
    (w,) = out
    assert ot.decode_offset_value(w.records[0][1]).expire_timestamp_ms == 6_000
    h.ack(out)
    assert not h.core.tick(5_999)
    assert h.core.tick(6_000)


def test_failed_expiry_is_retried():
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1)
    h.ack(h.send(commit({("t", 0): 1}))[1])
    out = h.core.tick(h.now + MINUTE)
    h.ack(out, E.REQUEST_TIMED_OUT)
    assert fetch(h)[1] == {("t", 0): (1, "")}
    assert h.core.tick(h.now + MINUTE + 5)


def test_offset_delete_only_for_groups_without_members():
    h = Harness()
    h.ack(h.send(commit({("t", 0): 1, ("t", 1): 2}))[1])
    h.group_record(1, ["m"])
    req = o.OffsetDeleteRequest(group_id=GID, topics=[o.OffsetDeleteTopic(name="t", partition_indexes=[0])])
    rid, out = h.send(req)
    assert reply(out, rid).error_code == E.NON_EMPTY_GROUP
    h.group_record(2, [])
    rid, out = h.send(req)
    assert not [e for e in out if isinstance(e, Reply)]
    assert codes(reply(h.ack(out), rid)) == [E.NONE]
    assert fetch(h)[1] == {("t", 1): (2, "")}


def test_reset_offsets_of_inactive_group_is_a_standalone_commit():
    h = Harness()
    h.group_record(5, ["m"])
    h.ack(h.send(commit({("t", 0): 100}, 5, "m"))[1])
    h.group_record(6, [])
    rid, out = h.send(commit({("t", 0): 0}))                   # riverbed groups reset-offsets
    assert codes(reply(h.ack(out), rid)) == [E.NONE]
    assert fetch(h)[1] == {("t", 0): (0, "")}


def test_unload_fails_inflight_commits_and_drops_cache():
    h = Harness()
    h.ack(h.send(commit({("t", 0): 1}))[1])
    rid, out = h.send(commit({("t", 0): 2}))
    effects = h.core.handle(ShardUnloaded(0), h.now)
    assert codes(reply(effects, rid)) == [E.NOT_COORDINATOR]
    assert h.core.offsets == {}
    assert h.ack(out) == []


# ---- transactional commits (TXN_OFFSET_COMMIT) ------------------------------------------------

from riverbed._proto.v1 import transaction_pb2 as txp  # noqa: E402


def txn_commit(h, offset, pid=77, epoch=0, **kw):
    return h.send(txp.TxnOffsetCommitRequest(
        transactional_id="t", group_id=GID, producer_id=pid, producer_epoch=epoch,
        generation_id=kw.get("generation", -1), member_id=kw.get("member", ""),
        topics=[txp.TxnOffsetCommitTopic(name="t", partitions=[
            txp.TxnOffsetCommitPartition(partition_index=0, committed_offset=offset)])]))


def fetch_stable(h):
    rid, out = h.send(o.OffsetFetchRequest(group_id=GID, require_stable=True,
                                           topics=[o.OffsetFetchTopic(name="t",
                                                                      partition_indexes=[0])]))
    return out[0].body.topics[0].partitions[0]


def test_txn_offsets_are_pending_until_the_commit_marker():
    h = Harness()
    h.ack(h.send(o.OffsetCommitRequest(group_id=GID, generation_id=-1, topics=[
        o.OffsetCommitTopic(name="t", partitions=[o.OffsetCommitPartition(
            partition_index=0, committed_offset=5)])]))[1])
    rid, out = txn_commit(h, 42)
    (app,) = [e for e in out if isinstance(e, AppendRecords)]
    assert (app.producer_id, app.producer_epoch) == (77, 0)
    (reply,) = h.ack(out)
    assert reply.body.topics[0].partitions[0].error_code == E.NONE
    assert h.core.offsets[GID][("t", 0)].value.offset == 5        # not yet
    assert fetch_stable(h).error_code == E.UNSTABLE_OFFSET_COMMIT
    assert h.core.replay_control(ot.StoredControl(0, 99, 77, 0, commit=True)) == []
    h.core.check_invariants()
    assert h.core.offsets[GID][("t", 0)].value.offset == 42
    p = fetch_stable(h)
    assert (p.error_code, p.committed_offset) == (E.NONE, 42)


def test_txn_offsets_are_dropped_by_the_abort_marker():
    h = Harness()
    h.ack(txn_commit(h, 42)[1])
    h.core.replay_control(ot.StoredControl(0, 99, 77, 0, commit=False))
    assert GID not in h.core.offsets and not h.core.pending
    assert fetch_stable(h).committed_offset == -1


def test_txn_offsets_from_the_log_at_load_then_markers():
    h = Harness(shards=())
    h.core.handle(ShardLoadStarted(0), h.now)
    key = ot.encode_key(ot.OffsetCommitKey(GID, "t", 0))
    val = ot.encode_offset_value(ot.OffsetCommitValue(9, "", 1, -1, None))
    h.core.replay(ot.StoredRecord(0, 0, key, val, 5, 0))
    h.core.replay_control(ot.StoredControl(0, 1, 5, 0, commit=True))
    h.core.replay(ot.StoredRecord(0, 2, key, ot.encode_offset_value(
        ot.OffsetCommitValue(11, "", 1, -1, None)), 6, 0))
    h.core.handle(ShardLoadCompleted(0), h.now)
    h.core.check_invariants()
    assert h.core.offsets[GID][("t", 0)].value.offset == 9
    assert set(h.core.pending) == {6}
    h.core.handle(ShardUnloaded(0), h.now)
    assert not h.core.pending


def test_a_fenced_producers_txn_commit_is_producer_fenced():
    h = Harness()
    (reply,) = h.ack(txn_commit(h, 1)[1], error=E.INVALID_PRODUCER_EPOCH)
    assert reply.body.topics[0].partitions[0].error_code == E.PRODUCER_FENCED
    assert not h.core.pending


def test_txn_commit_with_group_metadata_is_checked_like_a_commit():
    h = Harness()
    h.group_record(3, ["m1"])
    rid, out = txn_commit(h, 1, generation=2, member="m1")
    assert out[0].body.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
    rid, out = txn_commit(h, 1, generation=3, member="zz")
    assert out[0].body.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
    (reply,) = h.ack(txn_commit(h, 1, generation=3, member="m1")[1])
    assert reply.body.topics[0].partitions[0].error_code == E.NONE


def _delete_groups(*tombstones):
    from riverbed._proto.v1 import group_pb2 as g
    return g.DeleteGroupsRequest(tombstones=[g.GroupTombstone(group_id=gid, log_offset=off)
                                             for gid, off in tombstones])


def test_delete_groups_deletes_the_offsets_committed_before_the_groups_tombstone():
    h = Harness()
    h.ack(h.send(commit({("t", 0): 1, ("t", 1): 2}))[1])
    h.group_record(1, [])
    tombstone_at = len(h.log)                  # the coordinator's tombstone would be here
    h.log.append((0, b"", None))
    h.ack(h.send(commit({("u", 0): 9}))[1])    # a commit after it (a new group of that name)
    rid, out = h.send(_delete_groups((GID, tombstone_at)))
    (w,) = [e for e in out if isinstance(e, AppendRecords)]
    assert all(v is None for _, v in w.records) and len(w.records) == 2
    (r,) = reply(h.ack(out), rid).results
    assert r.error_code == E.NONE
    assert fetch(h)[1] == {("u", 0): (9, "")}


def test_delete_groups_of_a_group_the_coordinator_did_not_know():
    h = Harness()
    rid, out = h.send(_delete_groups((GID, -1)))
    assert reply(out, rid).results[0].error_code == E.GROUP_ID_NOT_FOUND
    h.ack(h.send(commit({("t", 0): 1}))[1])    # a standalone consumer's commits only
    rid, out = h.send(_delete_groups((GID, -1)))
    assert reply(h.ack(out), rid).results[0].error_code == E.NONE
    assert fetch(h)[1] == {}
    # a failed write deletes nothing and says so
    h.ack(h.send(commit({("t", 0): 1}))[1])
    rid, out = h.send(_delete_groups((GID, -1)))
    assert reply(h.ack(out, E.NOT_ENOUGH_REPLICAS), rid).results[0].error_code != E.NONE
    assert fetch(h)[1] == {("t", 0): (1, "")}


def test_delete_groups_of_several_shards_is_refused_whole():
    h = Harness(shards=(0, 1), num_partitions=2)
    a, b = "a", "b"
    from riverbed.coordinator.offsets_topic import partition_for
    assert partition_for(a, 2) != partition_for(b, 2)
    rid, out = h.send(_delete_groups((a, -1), (b, -1)))
    assert {r.error_code for r in reply(out, rid).results} == {E.INVALID_REQUEST}
