"""The committed-offsets half of a consumer's GroupMembership: OFFSET_COMMIT (sync, async,
auto-commit), OFFSET_FETCH and positions from committed offsets (Kafka's ConsumerCoordinator
commit paths). GroupMembership inherits it; the join/sync/heartbeat half and the state it reads
(member id, generation, the coordinator connection) live in riverbed.group_membership.

- `commit_sync` retries OFFSETS_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and
  timeouts with backoff (rediscovering the coordinator) until request_timeout_ms;
  REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID mean the generation is gone:
  rejoin on the next poll and raise CommitFailedError.
- `commit_async` returns a Future completed by a later poll / commit / close (no thread).
"""
from __future__ import annotations

import concurrent.futures
import enum
import logging
from typing import Any, Callable, Iterable, Mapping

from riverbed import errors, tracing
from riverbed._proto.v1 import header_pb2, offset_pb2
from riverbed.client_metrics import ConsumerMetrics
from riverbed.cluster import GatewayConnection
from riverbed.consumer_groups import commit_response_error, normalize_offsets, \
    offsets_to_commit_request
from riverbed.coordinator.consumer_protocol import group_by_topic
from riverbed.errors import CommitFailedError
from riverbed.structs import OffsetAndMetadata, TopicPartition
from riverbed.subscription_state import SubscriptionState

__all__ = ["CommittedOffsets", "MemberState"]

log = logging.getLogger("riverbed.group_membership")

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode

_COORDINATOR_LOST = frozenset({E.Value("NOT_COORDINATOR"), E.Value("COORDINATOR_NOT_AVAILABLE"),
                               E.Value("REQUEST_TIMED_OUT"), E.Value("NETWORK_EXCEPTION")})
_LOADING = E.Value("COORDINATOR_LOAD_IN_PROGRESS")
_REBALANCE = E.Value("REBALANCE_IN_PROGRESS")
_ILLEGAL_GENERATION = E.Value("ILLEGAL_GENERATION")
_UNKNOWN_MEMBER = E.Value("UNKNOWN_MEMBER_ID")
_GENERATION_GONE = frozenset({_REBALANCE, _ILLEGAL_GENERATION, _UNKNOWN_MEMBER})


class MemberState(enum.Enum):
    UNJOINED = "unjoined"        # no generation (never joined, left, or removed)
    REBALANCING = "rebalancing"  # revoked; join/sync in progress
    STABLE = "stable"            # has a generation and its assignment


class MemberState(enum.Enum):
    UNJOINED = "unjoined"        # no generation (never joined, left, or removed)
    REBALANCING = "rebalancing"  # revoked; join/sync in progress
    STABLE = "stable"            # has a generation and its assignment


