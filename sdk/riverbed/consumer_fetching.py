"""The Consumer's fetch path: positions to fetch from, FETCH requests out, their answers into
buffered completed fetches, and the records handed to poll().

A mixin of `riverbed.consumer.Consumer`, split out of it along this seam; it never imports
riverbed.consumer. One FETCH is in flight at a time and covers every fetchable partition (one
with a fetch offset, not paused, not backing off, with fewer than `_MAX_BUFFERED_FETCHES`
completed fetches buffered); an answer's whole batches are kept undecoded
(`riverbed.fetcher.CompletedFetch`) and `_drain` decodes them as poll() hands them out, in a
rotating partition order. OFFSET_OUT_OF_RANGE applies auto_offset_reset; a retriable partition
error backs the partition off (retry_backoff_ms) and may refresh the metadata; any other error
is raised by the next poll(). With tracing on, each FETCH is a CONSUMER span (`_fetch_span`).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from riverbed import errors, tracing
from riverbed._proto.v1 import fetch_pb2, header_pb2
from riverbed.errors import NoOffsetForPartitionError
from riverbed.fetcher import CompletedFetch
from riverbed.list_offsets import list_offsets
from riverbed.records import HEADER_SIZE, iter_batches, read_header
from riverbed.structs import ConsumerRecord, TopicPartition
from riverbed.subscription_state import EARLIEST, LATEST, PartitionState, SubscriptionState

log = logging.getLogger("riverbed.consumer")   # the Consumer's logger, as before the split

ApiKey = header_pb2.ApiKey
_OFFSET_OUT_OF_RANGE = errors.ErrorCode.Value("OFFSET_OUT_OF_RANGE")
_REQUEST_TIMED_OUT = errors.ErrorCode.Value("REQUEST_TIMED_OUT")
# Completed fetches buffered per partition before the fetcher stops asking for more.
_MAX_BUFFERED_FETCHES = 2


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Fetching:
    """Positions, FETCH out, answers buffered, records drained (mixed into Consumer)."""

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
