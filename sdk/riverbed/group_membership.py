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
"""
from __future__ import annotations

import concurrent.futures
import enum
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, NamedTuple, Sequence

from riverbed import errors
from riverbed._proto.v1 import group_pb2, header_pb2, offset_pb2
from riverbed.cluster import GatewayConnection
from riverbed.coordinator.consumer_protocol import group_by_topic
from riverbed.errors import CommitFailedError, NoOffsetForPartitionError
from riverbed.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:  # pragma: no cover
    from riverbed.consumer import Consumer

__all__ = ["ConsumerRebalanceListener", "OffsetAndMetadata", "CommitFailedError",
           "NoOffsetForPartitionError", "GroupMembership", "MemberState", "STRATEGIES",
           "GroupListing", "MemberDescription", "GroupDescription", "PartitionLag"]

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
STRATEGIES = ("range", "roundrobin", "sticky")
CONSUMER_PROTOCOL_TYPE = "consumer"

_COORDINATOR_LOST = frozenset({E.Value("NOT_COORDINATOR"), E.Value("COORDINATOR_NOT_AVAILABLE"),
                               E.Value("REQUEST_TIMED_OUT"), E.Value("NETWORK_EXCEPTION")})
_LOADING = E.Value("COORDINATOR_LOAD_IN_PROGRESS")
_REBALANCE = E.Value("REBALANCE_IN_PROGRESS")
_ILLEGAL_GENERATION = E.Value("ILLEGAL_GENERATION")
_UNKNOWN_MEMBER = E.Value("UNKNOWN_MEMBER_ID")
_GENERATION_GONE = frozenset({_REBALANCE, _ILLEGAL_GENERATION, _UNKNOWN_MEMBER})


# ------------------------------------------------------------------------------- public types

class ConsumerRebalanceListener:
    """Subclass and pass to `subscribe(listener=...)` (kafka-python's / Kafka's interface).

    on_partitions_revoked runs before the consumer rejoins (commit there for exactly-where-you-
    stopped semantics; the generation is still valid), on_partitions_assigned after SyncGroup,
    before positions are read from the committed offsets (so a seek there wins).
    on_partitions_lost runs instead of revoked when the membership was already gone (session
    expired): committing is pointless then. Exceptions from a listener are logged, not raised."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...] = ()
    subscribed_topics: tuple[str, ...] = ()
    topic_pattern: str = ""


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str                      # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    protocol: str                   # the assignment strategy chosen
    generation_id: int
    leader: str
    members: tuple[MemberDescription, ...] = field(default_factory=tuple)

    @property
    def is_empty(self) -> bool:
        return self.state in ("Empty", "Dead") and not self.members


@dataclass(frozen=True)
class PartitionLag:
    """One row of `riverbed groups describe` (kafka-consumer-groups.sh --describe)."""
    topic: str
    partition: int
    current_offset: int | None      # committed; None = nothing committed
    log_end_offset: int | None      # the high watermark; None = unknown
    consumer_id: str = ""
    host: str = ""
    client_id: str = ""

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.current_offset, 0)


# ------------------------------------------------------------------------------- wire helpers

def offsets_to_commit_request(group_id: str, generation_id: int, member_id: str,
                              offsets: Mapping[TopicPartition, OffsetAndMetadata]
                              ) -> offset_pb2.OffsetCommitRequest:
    req = offset_pb2.OffsetCommitRequest(group_id=group_id, generation_id=generation_id,
                                         member_id=member_id, retention_time_ms=-1)
    by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
    for tp, om in offsets.items():
        by_topic.setdefault(tp[0], []).append((tp[1], om))
    for topic in sorted(by_topic):
        t = req.topics.add(name=topic)
        for p, om in sorted(by_topic[topic], key=lambda x: x[0]):
            t.partitions.add(partition_index=p, committed_offset=om.offset,
                             committed_leader_epoch=om.leader_epoch,
                             committed_metadata=om.metadata or "")
    return req


