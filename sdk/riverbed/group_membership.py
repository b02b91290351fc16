"""Consumer-group membership and committed offsets for the Consumer (kafka-python's
ConsumerCoordinator, synchronous, no background thread).

Riverbed's coordinator computes the assignment itself (group.proto): a member sends JoinGroup with
its subscription under each strategy it supports, most preferred first, then SyncGroup returns its
part. All group and offset requests travel on the membership's own gateway connection (its own
DEALER), apart from the consumer's fetch channel: FIND_COORDINATOR names the gateway to use, the
gateway forwards to the group's coordinator / offset manager.

Everything happens inside `Consumer.poll()` (and commit/close), on the caller's thread:

    UNJOINED --join+sync--> STABLE --heartbeat says REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION /
        ^                      |       UNKNOWN_MEMBER_ID (member id reset), subscribe() changed,
        |                      |       a commit said so--> rejoin:
        +------ rejoin --------+       auto-commit (sync), on_partitions_revoked(assigned),
                                        assignment cleared (paused partitions remembered),
                                        JoinGroup, SyncGroup, assignment set (re-paused),
                                        on_partitions_assigned(new), positions from OFFSET_FETCH
                                        else auto_offset_reset.

- Heartbeats every `heartbeat_interval_ms` while STABLE: the application must call poll() within
  `session_timeout_ms` (Kafka's old single-thread rule; poll() bounds its own waits by the next
  heartbeat). `max_poll_interval_ms` is sent as the rebalance timeout.
- Heartbeats are long polls (`heartbeat_long_poll`, on by default): each HEARTBEAT asks the
  coordinator to hold it up to `heartbeat_interval_ms` (max_wait_ms) and is sent without waiting
  on the coordinator channel; its answer is picked up by a later poll (at most
  _HEARTBEAT_ANSWER_POLL_MS apart while one is in flight). The coordinator answers at once when
  the group starts rebalancing, so a member learns of a rebalance (say, a dead member's session
  expired) the moment it begins, not at its next heartbeat. The next HEARTBEAT goes out when the
  answer came and at least `heartbeat_interval_ms` after the previous one was sent: at once after
  a held answer, after the usual interval after an immediate one (a coordinator that predates
  max_wait_ms, or an error), so the cadence is never faster than Kafka's. Commits, joins and
  LeaveGroup are pipelined beside a held heartbeat on the same DEALER, never behind it; a
  heartbeat still in flight when a join starts, the member leaves or the coordinator is lost is
  forgotten (its late answer is dropped).
- Auto-commit (enable_auto_commit): every `auto_commit_interval_ms` inside poll (async), before a
  rebalance and at close (sync): the positions, i.e. after the records poll() returned before.
- Commits: `commit_sync` retries OFFSETS_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR and timeouts with backoff (rediscovering the coordinator) until
  request_timeout_ms; REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID mean the
  generation is gone: rejoin on the next poll and raise CommitFailedError (Kafka's rule: the
  partitions may belong to someone else now). `commit_async` returns a Future completed by a later
  poll / commit / close (no background thread).
- A consumer with group_id and manually assigned partitions commits as a standalone consumer
  (generation -1, empty member id), like Kafka.

Cooperative rebalancing (KIP-429), when every strategy is cooperative (`cooperative-sticky`):

    STABLE --rejoin needed--> STABLE + join in flight --SyncGroup answered--> STABLE
       ^     (nothing revoked; poll() keeps fetching the     | revoked = owned - new assignment:
       |      owned partitions; JoinGroup/SyncGroup are      |   commit (auto-commit), then
       |      sent without waiting and their answers are     |   on_partitions_revoked(revoked);
       |      picked up by later polls)                      | on_partitions_assigned(added only)
       +---- a second join at once if anything was revoked --+

  The coordinator's cooperative-sticky assignor withholds a moving partition from its new
  member until its owner has revoked it (the owner's rejoin opens the next generation), so a
  partition never has two consumers. A member that loses its generation (UNKNOWN_MEMBER_ID)
  calls on_partitions_lost and joins afresh (blocking, as it owns nothing).
"""
from __future__ import annotations

import concurrent.futures
import logging
import time
from typing import Any, Callable, Generator, Iterable, Mapping, Sequence

