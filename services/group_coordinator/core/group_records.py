"""The group coordinator core's durable state: a group's record in __consumer_offsets.

A mixin of GroupCoordinatorCore (core/coordinator.py), split out of it along this seam; it never
imports core.coordinator. Pure, like the core: `_write` returns an AppendRecords effect and the
shell reports a WriteCompleted. A new generation is written (`_group_value`, Kafka's
GroupMetadataValue) before its members are answered; `_on_write_completed` applies it through
`_apply_group_value` (the door `replay` uses when a shard loads) and answers the joins and
syncs, or sends the members back to rejoin when the write failed. Tombstones delete groups
(DeleteGroups, and Empty groups past offsets.retention.minutes: `_expire_empty_groups`).
"""
from __future__ import annotations

import logging

from riverbed.coordinator import offsets_topic as ot
from riverbed.coordinator.assignors import ASSIGNORS
from riverbed.coordinator.consumer_protocol import (
    Assignment, TopicPartition, decode_assignment, decode_subscription, encode_assignment,
    encode_subscription,
)
from riverbed.errors import ErrorCode as E
from services.group_coordinator.core.effects import AppendRecords, Effect, Reply
from services.group_coordinator.core.events import WriteCompleted
from services.group_coordinator.core.group import Group, Member, PendingWrite
from services.group_coordinator.core.states import GroupState
from services.group_coordinator.core.subscription_pb import (
    CONSUMER_PROTOCOL_TYPE, EMPTY_SUBSCRIPTION)

log = logging.getLogger("services.group_coordinator.core.coordinator")   # the core's, as before
S = GroupState


def _coordinator_could_have_written(v: ot.GroupMetadataValue) -> bool:
    """Whether a stored group record reads as one of this coordinator's own assignments (protocol
    type "consumer", a strategy it knows, every member's bytes in the consumer protocol)."""
    if v.protocol_type != CONSUMER_PROTOCOL_TYPE or (v.protocol and v.protocol not in ASSIGNORS):
        return False
    try:
        for mm in v.members:
            decode_subscription(mm.subscription)
            decode_assignment(mm.assignment)
    except ot.OffsetsTopicFormatError:
        return False
    return True


