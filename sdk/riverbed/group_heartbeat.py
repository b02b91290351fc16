"""A group member's heartbeats: HEARTBEAT sent as a long poll, its answer picked up later.

A mixin of `riverbed.group_membership.GroupMembership`, split out of it along this seam; it
never imports riverbed.group_membership. While the member is STABLE a HEARTBEAT goes out every
`heartbeat_interval_ms`; with `heartbeat_long_poll` it asks the coordinator to hold it up to that
long (max_wait_ms) and is sent without waiting: its answer is read by a later poll() (at most
`_HEARTBEAT_ANSWER_POLL_MS` apart) or by `heartbeat_if_due()` (riverbed.aio's heartbeat task).
One is in flight at a time; the next goes out once the answer came and the interval has passed.
REBALANCE_IN_PROGRESS and ILLEGAL_GENERATION make the member rejoin, UNKNOWN_MEMBER_ID resets
its generation first, a lost coordinator is looked up again.
"""
from __future__ import annotations

import logging

from riverbed import errors
from riverbed._proto.v1 import group_pb2, header_pb2
from riverbed.committed_offsets import (
    _COORDINATOR_LOST,
    _ILLEGAL_GENERATION,
    _LOADING,
    _REBALANCE,
    _UNKNOWN_MEMBER,
    MemberState,
)

log = logging.getLogger("riverbed.group_membership")   # the membership's logger, as before

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
# While a long-polled heartbeat is in flight, poll() looks for its answer at least this often:
# a rebalance is noticed this much after the coordinator said so, at most (poll() waits on the
# fetch channel, not on the coordinator's), for ~20 cheap wake-ups a second.
_HEARTBEAT_ANSWER_POLL_MS = 50.0


class GroupHeartbeats:
    """HEARTBEAT and its answers (mixed into GroupMembership)."""

    @property
    def heartbeat_in_flight(self) -> bool:
        """True while a HEARTBEAT waits for its answer (a long poll the coordinator may hold)."""
        return self._hb_corr is not None

    def heartbeat_if_due(self) -> None:
        """Act on a heartbeat's answer that arrived, and send a HEARTBEAT if one is due while
        this member is stable (nothing else: no join, no commit). For a client whose application
        may be idle between polls (riverbed.aio's consumer runs it from a task of its loop, as
        aiokafka sends heartbeats)."""
        if not self.subscribed:
            return
        self._receive_heartbeat()
        if (self.state is MemberState.STABLE and not self.rejoin_needed
                and self._bg_steps is None and self._hb_corr is None
                and self._clock() >= self._next_heartbeat_ms):
            self.heartbeat()

    def heartbeat(self) -> int:
        """Send one HEARTBEAT (a long poll unless heartbeat_long_poll is off) and act on its
        answer if it is already there; returns the error code acted upon (0 while the answer is
        still to come: a later poll() or heartbeat_if_due() acts on it)."""
        if self._hb_corr is not None:
            return 0                        # one at a time: the next follows its answer
        now = self._clock()
        # the earliest next one, also when the answer comes sooner (never faster than Kafka's)
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms
        if self.state is not MemberState.STABLE:
            return 0
        wait_ms = self.heartbeat_interval_ms if self.heartbeat_long_poll else 0
        try:
            conn = self.ensure_coordinator(now + self.heartbeat_interval_ms)
            self._hb_sent_ms = self._clock()
            self._hb_wait_ms = wait_ms
            self._hb_corr = conn.channel.send(ApiKey.HEARTBEAT, group_pb2.HeartbeatRequest(
                group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id,
                max_wait_ms=wait_ms),
                timeout_ms=wait_ms + min(self.request_timeout_ms, self.session_timeout_ms // 2))
        except errors.KafkaError as e:
            return self._heartbeat_answered(e.code, now)
        return self._receive_heartbeat()

    def _receive_heartbeat(self) -> int:
        """Read what arrived on the coordinator channel (async commits are completed) and act on
        the heartbeat's answer if it is there; its error code, or 0."""
        if self._hb_corr is None:
            return 0
        if self._hb_response is None and self._conn is not None:
            chan = self._conn.channel
            # (an async commit's answer may close the channel: coordinator lost)
            while self._hb_response is None and self._hb_corr is not None and not chan.closed:
                resp = chan.recv(0)
                if resp is None:
                    break
                self._commit_answered(resp)   # the heartbeat's answer lands in _hb_response
        resp, self._hb_response = self._hb_response, None
        if resp is None:
            return 0
        self._hb_corr = None
        answered = self._clock()
        if resp.ok:
            code = resp.body.error_code
            # the time beyond the wait the coordinator was asked to hold it (Kafka's response time)
            elapsed = answered - self._hb_sent_ms
            self.metrics.heartbeat(elapsed - min(elapsed, self._hb_wait_ms), answered)
        else:
            code = resp.error_code
        return self._heartbeat_answered(code, answered)

    def _forget_heartbeat(self) -> None:
        """Stop waiting for the HEARTBEAT in flight (its answer, if it comes, is dropped)."""
        self._hb_corr = None
        self._hb_response = None

    def _heartbeat_answered(self, code: int, now: float) -> int:
        """Act on a heartbeat's error code (0 = the session goes on)."""
        if code == 0:
            self.last_heartbeat_ok_ms = now
        elif code in (_REBALANCE, _ILLEGAL_GENERATION):
            log.info("[group=%s gen=%d] heartbeat: %s: rejoining", self.group_id,
                     self.generation_id, E.Name(code))
            self.rejoin_needed = True
        elif code == _UNKNOWN_MEMBER:
            log.info("[group=%s] member %s is no longer in the group: rejoining", self.group_id,
                     self.member_id)
            self._reset_generation()
            self.rejoin_needed = True
        elif code in _COORDINATOR_LOST:
            self._coordinator_lost(E.Name(code))
            self._next_heartbeat_ms = now + self.retry_backoff_ms
        elif code == _LOADING:
            self._next_heartbeat_ms = now + self.retry_backoff_ms
        else:
            log.warning("[group=%s] heartbeat failed: %s", self.group_id, E.Name(code))
        return code