class CommittedOffsets:
    """Commits and committed offsets of one group member (a mixin of GroupMembership, which
    sets these attributes and provides the coordinator calls)."""

    group_id: str
    state: MemberState
    member_id: str
    generation_id: int
    rejoin_needed: bool
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    request_timeout_ms: int
    _subs: SubscriptionState
    _conn: GatewayConnection | None
    _clock: Callable[[], float]
    _next_auto_commit_ms: float
    _no_committed: set[TopicPartition]
    _pending_commits: dict[int, tuple[dict[TopicPartition, OffsetAndMetadata],
                                      concurrent.futures.Future[Any], Callable[..., Any] | None]]
    _commit_sent: dict[Any, tuple[float, Any]]      # future -> (sent ms, span or None)
    metrics: ConsumerMetrics

    @property
    def subscribed(self) -> bool:
        raise NotImplementedError

    def _reset_generation(self) -> None:
        raise NotImplementedError

    def _coordinator_lost(self, reason: str) -> None:
        raise NotImplementedError

    def ensure_coordinator(self, deadline_ms: float) -> GatewayConnection:
        raise NotImplementedError

    def _call(self, api: int, body: Any, timeout_ms: int | None = None,
              api_version: int = 0) -> Any:
        raise NotImplementedError

    def _backoff(self) -> None:
        raise NotImplementedError

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
                for tp, st in self._subs.assignment.items() if st.position is not None}

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
        with tracing.current_span(*self._commit_span_args(offsets)) as span:
            self._commit_sync(offsets, deadline, span)

    def _commit_span_args(self, offsets: Mapping[TopicPartition, Any]) -> tuple:
        """A CLIENT span `commit <topic>` (messaging operation type `settle`)."""
        topics = {tp.topic for tp in offsets}
        attrs: dict[str, Any] = {"messaging.system": tracing.SYSTEM,
                                 "messaging.operation.type": "settle",
                                 "messaging.operation.name": "commit",
                                 "messaging.consumer.group.name": self.group_id,
                                 "messaging.batch.message_count": len(offsets)}
        name = "commit"
        if len(topics) == 1:
            (topic,) = topics
            name = f"commit {topic}"
            attrs["messaging.destination.name"] = topic
            if len(offsets) == 1:
                ((tp, om),) = offsets.items()
                attrs["messaging.destination.partition.id"] = str(tp.partition)
                attrs["messaging.kafka.offset"] = getattr(om, "offset", om)
        return name, tracing.SpanKind.CLIENT, attrs

    def _commit_sync(self, offsets: dict, deadline: float, span) -> None:
        while True:
            generation, member = self._commit_identity()
            req = offsets_to_commit_request(self.group_id, generation, member, offsets)
            try:
                self.ensure_coordinator(deadline)
                sent = self._clock()
                resp = self._call(ApiKey.OFFSET_COMMIT, req)
                answered = self._clock()
                err = commit_response_error(resp)
            except errors.KafkaError as e:
                err = e
            if err is None:
                self.metrics.committed(answered - sent, answered)
                return
            if span is not None:
                span.add_event("commit failed", {"error": getattr(err, "name", str(err))})
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
            t = tracing.tracer()
            span = None
            if t is None:
                corr = conn.channel.send(ApiKey.OFFSET_COMMIT, req,
                                         timeout_ms=self.request_timeout_ms)
            else:
                name, kind, attrs = self._commit_span_args(offsets)
                span = t.start_span(name, kind=kind, attributes=attrs)
                try:
                    with tracing.use_span(span, end_on_exit=False):
                        corr = conn.channel.send(ApiKey.OFFSET_COMMIT, req,
                                                 timeout_ms=self.request_timeout_ms)
                except BaseException as e:
                    span.record_exception(e)
                    span.end()
                    raise
        except errors.RiverbedError as e:
            self._complete(fut, callback, offsets, e)
            return fut
        self._pending_commits[corr] = (offsets, fut, callback)
        self._commit_sent[fut] = (self._clock(), span)
        return fut

    def _complete(self, fut, callback, offsets, exc) -> None:
        sent = self._commit_sent.pop(fut, None)
        if sent is not None:                 # an async commit that was sent: metrics, span
            self._async_commit_done(sent[0], sent[1], exc)
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
            self._commit_answered(resp)

    def _commit_answered(self, resp: Any) -> None:
        """Complete the async commit this response answers (another request's response goes to
        _unmatched_response)."""
        entry = self._pending_commits.pop(resp.correlation_id, None)
        if entry is None:
            self._unmatched_response(resp)
            return
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

    def _unmatched_response(self, resp: Any) -> None:
        """A response on the coordinator channel that no async commit awaits (GroupMembership
        keeps its cooperative join's answer)."""

    def _async_commit_done(self, sent_ms: float, span: Any, exc: BaseException | None) -> None:
        if exc is None:
            now = self._clock()
            self.metrics.committed(now - sent_ms, now)
        if span is not None:
            if exc is not None:
                span.set_status(tracing.Status(tracing.StatusCode.ERROR,
                                               getattr(exc, "name", None) or str(exc)))
            span.end()

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
        stable = getattr(self, "require_stable", False)
        req = offset_pb2.OffsetFetchRequest(group_id=self.group_id, require_stable=stable)
        wanted = None
        if partitions is not None:
            wanted = [TopicPartition(*tp) for tp in partitions]
            for topic, parts in group_by_topic(wanted):
                req.topics.add(name=topic, partition_indexes=parts)
        deadline = self._clock() + (self.request_timeout_ms if timeout_ms is None else timeout_ms)
        while True:
            try:
                self.ensure_coordinator(deadline)
                resp = self._call(ApiKey.OFFSET_FETCH, req, api_version=1 if stable else 0)
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
        subs = self._subs
        missing = [tp for tp, st in subs.assignment.items()
                   if st.position is None and st.reset_to is None and tp not in self._no_committed]
        if not missing:
            return
        try:
            committed = self.fetch_committed(missing)
        except errors.UnstableOffsetCommitError:
            return       # a transaction is committing offsets here: the next poll asks again
        for tp in missing:
            st = subs.assignment.get(tp)
            om = committed.get(tp)
            if st is None or st.position is not None or st.reset_to is not None:
                continue
            if om is None:
                self._no_committed.add(tp)
            else:
                st.seek(om.offset)