from riverbed import errors, tracing
from riverbed._proto.v1 import group_pb2, header_pb2, offset_pb2
from riverbed.client_metrics import ConsumerMetrics
from riverbed.cluster import GatewayConnection
from riverbed.coordinator.assignors import COOPERATIVE
from riverbed.coordinator.consumer_protocol import group_by_topic
from riverbed.errors import CommitFailedError, NoOffsetForPartitionError
from riverbed.consumer_groups import (  # noqa: F401 - re-exported: riverbed.group_membership's names
    STRATEGIES,
    ConsumerRebalanceListener,
    GroupDescription,
    GroupListing,
    MemberDescription,
    PartitionLag,
    commit_response_error,
    normalize_offsets,
    normalize_strategies,
    offsets_to_commit_request,
)
from riverbed.committed_offsets import (
    _COORDINATOR_LOST,
    _ILLEGAL_GENERATION,
    _LOADING,
    _REBALANCE,
    _UNKNOWN_MEMBER,
    CommittedOffsets,
    MemberState,
)
from riverbed.cooperative_join import _BACKGROUND_JOIN_POLL_MS, CooperativeJoin
from riverbed.group_heartbeat import _HEARTBEAT_ANSWER_POLL_MS, GroupHeartbeats
from riverbed.structs import OffsetAndMetadata, TopicPartition
from riverbed.subscription_state import SubscriptionState

__all__ = ["ConsumerRebalanceListener", "OffsetAndMetadata", "CommitFailedError",
           "NoOffsetForPartitionError", "GroupMembership", "MemberState", "STRATEGIES",
           "GroupListing", "MemberDescription", "GroupDescription", "PartitionLag"]

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
CONSUMER_PROTOCOL_TYPE = "consumer"

# ------------------------------------------------------------------------------- membership

# the group APIs with their own span and metric (join-time, sync-time)
_GROUP_SPAN_NAMES = {ApiKey.JOIN_GROUP: "JoinGroup", ApiKey.SYNC_GROUP: "SyncGroup"}


