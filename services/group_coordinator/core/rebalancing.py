"""The group coordinator core's rebalances: from PreparingRebalance to a new generation.

A mixin of GroupCoordinatorCore (core/coordinator.py), split out of it along this seam; it never
imports core.coordinator. Pure, like the core. A rebalance starts (`_prepare_rebalance`: members
are told at once through their parked heartbeats), the join phase completes when every member
rejoined or the rebalance timeout passed (`_complete_join`: the protocol is voted, the
coordinator's assignor assigns the partitions of the topics the subscriptions resolve to, and
the generation is written before anyone is answered), members leave (`_remove_member`), and
topic changes rebalance the groups whose partitions moved (`_on_metadata`).
`InvariantViolation` is what `check_invariants` and the protocol vote raise.
"""
from __future__ import annotations

import logging
import re

from riverbed.coordinator.assignors import ASSIGNORS, assign
from riverbed.coordinator.consumer_protocol import Subscription, TopicPartition
from riverbed.errors import ErrorCode as E
from services.group_coordinator.core.effects import Effect, Reply
from services.group_coordinator.core.events import TopicMetadataChanged
from services.group_coordinator.core.group import Group
from services.group_coordinator.core.states import GroupState

log = logging.getLogger("services.group_coordinator.core.coordinator")   # the core's, as before
S = GroupState


class InvariantViolation(AssertionError):
    pass


def _invariant(cond: bool, msg: str) -> None:
    if not cond:
        raise InvariantViolation(msg)


