"""The producer's sender: drains the accumulator into PRODUCE requests to the gateway and completes
batches from the answers (Kafka's Sender). One thread runs `run()`; `run_once()` is one step.

- Each step: get a producer id first when idempotent (INIT_PRODUCER_ID; a cluster that does not
  serve it turns idempotence off with a WARNING), bump the epoch when asked and possible, fail
  batches past delivery_timeout_ms (queued or in flight), drain the ready partitions into ONE
  request (one payload frame per partition, each frame one or more whole batches, at most
  max_request_size), keep up to max_in_flight_requests_per_connection requests in flight, and
  handle every answer that arrived.
- Errors: a retriable error puts the batch back at the head of its partition's deque (in sequence
  order with idempotence) after retry_backoff_ms, refreshing metadata when the error says so, up
  to `retries` times; anything else fails the batch's records with the error (naming topic and
  partition). With idempotence the IdempotenceState classifies sequence errors (Kafka's rules).
- request_timeout_ms: a request not answered in time counts as the gateway lost: move to the
  next gateway, and retry everything that was in flight there.
- Transactions (a transactional producer, riverbed.transactions): each step first fails the
  queued batches of an aborted transaction, adds the transaction's new partitions at the
  coordinator (ADD_PARTITIONS_TO_TXN, before any of their batches may be drained), and sends the
  next coordinator request the application queued (INIT_PRODUCER_ID v1, ADD_OFFSETS_TO_TXN,
  TXN_OFFSET_COMMIT, END_TXN once every batch of the transaction completed), one blocking call
  at a time, answers kept for recv(); a batch failing for good makes the transaction abortable.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import zmq

from riverbed import errors, tracing
from riverbed._proto.v1 import header_pb2, produce_pb2, producer_id_pb2
from riverbed.accumulator import ProducerBatch, RecordAccumulator
from riverbed.client_metrics import ProducerMetrics
from riverbed.cluster import GatewayConnection
from riverbed.idempotence import IdempotenceState, Verdict

__all__ = ["Sender"]

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
_REQUEST_TIMED_OUT = errors.ErrorCode.Value("REQUEST_TIMED_OUT")
_NETWORK_EXCEPTION = errors.ErrorCode.Value("NETWORK_EXCEPTION")
_DUPLICATE = errors.ErrorCode.Value("DUPLICATE_SEQUENCE_NUMBER")
# INIT_PRODUCER_ID answered with one of these: the cluster does not do idempotence (yet).
_NO_IDEMPOTENCE = (errors.InvalidRequestError, errors.UnsupportedVersionError)


# Sub-millisecond waits (zmq_poll has millisecond resolution) sleep in slices of at most this.
_SLICE_MS = 0.2


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class _InFlight:
    __slots__ = ("batches", "deadline_ms", "span", "sent_ms")

    def __init__(self, batches, deadline_ms, span=None, sent_ms=0.0):
        self.batches: list[ProducerBatch] = batches
        self.deadline_ms: float = deadline_ms
        self.span = span                  # the PRODUCER span while tracing, else None
        self.sent_ms: float = sent_ms     # request-latency (metrics)


def _produce_span(tracer, by_topic: dict, batches: list, acks: int):
    """A PRODUCER span for one PRODUCE request (OpenTelemetry messaging conventions)."""
    topics = list(by_topic)
    name = f"send {topics[0]}" if len(topics) == 1 else "send"
    attrs: dict[str, Any] = {
        "messaging.system": tracing.SYSTEM, "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.batch.message_count": sum(b.record_count for b in batches),
        "riverbed.acks": acks}
    if len(topics) == 1:
        attrs["messaging.destination.name"] = topics[0]
        parts = list(by_topic[topics[0]])
        if len(parts) == 1:
            attrs["messaging.destination.partition.id"] = str(parts[0])
    return tracer.start_span(name, kind=tracing.SpanKind.PRODUCER, attributes=attrs)


def _error_name(err: BaseException) -> str:
    """Kafka's error name for the metrics' errors per code (the class name for others)."""
    return getattr(err, "name", None) or type(err).__name__


def _end_produce_span(span, resp) -> None:
    try:
        if not resp.ok:
            span.set_status(tracing.Status(tracing.StatusCode.ERROR, resp.error_message or str(resp.error_code)))
        else:
            ps = [p for t in resp.body.topics for p in t.partitions]
            if len(ps) == 1:
                span.set_attribute("messaging.kafka.offset", ps[0].base_offset)
            if any(p.error_code for p in ps):
                span.set_status(tracing.Status(tracing.StatusCode.ERROR, "a partition answered an error"))
    finally:
        span.end()


class Sender:
    """Drains the accumulator into PRODUCE requests and completes batches from the answers.

    The I/O goes through the GatewayConnection's channel (`send`/`recv`/`call`), so tests can
    pass a fake channel factory."""

    def __init__(self, conn: GatewayConnection, accumulator: RecordAccumulator, *, acks: int,
                 retries: int, max_in_flight: int, max_request_size: int,
                 request_timeout_ms: int, retry_backoff_ms: int, metadata_max_age_ms: int,
                 metadata_changed: threading.Condition,
                 delivery_timeout_ms: float = 120000,
                 idempotence: IdempotenceState | None = None):
        self.conn = conn
        self.acc = accumulator
        self.acks = acks
        self.retries = retries
        self.max_in_flight = max_in_flight
        self.max_request_size = max_request_size
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.metadata_changed = metadata_changed
        self.delivery_timeout_ms = delivery_timeout_ms
        self.idempotence = idempotence
        if idempotence is not None and accumulator.idempotence is None:
            accumulator.idempotence = idempotence
        self.in_flight: dict[int, _InFlight] = {}
        # Producer.metrics(): recorded per request and per batch, never per record
        self.metrics = ProducerMetrics()
        self.running = True
        self.force_close = False
        self._topics: set[str] = set()
        self._metadata_wanted = False
        self._metadata_next_ms = 0.0       # earliest next refresh attempt (backoff)
        self._metadata_fetched_ms = -float("inf")
        self.metadata_error: BaseException | None = None
        self._pid_next_ms = 0.0            # earliest next INIT_PRODUCER_ID attempt
        # A transactional producer's TransactionManager and the condition its callers wait on
        # (riverbed.producer sets both; the condition's lock guards the manager).
        self.transactions = None
        self.txn_cond: Any = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poller: zmq.Poller | None = None
        self._poller_channel = None
        self.requests_sent = 0
        self.batches_expired = 0
        # Quotas (KIP-219): a response's throttle_time_ms holds further PRODUCE requests to the
        # gateway until it has passed (the gateway would hold them anyway).
        self.throttle_until_ms = 0.0
        self.throttle_time_ms_max = 0
        self.throttle_time_ms_total = 0
        self.throttled_responses = 0
        self.produce_responses = 0

    # -- called from other threads ----------------------------------------------------------
    def wakeup(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def request_metadata(self, topic: str | None = None) -> None:
        if topic is not None:
            self._topics.add(topic)
        self._metadata_wanted = True
        self.wakeup()

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while self.running:
                self.run_once()
            # closing: send what is left unless forced
            while not self.force_close and (self.acc.has_undrained() or self.in_flight):
                self.run_once()
        except Exception as e:  # a bug: fail everything loudly rather than hang callers
            log.exception("producer sender thread died")
            self._fail_everything(errors.ClientError(f"producer sender thread died: {e!r}"))
            raise
        finally:
            if self.force_close:
                self._fail_everything(errors.ClientError("producer closed before the record was sent"))
            self.conn.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def run_once(self) -> None:
        now = _now_ms()
        if self._metadata_due(now):
            self._refresh_metadata(now)
            now = _now_ms()
        delay = self.prepare(now)
        self._poll(delay, now)

    def prepare(self, now: float) -> float:
        """Everything of one step but the socket poll: producer id, epoch bump, expiry, drain,
        send. Returns how long the sender may sleep (ms) before something becomes ready."""
        idem = self.idempotence
        txn_delay = None
        if self.transactions is not None:
            txn_delay = self._transactional_step(now)
            now = _now_ms()
        elif idem is not None and idem.needs_producer_id and now >= self._pid_next_ms:
            self._init_producer_id(now)
        if idem is not None and idem.epoch_bump_pending:
            idem.bump_epoch_if_possible()
        meta = self.conn.metadata
        check = self.acc.ready(meta.leader_for, now, len(self.in_flight))
        if check.unknown_leader_topics:
            self._topics |= check.unknown_leader_topics
            self._metadata_wanted = True
        self._expire(now)
        throttled = now < self.throttle_until_ms
        delay = check.next_ready_check_delay_ms
        if check.ready and len(self.in_flight) < self.max_in_flight and not throttled:
            batches = self.acc.drain(check.ready, self.max_request_size, now)
            if batches:
                self._send_produce(batches, now)
                # One request holds at most max_request_size: batches that were ready may
                # still wait. Look again at once, without sleeping, while a request slot is
                # free (Kafka's Sender polls with timeout 0 while nodes have sendable data);
                # sleeping here left them for the next answer or append, a pipeline of one or
                # two requests under bulk load (the app blocked on buffer_memory appends
                # nothing to wake us).
                delay = 0
        if throttled:
            delay = max(delay, self.throttle_until_ms - now)
        if idem is not None and idem.needs_producer_id and self.transactions is None:
            delay = min(delay, max(self._pid_next_ms - now, 0))
        if txn_delay is not None:
            delay = min(delay, txn_delay)
        return delay

    # -- transactions -----------------------------------------------------------------------------
    def _transactional_step(self, now: float) -> float | None:
        """One coordinator request of a transactional producer, if one is due (see the module
        doc). Returns how soon the next may be (ms), or None when nothing waits."""
        txn = self.transactions
        cond = self.txn_cond
        with cond:
            abort = txn.take_abort_undrained()
        if abort:
            for b in self.acc.abort_all():
                self._fail(b, errors.TransactionAbortedError(
                    f"{b.record_count} record(s) for {b.tp.topic}-{b.tp.partition} not sent: "
                    "the transaction was aborted"))
            with cond:
                cond.notify_all()
        incomplete = None
        with cond:
            tps = txn.partitions_to_add(now)
            req = txn.add_partitions_request(tps) if tps else txn.next_request(now)
            if req is not None and not tps and txn.end_waits_for_batches(req):
                incomplete = req
        if incomplete is not None and self.acc.incomplete():
            req = None           # EndTxn after the transaction's last batch (an answer wakes us)
        if req is None:
            with cond:
                waits = [r.next_attempt_ms for r in txn.requests
                         if not r.done and r is not incomplete]
                if txn.new_partitions - txn.partitions and not txn.adding:
                    waits.append(txn.add_retry_at_ms)
            return max(min(waits) - now, 0) if waits else None
        chan = self.conn._channel
        try:
            body = self.conn.call(req.api, req.body, timeout_ms=self.request_timeout_ms,
                                  api_version=req.api_version).body
            failure = None
        except errors.RiverbedError as e:
            body, failure = None, e
            if isinstance(e, errors.RequestTimedOutError):
                self._metadata_wanted = True
        if self.conn._channel is not chan:
            # the call moved to another gateway: what was in flight on the old one is lost
            self._metadata_wanted = True
            self._fail_in_flight_retriable(_NETWORK_EXCEPTION, "gateway lost during a "
                                           "transactional request")
        with cond:
            txn.handle_answer(req, body, _now_ms(), self.retry_backoff_ms, failure)
            cond.notify_all()
        return 0

    # -- producer id ------------------------------------------------------------------------------
    def _init_producer_id(self, now: float) -> None:
        idem = self.idempotence
        assert idem is not None
        req = producer_id_pb2.InitProducerIdRequest(
            transactional_id="", transaction_timeout_ms=60000,
            producer_id=idem.producer_id, producer_epoch=idem.producer_epoch)
        try:
            resp = self.conn.call(ApiKey.INIT_PRODUCER_ID, req,
                                  timeout_ms=self.request_timeout_ms).body
            if resp.error_code != 0:
                raise errors.for_code(resp.error_code, resp.error_message)
            idem.set_producer_id(resp.producer_id, resp.producer_epoch)
            log.info("idempotent producer: producer id %d, epoch %d", resp.producer_id,
                     resp.producer_epoch)
        except _NO_IDEMPOTENCE as e:
            log.warning("the cluster does not serve INIT_PRODUCER_ID (%s): idempotence is OFF for "
                        "this producer; order per partition is kept by sending one request per "
                        "partition at a time, but a retry after a lost answer may duplicate "
                        "records", e)
            idem.disable()
            self.acc.guarantee_order = True
        except errors.ClusterAuthorizationFailedError as e:
            # The ACLs refuse this principal a producer id (Kafka: fatal for what is pending).
            # Fail the waiting batches now rather than at delivery_timeout_ms; ask again after
            # the backoff (an operator may grant Write meanwhile).
            log.warning("INIT_PRODUCER_ID refused: %s", e)
            for b in self.acc.abort_all():
                self._fail(b, e)
            self._pid_next_ms = now + self.retry_backoff_ms
        except errors.RiverbedError as e:
            # retriable (no controller, timeout, ...) or not: try again after the backoff;
            # batches waiting meanwhile expire with delivery_timeout_ms
            log.warning("INIT_PRODUCER_ID failed (%s); retrying in %d ms", e,
                        self.retry_backoff_ms)
            self._pid_next_ms = now + self.retry_backoff_ms
            if isinstance(e, errors.RequestTimedOutError):
                self._metadata_wanted = True

    # -- metadata -----------------------------------------------------------------------------------
    def _metadata_due(self, now: float) -> bool:
        if now < self._metadata_next_ms:
            return False
        return self._metadata_wanted or \
            (bool(self._topics) and now - self._metadata_fetched_ms > self.metadata_max_age_ms)

    def _refresh_metadata(self, now: float) -> None:
        self._metadata_wanted = False
        self._metadata_next_ms = now + self.retry_backoff_ms
        topics = set(self._topics)
        try:
            self.conn.fetch_metadata(topics, allow_auto_topic_creation=True,
                                     timeout_ms=self.request_timeout_ms)
            self._metadata_fetched_ms = _now_ms()
            self.metadata_error = None
        except errors.RequestTimedOutError as e:
            # GatewayConnection.call already moved on; every request in flight is lost with it.
            self.metadata_error = e
            self._metadata_wanted = True
            self._fail_in_flight_retriable(_NETWORK_EXCEPTION, f"gateway lost: {e}")
        except errors.KafkaError as e:
            self.metadata_error = e
            self._metadata_wanted = True
        with self.metadata_changed:
            self.metadata_changed.notify_all()

    # -- expiry -------------------------------------------------------------------------------------
    def _expire(self, now: float) -> None:
        timeout = self.delivery_timeout_ms
        for batch in self.acc.expire(now, timeout):
            self._expire_batch(batch, now)
        limit = now - timeout
        for entry in self.in_flight.values():
            for b in entry.batches:
                if b.created_ms <= limit and not b.result.is_done:
                    self._expire_batch(b, now)

    def _expire_batch(self, batch: ProducerBatch, now: float) -> None:
        self.batches_expired += 1
        self._fail(batch, errors.KafkaTimeoutError(
            f"{batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition} expired: "
            f"not acknowledged {now - batch.created_ms:.0f} ms after the batch was created "
            f"(delivery_timeout_ms={self.delivery_timeout_ms:.0f})"))

    # -- requests -----------------------------------------------------------------------------------
    def _send_produce(self, batches: list[ProducerBatch], now: float) -> None:
        by_topic: dict[str, dict[int, list[ProducerBatch]]] = {}
        for b in batches:
            by_topic.setdefault(b.tp.topic, {}).setdefault(b.tp.partition, []).append(b)
        req = produce_pb2.ProduceRequest(acks=self.acks, timeout_ms=self.request_timeout_ms)
        payloads = []
        for topic, parts in by_topic.items():
            pt = req.topics.add(name=topic)
            for partition, bs in parts.items():
                pt.partitions.add(partition=partition)
                payloads.append(bs[0].payload if len(bs) == 1 else b"".join(b.payload for b in bs))
        ordered = [b for parts in by_topic.values() for bs in parts.values() for b in bs]
        expect = self.acks != 0
        span = None
        t = tracing.tracer()
        try:
            if t is None:
                corr = self.conn.channel.send(ApiKey.PRODUCE, req, payloads=payloads,
                                              timeout_ms=self.request_timeout_ms,
                                              expect_response=expect)
            else:
                span = _produce_span(t, by_topic, ordered, self.acks)
                with tracing.use_span(span, end_on_exit=False):
                    corr = self.conn.channel.send(ApiKey.PRODUCE, req, payloads=payloads,
                                                  timeout_ms=self.request_timeout_ms,
                                                  expect_response=expect)
        except errors.RiverbedError as e:
            if span is not None:
                span.record_exception(e)
                span.end()
            for b in ordered:
                self._retry_or_fail(b, errors.NetworkError(str(e), topic=b.tp.topic,
                                                           partition=b.tp.partition), now)
            return
        self.requests_sent += 1
        self.metrics.request_sent(ordered, now)
        if not expect:
            if span is not None:
                span.end()
            for b in ordered:
                self._complete(b, -1, -1)
            return
        for b in ordered:
            b.on_wire = True
        self.in_flight[corr] = _InFlight(ordered, now + self.request_timeout_ms, span, now)

    def _poll_timeout(self, ready_delay_ms: float, now: float) -> float:
        """How long (ms) the sender may wait for answers and wakeups now."""
        chan = self.conn.channel
        timeout = ready_delay_ms
        if self.in_flight:
            timeout = min(timeout, min(f.deadline_ms for f in self.in_flight.values()) - now + 1)
        if chan.flush():
            timeout = min(timeout, 10)          # requests waiting for a connection
        if self._metadata_wanted or (self.metadata_error is not None):
            timeout = min(timeout, max(self._metadata_next_ms - now, 0))
        if not self.running:
            timeout = min(timeout, 50)
        return max(0, min(timeout, 1000))

    def _poll(self, ready_delay_ms: float, now: float) -> None:
        try:
            chan = self.conn.channel
        except errors.NetworkError as e:    # CURVE: no key known for this gateway: the next one
            self.conn.failover(str(e))
            time.sleep(self.retry_backoff_ms / 1000.0)
            return
        if self._poller_channel is not chan:
            self._poller = zmq.Poller()
            self._poller.register(chan.socket, zmq.POLLIN)
            self._poller.register(self._wake_r, zmq.POLLIN)
            if getattr(chan, "monitor_socket", None) is not None:   # a lost gateway wakes us
                self._poller.register(chan.monitor_socket, zmq.POLLIN)
            self._poller_channel = chan
        timeout = self._poll_timeout(ready_delay_ms, now)
        if timeout > 0:
            # Sleep unless an append makes something ready meanwhile (the accumulator writes
            # the wake pipe only while sender_sleeping is set, under its lock).
            acc = self.acc
            can_send = len(self.in_flight) < self.max_in_flight
            with acc._lock:
                if can_send and acc._ready_seq != acc._seq_at_ready:
                    timeout = 0     # something became ready after our ready() check
                else:
                    # With every request slot taken only an answer can let us send: appends
                    # need not wake us (saves a pipe write and a GIL hand-off per append).
                    acc.sender_sleeping = can_send
            if timeout >= 1:
                # zmq_poll counts whole milliseconds: round down (a linger deadline is not
                # overshot by up to 1 ms); the sub-millisecond rest is slept below next time.
                events = dict(self._poller.poll(int(timeout)))
            elif timeout > 0:
                # Less than 1 ms to a deadline (linger, backoff): a short sleep in slices of
                # at most _SLICE_MS, then look at the sockets without waiting. An answer or
                # a wakeup arriving meanwhile waits at most one slice.
                time.sleep(min(timeout, _SLICE_MS) / 1000.0)
                events = dict(self._poller.poll(0))
            else:
                events = dict(self._poller.poll(0))
            # No lock needed: a plain store (an appender that saw the flag set just writes one
            # more byte to the wake pipe, drained on the next wakeup).
            acc.sender_sleeping = False
            if events.get(self._wake_r):
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
        self.handle_responses()

    def handle_responses(self) -> None:
        """Handle every answer that has arrived (non-blocking)."""
        chan = self.conn.channel
        while True:
            resp = chan.recv(0)
            if resp is None:
                break
            self._handle_response(resp)
            if self.conn._channel is not chan:
                break

    def _handle_response(self, resp) -> None:
        entry = self.in_flight.pop(resp.correlation_id, None)
        if entry is None:
            return
        for b in entry.batches:
            b.on_wire = False
        if entry.span is not None:
            _end_produce_span(entry.span, resp)
        now = _now_ms()
        self.metrics.response(now - entry.sent_ms, now)
        if not resp.ok:
            code, msg = resp.error_code, resp.error_message
            if code == _REQUEST_TIMED_OUT:
                # No answer from the gateway: move to another one; what was in flight there is lost.
                self.conn.failover(msg)
                self._metadata_wanted = True
                self._fail_in_flight_retriable(_NETWORK_EXCEPTION, f"gateway lost: {msg}")
            for b in entry.batches:
                self._retry_or_fail(b, errors.for_code(code, msg, topic=b.tp.topic,
                                                       partition=b.tp.partition), now)
            return
        self._note_throttle(resp.body.throttle_time_ms, now)
        answers: dict[tuple[str, int], Any] = {}
        for t in resp.body.topics:
            for p in t.partitions:
                answers[(t.name, p.partition)] = p
        next_offset: dict[tuple[str, int], int] = {}
        idem = self.idempotence
        sequenced = idem is not None and idem.ready
        # Acknowledged batches: bookkeeping in order here; their memory is freed under one
        # accumulator lock hold (not one per batch: the appending threads hold that lock
        # most of the time) and then their results complete (callbacks run), in order.
        acked: list[tuple[ProducerBatch, int, int]] = []
        for b in entry.batches:
            key = (b.tp.topic, b.tp.partition)
            p = answers.get(key)
            if p is None:
                self._retry_or_fail(b, errors.UnknownServerError(
                    "no answer for this partition in the PRODUCE response",
                    topic=b.tp.topic, partition=b.tp.partition), now)
                continue
            code = p.error_code
            if code == 0 or (code == _DUPLICATE and b.base_sequence >= 0):
                # DUPLICATE_SEQUENCE_NUMBER: the broker has this batch already; base_offset is
                # where it was written (several batches in one frame: consecutive offsets).
                base = next_offset.get(key, p.base_offset)
                if self.acc.guarantee_order:
                    self.acc.unmute(b.tp)
                if idem is not None and b.base_sequence >= 0:
                    idem.completed(b)
                acked.append((b, base, p.log_append_time_ms))
                next_offset[key] = base + b.record_count if base >= 0 else -1
                continue
            err = errors.for_code(code, p.error_message, topic=b.tp.topic,
                                  partition=b.tp.partition)
            next_offset[key] = -1
            if sequenced and b.base_sequence >= 0 and not b.result.is_done:
                verdict = idem.classify(b, code, err.retriable)
                if verdict is Verdict.RETRY_FREE:
                    log.debug("%r: out of order behind an earlier batch; retrying", b)
                    # not charged to `retries`, but sent again: counted as Kafka's Sender
                    # counts every re-enqueue (record-retry-total, errors-by-code)
                    self.metrics.retried(b.record_count, _error_name(err), now)
                    self.acc.reenqueue(b, now, count_attempt=False)
                    continue
                if verdict is Verdict.RETRY:
                    self._retry_or_fail(b, err, now, force_retriable=True)
                    continue
            self._retry_or_fail(b, err, now)
        if acked:
            self.acc.deallocate_many([a[0] for a in acked])
            for b, base, append_time in acked:
                if not b.result.is_done:
                    b.result.complete(base, append_time)

    def _note_throttle(self, throttle_ms: int, now: float) -> None:
        self.produce_responses += 1
        if throttle_ms > 0:
            self.throttled_responses += 1
            self.throttle_time_ms_total += throttle_ms
            self.throttle_time_ms_max = max(self.throttle_time_ms_max, throttle_ms)
            self.throttle_until_ms = max(self.throttle_until_ms, now + throttle_ms)

    def _fail_in_flight_retriable(self, code: int, msg: str) -> None:
        entries, self.in_flight = list(self.in_flight.values()), {}
        now = _now_ms()
        for entry in entries:
            for b in entry.batches:
                b.on_wire = False
            for b in entry.batches:
                self._retry_or_fail(b, errors.for_code(code, msg, topic=b.tp.topic,
                                                       partition=b.tp.partition), now)

    def _retry_or_fail(self, batch: ProducerBatch, err: errors.RiverbedError, now: float, *,
                       force_retriable: bool = False) -> None:
        if batch.result.is_done:        # expired meanwhile (delivery_timeout_ms)
            return
        retriable = force_retriable or getattr(err, "retriable", False)
        if retriable and batch.attempts < self.retries and not self.force_close and \
                now - batch.created_ms < self.delivery_timeout_ms:
            log.debug("retrying %r (attempt %d) after %s", batch, batch.attempts + 1, err)
            self.metrics.retried(batch.record_count, _error_name(err), now)
            if getattr(err, "refresh_metadata", False):
                self._topics.add(batch.tp.topic)
                self._metadata_wanted = True
            self.acc.reenqueue(batch, now)
            if self.acc.guarantee_order:
                self.acc.unmute(batch.tp)
            return
        if getattr(err, "refresh_metadata", False):
            self._metadata_wanted = True
        self._fail(batch, err)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        if self.acc.guarantee_order:
            self.acc.unmute(batch.tp)
        self.acc.deallocate(batch)
        if self.idempotence is not None and batch.base_sequence >= 0:
            self.idempotence.completed(batch)
        if not batch.result.is_done:
            batch.result.complete(base_offset, log_append_time_ms)

    def _fail(self, batch: ProducerBatch, err: BaseException) -> None:
        if not batch.result.is_done:
            self.metrics.failed(batch.record_count, _error_name(err), _now_ms())
            txn = self.transactions
            if txn is not None and not isinstance(err, errors.TransactionAbortedError):
                with self.txn_cond:
                    txn.batch_failed(err)
                    self.txn_cond.notify_all()
        if self.acc.guarantee_order:
            self.acc.unmute(batch.tp)
        self.acc.deallocate(batch)
        if self.idempotence is not None and batch.base_sequence >= 0:
            self.idempotence.failed(batch)
        if not batch.result.is_done:
            batch.result.fail(err)

    def _fail_everything(self, err: BaseException) -> None:
        for b in self.acc.abort_all():
            self._fail(b, err)
        for entry in list(self.in_flight.values()):
            for b in entry.batches:
                self._fail(b, err)
        self.in_flight.clear()
        for b in self.acc.incomplete():
            self._fail(b, err)
