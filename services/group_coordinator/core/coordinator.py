"""The group coordinator core: Kafka's GroupCoordinator + GroupMetadataManager, pure.

Surface: `handle(event, now_ms) -> list[Effect]`, `tick(now_ms) -> list[Effect]`,
`replay(record)` (loading a shard), `check_invariants()`. See README.md for the flows.

Heartbeats may be long-polled (HeartbeatRequest.max_wait_ms > 0): a valid heartbeat of a Stable
group renews the session on arrival and is then parked on its member, answered NONE by `tick` when
its wait ends, or at once when the group leaves Stable (REBALANCE_IN_PROGRESS), the member goes
(UNKNOWN_MEMBER_ID), the shard goes (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS) or the
coordinator stops (COORDINATOR_NOT_AVAILABLE): survivors learn of a rebalance the moment it
begins instead of at their next heartbeat.

Riverbed computes assignments here (riverbed.coordinator.assignors) when the join phase
completes; the new generation is written to __consumer_offsets (partition = the group's shard)
and only then are the joins answered — the same bytes are applied through `_apply_group_value`,
the door `replay` uses when a shard loads.

The core's parts live beside it, one seam each, as mixins that never import this module:
rebalancing (the join phase and new generations), group_records (the group's record in
__consumer_offsets: writes, their outcome, expiry), group_admin (DescribeGroups, ListGroups,
DeleteGroups, FindCoordinator); subscription_pb converts the consumer protocol to group.proto.
"""
from __future__ import annotations

import logging
import random
import re
import uuid
from dataclasses import dataclass

from riverbed._proto.v1 import group_pb2
from riverbed.coordinator import offsets_topic as ot
from riverbed.coordinator.assignors import ASSIGNORS
from riverbed.coordinator.consumer_protocol import TopicPartition
from riverbed.errors import ErrorCode as E
from services.group_coordinator.config import GroupCoordinatorConfig
from services.group_coordinator.core.effects import Effect, Reply
from services.group_coordinator.core.events import (
    CoordinatorStopping, Event, RequestReceived, ShardLoadCompleted, ShardLoadStarted,
    ShardUnloaded, TopicMetadataChanged, WriteCompleted,
)
from services.group_coordinator.core.group import Group, Member, PendingWrite
from services.group_coordinator.core.group_admin import GroupAdmin
from services.group_coordinator.core.group_records import GroupRecords
from services.group_coordinator.core.rebalancing import InvariantViolation, Rebalancing, _invariant
from services.group_coordinator.core.states import GroupState
from services.group_coordinator.core.subscription_pb import (  # noqa: F401 - re-exported
    CONSUMER_PROTOCOL_TYPE, EMPTY_SUBSCRIPTION, assignment_to_pb, subscription_from_pb,
    subscription_to_pb)

__all__ = ["GroupCoordinatorCore", "InvariantViolation", "CONSUMER_PROTOCOL_TYPE",
           "HEARTBEAT_WAIT_SESSION_DIVISOR", "subscription_from_pb", "subscription_to_pb",
           "assignment_to_pb", "EMPTY_SUBSCRIPTION"]

log = logging.getLogger(__name__)
S = GroupState
# A parked heartbeat waits at most this fraction of its member's session.timeout.ms: the member's
# next heartbeat is sent only after the answer, so the wait must leave room for it (Kafka's advice
# for heartbeat.interval.ms: no more than a third of the session timeout).
HEARTBEAT_WAIT_SESSION_DIVISOR = 3


def _heartbeat_reply(rid: int, code: int, msg: str = "") -> Reply:
    return Reply(rid, group_pb2.HeartbeatResponse(error_code=code, error_message=msg))


@dataclass(slots=True)
class _Shard:
    loaded: bool = False


