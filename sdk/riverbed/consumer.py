"""The Consumer: kafka-python's KafkaConsumer API over Riverbed's gateways.

No background thread: `poll()` does the I/O on the caller's thread, but the fetcher keeps the
next FETCH in flight while the application processes records. Per assigned partition it tracks
two offsets:

    position      the next offset poll() will return to the application
    fetch_offset  the next offset to ask the storage node for (after the batches already
                  fetched and buffered)

When a FETCH answer arrives, its payloads are kept as "completed fetches" (undecoded bytes) and
the next FETCH for the partitions with at most one buffered completed fetch goes out at once;
records are decoded batch by batch as poll() hands them out. A fetch returns whole batches, so
records before `position` (a batch that starts before it, after a seek) are skipped; a trailing
partial batch (cut at max bytes) is ignored and fetched again. OFFSET_OUT_OF_RANGE applies
auto_offset_reset (earliest / latest via LIST_OFFSETS, or none: OffsetOutOfRangeError).

Transactions: with isolation_level="read_committed" the consumer reads only below each
partition's last stable offset and skips the records of aborted transactions (the storage node
lists them with each answer; riverbed.fetcher filters); its group's committed offsets are read
with require_stable, and end_offsets()/seek_to_end() answer the last stable offset.

Consumer groups: with `group_id`, `subscribe(topics | pattern=, listener=)` (or topics given to
the constructor) joins the group; the coordinator's assignment replaces the
assignment of `riverbed.subscription_state`
and positions start at the committed offsets (else auto_offset_reset). The membership, its
heartbeats, auto-commit and commits live in `riverbed.group_membership`; poll() calls its hook
first and bounds its waits by the next heartbeat. Without a group, topics given to the
constructor have all their partitions assigned.
"""
from __future__ import annotations

import collections
import logging
import os
import time
from typing import Any, Callable, Iterable, Sequence

from riverbed import client_otel, errors, process_owner, tracing
from riverbed._proto.v1 import fetch_pb2, header_pb2
from riverbed.client_metrics import ConsumerMetrics
from riverbed.cluster import (
    bootstrap_timeout,
    GatewayConnection,
    require_gateway,
    resolve_bootstrap,
)
from riverbed.wire.client import secure_channel_factory
from riverbed.fetcher import CompletedFetch
from riverbed.records import HEADER_SIZE, iter_batches, read_header
from riverbed.group_membership import (
    ConsumerRebalanceListener,
    GroupMembership,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    normalize_strategies,
)
from riverbed.kafka_python_types import kafka_python_settings
from riverbed.serializer import deserializer_of
from riverbed.structs import ConsumerRecord, OffsetAndTimestamp, TopicPartition
from riverbed.list_offsets import list_offsets
from riverbed.transactions import ConsumerGroupMetadata
from riverbed.subscription_state import EARLIEST, LATEST, PartitionState, SubscriptionState