class GroupRecords:
    """Writing a group's record and acting on the write's outcome (mixed into
    GroupCoordinatorCore)."""

    def _group_value(self, group: Group, assignment: dict[str, tuple[TopicPartition, ...]]) -> bytes:
        members = []
        if group.protocol is not None and group.client_assignment:
            data = group.pending_assignment_data or {}
            for mid, m in group.members.items():
                members.append(ot.MemberMetadata(
                    mid, m.client_id, m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
                    m.raw_metadata(group.protocol) or b"", data.get(mid, b"")))
        elif group.protocol is not None:
            for mid, m in group.members.items():
                members.append(ot.MemberMetadata(
                    mid, m.client_id, m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
                    encode_subscription(m.subscription(group.protocol)),
                    encode_assignment(Assignment(assignment.get(mid, ())))))
        return ot.encode_group_value(ot.GroupMetadataValue(
            group.protocol_type or CONSUMER_PROTOCOL_TYPE, group.generation_id, group.protocol,
            group.leader_id, group.state_timestamp_ms, tuple(members)))

    def _write(self, group: Group, kind: str, value: bytes | None, out: list[Effect]) -> int:
        wid = self._next_write_id
        self._next_write_id += 1
        self._writes[wid] = PendingWrite(group.group_id, kind, group.generation_id, value)
        key = ot.encode_key(ot.GroupMetadataKey(group.group_id))
        out.append(AppendRecords(wid, group.shard, ((key, value),)))
        return wid

    def _apply_group_value(self, group: Group, v: ot.GroupMetadataValue, *, live: bool) -> None:
        """The one door for durable group state: loading (`replay`) and acknowledged writes."""
        group.protocol_type = v.protocol_type
        group.generation_id = v.generation
        group.protocol = v.protocol
        group.leader_id = v.leader
        group.state_timestamp_ms = v.current_state_timestamp_ms
        if not live:
            # Which way this group is assigned is not in Kafka's record: a group whose record the
            # coordinator's assignors could have written is taken as coordinator-assigned until
            # its next join says (harmless either way meanwhile: its members keep their
            # assignments; a coordinator-assigned one also rebalances on topic changes).
            group.client_assignment = not _coordinator_could_have_written(v)
            group.assignment_mode_known = not v.members
        for mm in v.members:
            m = group.members.get(mm.member_id)
            if group.client_assignment:
                if m is None:
                    if live:
                        continue
                    m = Member(mm.member_id, mm.client_id, mm.client_host, mm.session_timeout_ms,
                               mm.rebalance_timeout_ms, ((v.protocol or "", EMPTY_SUBSCRIPTION),),
                               metadata=((v.protocol or "", mm.subscription),))
                    group.members[mm.member_id] = m
                m.assignment = ()
                m.assignment_data = mm.assignment
                continue
            assignment = decode_assignment(mm.assignment).partitions
            if m is None:
                if live:
                    continue                  # it left while the write was in flight
                m = Member(mm.member_id, mm.client_id, mm.client_host, mm.session_timeout_ms,
                           mm.rebalance_timeout_ms, ((v.protocol or "", decode_subscription(mm.subscription)),))
                group.members[mm.member_id] = m
            m.assignment = assignment
        if not live:
            group.state = S.STABLE if group.members else S.EMPTY

    def _on_write_completed(self, ev: WriteCompleted, now_ms: int, out: list[Effect]) -> None:
        pw = self._writes.pop(ev.write_id, None)
        if pw is None:
            return
        group = self.groups.get(pw.group_id)
        if group is None or group.pending_write != ev.write_id:
            if ev.error_code != E.NONE:
                log.warning("group %s: write of a %s record failed (%d)", pw.group_id, pw.kind, ev.error_code)
            return                               # an Empty-state write nobody waits for
        group.pending_write = None
        if pw.kind == "tombstone":
            waiters, group.delete_waiters = group.delete_waiters, []
            if ev.error_code == E.NONE and group.state is S.EMPTY:
                group.transition(S.DEAD, now_ms)
                del self.groups[group.group_id]
                log.info("[group=%s] %s", group.group_id, "deleted" if waiters else "expired")
                code, msg = E.NONE, ""
            else:
                code = ot.coordinator_error_for_append(ev.error_code) if ev.error_code else E.NON_EMPTY_GROUP
                msg = "could not write the group's tombstone" if ev.error_code else "the group has members"
            for waiter in waiters:
                self._deleted(waiter, group.group_id, code, msg, ev.base_offset, out)
            return
        if group.client_assignment:
            in_record = set(group.pending_assignment_data or ())
            group.pending_assignment_data = None
        else:
            in_record = set(group.pending_assignment or ())
        group.pending_assignment = None
        if ev.error_code == E.NONE:
            assert pw.value is not None
            self._apply_group_value(group, ot.decode_group_value(pw.value), live=True)
            if ev.base_offset >= 0:
                group.log_offset = ev.base_offset
            group.transition(S.STABLE, now_ms)
            if group.rebalance_started_ms is not None:
                self.rebalances += 1
                self.rebalance_ms_total += max(0, now_ms - group.rebalance_started_ms)
                group.rebalance_started_ms = None
            for mid, m in group.members.items():
                if mid not in in_record:
                    continue
                if m.join_request is not None:
                    out.append(Reply(m.join_request, self._join_response(group, m)))
                    m.join_request = None
                if m.sync_request is not None:
                    out.append(Reply(m.sync_request, self._sync_response(group, m)))
                    m.sync_request = None
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
            log.info("[group=%s gen=%d] stable", group.group_id, group.generation_id)
            if group.rebalance_after_write or any(mid not in in_record for mid in group.members):
                group.rebalance_after_write = False
                self._prepare_rebalance(group, now_ms, out)
                self._maybe_complete_join(group, now_ms, out)
            elif not group.client_assignment and self._expected_partitions(group) != {
                    tp for m in group.members.values() for tp in m.assignment}:
                self._prepare_rebalance(group, now_ms, out)
            return
        code = ot.coordinator_error_for_append(ev.error_code)
        log.warning("[group=%s gen=%d] generation write failed (%d): rebalancing", group.group_id,
                    group.generation_id, ev.error_code)
        for mid, m in group.members.items():
            if mid not in in_record:
                continue
            if m.join_request is not None:
                out.append(Reply(m.join_request, self._join_error(code, "could not store the generation", mid)))
                m.join_request = None
            if m.sync_request is not None:
                out.append(Reply(m.sync_request, self._sync_error(code, "could not store the generation")))
                m.sync_request = None
        group.rebalance_after_write = False
        group.transition(S.PREPARING_REBALANCE, now_ms)
        group.rebalance_deadline_ms = now_ms + max((m.rebalance_timeout_ms for m in group.members.values()),
                                                   default=0)
        self._maybe_complete_join(group, now_ms, out)

    def _expire_empty_groups(self, now_ms: int, out: list[Effect]) -> None:
        retention_ms = self.config.offsets_retention_minutes * 60_000
        for group in list(self.groups.values()):
            if (group.state is S.EMPTY and self._loaded(group.shard) and group.pending_write is None
                    and group.state_timestamp_ms >= 0 and group.state_timestamp_ms + retention_ms <= now_ms):
                group.pending_write = self._write(group, "tombstone", None, out)