class Rebalancing:
    """Rebalances and the join phase (mixed into GroupCoordinatorCore)."""

    def _prepare_rebalance(self, group: Group, now_ms: int, out: list[Effect]) -> None:
        if group.state is S.COMPLETING_REBALANCE and group.pending_write is not None:
            group.rebalance_after_write = True       # after the generation in flight is written
            return
        if group.state is S.COMPLETING_REBALANCE:
            # Client assignment, the leader's assignment not in yet (Kafka's
            # resetAndPropagateAssignmentError): the members waiting in SyncGroup rejoin.
            for m in group.members.values():
                if m.sync_request is not None:
                    out.append(Reply(m.sync_request, self._sync_error(
                        E.REBALANCE_IN_PROGRESS, "the group is rebalancing: rejoin")))
                    m.sync_request = None
                    # it was kept alive while it waited: its session runs from now (Kafka)
                    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            return
        was_empty = group.state is S.EMPTY
        group.transition(S.PREPARING_REBALANCE, now_ms)
        for m in group.members.values():        # tell the members now, not at their next heartbeat
            self._answer_heartbeat(m, E.REBALANCE_IN_PROGRESS, "the group is rebalancing: rejoin", out)
        group.rebalance_started_ms = now_ms
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.rebalance_deadline_ms = now_ms + timeout
        delay = min(self.config.group_initial_rebalance_delay_ms, timeout)
        if was_empty and delay > 0:
            group.initial_join_deadline_ms = now_ms + delay
        log.info("[group=%s gen=%d] preparing rebalance", group.group_id, group.generation_id)

    def _maybe_complete_join(self, group: Group, now_ms: int, out: list[Effect]) -> None:
        if group.initial_join_deadline_ms is not None and now_ms < group.initial_join_deadline_ms:
            return                                   # the initial delay: more members may come
        if group.state is S.PREPARING_REBALANCE and group.all_joined():
            self._complete_join(group, now_ms, out, timed_out=False)

    def _remove_member(self, group: Group, member_id: str, now_ms: int, out: list[Effect]) -> None:
        m = group.members.pop(member_id)
        self._answer_heartbeat(m, E.UNKNOWN_MEMBER_ID, "member removed", out)
        if m.join_request is not None:
            out.append(Reply(m.join_request, self._join_error(E.UNKNOWN_MEMBER_ID, "member removed", member_id)))
        if m.sync_request is not None:
            out.append(Reply(m.sync_request, self._sync_error(E.UNKNOWN_MEMBER_ID, "member removed")))
        if group.state is S.STABLE or group.state is S.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, now_ms, out)
        self._maybe_complete_join(group, now_ms, out)

    def resolve_topics(self, sub: Subscription) -> tuple[str, ...]:
        """Explicit topics plus those the pattern matches (internal `__` topics excluded, as
        Kafka's exclude.internal.topics)."""
        topics = set(sub.topics)
        if sub.topic_pattern:
            pat = re.compile(sub.topic_pattern)
            topics |= {t for t in self.topics if not t.startswith("__") and pat.fullmatch(t)}
        return tuple(sorted(topics))

    def _expected_partitions(self, group: Group) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        if group.protocol is None:
            return out
        if group.client_assignment:
            raise AssertionError("the leader assigns a client-assigned group's partitions")
        for m in group.members.values():
            try:
                sub = m.subscription(group.protocol)
            except KeyError:
                continue
            for t in self.resolve_topics(sub):
                out |= {(t, p) for p in range(self.topics.get(t, 0))}
        return out

    def _select_protocol(self, group: Group) -> str:
        candidates = group.supported_protocols() or set()
        if not group.client_assignment:
            candidates &= ASSIGNORS.keys()
        _invariant(bool(candidates), f"group {group.group_id}: members share no protocol")
        votes: dict[str, int] = {}
        for m in group.members.values():
            vote = next(n for n in m.protocol_names() if n in candidates)
            votes[vote] = votes.get(vote, 0) + 1
        return min(votes, key=lambda n: (-votes[n], n))

    def _complete_join(self, group: Group, now_ms: int, out: list[Effect], *, timed_out: bool) -> None:
        if timed_out:
            for mid in [mid for mid, m in group.members.items() if m.join_request is None]:
                log.info("[group=%s] member %s did not rejoin in time", group.group_id, mid)
                group.members.pop(mid)
                # (a parked sync cannot exist in PreparingRebalance)
        group.generation_id += 1
        group.rebalance_deadline_ms = None
        group.initial_join_deadline_ms = None
        if not group.members:
            group.protocol = None
            group.leader_id = None
            group.transition(S.EMPTY, now_ms)
            value = self._group_value(group, {})
            self._write(group, "empty", value, out)
            return
        group.protocol = self._select_protocol(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        if group.client_assignment:
            # Kafka: the joins are answered now (the leader gets every member's metadata); the
            # generation is written once the leader's SyncGroup brings the assignments.
            group.transition(S.COMPLETING_REBALANCE, now_ms)
            group.pending_assignment_data = None
            group.rebalance_after_write = False
            for m in group.members.values():
                m.assignment = ()
                m.assignment_data = b""
                if m.join_request is not None:
                    out.append(Reply(m.join_request, self._join_response(group, m)))
                    m.join_request = None
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
            log.info("[group=%s gen=%d] join complete: %d members, protocol %s/%s, leader %s",
                     group.group_id, group.generation_id, len(group.members),
                     group.protocol_type, group.protocol, group.leader_id)
            return
        subs: dict[str, Subscription] = {}
        for mid, m in group.members.items():
            sub = m.subscription(group.protocol)
            owned = m.assignment or sub.owned_partitions
            subs[mid] = Subscription(self.resolve_topics(sub), None, tuple(owned))
        wanted = {t for s in subs.values() for t in s.topics}
        result = assign(group.protocol, subs, {t: self.topics[t] for t in wanted if t in self.topics})
        group.transition(S.COMPLETING_REBALANCE, now_ms)
        group.pending_assignment = result
        group.rebalance_after_write = False
        value = self._group_value(group, result)
        group.pending_write = self._write(group, "generation", value, out)
        log.info("[group=%s gen=%d] join complete: %d members, protocol %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol)

    def _on_metadata(self, ev: TopicMetadataChanged, now_ms: int, out: list[Effect]) -> None:
        self.topics = dict(ev.partition_counts)
        for group in list(self.groups.values()):
            if not self._loaded(group.shard) or group.client_assignment:
                continue                 # a client-assigned group's leader watches metadata
            if group.state is S.STABLE:
                assigned = {tp for m in group.members.values() for tp in m.assignment}
                if assigned != self._expected_partitions(group):
                    log.info("[group=%s gen=%d] subscribed topics changed", group.group_id, group.generation_id)
                    self._prepare_rebalance(group, now_ms, out)
            elif group.state is S.COMPLETING_REBALANCE and group.pending_assignment is not None:
                assigned = {tp for tps in group.pending_assignment.values() for tp in tps}
                if assigned != self._expected_partitions(group):
                    group.rebalance_after_write = True