class GroupCoordinatorCore(Rebalancing, GroupRecords, GroupAdmin):
    def __init__(self, config: GroupCoordinatorConfig, rng: random.Random):
        self.config = config
        self.rng = rng
        self.shards: dict[int, _Shard] = {}
        self.groups: dict[str, Group] = {}
        # Totals for the metrics: rebalances completed (to Stable) and their summed duration.
        self.rebalances = 0
        self.rebalance_ms_total = 0
        self.topics: dict[str, int] = {}              # topic -> partition count
        self._writes: dict[int, PendingWrite] = {}
        self._next_write_id = 1
        self._next_retention_check_ms: int | None = None
        self.parked_heartbeats = 0             # members with a heartbeat_request, over all groups
        self.stopping = False                  # CoordinatorStopping seen: no heartbeat parks now

    # ------------------------------------------------------------------ surface

    def handle(self, event: Event, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        if isinstance(event, RequestReceived):
            self._on_request(event, now_ms, out)
        elif isinstance(event, WriteCompleted):
            self._on_write_completed(event, now_ms, out)
        elif isinstance(event, TopicMetadataChanged):
            self._on_metadata(event, now_ms, out)
        elif isinstance(event, ShardLoadStarted):
            self._unload(event.shard, out, E.COORDINATOR_LOAD_IN_PROGRESS)
            self.shards[event.shard] = _Shard(loaded=False)
        elif isinstance(event, ShardLoadCompleted):
            self._on_loaded(event.shard, now_ms)
        elif isinstance(event, ShardUnloaded):
            self._unload(event.shard, out, E.NOT_COORDINATOR)
            self.shards.pop(event.shard, None)
        elif isinstance(event, CoordinatorStopping):
            self.stopping = True
            for group in self.groups.values():
                for m in group.members.values():
                    self._answer_heartbeat(m, E.COORDINATOR_NOT_AVAILABLE,
                                           "the group coordinator is stopping", out)
        else:
            raise TypeError(f"unknown event {event!r}")
        return out

    def tick(self, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        for group in list(self.groups.values()):
            if not self._loaded(group.shard):
                continue
            for m in group.members.values():
                if m.heartbeat_answer_ms is not None and m.heartbeat_answer_ms <= now_ms:
                    self._answer_heartbeat(m, E.NONE, "", out)      # its wait ended: all is well
            for m in list(group.members.values()):
                if (m.join_request is None and m.sync_request is None
                        and m.heartbeat_deadline_ms is not None and m.heartbeat_deadline_ms <= now_ms):
                    log.info("[group=%s gen=%d] member %s session expired", group.group_id,
                             group.generation_id, m.member_id)
                    self._remove_member(group, m.member_id, now_ms, out)
            if group.initial_join_deadline_ms is not None and group.initial_join_deadline_ms <= now_ms:
                group.initial_join_deadline_ms = None
                self._maybe_complete_join(group, now_ms, out)
            if (group.state is S.PREPARING_REBALANCE and group.rebalance_deadline_ms is not None
                    and group.rebalance_deadline_ms <= now_ms):
                self._complete_join(group, now_ms, out, timed_out=True)
        if self._next_retention_check_ms is None or now_ms >= self._next_retention_check_ms:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
            self._expire_empty_groups(now_ms, out)
        return out

    def replay(self, record: ot.StoredRecord) -> None:
        """Apply one __consumer_offsets record of a shard being loaded (offset commits ignored)."""
        try:
            key = ot.decode_key(record.key)
        except ot.OffsetsTopicFormatError:
            log.warning("shard %d offset %d: undecodable key skipped", record.shard, record.offset)
            return
        if not isinstance(key, ot.GroupMetadataKey):
            return
        group = self.groups.get(key.group)
        if group is not None and 0 <= record.offset <= group.log_offset:
            return                                     # already applied (idempotent replay)
        if record.value is None:
            self.groups.pop(key.group, None)
            return
        value = ot.decode_group_value(record.value)
        group = Group(key.group, record.shard)
        self.groups[key.group] = group
        self._apply_group_value(group, value, live=False)
        group.log_offset = record.offset

    def check_invariants(self) -> None:
        for gid, g in self.groups.items():
            _invariant(g.group_id == gid, "group keyed by its id")
            _invariant(g.shard == ot.partition_for(gid, self.config.offsets_topic_num_partitions),
                       f"group {gid} in the wrong shard")
            _invariant(g.shard in self.shards, f"group {gid} of a shard not owned")
            _invariant(g.state is not S.DEAD, "dead groups are removed")
            _invariant(g.state is not S.EMPTY or not g.members, f"empty group {gid} has members")
            completing = g.state is S.COMPLETING_REBALANCE
            _invariant(not completing or g.pending_write is not None or g.client_assignment,
                       f"group {gid} completing without a write in flight")
            _invariant(g.pending_assignment_data is None or g.pending_write is not None,
                       f"group {gid}: the leader's assignment held without a write")
            _invariant(not g.delete_waiters or (g.state is S.EMPTY and g.pending_write is not None),
                       f"group {gid}: a delete waits without a tombstone in flight")
            if g.state is S.STABLE:
                seen: set[TopicPartition] = set()
                for m in g.members.values():
                    _invariant(not (seen & set(m.assignment)), f"group {gid}: partition twice")
                    seen |= set(m.assignment)
                _invariant(g.leader_id in g.members, f"stable group {gid} without a leader")
            for m in g.members.values():
                parked = m.heartbeat_request is not None
                _invariant(parked == (m.heartbeat_answer_ms is not None),
                           f"group {gid}: member {m.member_id} parked heartbeat without a deadline")
                _invariant(not parked or g.state is S.STABLE,
                           f"group {gid}: a heartbeat parked in state {g.state.value}")
        parked = sum(m.heartbeat_request is not None for g in self.groups.values()
                     for m in g.members.values())
        _invariant(parked == self.parked_heartbeats,
                   f"{self.parked_heartbeats} parked heartbeats counted, {parked} held by members")
        _invariant(parked <= self.config.group_max_parked_heartbeats, "too many parked heartbeats")

    # ------------------------------------------------------------------ shards

    def _loaded(self, shard: int) -> bool:
        s = self.shards.get(shard)
        return s is not None and s.loaded

    def _on_loaded(self, shard: int, now_ms: int) -> None:
        s = self.shards.setdefault(shard, _Shard())
        s.loaded = True
        for g in self.groups.values():
            if g.shard == shard:
                for m in g.members.values():
                    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        log.info("shard %d loaded", shard)

    def _unload(self, shard: int, out: list[Effect], heartbeat_code: int) -> None:
        """Forget the shard's groups; what waits is answered (a parked heartbeat with the error a
        heartbeat arriving now would get)."""
        for gid in [gid for gid, g in self.groups.items() if g.shard == shard]:
            g = self.groups.pop(gid)
            for waiter in g.delete_waiters:
                self._deleted(waiter, gid, E.NOT_COORDINATOR, "shard moved", -1, out)
            g.delete_waiters = []
            for m in g.members.values():
                self._answer_heartbeat(m, heartbeat_code, "shard moved", out)
                if m.join_request is not None:
                    out.append(Reply(m.join_request, self._join_error(E.NOT_COORDINATOR, "shard moved")))
                if m.sync_request is not None:
                    out.append(Reply(m.sync_request, self._sync_error(E.NOT_COORDINATOR, "shard moved")))
        for wid in [w for w, pw in self._writes.items() if pw.group_id not in self.groups]:
            del self._writes[wid]

    def _shard_error(self, group_id: str) -> tuple[int, str] | None:
        if not group_id:
            return E.INVALID_GROUP_ID, "group id is empty"
        shard = ot.partition_for(group_id, self.config.offsets_topic_num_partitions)
        s = self.shards.get(shard)
        if s is None:
            return E.NOT_COORDINATOR, f"shard {shard} is not served here"
        if not s.loaded:
            return E.COORDINATOR_LOAD_IN_PROGRESS, f"shard {shard} is loading"
        return None

    # ------------------------------------------------------------------ requests

    def _on_request(self, ev: RequestReceived, now_ms: int, out: list[Effect]) -> None:
        b = ev.body
        if isinstance(b, group_pb2.JoinGroupRequest):
            self._join(ev, b, now_ms, out)
        elif isinstance(b, group_pb2.SyncGroupRequest):
            self._sync(ev.request_id, b, now_ms, out)
        elif isinstance(b, group_pb2.HeartbeatRequest):
            self._heartbeat(ev.request_id, b, now_ms, out)
        elif isinstance(b, group_pb2.LeaveGroupRequest):
            code, msg = self._leave(b, now_ms, out)
            out.append(Reply(ev.request_id, group_pb2.LeaveGroupResponse(error_code=code, error_message=msg)))
        elif isinstance(b, group_pb2.DescribeGroupsRequest):
            out.append(Reply(ev.request_id, self._describe(b)))
        elif isinstance(b, group_pb2.ListGroupsRequest):
            out.append(Reply(ev.request_id, self._list(b)))
        elif isinstance(b, group_pb2.FindCoordinatorRequest):
            out.append(Reply(ev.request_id, self._find_coordinator(b)))
        elif isinstance(b, group_pb2.DeleteGroupsRequest):
            self._delete_groups(ev.request_id, b, out)
        else:
            raise TypeError(f"not a group request: {type(b).__name__}")

    @staticmethod
    def _join_error(code: int, msg: str, member_id: str = "") -> group_pb2.JoinGroupResponse:
        return group_pb2.JoinGroupResponse(error_code=code, error_message=msg, generation_id=-1,
                                           member_id=member_id)

    @staticmethod
    def _sync_error(code: int, msg: str) -> group_pb2.SyncGroupResponse:
        return group_pb2.SyncGroupResponse(error_code=code, error_message=msg)

    def _join(self, ev: RequestReceived, req: group_pb2.JoinGroupRequest, now_ms: int,
              out: list[Effect]) -> None:
        rid = ev.request_id

        def fail(code: int, msg: str) -> None:
            out.append(Reply(rid, self._join_error(code, msg, req.member_id)))

        err = self._shard_error(req.group_id)
        if err:
            return fail(*err)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT,
                        f"session.timeout.ms {req.session_timeout_ms} outside "
                        f"[{cfg.group_min_session_timeout_ms}, {cfg.group_max_session_timeout_ms}]")
        client = req.client_assignment
        if not req.protocols or not req.protocol_type or (
                not client and req.protocol_type != CONSUMER_PROTOCOL_TYPE):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL,
                        "a protocol type and at least one protocol are needed"
                        + ("" if client else f"; the type must be {CONSUMER_PROTOCOL_TYPE!r}"))
        protocols = []
        metadata: tuple[tuple[str, bytes], ...] = ()
        if client:
            # Kafka's classic protocol: the metadata is the client's business (opaque here).
            metadata = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
            protocols = [(p.name, EMPTY_SUBSCRIPTION) for p in req.protocols]
            names = {n for n, _ in protocols}
            known = names
        else:
            for p in req.protocols:
                if p.subscription.topic_pattern:
                    try:
                        re.compile(p.subscription.topic_pattern)
                    except re.error as e:
                        return fail(E.INVALID_REQUEST, f"bad topic pattern: {e}")
                protocols.append((p.name, subscription_from_pb(p.subscription)))
            names = {n for n, _ in protocols}
            known = names & ASSIGNORS.keys()
            if not known:
                return fail(E.INCONSISTENT_GROUP_PROTOCOL,
                            f"no assignment strategy known here among {sorted(names)}; "
                            f"known: {sorted(ASSIGNORS)}")
        group = self.groups.get(req.group_id)
        if group is not None and group.delete_waiters:
            # Being deleted (Kafka's Dead group): the client finds the coordinator again and
            # joins a new group once the tombstone is written.
            return fail(E.COORDINATOR_NOT_AVAILABLE, "the group is being deleted")
        if group is None:
            if req.member_id:
                return fail(E.UNKNOWN_MEMBER_ID, "unknown group")
            group = Group(req.group_id, ot.partition_for(req.group_id, cfg.offsets_topic_num_partitions),
                          state_timestamp_ms=now_ms, client_assignment=client)
            self.groups[req.group_id] = group
        if group.members:
            if not group.assignment_mode_known:
                group.client_assignment = client     # inferred at load: the members settle it
            if group.client_assignment != client:
                return fail(E.INCONSISTENT_GROUP_PROTOCOL,
                            "this group's members are assigned by "
                            + ("their leader (Kafka clients)" if group.client_assignment
                               else "the coordinator (Riverbed SDK clients)")
                            + "; a member cannot join it the other way")
            if group.protocol_type not in (None, req.protocol_type):
                return fail(E.INCONSISTENT_GROUP_PROTOCOL, "protocol type differs from the group's")
            common = group.supported_protocols(exclude=req.member_id or None)
            if common is not None and not (common & known):
                return fail(E.INCONSISTENT_GROUP_PROTOCOL,
                            "no assignment strategy is supported by every member")
        else:
            group.client_assignment = client
        group.assignment_mode_known = True
        rebalance_timeout = req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
        if not req.member_id:
            if len(group.members) >= cfg.group_max_size:
                return fail(E.GROUP_MAX_SIZE_REACHED, f"group.max.size {cfg.group_max_size} reached")
            member_id = f"{ev.client_id}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
            member = Member(member_id, ev.client_id, req.client_host, req.session_timeout_ms,
                            rebalance_timeout, tuple(protocols), join_request=rid,
                            heartbeat_deadline_ms=now_ms + req.session_timeout_ms,
                            metadata=metadata)
            group.members[member_id] = member
            group.protocol_type = req.protocol_type
            log.info("[group=%s gen=%d] member %s joins", group.group_id, group.generation_id, member_id)
            if group.state in (S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE):
                self._prepare_rebalance(group, now_ms, out)
            self._maybe_complete_join(group, now_ms, out)
            return
        member = group.members.get(req.member_id)
        if member is None:
            return fail(E.UNKNOWN_MEMBER_ID, f"member {req.member_id} is not in the group")
        changed = member.protocols != tuple(protocols) or member.metadata != metadata
        if member.join_request is not None:
            out.append(Reply(member.join_request,
                             self._join_error(E.REBALANCE_IN_PROGRESS, "superseded by a newer join",
                                              member.member_id)))
        member.protocols = tuple(protocols)
        member.metadata = metadata
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout
        member.client_host = req.client_host or member.client_host
        member.heartbeat_deadline_ms = now_ms + req.session_timeout_ms
        member.join_request = rid
        if group.client_assignment:
            # Kafka: a follower rejoining unchanged gets the current generation back; its leader
            # rejoining (its subscriptions' metadata changed: it must assign again) or a changed
            # member rebalances.
            unchanged_follower = not changed and member.member_id != group.leader_id
            if unchanged_follower and group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                member.join_request = None
                out.append(Reply(rid, self._join_response(group, member)))
                return
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                self._prepare_rebalance(group, now_ms, out)
            self._maybe_complete_join(group, now_ms, out)
            return
        if group.state is S.STABLE and not changed:
            member.join_request = None           # same subscription: answer the generation now
            out.append(Reply(rid, self._join_response(group, member)))
            return
        if group.state is S.STABLE or (group.state is S.COMPLETING_REBALANCE and changed):
            self._prepare_rebalance(group, now_ms, out)
        self._maybe_complete_join(group, now_ms, out)

    def _join_response(self, group: Group, member: Member) -> group_pb2.JoinGroupResponse:
        resp = group_pb2.JoinGroupResponse(
            error_code=E.NONE, generation_id=group.generation_id, protocol_type=group.protocol_type or "",
            protocol_name=group.protocol or "", leader=group.leader_id or "", member_id=member.member_id)
        if member.member_id == group.leader_id and group.protocol:
            for m in group.members.values():
                if group.client_assignment:
                    data = m.raw_metadata(group.protocol)
                    if data is None:
                        continue
                    resp.members.append(group_pb2.JoinGroupMember(
                        member_id=m.member_id, metadata=data, client_id=m.client_id,
                        client_host=m.client_host))
                    continue
                try:
                    sub = m.subscription(group.protocol)
                except KeyError:
                    continue
                resp.members.append(group_pb2.JoinGroupMember(
                    member_id=m.member_id, subscription=subscription_to_pb(sub),
                    client_id=m.client_id, client_host=m.client_host))
        return resp

    def _sync_response(self, group: Group, member: Member) -> group_pb2.SyncGroupResponse:
        if group.client_assignment:
            return group_pb2.SyncGroupResponse(
                error_code=E.NONE, protocol_type=group.protocol_type or "",
                protocol_name=group.protocol or "", assignment_data=member.assignment_data)
        return group_pb2.SyncGroupResponse(
            error_code=E.NONE, protocol_type=group.protocol_type or "", protocol_name=group.protocol or "",
            assignment=assignment_to_pb(member.assignment))

    def _member_check(self, group_id: str, member_id: str, generation_id: int | None
                      ) -> tuple[Group | None, Member | None, tuple[int, str] | None]:
        err = self._shard_error(group_id)
        if err:
            return None, None, err
        group = self.groups.get(group_id)
        if group is None or group.state is S.EMPTY:
            return group, None, (E.UNKNOWN_MEMBER_ID, "unknown group or group has no members")
        member = group.members.get(member_id)
        if member is None:
            return group, None, (E.UNKNOWN_MEMBER_ID, f"member {member_id} is not in the group")
        if generation_id is not None and generation_id != group.generation_id \
                and group.state is not S.COMPLETING_REBALANCE:
            return group, member, (E.ILLEGAL_GENERATION,
                                   f"generation {generation_id} is not the group's {group.generation_id}")
        return group, member, None

    def _sync(self, rid: int, req: group_pb2.SyncGroupRequest, now_ms: int, out: list[Effect]) -> None:
        group, member, err = self._member_check(req.group_id, req.member_id, req.generation_id)
        if err:
            out.append(Reply(rid, self._sync_error(*err)))
            return
        assert group is not None and member is not None
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if (req.protocol_type and req.protocol_type != group.protocol_type) or (
                req.protocol_name and group.protocol and req.protocol_name != group.protocol):
            out.append(Reply(rid, self._sync_error(
                E.INCONSISTENT_GROUP_PROTOCOL,
                f"the group's protocol is {group.protocol_type}/{group.protocol}")))
            return
        if group.state is S.PREPARING_REBALANCE:
            out.append(Reply(rid, self._sync_error(E.REBALANCE_IN_PROGRESS, "the group is rebalancing")))
        elif group.state is S.COMPLETING_REBALANCE:
            if req.generation_id != group.generation_id:
                out.append(Reply(rid, self._sync_error(E.REBALANCE_IN_PROGRESS, "the group is rebalancing")))
                return
            if member.sync_request is not None:
                out.append(Reply(member.sync_request,
                                 self._sync_error(E.REBALANCE_IN_PROGRESS, "superseded by a newer sync")))
            member.sync_request = rid                   # answered when the generation is written
            if (group.client_assignment and member.member_id == group.leader_id
                    and group.pending_write is None):
                # The leader's assignments: written with the generation, then every sync answered.
                assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
                group.pending_assignment_data = {
                    mid: assignments.get(mid, b"") for mid in group.members}
                group.rebalance_after_write = False
                value = self._group_value(group, {})
                group.pending_write = self._write(group, "generation", value, out)
                log.info("[group=%s gen=%d] the leader's assignment for %d members", group.group_id,
                         group.generation_id, len(group.members))
        else:
            out.append(Reply(rid, self._sync_response(group, member)))

    def _heartbeat(self, rid: int, req: group_pb2.HeartbeatRequest, now_ms: int,
                   out: list[Effect]) -> None:
        """Renew the session and answer, or (max_wait_ms > 0, Stable, a free slot) park it."""
        def answer(code: int, msg: str = "") -> None:
            out.append(_heartbeat_reply(rid, code, msg))

        group, member, err = self._member_check(req.group_id, req.member_id, req.generation_id)
        if member is not None:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            # the member sent another: the parked one is answered first (answers keep its order)
            self._answer_heartbeat(member, E.NONE, "", out)
        if err:
            return answer(*err)
        assert group is not None and member is not None
        if group.state is S.COMPLETING_REBALANCE and group.client_assignment:
            # Kafka: members may heartbeat between their join answer and their sync answer.
            return answer(E.NONE)
        if group.state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
            return answer(E.REBALANCE_IN_PROGRESS, "the group is rebalancing: rejoin")
        wait_ms = min(req.max_wait_ms, member.session_timeout_ms // HEARTBEAT_WAIT_SESSION_DIVISOR)
        if (wait_ms <= 0 or self.stopping
                or self.parked_heartbeats >= self.config.group_max_parked_heartbeats):
            return answer(E.NONE)
        member.heartbeat_request = rid
        member.heartbeat_answer_ms = now_ms + wait_ms
        self.parked_heartbeats += 1

    def _answer_heartbeat(self, member: Member, code: int, msg: str, out: list[Effect]) -> None:
        """Answer the member's parked heartbeat, if it has one."""
        rid = member.heartbeat_request
        if rid is None:
            return
        member.heartbeat_request = None
        member.heartbeat_answer_ms = None
        self.parked_heartbeats -= 1
        out.append(_heartbeat_reply(rid, code, msg))

    def _leave(self, req: group_pb2.LeaveGroupRequest, now_ms: int, out: list[Effect]) -> tuple[int, str]:
        group, member, err = self._member_check(req.group_id, req.member_id, None)
        if err:
            return err
        assert group is not None
        log.info("[group=%s gen=%d] member %s leaves", group.group_id, group.generation_id, req.member_id)
        self._remove_member(group, req.member_id, now_ms, out)
        return E.NONE, ""

    # ------------------------------------------------------------------ metrics

    def groups_by_state(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.groups.values():
            out[g.state.value] = out.get(g.state.value, 0) + 1
        return out
