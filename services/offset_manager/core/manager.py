"""The offset manager core: Kafka's offset half of GroupMetadataManager, pure.

Surface: `handle(event, now_ms) -> list[Effect]`, `tick(now_ms) -> list[Effect]`,
`replay(record)`, `check_invariants()`.

Commits become offset-commit records for __consumer_offsets (partition = the group's shard); the
reply waits for the write (acks=all). On success the written records go through `replay` — the
same door as loading — so the cache only ever holds what is durable. A failed write answers the
mapped coordinator error and leaves the cache unchanged.

Group membership (generation, member ids) comes from the group-metadata records of the same
shard (`replay`), or from GroupMembershipChanged. A commit for a group with members must name a
member and the current generation; a generation newer than the one known here means this
instance has not yet read the coordinator's record: COORDINATOR_LOAD_IN_PROGRESS (retriable).

Transactional commits (TXN_OFFSET_COMMIT, KIP-98/447; Kafka's pendingTransactionalOffsetCommits):
the offsets are written as a transactional batch of the producer (id and epoch; the storage node
refuses an older epoch: PRODUCER_FENCED) and kept aside as pending, per producer. The
transaction coordinator's marker in the same partition reaches this core through the tail
(`replay_control`): COMMIT moves the producer's pending offsets into the cache (unless a later
commit replaced one already), ABORT drops them. Loading a shard does the same from the log.
OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition with a pending
transactional offset, so a read_committed consumer never resumes from an offset a transaction
is about to replace.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from riverbed._proto.v1 import group_pb2, offset_pb2, transaction_pb2
from riverbed.coordinator import offsets_topic as ot
from riverbed.errors import ErrorCode as E
from services.offset_manager.config import OffsetManagerConfig
from services.offset_manager.core.effects import AppendRecords, Effect, Reply
from services.offset_manager.core.events import (
    Event, GroupMembershipChanged, RequestReceived, ShardLoadCompleted, ShardLoadStarted,
    ShardUnloaded, WriteCompleted,
)

log = logging.getLogger(__name__)
TP = tuple[str, int]


@dataclass(slots=True)
class CachedOffset:
    value: ot.OffsetCommitValue
    log_offset: int


@dataclass(slots=True)
class Membership:
    generation: int
    member_ids: frozenset[str]
    state_timestamp_ms: int
    log_offset: int = -1


@dataclass(slots=True)
class _PendingWrite:
    shard: int
    records: tuple[tuple[bytes, bytes | None], ...]
    request_id: int | None               # None for expiry tombstones
    kind: str                            # "commit" | "delete" | "expire" | "txn_commit"
    response: object = None              # the response to fill and send
    slots: list = field(default_factory=list)   # per record: the partition response to set
    keys: list = field(default_factory=list)    # per record: (group, tp)
    producer: tuple[int, int] = (-1, -1)        # txn_commit: the producer id and epoch


class OffsetManagerCore:
    def __init__(self, config: OffsetManagerConfig):
        self.config = config
        self.shards: dict[int, bool] = {}                   # shard -> loaded
        self.offsets: dict[str, dict[TP, CachedOffset]] = {}
        self.groups: dict[str, Membership] = {}
        # transactional offsets waiting for their transaction's marker:
        # producer id -> (group, (topic, partition)) -> the offset and its log offset
        self.pending: dict[int, dict[tuple[str, TP], CachedOffset]] = {}
        self._writes: dict[int, _PendingWrite] = {}
        self._expiring: set[tuple[str, TP]] = set()
        self._next_write_id = 1
        self._next_expiry_check_ms: int | None = None
        # Log offsets of records this core wrote and already applied on acknowledgement, per
        # shard: the tail of the partition skips them (so a later tail record never regresses
        # what an earlier ack applied). Pruned as the tail passes them.
        self._own_offsets: dict[int, set[int]] = {}

    def _shard_of(self, group_id: str) -> int:
        return ot.partition_for(group_id, self.config.offsets_topic_num_partitions)

    # ------------------------------------------------------------------ surface

    def handle(self, event: Event, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        if isinstance(event, RequestReceived):
            self._on_request(event, now_ms, out)
        elif isinstance(event, WriteCompleted):
            self._on_write_completed(event, out)
        elif isinstance(event, ShardLoadStarted):
            self._unload(event.shard, out)
            self.shards[event.shard] = False
        elif isinstance(event, ShardLoadCompleted):
            self.shards[event.shard] = True
        elif isinstance(event, ShardUnloaded):
            self._unload(event.shard, out)
            self.shards.pop(event.shard, None)
        elif isinstance(event, GroupMembershipChanged):
            if event.generation < 0 and not event.member_ids:
                self.groups.pop(event.group_id, None)
            else:
                self.groups[event.group_id] = Membership(event.generation, event.member_ids,
                                                         event.state_timestamp_ms)
        else:
            raise TypeError(f"unknown event {event!r}")
        return out

    def tick(self, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        if self._next_expiry_check_ms is not None and now_ms < self._next_expiry_check_ms:
            return out
        self._next_expiry_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
        retention_ms = self.config.offsets_retention_minutes * 60_000
        by_shard: dict[int, list[tuple[str, TP]]] = {}
        for group_id in sorted(self.offsets):
            shard = self._shard_of(group_id)
            if not self.shards.get(shard):
                continue
            m = self.groups.get(group_id)
            if m is not None and m.member_ids:
                continue                                  # an active group keeps its offsets
            for tp, c in sorted(self.offsets[group_id].items()):
                if (group_id, tp) in self._expiring:
                    continue
                v = c.value
                if v.expire_timestamp_ms is not None:
                    expired = v.expire_timestamp_ms <= now_ms
                else:
                    base = v.commit_timestamp_ms
                    if m is not None and m.state_timestamp_ms > base:
                        base = m.state_timestamp_ms       # when the group became empty
                    expired = base + retention_ms <= now_ms
                if expired:
                    by_shard.setdefault(shard, []).append((group_id, tp))
        for shard, keys in sorted(by_shard.items()):
            pw = _PendingWrite(shard, tuple((ot.encode_key(ot.OffsetCommitKey(g, t, p)), None)
                                            for g, (t, p) in keys), None, "expire", keys=list(keys))
            self._expiring.update(keys)
            self._append(pw, out)
        return out

    def replay(self, record: ot.StoredRecord) -> None:
        """Apply one __consumer_offsets record read from the log (loading, then tailing), in log
        order. Records this core wrote were applied when acknowledged and are skipped here."""
        own = self._own_offsets.get(record.shard)
        if own and record.offset >= 0:
            if record.offset in own:
                own.discard(record.offset)
                return
            own.difference_update([o for o in own if o < record.offset])
        self._apply(record)

    def replay_control(self, control: ot.StoredControl) -> list[Effect]:
        """A transaction marker in an owned shard (tail or load): the producer's pending
        offsets of that shard are committed (into the cache, each unless a later commit of the
        same partition is there) or dropped."""
        out: list[Effect] = []
        if control.shard not in self.shards:
            return out
        pending = self.pending.get(control.producer_id)
        if not pending:
            return out
        done = [k for k in pending if self._shard_of(k[0]) == control.shard]
        for key in done:
            c = pending.pop(key)
            if not control.commit:
                continue
            group_id, tp = key
            cache = self.offsets.setdefault(group_id, {})
            old = cache.get(tp)
            if old is None or old.log_offset < c.log_offset:
                cache[tp] = c
        if not pending:
            del self.pending[control.producer_id]
        return out

    def _apply(self, record: ot.StoredRecord) -> None:
        try:
            rec = ot.decode_record(record.key, record.value)
        except ot.OffsetsTopicFormatError:
            log.warning("shard %d offset %d: undecodable record skipped", record.shard, record.offset)
            return
        if isinstance(rec.key, ot.OffsetCommitKey) and record.producer_id >= 0:
            if isinstance(rec.value, ot.OffsetCommitValue):     # a transaction's offset
                self.pending.setdefault(record.producer_id, {})[
                    (rec.key.group, (rec.key.topic, rec.key.partition))] = \
                    CachedOffset(rec.value, record.offset)
            return
        if isinstance(rec.key, ot.OffsetCommitKey):
            tp = (rec.key.topic, rec.key.partition)
            cache = self.offsets.setdefault(rec.key.group, {})
            old = cache.get(tp)
            if old is not None and record.offset >= 0 and record.offset <= old.log_offset:
                return                                    # seen already
            if rec.value is None:
                cache.pop(tp, None)
                if not cache:
                    del self.offsets[rec.key.group]
            else:
                assert isinstance(rec.value, ot.OffsetCommitValue)
                cache[tp] = CachedOffset(rec.value, record.offset)
            return
        group_id = rec.key.group
        m = self.groups.get(group_id)
        if m is not None and record.offset >= 0 and record.offset <= m.log_offset:
            return
        if rec.value is None:
            self.groups.pop(group_id, None)
        else:
            assert isinstance(rec.value, ot.GroupMetadataValue)
            v = rec.value
            self.groups[group_id] = Membership(v.generation, frozenset(mm.member_id for mm in v.members),
                                               v.current_state_timestamp_ms, record.offset)

    def check_invariants(self) -> None:
        for g in self.offsets:
            if self._shard_of(g) not in self.shards:
                raise AssertionError(f"offsets of group {g} cached for a shard not owned")
            if not self.offsets[g]:
                raise AssertionError(f"empty offset map kept for group {g}")
        for wid, pw in self._writes.items():
            if pw.shard not in self.shards:
                raise AssertionError(f"write {wid} pending for a shard not owned")
        for pid, pending in self.pending.items():
            if not pending:
                raise AssertionError(f"empty pending map kept for producer {pid}")
            for g, _ in pending:
                if self._shard_of(g) not in self.shards:
                    raise AssertionError(f"pending offsets of group {g} for a shard not owned")

    # ------------------------------------------------------------------ shards

    def _unload(self, shard: int, out: list[Effect]) -> None:
        for g in [g for g in self.offsets if self._shard_of(g) == shard]:
            del self.offsets[g]
        for g in [g for g in self.groups if self._shard_of(g) == shard]:
            del self.groups[g]
        self._expiring = {k for k in self._expiring if self._shard_of(k[0]) != shard}
        for pid in list(self.pending):
            pending = self.pending[pid]
            for key in [k for k in pending if self._shard_of(k[0]) == shard]:
                del pending[key]
            if not pending:
                del self.pending[pid]
        self._own_offsets.pop(shard, None)
        for wid in [w for w, pw in self._writes.items() if pw.shard == shard]:
            pw = self._writes.pop(wid)
            self._fail(pw, E.NOT_COORDINATOR, "shard moved", out)

    def _shard_error(self, group_id: str) -> tuple[int, str] | None:
        if not group_id:
            return E.INVALID_GROUP_ID, "group id is empty"
        shard = self._shard_of(group_id)
        loaded = self.shards.get(shard)
        if loaded is None:
            return E.NOT_COORDINATOR, f"shard {shard} is not served here"
        if not loaded:
            return E.OFFSETS_LOAD_IN_PROGRESS, f"shard {shard} is loading"
        return None

    # ------------------------------------------------------------------ requests

    def _on_request(self, ev: RequestReceived, now_ms: int, out: list[Effect]) -> None:
        b = ev.body
        if isinstance(b, offset_pb2.OffsetCommitRequest):
            self._commit(ev.request_id, b, now_ms, out)
        elif isinstance(b, offset_pb2.OffsetFetchRequest):
            out.append(Reply(ev.request_id, self._fetch(b)))
        elif isinstance(b, offset_pb2.OffsetDeleteRequest):
            self._delete(ev.request_id, b, out)
        elif isinstance(b, transaction_pb2.TxnOffsetCommitRequest):
            self._txn_commit(ev.request_id, b, now_ms, out)
        elif isinstance(b, group_pb2.DeleteGroupsRequest):
            self._delete_groups(ev.request_id, b, out)
        else:
            raise TypeError(f"not an offset request: {type(b).__name__}")

    def _membership_error(self, req) -> tuple[int, str] | None:
        """`req`: an OffsetCommitRequest or TxnOffsetCommitRequest (group id, generation, member)."""
        m = self.groups.get(req.group_id)
        active = m is not None and bool(m.member_ids)
        if not active:
            if req.generation_id < 0 and not req.member_id:
                return None                                   # standalone consumer / admin reset
            if not req.member_id:
                return E.ILLEGAL_GENERATION, "a standalone commit needs generation_id -1"
            if req.generation_id > (m.generation if m is not None else 0):
                return (E.COORDINATOR_LOAD_IN_PROGRESS,
                        "generation not yet known here (the group's record is still being read)")
            return E.UNKNOWN_MEMBER_ID, "the group has no members"
        assert m is not None
        if req.generation_id > m.generation:
            return (E.COORDINATOR_LOAD_IN_PROGRESS,
                    "generation not yet known here (the group's record is still being read)")
        if req.member_id not in m.member_ids:
            return E.UNKNOWN_MEMBER_ID, f"member {req.member_id!r} is not in the group"
        if req.generation_id != m.generation:
            return E.ILLEGAL_GENERATION, f"generation {req.generation_id} is not {m.generation}"
        return None

    def _commit(self, rid: int, req: offset_pb2.OffsetCommitRequest, now_ms: int, out: list[Effect]) -> None:
        resp = offset_pb2.OffsetCommitResponse()
        expire = now_ms + req.retention_time_ms if req.retention_time_ms > 0 else None
        self._write_offsets(rid, req, resp, "commit", now_ms, expire, out)

    def _txn_commit(self, rid: int, req: transaction_pb2.TxnOffsetCommitRequest, now_ms: int,
                    out: list[Effect]) -> None:
        """TXN_OFFSET_COMMIT: the offsets as a transactional batch of the producer; pending
        once written (see the module doc)."""
        self._write_offsets(rid, req, transaction_pb2.TxnOffsetCommitResponse(), "txn_commit",
                            now_ms, None, out)

    def _write_offsets(self, rid: int, req, resp, kind: str, now_ms: int, expire: int | None,
                       out: list[Effect]) -> None:
        """OFFSET_COMMIT and TXN_OFFSET_COMMIT: the checks, then one write of the offset records
        (a transactional batch of the producer for a TXN_OFFSET_COMMIT); answered after it."""
        slots = []
        for t in req.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partitions:
                slots.append((t.name, p, tr.partitions.add(partition_index=p.partition_index)))
        transactional = kind == "txn_commit"
        err = self._shard_error(req.group_id)
        if err is None and (not transactional or req.generation_id >= 0 or req.member_id):
            err = self._membership_error(req)
        if err is None and transactional and (req.producer_id < 0 or
                                              not 0 <= req.producer_epoch <= 32767):
            err = (E.INVALID_REQUEST, "a transactional commit needs a producer id and epoch")
        if err:
            if not transactional:
                resp.error_code, resp.error_message = err
            for _, _, s in slots:
                s.error_code, s.error_message = err
            out.append(Reply(rid, resp))
            return
        pw = _PendingWrite(self._shard_of(req.group_id), (), rid, kind, resp)
        records = []
        limit = self.config.offset_metadata_max_bytes
        for topic, p, s in slots:
            if len(p.committed_metadata.encode("utf-8")) > limit:
                s.error_code = E.OFFSET_METADATA_TOO_LARGE
                s.error_message = f"metadata over offset.metadata.max.bytes={limit}"
                continue
            value = ot.OffsetCommitValue(p.committed_offset, p.committed_metadata, now_ms,
                                         p.committed_leader_epoch if p.committed_leader_epoch
                                         else -1, expire)
            key = ot.OffsetCommitKey(req.group_id, topic, p.partition_index)
            records.append((ot.encode_key(key), ot.encode_offset_value(value)))
            pw.slots.append(s)
            pw.keys.append((req.group_id, (topic, p.partition_index)))
        if not records:
            out.append(Reply(rid, resp))
            return
        pw.records = tuple(records)
        if transactional:
            pw.producer = (req.producer_id, req.producer_epoch)
        self._append(pw, out)

    def _fetch(self, req: offset_pb2.OffsetFetchRequest) -> offset_pb2.OffsetFetchResponse:
        resp = offset_pb2.OffsetFetchResponse()
        err = self._shard_error(req.group_id)
        if err:
            resp.error_code, resp.error_message = err
            for t in req.topics:
                tr = resp.topics.add(name=t.name)
                for p in t.partition_indexes:
                    tr.partitions.add(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                      error_code=err[0], error_message=err[1])
            return resp
        cache = self.offsets.get(req.group_id, {})
        wanted: list[tuple[str, list[int]]]
        if req.topics:
            wanted = [(t.name, list(t.partition_indexes)) for t in req.topics]
        else:
            by: dict[str, list[int]] = {}
            for (t, p) in sorted(cache):
                by.setdefault(t, []).append(p)
            wanted = list(by.items())
        unstable: set[TP] = set()
        if req.require_stable:
            for pending in self.pending.values():
                unstable.update(tp for g, tp in pending if g == req.group_id)
        for topic, parts in wanted:
            tr = resp.topics.add(name=topic)
            for p in parts:
                c = cache.get((topic, p))
                if (topic, p) in unstable:
                    tr.partitions.add(partition_index=p, committed_offset=-1,
                                      committed_leader_epoch=-1,
                                      error_code=E.UNSTABLE_OFFSET_COMMIT,
                                      error_message="a transactional commit of this partition "
                                                    "is not yet committed or aborted")
                elif c is None:
                    tr.partitions.add(partition_index=p, committed_offset=-1, committed_leader_epoch=-1)
                else:
                    tr.partitions.add(partition_index=p, committed_offset=c.value.offset,
                                      committed_leader_epoch=c.value.leader_epoch, metadata=c.value.metadata)
        return resp

    def _delete(self, rid: int, req: offset_pb2.OffsetDeleteRequest, out: list[Effect]) -> None:
        resp = offset_pb2.OffsetDeleteResponse()
        slots = []
        for t in req.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partition_indexes:
                slots.append((t.name, p, tr.partitions.add(partition_index=p)))
        err = self._shard_error(req.group_id)
        m = self.groups.get(req.group_id)
        if err is None and m is not None and m.member_ids:
            err = (E.NON_EMPTY_GROUP, "the group has members")
        if err:
            resp.error_code, resp.error_message = err
            for *_, s in slots:
                s.error_code, s.error_message = err
            out.append(Reply(rid, resp))
            return
        cache = self.offsets.get(req.group_id, {})
        pw = _PendingWrite(self._shard_of(req.group_id), (), rid, "delete", resp)
        records = []
        for topic, p, s in slots:
            if (topic, p) in cache:
                records.append((ot.encode_key(ot.OffsetCommitKey(req.group_id, topic, p)), None))
                pw.slots.append(s)
                pw.keys.append((req.group_id, (topic, p)))
        if not records:
            out.append(Reply(rid, resp))
            return
        pw.records = tuple(records)
        self._append(pw, out)

    def _delete_groups(self, rid: int, req: group_pb2.DeleteGroupsRequest, out: list[Effect]) -> None:
        """DeleteGroups' second step (the gateway's, after the group coordinator's): each
        group's offsets committed before its tombstone are deleted (all of them for a group the
        coordinator did not know, log_offset -1: GROUP_ID_NOT_FOUND when it had none either)."""
        resp = group_pb2.DeleteGroupsResponse()
        if len({self._shard_of(t.group_id) for t in req.tombstones}) > 1:
            resp.error_code, resp.error_message = E.INVALID_REQUEST, "groups of several shards"
            for t in req.tombstones:
                resp.results.add(group_id=t.group_id, tombstone_offset=t.log_offset,
                                 error_code=resp.error_code, error_message=resp.error_message)
            out.append(Reply(rid, resp))
            return
        shard = -1
        pw = _PendingWrite(shard, (), rid, "delete", resp)
        records = []
        for t in req.tombstones:
            r = resp.results.add(group_id=t.group_id, tombstone_offset=t.log_offset)
            err = self._shard_error(t.group_id)
            m = self.groups.get(t.group_id)
            if err is None and t.log_offset < 0 and m is not None and m.member_ids:
                err = (E.NON_EMPTY_GROUP, "the group has members")
            if err is not None:
                r.error_code, r.error_message = err
                continue
            cache = self.offsets.get(t.group_id, {})
            # Commits after the tombstone (a new group of the same name) are kept; one applied
            # without a known offset counts as older.
            doomed = sorted(tp for tp, c in cache.items()
                            if t.log_offset < 0 or c.log_offset < t.log_offset)
            if not doomed and t.log_offset < 0:
                r.error_code, r.error_message = E.GROUP_ID_NOT_FOUND, f"group {t.group_id!r} does not exist"
                continue
            shard = self._shard_of(t.group_id)
            for topic, p in doomed:
                records.append((ot.encode_key(ot.OffsetCommitKey(t.group_id, topic, p)), None))
                pw.slots.append(r)
                pw.keys.append((t.group_id, (topic, p)))
        if not records:
            out.append(Reply(rid, resp))
            return
        pw.shard = shard
        pw.records = tuple(records)
        self._append(pw, out)

    # ------------------------------------------------------------------ writes

    def _append(self, pw: _PendingWrite, out: list[Effect]) -> None:
        wid = self._next_write_id
        self._next_write_id += 1
        self._writes[wid] = pw
        pid, epoch = pw.producer
        out.append(AppendRecords(wid, pw.shard, pw.records, pid, epoch))

    def _fail(self, pw: _PendingWrite, code: int, msg: str, out: list[Effect]) -> None:
        self._expiring.difference_update(pw.keys)
        if pw.request_id is None:
            return
        for s in pw.slots:
            s.error_code, s.error_message = code, msg
        out.append(Reply(pw.request_id, pw.response))

    def _on_write_completed(self, ev: WriteCompleted, out: list[Effect]) -> None:
        pw = self._writes.pop(ev.write_id, None)
        if pw is None:
            return
        if ev.error_code != E.NONE:
            code = ot.coordinator_error_for_append(ev.error_code)
            if pw.kind == "txn_commit" and ev.error_code in (E.INVALID_PRODUCER_EPOCH,
                                                             E.PRODUCER_FENCED):
                code = E.PRODUCER_FENCED     # a newer instance of the transactional id wrote
            log.warning("shard %d: write of %d %s records failed (%d)", pw.shard, len(pw.records), pw.kind,
                        ev.error_code)
            self._fail(pw, code, f"writing to __consumer_offsets failed ({E.Name(ev.error_code)})", out)
            return
        pid, epoch = pw.producer
        for i, (key, value) in enumerate(pw.records):
            offset = ev.base_offset + i if ev.base_offset >= 0 else -1
            if offset >= 0:
                self._own_offsets.setdefault(pw.shard, set()).add(offset)
            self._apply(ot.StoredRecord(pw.shard, offset, key, value, pid, epoch))
        self._expiring.difference_update(pw.keys)
        if pw.request_id is not None:
            out.append(Reply(pw.request_id, pw.response))