def commit_response_error(resp: offset_pb2.OffsetCommitResponse) -> errors.KafkaError | None:
    """The whole-request error, else the first per-partition error, else None."""
    if resp.error_code != 0:
        return errors.for_code(resp.error_code, resp.error_message)
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != 0:
                return errors.for_code(p.error_code, p.error_message, topic=t.name,
                                       partition=p.partition_index)
    return None


def normalize_offsets(offsets: Mapping) -> dict[TopicPartition, OffsetAndMetadata]:
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, v in offsets.items():
        tp = TopicPartition(*tp)
        if isinstance(v, OffsetAndMetadata):
            om = v
        elif isinstance(v, int):
            om = OffsetAndMetadata(v)
        elif isinstance(v, tuple):
            om = OffsetAndMetadata(*v)
        else:
            raise TypeError(f"offset for {tp}: expected int or OffsetAndMetadata, got {v!r}")
        if om.offset < 0:
            raise ValueError(f"offset for {tp} must be >= 0, got {om.offset}")
        out[tp] = om
    return out


def normalize_strategies(strategy: str | Sequence[str] | None) -> tuple[str, ...]:
    """"range" / ["sticky", "range"] / kafka-python class names (RangePartitionAssignor)."""
    if strategy is None:
        return ("range",)
    items = [strategy] if isinstance(strategy, str) else list(strategy)
    out: list[str] = []
    for s in items:
        name = getattr(s, "name", s)
        if not isinstance(name, str):
            raise ValueError(f"partition_assignment_strategy: {s!r} is not a strategy name")
        key = name.lower().replace("partitionassignor", "").replace("assignor", "").replace("_", "")
        key = {"roundrobin": "roundrobin", "round-robin": "roundrobin"}.get(key, key)
        if key not in STRATEGIES:
            raise ValueError(f"partition_assignment_strategy {name!r}: expected one of {STRATEGIES}")
        if key not in out:
            out.append(key)
    if not out:
        raise ValueError("partition_assignment_strategy is empty")
    return tuple(out)


class MemberState(enum.Enum):
    UNJOINED = "unjoined"        # no generation (never joined, left, or removed)
    REBALANCING = "rebalancing"  # revoked; join/sync in progress
    STABLE = "stable"            # has a generation and its assignment


# ------------------------------------------------------------------------------- membership

