"""A cooperative join (KIP-429) that never blocks poll(): JoinGroup and SyncGroup are sent
without waiting and their answers picked up by later polls, while the owned partitions keep
being fetched.

A mixin of `riverbed.group_membership.GroupMembership`, split out of it along this seam; it
never imports riverbed.group_membership. `_background_join` drives the same steps as the
blocking join (`_join_and_sync_steps`), one answer at a time; a member whose generation is gone
(UNKNOWN_MEMBER_ID) loses its partitions (`_lose_partitions`: on_partitions_lost, no commit)
and joins afresh.
"""
from __future__ import annotations

import logging
from typing import Any

from riverbed import errors
from riverbed.committed_offsets import _COORDINATOR_LOST, MemberState

log = logging.getLogger("riverbed.group_membership")   # the membership's logger, as before

_REQUEST_TIMED_OUT = errors.ErrorCode.Value("REQUEST_TIMED_OUT")
# While a cooperative join is in flight, poll() looks for its answer at least this often.
_BACKGROUND_JOIN_POLL_MS = 10.0


class CooperativeJoin:
    """The cooperative join's steps in the background (mixed into GroupMembership)."""

    def _background_join(self) -> None:
        """One step of a cooperative join that never waits: start it (JoinGroup sent), or pass
        the answer that arrived to its steps and send the next request (SyncGroup), or finish
        it. The owned partitions stay assigned and fetched throughout."""
        now = self._clock()
        if self._bg_steps is None:
            if now < self._bg_next_ms:
                return
            self._last_owned = self.assigned
            self._forget_heartbeat()        # the join ends this generation's heartbeats
            try:
                self.ensure_coordinator(now + self.retry_backoff_ms)
            except errors.KafkaError as e:
                if not (e.retriable or e.code in _COORDINATOR_LOST):
                    raise
                self._bg_next_ms = now + self.retry_backoff_ms
                return
            self._bg_steps = self._join_and_sync_steps()
            self._bg_send(next(self._bg_steps))
            return
        self._receive_background()
        resp, self._bg_response = self._bg_response, None
        if resp is None:
            return
        self._bg_corr = None
        try:
            if not resp.ok:
                raise errors.for_code(resp.error_code, resp.error_message)
            try:
                self._bg_send(self._bg_steps.send(resp.body))
                return
            except StopIteration as done:
                joined = bool(done.value)
        except errors.KafkaError as e:
            self._bg_steps = None
            if not (e.retriable or e.code in _COORDINATOR_LOST):
                raise
            if e.code in _COORDINATOR_LOST or e.code == _REQUEST_TIMED_OUT:
                self._coordinator_lost(str(e))
            log.info("[group=%s] cooperative join: %s; retrying", self.group_id, e)
            joined = False
        self._bg_steps = None
        if not joined:
            if not self.member_id:
                self._lose_partitions()     # not a member any more: join afresh, owning nothing
            self._bg_next_ms = self._clock() + self.retry_backoff_ms

    def _bg_send(self, request: tuple[int, Any, int]) -> None:
        api, body, timeout_ms = request
        assert self._conn is not None
        self._bg_corr = self._conn.channel.send(api, body, timeout_ms=timeout_ms)

    def _receive_background(self) -> None:
        """Read what arrived on the coordinator channel: the join's answer is kept for
        _background_join, async commits are completed."""
        if self._conn is None:
            return
        chan = self._conn.channel
        while self._bg_response is None:
            resp = chan.recv(0)
            if resp is None:
                return
            if resp.correlation_id == self._bg_corr:
                self._bg_response = resp
            else:
                self._commit_answered(resp)

    def _lose_partitions(self) -> None:
        """The generation is gone while partitions were owned (cooperative): they may belong to
        others already; no commit, on_partitions_lost (Kafka's onPartitionsLost)."""
        if self.assigned:
            self._invoke_listener("on_partitions_lost", set(self.assigned))
        self._paused_across_rebalance |= {tp for tp, st in self._subs.assignment.items()
                                          if st.paused}
        self._subs.assign(())
        self.assigned = frozenset()
        self._last_owned = frozenset()
        self.state = MemberState.REBALANCING
        self.rejoin_needed = True