class GroupMembership(GroupHeartbeats, CooperativeJoin, CommittedOffsets):
    """One consumer's group membership (join, sync, heartbeats, leave); its committed offsets
    (commits, auto-commit, OFFSET_FETCH) are the CommittedOffsets half, its heartbeats the
    GroupHeartbeats mixin (riverbed.group_heartbeat), the non-blocking cooperative join the
    CooperativeJoin mixin (riverbed.cooperative_join). Owned by a Consumer; not thread-safe."""

    def __init__(self, subscriptions: SubscriptionState, *, group_id: str, client_id: str,
                 bootstrap: Sequence[str] | str | None, channel_factory: Callable | None = None,
                 session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 3000,
                 max_poll_interval_ms: int = 300000, enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000,
                 strategies: Sequence[str] = ("range",), retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30000, heartbeat_long_poll: bool = True,
                 clock: Callable[[], float] | None = None,
                 sleep: Callable[[float], None] | None = None):
        if not group_id:
            raise ValueError("group_id must be a non-empty string")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
        self._subs = subscriptions
        self.group_id = group_id
        self.client_id = client_id
        self._bootstrap = bootstrap
        self._channel_factory = channel_factory
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.strategies = tuple(strategies)
        # KIP-429: incremental rebalances when every strategy offered is cooperative
        self.cooperative = bool(self.strategies) and all(s in COOPERATIVE for s in self.strategies)
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.heartbeat_long_poll = heartbeat_long_poll
        self._clock = clock or (lambda: time.monotonic() * 1000.0)
        self._sleep = sleep or time.sleep
        # subscription
        self.topics: tuple[str, ...] = ()
        self.pattern: str | None = None
        self.listener: ConsumerRebalanceListener | None = None
        # membership
        self.state = MemberState.UNJOINED
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.leader = ""
        self.rejoin_needed = False
        self.assigned: frozenset[TopicPartition] = frozenset()
        self._last_owned: frozenset[TopicPartition] = frozenset()   # sent as owned_partitions
        self._conn: GatewayConnection | None = None
        # False until a gateway first answered: NoBrokersAvailable before that is a wrong or
        # unreachable bootstrap, raised to the caller at once instead of retried
        self._reached_gateway = False
        self._coordinator_endpoint: str | None = None
        self._next_heartbeat_ms = 0.0
        self.last_heartbeat_ok_ms = 0.0
        # the HEARTBEAT in flight: its correlation id, when it was sent, the wait it asked for,
        # and its answer once read (kept until acted upon: reading and acting are apart, as
        # acting may close the channel being read)
        self._hb_corr: int | None = None
        self._hb_sent_ms = 0.0
        self._hb_wait_ms = 0
        self._hb_response = None
        self._next_auto_commit_ms = 0.0
        self._paused_across_rebalance: set[TopicPartition] = set()
        self._no_committed: set[TopicPartition] = set()     # OFFSET_FETCH said none: reset policy
        # the Consumer's metrics (it sets its own): join/sync/rebalance/commit/heartbeat times
        self.metrics = ConsumerMetrics()
        self._commit_sent: dict = {}        # async commit's future -> (sent ms, span or None)
        # corr -> (offsets, future, callback)
        self._pending_commits: dict[int, tuple[dict, concurrent.futures.Future, Callable | None]] = {}
        self.rebalances = 0
        # cooperative: the join in flight (its steps, the request's correlation id, its answer)
        self._bg_steps: Generator[tuple[int, Any, int], Any, bool] | None = None
        self._bg_corr: int | None = None
        self._bg_response = None
        self._bg_next_ms = 0.0          # earliest next background join after a failed one

    # -- subscription ----------------------------------------------------------------------
    @property
    def join_in_flight(self) -> bool:
        """True while a cooperative join is in flight (the owned partitions are still fetched)."""
        return self._bg_steps is not None

    @property
    def subscribed(self) -> bool:
        return bool(self.topics or self.pattern)

    def subscribe(self, topics: Iterable[str] = (), pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        topics = tuple(sorted(set(topics)))
        if not topics and not pattern:
            raise ValueError("subscribe() needs topics or a pattern")
        if topics and pattern:
            raise ValueError("subscribe() takes topics or a pattern, not both")
        if pattern is not None:
            import re
            re.compile(pattern)           # a bad pattern fails here, not at the coordinator
        changed = (topics, pattern) != (self.topics, self.pattern)
        self.topics, self.pattern = topics, pattern
        self.listener = listener
        if changed:
            self.rejoin_needed = True

    def unsubscribe(self) -> None:
        """Revoke (after an auto-commit), leave the group, forget the subscription."""
        if self.subscribed:
            self._prepare_leave()
            self.leave_group()
        self.topics, self.pattern, self.listener = (), None, None
        self.rejoin_needed = False
        self.assigned = frozenset()
        self._subs.assign(())

    # -- the poll hook ---------------------------------------------------------------------
    def poll(self, timeout_ms: float) -> None:
        """Called by Consumer.poll() before it drains/fetches: completes async commits, joins
        when needed, heartbeats and auto-commits when due, and initialises the positions of newly
        assigned partitions from the committed offsets. `timeout_ms` is what is left of the
        caller's poll; the deadline is taken on this object's own clock (never mix clocks)."""
        self._drain_async_commits()
        if self.subscribed:
            self._receive_heartbeat()       # a held answer may say: rebalance now
            if self.cooperative and self.state is MemberState.STABLE and \
                    (self.rejoin_needed or self._bg_steps is not None):
                self._background_join()     # KIP-429: owned partitions keep being fetched
            elif self.rejoin_needed or self.state is not MemberState.STABLE:
                if not self.ensure_active_group(self._clock() + max(timeout_ms, 0)):
                    return
            now = self._clock()
            if self._bg_steps is not None:
                pass                        # no heartbeat or commit of the old generation now
            elif now >= self._next_heartbeat_ms and self._hb_corr is None:
                self.heartbeat()
            if (self.enable_auto_commit and self.state is MemberState.STABLE
                    and not self.rejoin_needed and self._clock() >= self._next_auto_commit_ms):
                self._auto_commit_async()
        self.init_positions()

    def time_to_next_ms(self) -> float:
        """How long poll() may wait before it must come back here (heartbeat / auto-commit)."""
        if not self.subscribed:
            return float("inf")
        if self._bg_steps is not None or (self.cooperative and self.rejoin_needed
                                          and self.state is MemberState.STABLE):
            # a cooperative join in flight: look for its answer soon, fetch meanwhile
            return max(min(_BACKGROUND_JOIN_POLL_MS, self._bg_next_ms - self._clock()), 0.0)
        if self.rejoin_needed or self.state is not MemberState.STABLE:
            return 0.0
        due = self._next_heartbeat_ms
        if self._hb_corr is not None:       # look for the held heartbeat's answer
            due = self._clock() + _HEARTBEAT_ANSWER_POLL_MS
        if self.enable_auto_commit:
            due = min(due, self._next_auto_commit_ms)
        return max(due - self._clock(), 0.0)

    # -- coordinator -----------------------------------------------------------------------
    def _coordinator_lost(self, reason: str) -> None:
        self._forget_heartbeat()            # its answer will not come on a closed channel
        if self._bg_steps is not None:      # its answer will not come on a closed channel
            self._bg_steps, self._bg_corr, self._bg_response = None, None, None
            self._bg_next_ms = self._clock() + self.retry_backoff_ms
        if self._conn is not None:
            log.info("[group=%s] coordinator %s lost: %s", self.group_id,
                     self._coordinator_endpoint, reason)
            self._fail_pending_commits(errors.CoordinatorNotAvailableError(reason))
            self._conn.close()
            self._conn = None
        self._coordinator_endpoint = None

    def ensure_coordinator(self, deadline_ms: float) -> GatewayConnection:
        """FIND_COORDINATOR (retried with backoff until deadline_ms) -> the connection to use."""
        while self._conn is None:
            conn = GatewayConnection(self._bootstrap, client_id=self.client_id,
                                     request_timeout_ms=self.request_timeout_ms,
                                     channel_factory=self._channel_factory)
            try:
                resp = conn.call(ApiKey.FIND_COORDINATOR,
                                 group_pb2.FindCoordinatorRequest(key=self.group_id,
                                                                  key_type=group_pb2.GROUP),
                                 timeout_ms=self.request_timeout_ms).body
                code, msg = resp.error_code, resp.error_message
            except errors.KafkaError as e:
                if not e.retriable or (isinstance(e, errors.NoBrokersAvailable)
                                       and not self._reached_gateway):
                    conn.close()
                    raise
                code, msg = e.code, str(e)
            self._reached_gateway = True
            if code == 0:
                endpoint = resp.endpoint
                if endpoint and endpoint != conn.endpoint:
                    conn.close()
                    seeds = [endpoint] + [e for e in conn.endpoints if e != endpoint]
                    conn = GatewayConnection(seeds, client_id=self.client_id,
                                             request_timeout_ms=self.request_timeout_ms,
                                             channel_factory=self._channel_factory)
                self._conn = conn
                self._coordinator_endpoint = conn.endpoint
                log.debug("[group=%s] coordinator via %s (shard %d)", self.group_id,
                          conn.endpoint, resp.shard)
                break
            conn.close()
            err = errors.for_code(code, msg)
            if not (err.retriable or code in _COORDINATOR_LOST):
                raise err
            if self._clock() >= deadline_ms:
                raise err
            self._backoff()
        return self._conn

    def _backoff(self) -> None:
        self._sleep(self.retry_backoff_ms / 1000.0)

    def _call(self, api: int, body, timeout_ms: int | None = None, api_version: int = 0):
        """One call on the coordinator connection: the body, or a KafkaError raised."""
        assert self._conn is not None
        if api in _GROUP_SPAN_NAMES:     # JOIN_GROUP, SYNC_GROUP: timed and traced
            return self._group_call(api, body, timeout_ms or self.request_timeout_ms)
        return self._conn.call(api, body, timeout_ms=timeout_ms or self.request_timeout_ms,
                               api_version=api_version).body

    def _group_call(self, api: int, body, timeout_ms: int):
        """JOIN_GROUP / SYNC_GROUP: timed for the metrics (join-time, sync-time) and a CLIENT
        span `JoinGroup <group>` / `SyncGroup <group>` while tracing (the coordinator's server
        span is its child)."""
        assert self._conn is not None
        name = _GROUP_SPAN_NAMES[api]
        attrs = {"messaging.system": tracing.SYSTEM, "messaging.operation.name": name,
                 "messaging.consumer.group.name": self.group_id}
        with tracing.current_span(f"{name} {self.group_id}", tracing.SpanKind.CLIENT,
                                  attrs) as span:
            started = self._clock()
            resp = self._conn.call(api, body, timeout_ms=timeout_ms).body
            now = self._clock()
            if api == ApiKey.JOIN_GROUP:
                self.metrics.joined(now - started, now)
            else:
                self.metrics.synced(now - started, now)
            if span is not None:
                span.set_attribute("riverbed.generation_id", int(
                    resp.generation_id if api == ApiKey.JOIN_GROUP else self.generation_id))
                if resp.error_code:
                    span.set_status(tracing.Status(tracing.StatusCode.ERROR,
                                                   E.Name(resp.error_code)))
            return resp

    # -- join / sync -----------------------------------------------------------------------
    def _reset_generation(self) -> None:
        self._forget_heartbeat()
        self.member_id = ""
        self.generation_id = -1
        self.protocol = None
        self.leader = ""

    def _invoke_listener(self, method: str, tps: set[TopicPartition]) -> None:
        if self.listener is None:
            return
        try:
            getattr(self.listener, method)(set(tps))
        except Exception:  # noqa: BLE001 - Kafka logs listener errors and goes on
            log.exception("[group=%s] %s raised", self.group_id, method)

    def _prepare_rejoin(self) -> None:
        """Before JoinGroup (Kafka's eager onJoinPrepare): commit, revoke, clear. Cooperative
        members revoke nothing here: _complete_join revokes what the new assignment lacks."""
        self._forget_heartbeat()            # of the generation being left: its answer is stale
        if self.state is MemberState.STABLE and not self.cooperative:
            owned = set(self.assigned)
            member_valid = self.generation_id >= 0 and bool(self.member_id)
            if member_valid:
                if self.enable_auto_commit:
                    self._commit_positions_quietly("before rebalance")
                self._invoke_listener("on_partitions_revoked", owned)
            else:
                self._invoke_listener("on_partitions_lost", owned)
            subs = self._subs
            self._paused_across_rebalance |= {tp for tp, st in subs.assignment.items() if st.paused}
            subs.assign(())
            self.assigned = frozenset()
        self.state = MemberState.REBALANCING

    def _prepare_leave(self, autocommit: bool = True) -> None:
        """Before LeaveGroup (close, unsubscribe): auto-commit, then revoke."""
        if self.state is MemberState.STABLE and not self.rejoin_needed:
            if autocommit and self.enable_auto_commit:
                self._commit_positions_quietly("on leave")
            self._invoke_listener("on_partitions_revoked", set(self.assigned))
        elif self.state is MemberState.STABLE:
            self._invoke_listener("on_partitions_revoked", set(self.assigned))

    def _join_request(self) -> group_pb2.JoinGroupRequest:
        req = group_pb2.JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.max_poll_interval_ms, member_id=self.member_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE)
        owned = group_by_topic(self._last_owned)
        for name in self.strategies:
            p = req.protocols.add(name=name)
            p.subscription.topics.extend(self.topics)
            if self.pattern:
                p.subscription.topic_pattern = self.pattern
            for topic, parts in owned:
                p.subscription.owned_partitions.add(topic=topic, partitions=parts)
        return req

    def ensure_active_group(self, deadline_ms: float) -> bool:
        """Join and sync until STABLE; False if deadline_ms passed between attempts (the next
        poll goes on). Non-retriable errors (bad session timeout, no common strategy) raise."""
        if not self.subscribed:
            return False
        if self.state is MemberState.STABLE:
            self._last_owned = self.assigned
        self._prepare_rejoin()
        self._drain_async_commits()
        started = self._clock()
        while True:
            try:
                if self._join_and_sync(deadline_ms):
                    now = self._clock()
                    self.metrics.rebalanced(now - started, now)
                    return True
                self.metrics.failed_rebalances += 1
            except errors.KafkaError as e:
                self.metrics.failed_rebalances += 1
                if not (e.retriable or e.code in _COORDINATOR_LOST):
                    raise
                if isinstance(e, errors.NoBrokersAvailable) and not self._reached_gateway:
                    raise
                if e.code in _COORDINATOR_LOST:
                    self._coordinator_lost(str(e))
                log.info("[group=%s] join: %s; retrying", self.group_id, e)
            if self._clock() >= deadline_ms:
                return False
            self._backoff()

    def _join_and_sync(self, deadline_ms: float) -> bool:
        """One JoinGroup + SyncGroup, waiting for each answer. True when STABLE; False to retry
        (after backoff)."""
        self.ensure_coordinator(deadline_ms)
        steps = self._join_and_sync_steps()
        try:
            api, body, timeout_ms = next(steps)
            while True:
                api, body, timeout_ms = steps.send(self._call(api, body, timeout_ms=timeout_ms))
        except StopIteration as done:
            return bool(done.value)

    def _join_and_sync_steps(self) -> Generator[tuple[int, Any, int], Any, bool]:
        """JoinGroup then SyncGroup, sans I/O: yields (api, request, timeout_ms) and is sent
        each answer's body; returns True when STABLE, False to retry. Driven by _join_and_sync
        (blocking) or by _background_join (cooperative: answers picked up by later polls)."""
        join_timeout = self.max_poll_interval_ms + 5000
        resp = yield ApiKey.JOIN_GROUP, self._join_request(), join_timeout
        code = resp.error_code
        if code == _UNKNOWN_MEMBER:
            log.info("[group=%s] member id %r unknown: joining afresh", self.group_id, self.member_id)
            self._reset_generation()
            return False
        if code in (_REBALANCE, _ILLEGAL_GENERATION, _LOADING):
            if resp.member_id:
                self.member_id = resp.member_id
            return False
        if code != 0:
            raise errors.for_code(code, resp.error_message)
        self.member_id = resp.member_id
        self.generation_id = resp.generation_id
        self.protocol = resp.protocol_name
        self.leader = resp.leader
        sresp = yield ApiKey.SYNC_GROUP, group_pb2.SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation_id,
            member_id=self.member_id), self.request_timeout_ms
        code = sresp.error_code
        if code == _UNKNOWN_MEMBER:
            self._reset_generation()
            return False
        if code in (_REBALANCE, _ILLEGAL_GENERATION, _LOADING):
            return False
        if code != 0:
            raise errors.for_code(code, sresp.error_message)
        assigned = frozenset(TopicPartition(tp.topic, p) for tp in sresp.assignment.partitions
                             for p in tp.partitions)
        self._complete_join(assigned)
        return True

    def _unmatched_response(self, resp) -> None:
        if self._bg_corr is not None and resp.correlation_id == self._bg_corr:
            self._bg_response = resp
        elif self._hb_corr is not None and resp.correlation_id == self._hb_corr:
            self._hb_response = resp

    def _complete_join(self, assigned: frozenset[TopicPartition]) -> None:
        subs = self._subs
        added = assigned
        if self.cooperative:
            # Revoke only what moves; kept partitions keep their positions and buffered records.
            revoked = self.assigned - assigned
            added = assigned - self.assigned
            if revoked:
                if self.enable_auto_commit:
                    self._commit_positions_quietly("before revoking")
                self._invoke_listener("on_partitions_revoked", set(revoked))
        else:
            revoked = frozenset()
        subs.assign(sorted(assigned))
        for tp in self._paused_across_rebalance & assigned:
            subs.assignment[tp].paused = True
        self._paused_across_rebalance.clear()
        self._no_committed.clear()
        self.assigned = assigned
        self.state = MemberState.STABLE
        # KIP-429: a member that revoked something rejoins at once, so that the next generation
        # gives the revoked partitions to their new members
        self.rejoin_needed = bool(revoked)
        self.rebalances += 1
        now = self._clock()
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms
        self.last_heartbeat_ok_ms = now
        self._next_auto_commit_ms = now + self.auto_commit_interval_ms
        log.info("[group=%s gen=%d] member %s assigned %s (strategy %s%s)", self.group_id,
                 self.generation_id, self.member_id, sorted(assigned), self.protocol,
                 f", revoked {sorted(revoked)}" if revoked else "")
        self._invoke_listener("on_partitions_assigned", set(added))
        # positions: init_positions() from poll (a failure there must not cause a rejoin)

    # -- leave ---------------------------------------------------------------------------
    def leave_group(self) -> None:
        """LEAVE_GROUP once (errors ignored: the session would expire anyway). Pipelined beside a
        held heartbeat, not behind it: the coordinator answers that one too when we leave."""
        self._forget_heartbeat()
        if self.member_id and self._conn is not None:
            try:
                self._call(ApiKey.LEAVE_GROUP, group_pb2.LeaveGroupRequest(
                    group_id=self.group_id, member_id=self.member_id),
                    timeout_ms=min(self.request_timeout_ms, 5000))
            except errors.RiverbedError as e:
                log.info("[group=%s] leave: %s", self.group_id, e)
        self._reset_generation()
        self.state = MemberState.UNJOINED

    def close(self, autocommit: bool = True) -> None:
        """Auto-commit (sync, unless autocommit=False), revoke, LEAVE_GROUP at once, complete
        async commits."""
        try:
            self._drain_async_commits()
            self._bg_steps, self._bg_corr, self._bg_response = None, None, None
            if self.subscribed:
                self._prepare_leave(autocommit)
                self.leave_group()
            elif autocommit and self.enable_auto_commit and self._subs.assignment:
                self._commit_positions_quietly("on close")
        finally:
            self._fail_pending_commits(errors.ClientError("consumer closed"))
            if self._conn is not None:
                self._conn.close()
                self._conn = None