class GroupMembership:
    """One consumer's group membership. Owned by a Consumer; not thread-safe."""

    def __init__(self, consumer: "Consumer", *, group_id: str, client_id: str,
                 bootstrap: Sequence[str] | str | None, channel_factory: Callable | None = None,
                 session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 3000,
                 max_poll_interval_ms: int = 300000, enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000,
                 strategies: Sequence[str] = ("range",), retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30000,
                 clock: Callable[[], float] | None = None,
                 sleep: Callable[[float], None] | None = None):
        if not group_id:
            raise ValueError("group_id must be a non-empty string")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
        self._consumer = consumer
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
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
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
        self._coordinator_endpoint: str | None = None
        self._next_heartbeat_ms = 0.0
        self.last_heartbeat_ok_ms = 0.0
        self._next_auto_commit_ms = 0.0
        self._paused_across_rebalance: set[TopicPartition] = set()
        self._no_committed: set[TopicPartition] = set()     # OFFSET_FETCH said none: reset policy
        # corr -> (offsets, future, callback)
        self._pending_commits: dict[int, tuple[dict, concurrent.futures.Future, Callable | None]] = {}
        self.rebalances = 0

    # -- subscription ----------------------------------------------------------------------
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
        self._consumer._subs.assign(())

    # -- the poll hook ---------------------------------------------------------------------
    def poll(self, timeout_ms: float) -> None:
        """Called by Consumer.poll() before it drains/fetches: completes async commits, joins
        when needed, heartbeats and auto-commits when due, and initialises the positions of newly
        assigned partitions from the committed offsets. `timeout_ms` is what is left of the
        caller's poll; the deadline is taken on this object's own clock (never mix clocks)."""
        self._drain_async_commits()
        if self.subscribed:
            if self.rejoin_needed or self.state is not MemberState.STABLE:
                if not self.ensure_active_group(self._clock() + max(timeout_ms, 0)):
                    return
            now = self._clock()
            if now >= self._next_heartbeat_ms:
                self.heartbeat()
            if (self.enable_auto_commit and self.state is MemberState.STABLE
                    and not self.rejoin_needed and self._clock() >= self._next_auto_commit_ms):
                self._auto_commit_async()
        self.init_positions()

    def time_to_next_ms(self) -> float:
        """How long poll() may wait before it must come back here (heartbeat / auto-commit)."""
        if not self.subscribed:
            return float("inf")
        if self.rejoin_needed or self.state is not MemberState.STABLE:
            return 0.0
        due = self._next_heartbeat_ms
        if self.enable_auto_commit:
            due = min(due, self._next_auto_commit_ms)
        return max(due - self._clock(), 0.0)

    # -- coordinator -----------------------------------------------------------------------
    def _coordinator_lost(self, reason: str) -> None:
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
                if not e.retriable:
                    conn.close()
                    raise
                code, msg = e.code, str(e)
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

    def _call(self, api: int, body, timeout_ms: int | None = None):
        """One call on the coordinator connection: the body, or a KafkaError raised."""
        assert self._conn is not None
        return self._conn.call(api, body, timeout_ms=timeout_ms or self.request_timeout_ms).body

    # -- join / sync -----------------------------------------------------------------------
    def _reset_generation(self) -> None:
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
        """Before JoinGroup (Kafka's eager onJoinPrepare): commit, revoke, clear."""
        if self.state is MemberState.STABLE:
            owned = set(self.assigned)
            member_valid = self.generation_id >= 0 and bool(self.member_id)
            if member_valid:
                if self.enable_auto_commit:
                    self._commit_positions_quietly("before rebalance")
                self._invoke_listener("on_partitions_revoked", owned)
            else:
                self._invoke_listener("on_partitions_lost", owned)
            subs = self._consumer._subs
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
        while True:
            try:
                if self._join_and_sync(deadline_ms):
                    return True
            except errors.KafkaError as e:
                if not (e.retriable or e.code in _COORDINATOR_LOST):
                    raise
                if e.code in _COORDINATOR_LOST:
                    self._coordinator_lost(str(e))
                log.info("[group=%s] join: %s; retrying", self.group_id, e)
            if self._clock() >= deadline_ms:
                return False
            self._backoff()

    def _join_and_sync(self, deadline_ms: float) -> bool:
        """One JoinGroup + SyncGroup. True when STABLE; False to retry (after backoff)."""
        self.ensure_coordinator(deadline_ms)
        join_timeout = self.max_poll_interval_ms + 5000
        resp = self._call(ApiKey.JOIN_GROUP, self._join_request(), timeout_ms=join_timeout)
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
        sresp = self._call(ApiKey.SYNC_GROUP, group_pb2.SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id))
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

    def _complete_join(self, assigned: frozenset[TopicPartition]) -> None:
        subs = self._consumer._subs
        subs.assign(sorted(assigned))
        for tp in self._paused_across_rebalance & assigned:
            subs.assignment[tp].paused = True
        self._paused_across_rebalance.clear()
        self._no_committed.clear()
        self.assigned = assigned
        self.state = MemberState.STABLE
        self.rejoin_needed = False
        self.rebalances += 1
        now = self._clock()
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms
        self.last_heartbeat_ok_ms = now
        self._next_auto_commit_ms = now + self.auto_commit_interval_ms
        log.info("[group=%s gen=%d] member %s assigned %s (strategy %s)", self.group_id,
                 self.generation_id, self.member_id, sorted(assigned), self.protocol)
        self._invoke_listener("on_partitions_assigned", set(assigned))
        # positions: init_positions() from poll (a failure there must not cause a rejoin)

    # -- heartbeat / leave -----------------------------------------------------------------
    def heartbeat(self) -> int:
        """One HEARTBEAT; returns its error code (also acted upon)."""
        now = self._clock()
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms
        if self.state is not MemberState.STABLE:
            return 0
        try:
            self.ensure_coordinator(now + self.heartbeat_interval_ms)
            resp = self._call(ApiKey.HEARTBEAT, group_pb2.HeartbeatRequest(
                group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id),
                timeout_ms=min(self.request_timeout_ms, self.session_timeout_ms // 2))
            code = resp.error_code
        except errors.KafkaError as e:
            code = e.code
        if code == 0:
            self.last_heartbeat_ok_ms = self._clock()
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

    def leave_group(self) -> None:
        """LEAVE_GROUP once (errors ignored: the session would expire anyway)."""
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
            if self.subscribed:
                self._prepare_leave(autocommit)
                self.leave_group()
            elif autocommit and self.enable_auto_commit and self._consumer._subs.assignment:
                self._commit_positions_quietly("on close")
        finally:
            self._fail_pending_commits(errors.ClientError("consumer closed"))
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- committed offsets -----------------------------------------------------------------
    def _commit_identity(self) -> tuple[int, str]:
        if not self.subscribed:
            return -1, ""              # standalone consumer (assign() with a group id)
        if self.state is MemberState.UNJOINED or self.generation_id < 0:
            raise CommitFailedError(f"group {self.group_id}: not a member of a generation "
                                    "(rejoining on the next poll)")
        return self.generation_id, self.member_id

    def positions(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(st.position)
                for tp, st in self._consumer._subs.assignment.items() if st.position is not None}

    def _generation_gone(self, err: errors.KafkaError) -> CommitFailedError:
        if err.code == _UNKNOWN_MEMBER:
            self._reset_generation()
        if self.subscribed:
            self.rejoin_needed = True
        return CommitFailedError(f"commit failed, the group rebalanced or removed this member "
                                 f"({err.name}); rejoining on the next poll")

    def commit_sync(self, offsets: Mapping | None = None, timeout_ms: float | None = None) -> None:
        """OFFSET_COMMIT and wait. offsets=None: the positions of all assigned partitions."""
        offsets = self.positions() if offsets is None else normalize_offsets(offsets)
        if not offsets:
            return
        deadline = self._clock() + (self.request_timeout_ms if timeout_ms is None else timeout_ms)
        self._drain_async_commits()
        while True:
            generation, member = self._commit_identity()
            req = offsets_to_commit_request(self.group_id, generation, member, offsets)
            try:
                self.ensure_coordinator(deadline)
                err = commit_response_error(self._call(ApiKey.OFFSET_COMMIT, req))
            except errors.KafkaError as e:
                err = e
            if err is None:
                return
            if err.code in _GENERATION_GONE and self.subscribed:
                raise self._generation_gone(err) from err
            if err.code in _COORDINATOR_LOST:
                self._coordinator_lost(str(err))
            elif not err.retriable:
                raise err
            if self._clock() >= deadline:
                raise err
            log.info("[group=%s] commit: %s; retrying", self.group_id, err)
            self._backoff()

    def commit_async(self, offsets: Mapping | None = None,
                     callback: Callable | None = None) -> concurrent.futures.Future:
        """Send an OFFSET_COMMIT without waiting. The Future (and callback(offsets, exc_or_None))
        completes in a later poll(), commit() or close(). Not retried (Kafka's rule: a later
        commit would be overtaken)."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        try:
            offsets = self.positions() if offsets is None else normalize_offsets(offsets)
            if not offsets:
                self._complete(fut, callback, offsets, None)
                return fut
            generation, member = self._commit_identity()
            conn = self.ensure_coordinator(self._clock() + self.request_timeout_ms)
            req = offsets_to_commit_request(self.group_id, generation, member, offsets)
            corr = conn.channel.send(ApiKey.OFFSET_COMMIT, req, timeout_ms=self.request_timeout_ms)
        except errors.RiverbedError as e:
            self._complete(fut, callback, offsets, e)
            return fut
        self._pending_commits[corr] = (offsets, fut, callback)
        return fut

    def _complete(self, fut, callback, offsets, exc) -> None:
        if exc is None:
            fut.set_result(offsets)
        else:
            fut.set_exception(exc)
        if callback is not None:
            try:
                callback(offsets, exc)
            except Exception:  # noqa: BLE001
                log.exception("[group=%s] commit callback raised", self.group_id)

    def _drain_async_commits(self, wait_ms: int = 0) -> None:
        if not self._pending_commits or self._conn is None:
            return
        chan = self._conn.channel
        end = self._clock() + wait_ms
        while self._pending_commits:
            resp = chan.recv(max(int(end - self._clock()), 0))
            if resp is None:
                if self._clock() >= end:
                    return
                continue
            entry = self._pending_commits.pop(resp.correlation_id, None)
            if entry is None:
                continue
            offsets, fut, callback = entry
            if not resp.ok:
                err: errors.RiverbedError | None = errors.for_code(resp.error_code, resp.error_message)
            else:
                err = commit_response_error(resp.body)
            if err is not None:
                assert isinstance(err, errors.KafkaError)
                if err.code in _GENERATION_GONE and self.subscribed:
                    err = self._generation_gone(err)
                elif err.code in _COORDINATOR_LOST:
                    self._coordinator_lost(str(err))
            self._complete(fut, callback, offsets, err)

    def _fail_pending_commits(self, exc: BaseException) -> None:
        pending, self._pending_commits = self._pending_commits, {}
        for offsets, fut, callback in pending.values():
            self._complete(fut, callback, offsets, exc)

    def _auto_commit_async(self) -> None:
        self._next_auto_commit_ms = self._clock() + self.auto_commit_interval_ms

        def done(offsets, exc):
            if exc is not None:
                log.info("[group=%s] auto-commit of %d offsets failed: %s", self.group_id,
                         len(offsets), exc)
        self.commit_async(None, done)

    def _commit_positions_quietly(self, when: str) -> None:
        try:
            self.commit_sync(None)
        except errors.RiverbedError as e:
            log.warning("[group=%s] auto-commit %s failed: %s", self.group_id, when, e)

    def fetch_committed(self, partitions: Iterable[TopicPartition] | None,
                        timeout_ms: float | None = None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OFFSET_FETCH (retried while the coordinator loads or moves). None = nothing
        committed. partitions=None: everything the group committed."""
        req = offset_pb2.OffsetFetchRequest(group_id=self.group_id)
        wanted = None
        if partitions is not None:
            wanted = [TopicPartition(*tp) for tp in partitions]
            for topic, parts in group_by_topic(wanted):
                req.topics.add(name=topic, partition_indexes=parts)
        deadline = self._clock() + (self.request_timeout_ms if timeout_ms is None else timeout_ms)
        while True:
            try:
                self.ensure_coordinator(deadline)
                resp = self._call(ApiKey.OFFSET_FETCH, req)
                err = errors.for_code(resp.error_code, resp.error_message) if resp.error_code else None
            except errors.KafkaError as e:
                err = e
            if err is None:
                out: dict[TopicPartition, OffsetAndMetadata | None] = {}
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if p.error_code != 0:
                            perr = errors.for_code(p.error_code, p.error_message, topic=t.name,
                                                   partition=p.partition_index)
                            if perr.retriable:
                                err = perr
                                break
                            raise perr
                        out[tp] = (None if p.committed_offset < 0 else
                                   OffsetAndMetadata(p.committed_offset, p.metadata,
                                                     p.committed_leader_epoch))
                    if err is not None:
                        break
                if err is None:
                    if wanted is not None:
                        return {tp: out.get(tp) for tp in wanted}
                    return out
            assert err is not None
            if err.code in _COORDINATOR_LOST:
                self._coordinator_lost(str(err))
            elif not err.retriable:
                raise err
            if self._clock() >= deadline:
                raise err
            self._backoff()

    def init_positions(self) -> None:
        """Positions of assigned partitions that have none: the committed offset, else left to
        the consumer's auto_offset_reset (remembered in _no_committed)."""
        subs = self._consumer._subs
        missing = [tp for tp, st in subs.assignment.items()
                   if st.position is None and st.reset_to is None and tp not in self._no_committed]
        if not missing:
            return
        committed = self.fetch_committed(missing)
        for tp in missing:
            st = subs.assignment.get(tp)
            om = committed.get(tp)
            if st is None or st.position is not None or st.reset_to is not None:
                continue
            if om is None:
                self._no_committed.add(tp)
            else:
                self._consumer._set_position(st, om.offset)