__all__ = ["Consumer", "KafkaConsumer", "ConsumerRebalanceListener", "OffsetAndMetadata"]

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
_OFFSET_OUT_OF_RANGE = errors.ErrorCode.Value("OFFSET_OUT_OF_RANGE")
_REQUEST_TIMED_OUT = errors.ErrorCode.Value("REQUEST_TIMED_OUT")
# Completed fetches buffered per partition before the fetcher stops asking for more.
_MAX_BUFFERED_FETCHES = 2


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Consumer:
    """Reads records from Riverbed topics (kafka-python's KafkaConsumer API).

        with Consumer("orders", bootstrap_servers=["tcp://127.0.0.1:9092"],
                      auto_offset_reset="earliest", consumer_timeout_ms=1000) as c:
            for rec in c:
                print(rec.partition, rec.offset, rec.key, rec.value)

    Not thread-safe (like kafka-python's): use it from one thread. It belongs to the process
    that created it: after os.fork(), the child's copy raises errors.ForkedClientError from
    poll() and every call that talks to the cluster; close() there is a no-op."""

    # How the consumer waits without a socket to wait on (riverbed.aio awaits instead).
    _sleep = staticmethod(time.sleep)
    # Deserializers see None keys and values too (kafka-python's way: KafkaConsumer)? Consumer's
    # leave None alone.
    _convert_none = False

    def __init__(self, *topics: str, bootstrap_servers: str | Sequence[str] | None = None,
                 client_id: str | None = None, group_id: str | None = None,
                 fetch_min_bytes: int = 1, fetch_max_wait_ms: int = 500,
                 max_partition_fetch_bytes: int = 1048576, fetch_max_bytes: int = 52428800,
                 auto_offset_reset: str = "latest", consumer_timeout_ms: float = float("inf"),
                 max_poll_records: int = 500, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, check_crcs: bool = True,
                 key_deserializer: Callable | None = None,
                 value_deserializer: Callable | None = None,
                 bootstrap: str | Sequence[str] | None = None,
                 enable_auto_commit: bool = True, auto_commit_interval_ms: int = 5000,
                 session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 3000,
                 max_poll_interval_ms: int = 300000, heartbeat_long_poll: bool = True,
                 partition_assignment_strategy: str | Sequence[str] = ("range",),
                 security_protocol: str | None = None, curve_secret_key_file: str | None = None,
                 curve_server_public_key: str | None = None,
                 curve_server_keys_dir: str | None = None,
                 isolation_level: str = "read_uncommitted",
                 _channel_factory: Callable | None = None):
        bootstrap = resolve_bootstrap(bootstrap_servers, bootstrap)
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation_level={isolation_level!r}: expected read_uncommitted or "
                             "read_committed")
        self.isolation_level = isolation_level
        self._read_committed = isolation_level == "read_committed"
        _channel_factory = secure_channel_factory(
            _channel_factory, security_protocol=security_protocol,
            curve_secret_key_file=curve_secret_key_file,
            curve_server_public_key=curve_server_public_key,
            curve_server_keys_dir=curve_server_keys_dir)
        if auto_offset_reset not in ("earliest", "latest", "none", "smallest", "largest"):
            raise ValueError(f"auto_offset_reset={auto_offset_reset!r}: expected earliest, latest or none")
        strategies = normalize_strategies(partition_assignment_strategy)
        self.client_id = client_id or f"riverbed-consumer-{os.getpid()}-{id(self):x}"
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.check_crcs = check_crcs
        self._reset = {"smallest": "earliest", "largest": "latest"}.get(auto_offset_reset,
                                                                          auto_offset_reset)
        self.consumer_timeout_ms = consumer_timeout_ms
        self.max_poll_records = max_poll_records
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        # fn(topic, headers, data): a function's or a kafka-python Deserializer's
        self._key_deserializer = deserializer_of(key_deserializer)
        self._value_deserializer = deserializer_of(value_deserializer)
        self._conn = GatewayConnection(bootstrap, client_id=self.client_id,
                                       request_timeout_ms=request_timeout_ms,
                                       channel_factory=_channel_factory)
        self._subs = SubscriptionState()
        self._fetch_in_flight: dict[int, dict[TopicPartition, int]] = {}  # corr -> tp -> epoch
        self._pending_error: BaseException | None = None
        self._closed = False
        self._owner_pid = process_owner.current_pid()
        self._iterator_records: collections.deque = collections.deque()
        self._drain_start = 0
        # Kafka's metrics (riverbed.client_metrics): per poll / fetch / partition of a fetch
        self._metrics = ConsumerMetrics()
        self._fetch_sent: dict[int, tuple[float, Any]] = {}   # corr -> (sent ms, CONSUMER span)
        # metrics(): counted per poll / per fetch, never per record
        self._records_consumed = 0
        self._bytes_fetched = 0
        self._fetch_requests = 0
        self._fetch_responses = 0
        self._throttle_until_ms = 0.0       # quota: no FETCH before this (throttle_time_ms)
        self._fetch_throttle_total = 0
        self._fetch_throttle_max = 0
        self.group_id = group_id
        self._group: GroupMembership | None = None
        if group_id is not None:
            self._group = GroupMembership(
                self._subs, group_id=group_id, client_id=self.client_id, bootstrap=bootstrap,
                channel_factory=_channel_factory, session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                max_poll_interval_ms=max_poll_interval_ms, enable_auto_commit=enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms, strategies=strategies,
                retry_backoff_ms=retry_backoff_ms, request_timeout_ms=request_timeout_ms,
                heartbeat_long_poll=heartbeat_long_poll)
            self._group.metrics = self._metrics
            # read_committed: never resume from an offset a pending transaction is about to
            # replace (OFFSET_FETCH require_stable, KIP-447)
            self._group.require_stable = self._read_committed
        if topics:
            self._take_topics(topics)
        client_otel.register("consumer", self)     # only with the application's MeterProvider

    def _take_topics(self, topics: Sequence[str]) -> None:
        """The constructor's topics: subscribed with a group, else every partition assigned."""
        if self._group is not None:
            self.subscribe(topics)
        else:
            self._subs.subscribed_topics = tuple(topics)
            self._assign_all_partitions(topics)

    # -- assignment ---------------------------------------------------------------------------
    def _assign_all_partitions(self, topics: Sequence[str]) -> None:
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        while True:
            self._conn.fetch_metadata(topics, allow_auto_topic_creation=False)
            meta = self._conn.metadata
            missing = [t for t in topics if meta.num_partitions(t) is None]
            if not missing:
                break
            if time.monotonic() > deadline:
                err = meta.topic_error(missing[0])
                if err is not None:
                    raise errors.for_code(err[0], err[1], topic=missing[0])
                raise errors.UnknownTopicOrPartitionError("not in metadata", topic=missing[0])
            self._sleep(self.retry_backoff_ms / 1000.0)
        self._subs.assign(TopicPartition(t, p) for t in topics
                          for p in sorted(meta.partitions_for_topic(t) or ()))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replaces the previous assignment). With a group_id,
        commits go to the group as a standalone consumer (generation -1)."""
        if self._group is not None and self._group.subscribed:
            raise errors.IllegalStateError(
                "assign() and subscribe() cannot be mixed: unsubscribe() first")
        self._subs.subscribed_topics = ()
        self._subs.assign(partitions)

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    def subscription(self) -> set[str]:
        return set(self._subs.subscribed_topics)

    # -- consumer groups (riverbed.group_membership) -------------------------------------------
    def _require_group(self, what: str) -> GroupMembership:
        process_owner.check_owner(self._owner_pid, "this consumer")
        if self._group is None:
            raise errors.IllegalStateError(f"{what} needs a group_id")
        return self._group

    def subscribe(self, topics: Iterable[str] = (), pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Join group_id for these topics (or the topics matching `pattern`, re.fullmatch at the
        coordinator); the assignment arrives in poll(). Without a group_id, topics get all their
        partitions assigned (no pattern)."""
        if isinstance(topics, str):
            topics = (topics,)
        topics = tuple(topics)
        if self._group is None:
            if pattern is not None:
                raise errors.IllegalStateError("subscribe(pattern=...) needs a group_id")
            self._subs.subscribed_topics = topics
            self._assign_all_partitions(topics)
            return
        if self._subs.assignment and not self._group.subscribed:
            raise errors.IllegalStateError(
                "assign() and subscribe() cannot be mixed: unsubscribe() first")
        self._group.subscribe(topics, pattern, listener)
        self._subs.subscribed_topics = topics

    def unsubscribe(self) -> None:
        """Leave the group (after an auto-commit and on_partitions_revoked) and drop every
        partition."""
        if self._group is not None:
            self._group.unsubscribe()
        self._subs.subscribed_topics = ()
        self._subs.assign(())

    def commit(self, offsets: dict | None = None) -> None:
        """Commit synchronously: offsets {TopicPartition: OffsetAndMetadata | int} (the next
        offset to read), default the current positions of all assigned partitions. Raises
        CommitFailedError when the group rebalanced meanwhile."""
        self._require_group("commit()").commit_sync(offsets)

    def commit_async(self, offsets: dict | None = None, callback: Callable | None = None):
        """Send a commit without waiting; callback(offsets, exception_or_None) and the returned
        Future complete during a later poll(), commit() or close()."""
        return self._require_group("commit_async()").commit_async(offsets, callback)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation and member id, for a transactional producer's
        send_offsets_to_transaction (KIP-447): offsets it commits for a generation the group has
        left are refused, so a zombie worker cannot commit."""
        group = self._require_group("group_metadata()")
        if not group.subscribed:
            return ConsumerGroupMetadata(group.group_id)
        return ConsumerGroupMetadata(group.group_id, group.generation_id, group.member_id)

    def committed(self, partition: TopicPartition, metadata: bool = False):
        """The group's committed offset for the partition (None when none), or the
        OffsetAndMetadata with metadata=True."""
        om = self._require_group("committed()").fetch_committed([TopicPartition(*partition)])
        got = om.get(TopicPartition(*partition))
        if got is None:
            return None
        return got if metadata else got.offset

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        meta = self._conn.metadata
        if meta.num_partitions(topic) is None:
            self._conn.fetch_metadata([topic])
        return meta.partitions_for_topic(topic)

    def topics(self) -> set[str]:
        self._conn.fetch_metadata(None)
        return self._conn.metadata.topics()

    def _state(self, tp) -> PartitionState:
        st = self._subs.assignment.get(TopicPartition(*tp))
        if st is None:
            raise errors.IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return st

    # -- positions ----------------------------------------------------------------------------
    def seek(self, partition: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError("offset must be >= 0")
        self._state(partition).seek(offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._subs.assignment):
            self._state(tp).seek(None, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._subs.assignment):
            self._state(tp).seek(None, LATEST)

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record poll() will return for this partition."""
        st = self._state(partition)
        if st.position is None:
            self._update_positions([TopicPartition(*partition)])
        assert st.position is not None
        return st.position

    def highwater(self, partition: TopicPartition) -> int | None:
        hw = self._state(partition).high_watermark
        return hw if hw >= 0 else None

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets({TopicPartition(*tp): EARLIEST for tp in partitions})

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets({TopicPartition(*tp): LATEST for tp in partitions})

    def offsets_for_times(self, timestamps: dict[TopicPartition, int]
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """kafka-python's: per partition, the earliest offset whose record timestamp is >= the
        given time (ms since the epoch) and that timestamp; None where no record is that late
        (below the high watermark)."""
        want = {}
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"timestamp {ts} for {tp}: must be >= 0 (ms since the epoch)")
            want[TopicPartition(*tp)] = int(ts)
        found = self._list_offsets(want, with_timestamps=True)
        return {tp: OffsetAndTimestamp(*found[tp]) if found[tp][0] >= 0 else None for tp in want}

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._subs.assignment.items() if st.paused}

    def _update_positions(self, tps: Sequence[TopicPartition]) -> None:
        want: dict[TopicPartition, int] = {}
        for tp in tps:
            st = self._subs.assignment[tp]
            if st.position is not None:
                continue
            if st.reset_to is not None:
                want[tp] = st.reset_to
            elif self._reset == "none":
                raise NoOffsetForPartitionError(
                    "no committed offset or position and auto_offset_reset='none'",
                    topic=tp.topic, partition=tp.partition)
            else:
                want[tp] = EARLIEST if self._reset == "earliest" else LATEST
        if not want:
            return
        found = self._list_offsets(want)
        for tp, offset in found.items():
            st = self._subs.assignment[tp]
            st.seek(offset)

    def _list_offsets(self, want: dict[TopicPartition, int], with_timestamps: bool = False
                      ) -> dict[TopicPartition, Any]:
        return list_offsets(self._conn, want, with_timestamps=with_timestamps,
                            request_timeout_ms=self.request_timeout_ms,
                            retry_backoff_ms=self.retry_backoff_ms, sleep=self._sleep,
                            isolation_level=1 if self._read_committed else 0)

    # -- fetching -----------------------------------------------------------------------------
    def _fetchable(self, now: float) -> list[TopicPartition]:
        in_flight = set()
        for parts in self._fetch_in_flight.values():
            in_flight.update(parts)
        if now < self._throttle_until_ms:
            return []     # the gateway asked us to wait (quota throttle_time_ms)
        return [tp for tp, st in self._subs.assignment.items()
                if st.fetch_offset is not None and not st.paused and tp not in in_flight
                and len(st.buffered) < _MAX_BUFFERED_FETCHES and st.backoff_until_ms <= now]

    def _send_fetches(self) -> None:
        if self._fetch_in_flight:
            return        # one FETCH in flight at a time (it covers every fetchable partition)
        tps = self._fetchable(_now_ms())
        if not tps:
            return
        req = fetch_pb2.FetchRequest(replica_id=-1, max_wait_ms=self.fetch_max_wait_ms,
                                     min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
                                     isolation_level=1 if self._read_committed else 0)
        version = 1 if self._read_committed else 0
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp)
        epochs: dict[TopicPartition, int] = {}
        for topic, parts in by_topic.items():
            t = req.topics.add(name=topic)
            for tp in parts:
                st = self._subs.assignment[tp]
                t.partitions.add(partition=tp.partition, fetch_offset=st.fetch_offset,
                                 partition_max_bytes=self.max_partition_fetch_bytes,
                                 current_leader_epoch=-1, log_start_offset=-1,
                                 last_fetched_epoch=-1)
                epochs[tp] = st.epoch
        t = tracing.tracer()
        span = None
        if t is None:
            corr = self._conn.channel.send(ApiKey.FETCH, req, timeout_ms=self.request_timeout_ms
                                           + self.fetch_max_wait_ms, api_version=version)
        else:
            span = _fetch_span(t, by_topic, self._subs, self.group_id)
            try:
                with tracing.use_span(span, end_on_exit=False):
                    corr = self._conn.channel.send(ApiKey.FETCH, req,
                                                   timeout_ms=self.request_timeout_ms
                                                   + self.fetch_max_wait_ms, api_version=version)
            except BaseException as e:
                span.record_exception(e)
                span.end()
                raise
        self._fetch_in_flight[corr] = epochs
        self._fetch_sent[corr] = (_now_ms(), span)
        self._fetch_requests += 1

    def _handle_fetch_response(self, resp) -> None:
        epochs = self._fetch_in_flight.pop(resp.correlation_id, None)
        if epochs is None:
            return
        now = _now_ms()
        sent_ms, span = self._fetch_sent.pop(resp.correlation_id, (now, None))
        m = self._metrics
        if not resp.ok:
            m.fetch_errors += 1
            if span is not None:
                span.set_status(tracing.Status(tracing.StatusCode.ERROR,
                                               resp.error_message or str(resp.error_code)))
                span.end()
            if resp.error_code == _REQUEST_TIMED_OUT:
                self._conn.failover(resp.error_message)
                self._fetch_in_flight.clear()
                self._end_fetch_spans()
            err = errors.for_code(resp.error_code, resp.error_message)
            if not err.retriable:
                self._pending_error = err
            for tp in epochs:
                st = self._subs.assignment.get(tp)
                if st is not None:
                    st.backoff_until_ms = now + self.retry_backoff_ms
            return
        self._fetch_responses += 1
        throttle = resp.body.throttle_time_ms
        if throttle > 0:
            self._throttle_until_ms = max(self._throttle_until_ms, now + throttle)
            self._fetch_throttle_total += throttle
            self._fetch_throttle_max = max(self._fetch_throttle_max, throttle)
        payloads = resp.payloads
        i = 0
        refresh = False
        nbytes = records = 0
        for t in resp.body.topics:
            for p in t.partitions:
                payload = payloads[i] if i < len(payloads) else b""
                i += 1
                tp = TopicPartition(t.name, p.partition)
                st = self._subs.assignment.get(tp)
                if st is None or epochs.get(tp) != st.epoch:
                    continue        # unassigned or seeked since: drop
                if p.error_code != 0:
                    m.fetch_errors += 1
                    refresh |= self._partition_error(tp, st, p, now)
                    continue
                st.high_watermark = p.high_watermark
                st.last_stable_offset = p.last_stable_offset
                size, count = self._add_completed_fetch(tp, st, payload,
                                                        p.aborted_transactions)
                nbytes += size
                records += count
                if st.fetch_offset is not None:
                    end = p.last_stable_offset if self._read_committed else p.high_watermark
                    m.lag(tp, max(end - st.fetch_offset, 0), now)
        m.fetched(now - sent_ms, nbytes, records, now)
        if span is not None:
            _end_fetch_span(span, resp, records)
        if refresh:
            try:
                self._conn.fetch_metadata({tp.topic for tp in self._subs.assignment})
            except errors.RiverbedError as e:
                log.debug("metadata refresh failed: %s", e)

    def _add_completed_fetch(self, tp: TopicPartition, st: PartitionState,
                             payload, aborted=()) -> tuple[int, int]:
        """Buffers the whole batches of one partition's answer; returns (their bytes, records
        in them) for the metrics (read from the batch headers, not the records)."""
        buf = getattr(payload, "buffer", payload)
        batches = list(iter_batches(buf))
        if not batches:
            if len(buf) >= HEADER_SIZE:
                size = read_header(buf).size
                if size > self.max_partition_fetch_bytes:
                    self._pending_error = errors.RecordTooLargeError(
                        f"a batch of {size} bytes at offset {st.fetch_offset} is larger than "
                        f"max_partition_fetch_bytes={self.max_partition_fetch_bytes}",
                        topic=tp.topic, partition=tp.partition)
            return 0, 0
        next_offset = batches[-1][1].next_offset
        self._bytes_fetched += len(buf)
        st.fetch_offset = next_offset
        st.buffered.append(CompletedFetch(
            tp, buf, batches, next_offset, st.high_watermark, self.check_crcs,
            [(a.producer_id, a.first_offset) for a in aborted] if aborted else None,
            self._read_committed))
        return len(buf), sum(h.records_count for _, h in batches)

    def _end_fetch_spans(self) -> None:
        """The spans of fetches dropped without an answer (gateway lost)."""
        sent, self._fetch_sent = self._fetch_sent, {}
        for _, span in sent.values():
            if span is not None:
                span.set_status(tracing.Status(tracing.StatusCode.ERROR, "gateway lost"))
                span.end()

    def _partition_error(self, tp: TopicPartition, st: PartitionState, p, now: float) -> bool:
        if p.error_code == _OFFSET_OUT_OF_RANGE:
            if self._reset == "none":
                self._pending_error = errors.OffsetOutOfRangeError(
                    f"fetch offset {st.fetch_offset} is out of range (auto_offset_reset='none')",
                    topic=tp.topic, partition=tp.partition)
                st.paused = True
            else:
                log.info("%s-%d: offset %s out of range, resetting to %s", tp.topic, tp.partition,
                         st.fetch_offset, self._reset)
                st.seek(None, EARLIEST if self._reset == "earliest" else LATEST)
            return False
        err = errors.for_code(p.error_code, p.error_message, topic=tp.topic, partition=tp.partition)
        if not err.retriable:
            self._pending_error = err
            return False
        st.backoff_until_ms = now + self.retry_backoff_ms
        return err.refresh_metadata

    def _drain(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        left = max_records
        convert = self._convert if self._key_deserializer is not None or \
            self._value_deserializer is not None else None
        items = list(self._subs.assignment.items())
        n = len(items)
        start = self._drain_start % n if n else 0
        self._drain_start = start + 1      # rotate: no partition is always served first
        for k in range(n):
            tp, st = items[(start + k) % n]
            if left <= 0:
                break
            while st.buffered and left > 0 and not st.paused:
                cf = st.buffered[0]
                recs, st.position = cf.take(st.position, left, convert)
                if recs:
                    out.setdefault(tp, []).extend(recs)
                    left -= len(recs)
                if cf.exhausted:
                    st.buffered.popleft()
                    if st.position < cf.next_fetch_offset:
                        st.position = cf.next_fetch_offset  # compacted gap / control records
        return out

    def _convert(self, r: ConsumerRecord) -> ConsumerRecord:
        key, value = r.key, r.value
        if self._key_deserializer is not None and (key is not None or self._convert_none):
            key = self._key_deserializer(r.topic, r.headers, key)
        if self._value_deserializer is not None and (value is not None or self._convert_none):
            value = self._value_deserializer(r.topic, r.headers, value)
        return r._replace(key=key, value=value)

    def poll(self, timeout_ms: float = 0, max_records: int | None = None,
             update_offsets: bool = True) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions: {TopicPartition: [ConsumerRecord, ...]}, at most
        max_records (default max_poll_records) in all; {} if none arrived within timeout_ms."""
        process_owner.check_owner(self._owner_pid, "this consumer")
        if self._closed:
            raise errors.ClientError("consumer is closed")
        max_records = max_records or self.max_poll_records
        now = _now_ms()
        self._metrics.polled(now)
        deadline = now + max(timeout_ms, 0)
        chan_recv = None
        while True:
            if self._pending_error is not None:
                err, self._pending_error = self._pending_error, None
                raise err
            if self._group is not None:
                self._group.poll(deadline - _now_ms())   # join/rebalance, heartbeat, auto-commit, committed
            missing = [tp for tp, st in self._subs.assignment.items() if st.position is None]
            if missing:
                self._update_positions(missing)
            if self._fetch_in_flight:
                self._receive_arrived()  # answers that came while the application worked
            self._send_fetches()         # pipelined: the next FETCH travels while we decode
            records = self._drain(max_records)
            if records:
                self._send_fetches()
                n = sum(map(len, records.values()))
                self._records_consumed += n
                self._metrics.consumed(n, _now_ms())
                return records
            now = _now_ms()
            if now >= deadline and chan_recv is not None:
                return {}
            chan_recv = self._conn.channel
            wait = max(deadline - now, 0)
            if self._group is not None:
                wait = min(wait, self._group.time_to_next_ms())   # heartbeats are due in poll
            if not self._fetch_in_flight:
                # nothing to wait for but backoffs
                backoffs = [st.backoff_until_ms for st in self._subs.assignment.values()
                            if st.backoff_until_ms > now]
                if self._throttle_until_ms > now:
                    backoffs.append(self._throttle_until_ms)
                wait = min(wait, max(min(backoffs) - now, 0)) if backoffs else wait
                if not self._subs.assignment or not backoffs:
                    if wait > 0:
                        self._sleep(wait / 1000.0)
                    if _now_ms() >= deadline:
                        return {}
                    continue
                self._sleep(wait / 1000.0)
                continue
            resp = chan_recv.recv(int(wait))
            if resp is not None:
                if resp.api == ApiKey.FETCH or resp.correlation_id in self._fetch_in_flight:
                    self._handle_fetch_response(resp)
                # drain whatever else already arrived
                while True:
                    more = chan_recv.recv(0)
                    if more is None:
                        break
                    self._handle_fetch_response(more)

    def _receive_arrived(self) -> None:
        chan = self._conn.channel
        while self._fetch_in_flight:
            resp = chan.recv(0)
            if resp is None:
                break
            self._handle_fetch_response(resp)

    def metrics(self, raw: bool = False) -> dict[str, Any]:
        """This consumer's metrics, one flat dict (kafka-python's metrics(), `raw` accepted and
        changing nothing). Kafka's consumer metric names, counted per poll, per FETCH answer, per
        partition of an answer, per commit and per join (riverbed.client_metrics: rates per
        second and avg/max over two 30 s windows; NaN when nothing was measured in them; times
        in ms, sizes in bytes):

        records-consumed-rate/-total, records-lag-max (largest hw - next fetch offset seen in
        the windows), records-lag-max-by-partition ({"topic-partition": the same per
        partition}), records-lag ({"topic-partition": hw - position} now),
        bytes-consumed-rate/-total, fetch-rate/-total, fetch-latency-avg/-max,
        fetch-size-avg/-max, records-per-request-avg, fetch-error-total,
        time-between-poll-avg/-max (the poll interval), last-poll-seconds-ago,
        commit-latency-avg/-max, commit-rate/-total (successful commits), rebalance-total,
        rebalance-rate-per-hour, rebalance-latency-avg/-max/-total, failed-rebalance-total,
        last-rebalance-seconds-ago, join-time-avg/-max, sync-time-avg/-max,
        heartbeat-rate/-total, heartbeat-response-time-max, assigned-partitions.

        And Riverbed's own: records_consumed, bytes_fetched, fetch_requests, fetches_in_flight,
        assigned_partitions, records_lag, records_lag_max (now), group_id, generation_id,
        rebalances, gateway, gateway_failovers."""
        lag = {}
        for tp, st in self._subs.assignment.items():
            if st.position is not None and st.high_watermark >= 0:
                lag[f"{tp.topic}-{tp.partition}"] = max(st.high_watermark - st.position, 0)
        group = self._group
        ours = {"records_consumed": self._records_consumed,
                "bytes_fetched": self._bytes_fetched,
                "fetch_requests": self._fetch_requests,
                "fetches_in_flight": len(self._fetch_in_flight),
                # quotas: throttle_time_ms of the gateway's FETCH answers (Kafka's
                # fetch-throttle-time-max / -avg, over the consumer's life)
                "fetch_throttle_time_max": self._fetch_throttle_max,
                "fetch_throttle_time_avg": self._fetch_throttle_total / max(self._fetch_responses, 1),
                "assigned_partitions": len(self._subs.assignment),
                "records_lag": lag,
                "records_lag_max": max(lag.values(), default=0),
                "group_id": self.group_id,
                "generation_id": group.generation_id if group is not None else -1,
                "rebalances": group.rebalances if group is not None else 0,
                "gateway": self._conn.endpoint, "gateway_failovers": self._conn.failovers}
        kafka = self._metrics.snapshot(_now_ms(), assigned_partitions=len(self._subs.assignment),
                                       lag_by_partition=lag)
        return {**kafka, **ours}

    # -- iteration ----------------------------------------------------------------------------
    def __iter__(self) -> "Consumer":
        return self

    def __next__(self) -> ConsumerRecord:
        process_owner.check_owner(self._owner_pid, "this consumer")
        if self._iterator_records:
            return self._iterator_records.popleft()
        deadline = _now_ms() + self.consumer_timeout_ms
        while True:
            left = deadline - _now_ms()
            if left <= 0:
                raise StopIteration
            batch = self.poll(timeout_ms=min(left, 1000))
            for recs in batch.values():
                self._iterator_records.extend(recs)
            if self._iterator_records:
                return self._iterator_records.popleft()

    def close(self, autocommit: bool = True) -> None:
        """Leave the group (after an auto-commit when enable_auto_commit and autocommit, as
        kafka-python's close(autocommit=True)) and close the connections. In a forked child it
        only marks this copy closed: the group membership is the parent's."""
        if not self._closed and self._owner_pid != process_owner.current_pid():
            self._closed = True
            return
        if not self._closed:
            try:
                if self._group is not None:
                    self._group.close(autocommit)      # auto-commit, revoke, LEAVE_GROUP
            finally:
                self._closed = True
                self._end_fetch_spans()
                client_otel.unregister(self)
                self._conn.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# kafka-python 3.0's session_timeout_ms default (KIP-735); Consumer's own is 10000
KAFKA_PYTHON_SESSION_TIMEOUT_MS = 45000


class KafkaConsumer(Consumer):
    """kafka-python 3.0's `KafkaConsumer`: a `Consumer` with kafka-python 3.0's defaults
    (`session_timeout_ms` 45000), deserializers called for None keys and values too
    (kafka-python's way), and its constructor check: it waits up to
    `bootstrap_timeout_ms` (30000; kafka-python 2.x's `api_version_auto_timeout_ms` is taken
    too) for a bootstrap address to answer and raises `riverbed.errors.NoBrokersAvailable` (a
    `KafkaTimeoutError`, what kafka-python 3.0 raises), naming each address and why, when none
    does. kafka-python's settings for Kafka connections, TLS, SASL and metrics reporters
    (`api_version`, `ssl_*`, `sasl_*`, `reconnect_backoff_ms`, ...) are accepted and ignored
    (riverbed.kafka_python_types); so is the `timeout_ms` of commit(), committed(),
    position(), offsets_for_times(), beginning_offsets(), end_offsets() and close()
    (request_timeout_ms bounds each call).
    `Consumer` itself connects lazily: an unreachable cluster is reported by the first call
    that needs it."""

    _convert_none = True

    def __init__(self, *topics: str, **configs: Any) -> None:
        timeout_ms, setting = bootstrap_timeout(configs)
        configs = kafka_python_settings(configs)
        configs.setdefault("session_timeout_ms", KAFKA_PYTHON_SESSION_TIMEOUT_MS)
        super().__init__(**configs)        # the topics once the cluster is known to be there
        try:
            require_gateway(self._conn, timeout_ms, setting)
            if topics:
                self._take_topics(topics)
        except BaseException:
            self.close(autocommit=False)
            raise

    def bootstrap_connected(self) -> bool:
        """True: the constructor waited for a gateway to answer (False once closed)."""
        return not self._closed

    def bootstrap(self, timeout_ms: int | None = None, refresh: bool = False) -> None:
        """Wait until a bootstrap address answers (KafkaTimeoutError after timeout_ms; None:
        request_timeout_ms)."""
        require_gateway(self._conn, timeout_ms or self.request_timeout_ms, "timeout_ms")

    def subscription(self) -> set[str] | None:  # type: ignore[override]
        """The topics subscribed to, or None without a subscription (kafka-python's)."""
        return super().subscription() or None

    def commit(self, offsets: dict | None = None, timeout_ms: int | None = None) -> None:
        super().commit(offsets)

    def committed(self, partition: TopicPartition, metadata: bool = False,
                  timeout_ms: int | None = None):
        return super().committed(partition, metadata)

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        return super().position(partition)

    def offsets_for_times(self, timestamps: dict[TopicPartition, int],
                          timeout_ms: int | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return super().offsets_for_times(timestamps)

    def beginning_offsets(self, partitions: Iterable[TopicPartition],
                          timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        return super().beginning_offsets(partitions)

    def end_offsets(self, partitions: Iterable[TopicPartition],
                    timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        return super().end_offsets(partitions)

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        super().close(autocommit)


def _fetch_span(tracer, by_topic: dict[str, list[TopicPartition]], subs: SubscriptionState,
                group_id: str | None):
    """A CONSUMER span for one FETCH request (OpenTelemetry messaging conventions: a pull is a
    `receive` operation, named `poll`)."""
    topics = list(by_topic)
    attrs: dict[str, Any] = {"messaging.system": tracing.SYSTEM,
                             "messaging.operation.type": "receive",
                             "messaging.operation.name": "poll"}
    if group_id:
        attrs["messaging.consumer.group.name"] = group_id
    if len(topics) == 1:
        attrs["messaging.destination.name"] = topics[0]
        parts = by_topic[topics[0]]
        if len(parts) == 1:
            attrs["messaging.destination.partition.id"] = str(parts[0].partition)
            st = subs.assignment.get(parts[0])
            if st is not None and st.fetch_offset is not None:
                attrs["messaging.kafka.offset"] = st.fetch_offset
    name = f"poll {topics[0]}" if len(topics) == 1 else "poll"
    return tracer.start_span(name, kind=tracing.SpanKind.CONSUMER, attributes=attrs)


def _end_fetch_span(span, resp, records: int) -> None:
    try:
        span.set_attribute("messaging.batch.message_count", records)
        if any(p.error_code for t in resp.body.topics for p in t.partitions):
            span.set_status(tracing.Status(tracing.StatusCode.ERROR,
                                           "a partition answered an error"))
    finally:
        span.end()
