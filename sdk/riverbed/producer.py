"""The Producer: kafka-python's API over Riverbed's gateways, built like Kafka's Java producer.

    app threads ── send() ──> RecordAccumulator ── ready()/drain() ──> Sender thread ── PRODUCE ──> gateway
                  (partition,   per-partition deques of                (owns the Channel,
                   append)      ProducerBatch (seed 003)                pipelines, retries)

- `send()` picks the partition (murmur2 of the key, sticky for keyless records), appends the
  record to the partition's open batch and returns a thin `FutureRecordMetadata` (its batch's
  `BatchResult` + its index). No thread, lock-free future or Future object per record.
- The sender thread alone owns the `GatewayConnection` (one DEALER). Each loop it asks the
  accumulator which partitions are ready (full batch, linger_ms passed, flush, close, buffer
  exhausted, retry backoff over), drains their batches into ONE PRODUCE request (one payload
  frame per partition, each frame one or more whole batches, up to max_request_size), keeps up
  to max_in_flight_requests_per_connection requests in flight and matches the answers by
  correlation id.
- Errors: a retriable error (riverbed.errors `retriable`) puts the batch back at the head of its
  partition's deque with retry_backoff_ms, asking for a metadata refresh when the error says so,
  up to `retries` times; anything else fails the batch's records with the error, which names the
  topic and partition.
- Ordering, as in Kafka 0.8/0.9: records to one partition are sent in order. With
  max_in_flight_requests_per_connection == 1 a partition is "muted" while one of its batches is
  in flight, so a retry can never overtake a later batch. With retries > 0 AND more than one
  request in flight, a retried batch may land after a batch sent later: order may break (and
  a retry after a lost answer may duplicate a batch — idempotence comes later).
- Buffer: each open batch reserves max(batch_size, record) bytes of buffer_memory until it
  completes; `send()` blocks up to max_block_ms for room, then raises BufferExhaustedError.
"""
from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Any, Callable, Iterable, Sequence

import zmq

from riverbed import errors
from riverbed._proto.v1 import header_pb2, produce_pb2
from riverbed.cluster import GatewayConnection
from riverbed.futures import BatchResult, FutureRecordMetadata
from riverbed.partitioner import DefaultPartitioner
from riverbed.records import BatchBuilder, Compression
from riverbed.structs import TopicPartition

__all__ = ["Producer", "KafkaProducer", "RecordAccumulator", "ProducerBatch", "Sender"]

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
_REQUEST_TIMED_OUT = errors.ErrorCode.Value("REQUEST_TIMED_OUT")
_NETWORK_EXCEPTION = errors.ErrorCode.Value("NETWORK_EXCEPTION")
_UNKNOWN_SERVER_ERROR = errors.ErrorCode.Value("UNKNOWN_SERVER_ERROR")

# Per-record overhead of a v2 record beyond key and value (length, attributes, deltas, lengths,
# header count: at most ~21 bytes) plus the batch header, for the max_request_size check.
_RECORD_OVERHEAD = 21
_BATCH_OVERHEAD = 61

_COMPRESSION = {None: Compression.NONE, "none": Compression.NONE, "gzip": Compression.GZIP,
                "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


def compression_from_name(name: str | None) -> Compression:
    try:
        return _COMPRESSION[name.lower() if isinstance(name, str) else name]
    except KeyError:
        raise ValueError(f"compression_type {name!r}: expected None, gzip, snappy, lz4 or zstd") \
            from None


def _now_ms() -> float:
    return time.monotonic() * 1000.0


# ---------------------------------------------------------------------------------------------
# Accumulator (pure: no sockets, no threads of its own; time is passed in)

class ProducerBatch:
    """One batch being filled (then sent) for one partition."""

    __slots__ = ("tp", "builder", "result", "created_ms", "attempts", "last_attempt_ms",
                 "payload", "record_count", "reserved", "full")

    def __init__(self, tp: TopicPartition, builder: BatchBuilder, now_ms: float, reserved: int):
        self.tp = tp
        self.builder: BatchBuilder | None = builder
        self.result = BatchResult(tp.topic, tp.partition)
        self.created_ms = now_ms
        self.attempts = 0
        self.last_attempt_ms = now_ms
        self.payload: bytes | None = None
        self.record_count = 0
        self.reserved = reserved
        self.full = False

    def try_append(self, timestamp_ms: int, key, value, headers) -> FutureRecordMetadata | None:
        b = self.builder
        if b is None or not b.append(timestamp_ms, key, value, headers):
            self.full = True
            return None
        index = self.record_count
        self.record_count = index + 1
        return FutureRecordMetadata(self.result, index, timestamp_ms)

    def close(self) -> bytes:
        """Build the batch bytes (once; a retry sends the same bytes)."""
        if self.payload is None:
            assert self.builder is not None
            self.payload = self.builder.build()
            self.builder = None
        return self.payload

    @property
    def size_in_bytes(self) -> int:
        if self.payload is not None:
            return len(self.payload)
        return self.builder.estimated_size if self.builder is not None else 0

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.tp.topic}-{self.tp.partition} n={self.record_count}>"


class ReadyCheck:
    __slots__ = ("ready", "next_ready_check_delay_ms", "unknown_leader_topics")

    def __init__(self, ready, delay, unknown):
        self.ready: list[TopicPartition] = ready
        self.next_ready_check_delay_ms: float = delay
        self.unknown_leader_topics: set[str] = unknown


class RecordAccumulator:
    """Per-partition deques of batches (Kafka's RecordAccumulator, seed 003). Thread-safe: app
    threads append, the sender thread checks readiness, drains, re-enqueues and deallocates."""

    def __init__(self, *, batch_size: int = 16384, buffer_memory: int = 33554432,
                 compression: Compression = Compression.NONE, linger_ms: float = 0,
                 retry_backoff_ms: float = 100, guarantee_order: bool = False,
                 on_ready: Callable[[], None] | None = None):
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.guarantee_order = guarantee_order
        self._on_ready = on_ready
        self._cond = threading.Condition(threading.Lock())
        self._batches: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._muted: set[TopicPartition] = set()
        self._used = 0
        self._waiting_for_memory = 0
        self._flushes = 0
        self.closed = False
        self._drain_index = 0
        self.sender_sleeping = False  # set under the lock by the sender before it sleeps
        self._ready_seq = 0           # bumped by every event that may make a partition ready
        self._seq_at_ready = 0        # its value at the sender's last ready() check

    # -- app side ---------------------------------------------------------------------------
    def append(self, tp: TopicPartition, timestamp_ms: int, key, value, headers, *,
               now_ms: float, max_block_ms: float = 0,
               abort_on_new_batch: bool = False) -> FutureRecordMetadata | None:
        """Append one record. None only with abort_on_new_batch when the record would need a
        new batch (the sticky partitioner then moves on). Blocks up to max_block_ms for memory."""
        with self._cond:
            if self.closed:
                raise errors.ClientError("producer is closed")
            dq = self._batches.get(tp)
            if dq is None:
                dq = self._batches[tp] = collections.deque()
            if dq:
                last = dq[-1]
                fut = last.try_append(timestamp_ms, key, value, headers)
                if fut is not None:
                    if self.linger_ms <= 0 or len(dq) > 1:
                        self._wake()
                    return fut
            if abort_on_new_batch:
                return None
            size = len(key or b"") + len(value or b"") + _RECORD_OVERHEAD + _BATCH_OVERHEAD
            reserve = max(self.batch_size, size)
            self._reserve(reserve, now_ms, max_block_ms)
            batch = self._new_batch(tp, now_ms, reserve)
            fut = batch.try_append(timestamp_ms, key, value, headers)
            assert fut is not None, "the first record always fits"
            dq.append(batch)
            self._wake()
            return fut

    def append_values(self, tp: TopicPartition, timestamp_ms: int, values: Sequence,
                      *, now_ms: float, max_block_ms: float = 0) -> list[FutureRecordMetadata]:
        """Append many keyless values with BatchBuilder.append_values; one future per batch
        touched (the handle of this call's last record in that batch)."""
        futures: list[FutureRecordMetadata] = []
        start = 0
        total = len(values)
        with self._cond:
            if self.closed:
                raise errors.ClientError("producer is closed")
            dq = self._batches.get(tp)
            if dq is None:
                dq = self._batches[tp] = collections.deque()
            while start < total:
                batch = dq[-1] if dq else None
                if batch is None or batch.builder is None or batch.full:
                    reserve = max(self.batch_size,
                                  len(values[start]) + _RECORD_OVERHEAD + _BATCH_OVERHEAD)
                    self._reserve(reserve, now_ms, max_block_ms)
                    batch = self._new_batch(tp, now_ms, reserve)
                    dq.append(batch)
                chunk = values[start:] if start else values
                n = batch.builder.append_values(timestamp_ms, chunk)
                if n == 0:
                    batch.full = True
                    continue
                if start + n < total:
                    batch.full = True
                batch.record_count += n
                start += n
                futures.append(FutureRecordMetadata(batch.result, batch.record_count - 1,
                                                    timestamp_ms))
            self._wake()
        return futures

    def _new_batch(self, tp: TopicPartition, now_ms: float, reserve: int) -> ProducerBatch:
        builder = BatchBuilder(compression=self.compression, batch_size=self.batch_size)
        batch = ProducerBatch(tp, builder, now_ms, reserve)
        self._incomplete.add(batch)
        return batch

    def _reserve(self, nbytes: int, now_ms: float, max_block_ms: float) -> None:
        # Called with the lock held. Waits for deallocate() to free room.
        if self._used + nbytes <= self.buffer_memory or not self._incomplete:
            self._used += nbytes
            return
        deadline = time.monotonic() + max_block_ms / 1000.0
        self._waiting_for_memory += 1
        try:
            self._wake()
            while self._used + nbytes > self.buffer_memory and self._incomplete:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.BufferExhaustedError(
                        f"failed to allocate {nbytes} bytes within max_block_ms={max_block_ms}: "
                        f"{self._used} of buffer_memory={self.buffer_memory} in use")
                self._cond.wait(left)
                if self.closed:
                    raise errors.ClientError("producer is closed")
        finally:
            self._waiting_for_memory -= 1
        self._used += nbytes

    def _wake(self) -> None:
        self._ready_seq += 1
        if self.sender_sleeping and self._on_ready is not None:
            self.sender_sleeping = False
            self._on_ready()

    # -- sender side ------------------------------------------------------------------------
    def ready(self, leader_of: Callable[[TopicPartition], int], now_ms: float) -> ReadyCheck:
        """Partitions with a sendable first batch, the delay until the next may become ready,
        and topics with batches but no known leader."""
        ready: list[TopicPartition] = []
        unknown: set[str] = set()
        delay = float("inf")
        with self._cond:
            self._seq_at_ready = self._ready_seq
            exhausted = self._waiting_for_memory > 0
            force = exhausted or self.closed or self._flushes > 0
            for tp, dq in self._batches.items():
                if not dq or tp in self._muted:
                    continue
                if leader_of(tp) < 0:
                    unknown.add(tp.topic)
                    continue
                batch = dq[0]
                backing_off = batch.attempts > 0 and \
                    batch.last_attempt_ms + self.retry_backoff_ms > now_ms
                waited = now_ms - batch.last_attempt_ms
                time_to_wait = self.retry_backoff_ms if backing_off else self.linger_ms
                full = len(dq) > 1 or batch.full
                sendable = full or waited >= time_to_wait or force
                if sendable and not backing_off:
                    ready.append(tp)
                else:
                    delay = min(delay, max(time_to_wait - waited, 0))
        return ReadyCheck(ready, delay, unknown)

    def drain(self, ready: Sequence[TopicPartition], max_request_size: int,
              now_ms: float) -> list[ProducerBatch]:
        """Take batches from the ready partitions' heads for one request of at most
        max_request_size bytes (the first batch always goes). Several batches of one partition
        may go together, in order. Muted partitions (order guaranteed, one in flight) are skipped."""
        out: list[ProducerBatch] = []
        size = 0
        if not ready:
            return out
        with self._cond:
            n = len(ready)
            start = self._drain_index % n
            self._drain_index = start + 1
            for i in range(n):
                tp = ready[(start + i) % n]
                if tp in self._muted:
                    continue
                dq = self._batches.get(tp)
                taken = False
                while dq:
                    first = dq[0]
                    if first.attempts > 0 and first.last_attempt_ms + self.retry_backoff_ms > now_ms:
                        break
                    first_size = first.size_in_bytes
                    if out and size + first_size > max_request_size:
                        break
                    dq.popleft()
                    first.close()
                    size += len(first.payload)  # type: ignore[arg-type]
                    out.append(first)
                    taken = True
                    if first.attempts > 0:
                        break   # a retried batch travels alone: its partition's order stays intact
                if taken and self.guarantee_order:
                    self._muted.add(tp)
                if out and size >= max_request_size:
                    break
        return out

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a batch that failed with a retriable error back at the head of its deque."""
        with self._cond:
            batch.attempts += 1
            batch.last_attempt_ms = now_ms
            self._batches.setdefault(batch.tp, collections.deque()).appendleft(batch)

    def unmute(self, tp: TopicPartition) -> None:
        with self._cond:
            self._muted.discard(tp)

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch completed (either way): free its memory and wake blocked appenders/flushes."""
        with self._cond:
            if batch in self._incomplete:
                self._incomplete.discard(batch)
                self._used -= batch.reserved
            self._cond.notify_all()

    def expire(self, now_ms: float, timeout_ms: float) -> list[ProducerBatch]:
        """Batches waiting (not in flight) longer than timeout_ms since created/last attempt:
        removed here; the sender fails them (Kafka 0.9's request.timeout.ms expiry)."""
        out: list[ProducerBatch] = []
        with self._cond:
            for tp, dq in self._batches.items():
                while dq and now_ms - dq[0].last_attempt_ms > timeout_ms + self.linger_ms \
                        and tp not in self._muted:
                    b = dq.popleft()
                    b.close()
                    out.append(b)
        return out

    def abort_all(self) -> list[ProducerBatch]:
        """Remove every queued (not in-flight) batch; the caller fails them."""
        with self._cond:
            out = [b for dq in self._batches.values() for b in dq]
            for dq in self._batches.values():
                dq.clear()
        return out

    def begin_flush(self) -> None:
        with self._cond:
            self._flushes += 1
            self._wake()

    def end_flush(self) -> None:
        with self._cond:
            self._flushes -= 1

    def incomplete(self) -> list[ProducerBatch]:
        with self._cond:
            return list(self._incomplete)

    def has_undrained(self) -> bool:
        with self._cond:
            return any(self._batches.values())

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()
            self._wake()

    @property
    def memory_used(self) -> int:
        return self._used


# ---------------------------------------------------------------------------------------------
# Sender

class _InFlight:
    __slots__ = ("batches", "deadline_ms")

    def __init__(self, batches, deadline_ms):
        self.batches: list[ProducerBatch] = batches
        self.deadline_ms: float = deadline_ms


class Sender:
    """Drains the accumulator into PRODUCE requests and completes batches from the answers.

    `run_once(now_ms)` is one step; the thread calls it in a loop. The I/O goes through the
    GatewayConnection's channel (`send`/`recv`), so tests can pass a fake channel factory."""

    def __init__(self, conn: GatewayConnection, accumulator: RecordAccumulator, *, acks: int,
                 retries: int, max_in_flight: int, max_request_size: int,
                 request_timeout_ms: int, retry_backoff_ms: int, metadata_max_age_ms: int,
                 metadata_changed: threading.Condition):
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
        self.in_flight: dict[int, _InFlight] = {}
        self.running = True
        self.force_close = False
        self._topics: set[str] = set()
        self._metadata_wanted = False
        self._metadata_next_ms = 0.0       # earliest next refresh attempt (backoff)
        self._metadata_fetched_ms = -float("inf")
        self.metadata_error: BaseException | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poller: zmq.Poller | None = None
        self._poller_channel = None
        self.requests_sent = 0

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
        meta = self.conn.metadata
        check = self.acc.ready(meta.leader_for, now)
        if check.unknown_leader_topics:
            self._topics |= check.unknown_leader_topics
            self._metadata_wanted = True
        for batch in self.acc.expire(now, self.request_timeout_ms):
            self._fail(batch, errors.KafkaTimeoutError(
                f"{batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition} expired: "
                f"{now - batch.created_ms:.0f} ms since the batch was created"))
        if check.ready and len(self.in_flight) < self.max_in_flight:
            batches = self.acc.drain(check.ready, self.max_request_size, now)
            if batches:
                self._send_produce(batches, now)
        self._poll(check.next_ready_check_delay_ms, now)

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
        try:
            corr = self.conn.channel.send(ApiKey.PRODUCE, req, payloads=payloads,
                                          timeout_ms=self.request_timeout_ms,
                                          expect_response=expect)
        except errors.RiverbedError as e:
            for b in ordered:
                self._retry_or_fail(b, errors.NetworkError(str(e), topic=b.tp.topic,
                                                           partition=b.tp.partition), now)
            return
        self.requests_sent += 1
        if not expect:
            for b in ordered:
                self._complete(b, -1, -1)
            return
        self.in_flight[corr] = _InFlight(ordered, now + self.request_timeout_ms)

    def _poll(self, ready_delay_ms: float, now: float) -> None:
        chan = self.conn.channel
        if self._poller_channel is not chan:
            self._poller = zmq.Poller()
            self._poller.register(chan.socket, zmq.POLLIN)
            self._poller.register(self._wake_r, zmq.POLLIN)
            self._poller_channel = chan
        timeout = ready_delay_ms
        if self.in_flight:
            timeout = min(timeout, min(f.deadline_ms for f in self.in_flight.values()) - now + 1)
        if chan.flush():
            timeout = min(timeout, 10)          # requests waiting for a connection
        if self._metadata_wanted or (self.metadata_error is not None):
            timeout = min(timeout, max(self._metadata_next_ms - now, 0))
        if not self.running:
            timeout = min(timeout, 50)
        timeout = max(0, min(timeout, 1000))
        if timeout > 0:
            # Sleep unless an append makes something ready meanwhile (the accumulator writes
            # the wake pipe only while sender_sleeping is set, under its lock).
            with self.acc._cond:
                if self.acc._ready_seq != self.acc._seq_at_ready:
                    timeout = 0     # something became ready after our ready() check
                else:
                    self.acc.sender_sleeping = True
            events = dict(self._poller.poll(int(timeout + 0.999)))
            with self.acc._cond:
                self.acc.sender_sleeping = False
            if events.get(self._wake_r):
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
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
        now = _now_ms()
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
        answers: dict[tuple[str, int], Any] = {}
        for t in resp.body.topics:
            for p in t.partitions:
                answers[(t.name, p.partition)] = p
        next_offset: dict[tuple[str, int], int] = {}
        for b in entry.batches:
            key = (b.tp.topic, b.tp.partition)
            p = answers.get(key)
            if p is None:
                self._retry_or_fail(b, errors.UnknownServerError(
                    "no answer for this partition in the PRODUCE response",
                    topic=b.tp.topic, partition=b.tp.partition), now)
            elif p.error_code != 0:
                self._retry_or_fail(b, errors.for_code(p.error_code, p.error_message,
                                                       topic=b.tp.topic, partition=b.tp.partition),
                                    now)
            else:
                base = next_offset.get(key, p.base_offset)
                self._complete(b, base, p.log_append_time_ms)
                # several batches of one partition in one frame got consecutive offsets
                next_offset[key] = base + b.record_count if base >= 0 else -1

    def _fail_in_flight_retriable(self, code: int, msg: str) -> None:
        entries, self.in_flight = list(self.in_flight.values()), {}
        now = _now_ms()
        for entry in entries:
            for b in entry.batches:
                self._retry_or_fail(b, errors.for_code(code, msg, topic=b.tp.topic,
                                                       partition=b.tp.partition), now)

    def _retry_or_fail(self, batch: ProducerBatch, err: errors.RiverbedError, now: float) -> None:
        retriable = getattr(err, "retriable", False)
        if retriable and batch.attempts < self.retries and not self.force_close:
            log.debug("retrying %r (attempt %d) after %s", batch, batch.attempts + 1, err)
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
        self.acc.unmute(batch.tp)
        self.acc.deallocate(batch)
        batch.result.complete(base_offset, log_append_time_ms)

    def _fail(self, batch: ProducerBatch, err: BaseException) -> None:
        self.acc.unmute(batch.tp)
        self.acc.deallocate(batch)
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


# ---------------------------------------------------------------------------------------------
# Producer

class Producer:
    """Publishes records to Riverbed topics (kafka-python's KafkaProducer API).

        with Producer(bootstrap=["tcp://127.0.0.1:9092"]) as p:
            fut = p.send("orders", b"value", key=b"k")
            print(fut.result(timeout=10))      # RecordMetadata(topic, partition, offset, timestamp)

    Thread-safe: any number of threads may call send(). See the module doc for batching,
    retries and ordering."""

    def __init__(self, bootstrap: str | Sequence[str] | None = None, *, acks: int | str = 1,
                 client_id: str | None = None, batch_size: int = 16384, linger_ms: float = 0,
                 buffer_memory: int = 33554432, max_block_ms: int = 60000,
                 compression_type: str | None = None, max_request_size: int = 1048576,
                 retries: int = 3, retry_backoff_ms: int = 100, request_timeout_ms: int = 30000,
                 max_in_flight_requests_per_connection: int = 5,
                 partitioner: Callable | None = None, key_serializer: Callable | None = None,
                 value_serializer: Callable | None = None, metadata_max_age_ms: int = 300000,
                 bootstrap_servers: str | Sequence[str] | None = None,
                 _channel_factory: Callable | None = None):
        if bootstrap is None:
            bootstrap = bootstrap_servers
        if acks == "all":
            acks = -1
        acks = int(acks)
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks={acks}: expected 0, 1, -1 or 'all'")
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be >= 1")
        if batch_size < 1 or buffer_memory < batch_size:
            raise ValueError("need 1 <= batch_size <= buffer_memory")
        self.config = dict(acks=acks, batch_size=batch_size, linger_ms=linger_ms,
                           buffer_memory=buffer_memory, max_block_ms=max_block_ms,
                           compression_type=compression_type, max_request_size=max_request_size,
                           retries=retries, retry_backoff_ms=retry_backoff_ms,
                           request_timeout_ms=request_timeout_ms,
                           max_in_flight_requests_per_connection=max_in_flight_requests_per_connection)
        self.client_id = client_id or f"riverbed-producer-{os.getpid()}-{id(self):x}"
        self._max_block_ms = max_block_ms
        self._max_request_size = max_request_size
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._custom_partitioner = partitioner
        self._partitioner = DefaultPartitioner()
        self._partitioner_lock = threading.Lock()
        self._metadata_changed = threading.Condition()
        self._conn = GatewayConnection(bootstrap, client_id=self.client_id,
                                       request_timeout_ms=request_timeout_ms,
                                       channel_factory=_channel_factory)
        self._accumulator = RecordAccumulator(
            batch_size=batch_size, buffer_memory=buffer_memory,
            compression=compression_from_name(compression_type), linger_ms=linger_ms,
            retry_backoff_ms=retry_backoff_ms,
            guarantee_order=max_in_flight_requests_per_connection == 1)
        self._sender = Sender(self._conn, self._accumulator, acks=acks, retries=retries,
                              max_in_flight=max_in_flight_requests_per_connection,
                              max_request_size=max_request_size,
                              request_timeout_ms=request_timeout_ms,
                              retry_backoff_ms=retry_backoff_ms,
                              metadata_max_age_ms=metadata_max_age_ms,
                              metadata_changed=self._metadata_changed)
        self._accumulator._on_ready = self._sender.wakeup
        self._closed = False
        self._thread = threading.Thread(target=self._sender.run, name=f"{self.client_id}-sender",
                                        daemon=True)
        self._thread.start()

    # -- sending ------------------------------------------------------------------------------
    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             headers: Iterable[tuple[str, bytes]] | None = None,
             timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """Queue one record; returns a future of RecordMetadata. Blocks at most max_block_ms
        (for the topic's metadata, or for buffer memory)."""
        if self._closed:
            raise errors.ClientError("producer is closed")
        if value is None and key is None:
            raise ValueError("need a value or a key (None, None is not a record)")
        if self._key_serializer is not None and key is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None and value is not None:
            value = self._value_serializer(value)
        key = _as_bytes(key, "key")
        value = _as_bytes(value, "value")
        headers = tuple(headers) if headers else ()
        size = len(key or b"") + len(value or b"") + _RECORD_OVERHEAD + _BATCH_OVERHEAD + \
            sum(len(h[0]) + len(h[1] or b"") + 10 for h in headers)
        if size > self._max_request_size:
            raise errors.MessageTooLargeError(
                f"record of about {size} bytes exceeds max_request_size={self._max_request_size}",
                topic=topic, partition=partition)
        deadline = time.monotonic() + self._max_block_ms / 1000.0
        num_partitions = self._wait_on_metadata(topic, partition, deadline)
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        acc = self._accumulator
        meta = self._conn.metadata
        if partition is not None:
            tp = TopicPartition(topic, partition)
            return acc.append(tp, timestamp_ms, key, value, headers, now_ms=_now_ms(),
                              max_block_ms=_left_ms(deadline))
        if self._custom_partitioner is not None:
            p = self._custom_partitioner(key, list(range(num_partitions)),
                                         list(meta.available_partitions_for_topic(topic)))
            return acc.append(TopicPartition(topic, p), timestamp_ms, key, value, headers,
                              now_ms=_now_ms(), max_block_ms=_left_ms(deadline))
        available = meta.available_partitions_for_topic(topic)
        with self._partitioner_lock:
            p = self._partitioner.partition(topic, key, num_partitions, available)
        if key is not None:
            return acc.append(TopicPartition(topic, p), timestamp_ms, key, value, headers,
                              now_ms=_now_ms(), max_block_ms=_left_ms(deadline))
        fut = acc.append(TopicPartition(topic, p), timestamp_ms, key, value, headers,
                         now_ms=_now_ms(), max_block_ms=_left_ms(deadline),
                         abort_on_new_batch=True)
        if fut is None:
            # The sticky partition's batch is full: move on (KIP-480's onNewBatch), then append.
            with self._partitioner_lock:
                p = self._partitioner.on_new_batch(topic, num_partitions, available, p)
            fut = acc.append(TopicPartition(topic, p), timestamp_ms, key, value, headers,
                             now_ms=_now_ms(), max_block_ms=_left_ms(deadline))
        return fut

    def send_many(self, topic: str, values: Sequence[bytes], partition: int | None = None,
                  timestamp_ms: int | None = None) -> list[FutureRecordMetadata]:
        """Queue many keyless values to one topic, built with BatchBuilder.append_values (the
        fast path). Without a partition, consecutive chunks of batch_size go to partitions
        chosen like keyless send() (sticky, moving on per batch). Returns one future per batch
        touched: the handle of this call's last record in it; waiting on all waits for all."""
        if self._closed:
            raise errors.ClientError("producer is closed")
        if not isinstance(values, (list, tuple)):
            values = list(values)
        if self._value_serializer is not None:
            values = [self._value_serializer(v) for v in values]
        if not values:
            return []
        deadline = time.monotonic() + self._max_block_ms / 1000.0
        num_partitions = self._wait_on_metadata(topic, partition, deadline)
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        if partition is not None:
            return self._accumulator.append_values(TopicPartition(topic, partition), timestamp_ms,
                                                   values, now_ms=_now_ms(),
                                                   max_block_ms=_left_ms(deadline))
        # Chunks of about one batch each, spread like keyless records.
        futures: list[FutureRecordMetadata] = []
        chunk_bytes = self._accumulator.batch_size
        meta = self._conn.metadata
        start = 0
        n = len(values)
        while start < n:
            end, size = start, 0
            while end < n and (end == start or size + len(values[end]) + 8 <= chunk_bytes):
                size += len(values[end]) + 8
                end += 1
            available = meta.available_partitions_for_topic(topic)
            with self._partitioner_lock:
                p = self._partitioner.partition(topic, None, num_partitions, available)
                if end < n or size >= chunk_bytes // 2:
                    self._partitioner.on_new_batch(topic, num_partitions, available, p)
            futures += self._accumulator.append_values(
                TopicPartition(topic, p), timestamp_ms, values[start:end], now_ms=_now_ms(),
                max_block_ms=_left_ms(deadline))
            start = end
        return futures

    def _wait_on_metadata(self, topic: str, partition: int | None, deadline: float) -> int:
        meta = self._conn.metadata
        n = meta.num_partitions(topic)
        if n is not None and (partition is None or partition < n):
            return n
        with self._metadata_changed:
            while True:
                version = meta.version
                self._sender.request_metadata(topic)
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._metadata_changed.wait_for(lambda: meta.version != version, timeout=left)
                n = meta.num_partitions(topic)
                if n is not None:
                    if partition is None or partition < n:
                        return n
                    raise errors.UnknownTopicOrPartitionError(
                        f"partition {partition} not in topic of {n} partitions",
                        topic=topic, partition=partition)
                err = meta.topic_error(topic)
                if err is not None and not errors.error_class(err[0]).retriable:
                    raise errors.for_code(err[0], err[1], topic=topic)
        raise errors.KafkaTimeoutError(
            f"topic {topic} not present in metadata after max_block_ms={self._max_block_ms}"
            + (f" (last error: {self._sender.metadata_error})" if self._sender.metadata_error else ""))

    # -- metadata ------------------------------------------------------------------------------
    def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition numbers (waits up to max_block_ms for metadata)."""
        self._wait_on_metadata(topic, None, time.monotonic() + self._max_block_ms / 1000.0)
        return self._conn.metadata.partitions_for_topic(topic) or set()

    # -- flush / close -------------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it completed (either way)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        acc = self._accumulator
        acc.begin_flush()
        try:
            for batch in acc.incomplete():
                left = None if deadline is None else max(deadline - time.monotonic(), 0)
                if not batch.result.wait(left):
                    raise errors.KafkaTimeoutError(f"flush did not complete within {timeout} s")
        finally:
            acc.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued, wait (at most timeout s) for it, then stop. Records not done by
        then fail with ClientError."""
        if self._closed:
            return
        self._closed = True
        self._sender.running = False
        self._accumulator.close()
        self._sender.wakeup()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._sender.force_close = True
            self._sender.wakeup()
            self._thread.join()

    def metrics(self) -> dict:
        return {"requests_sent": self._sender.requests_sent,
                "in_flight": len(self._sender.in_flight),
                "buffer_memory_used": self._accumulator.memory_used,
                "gateway": self._conn.endpoint, "gateway_failovers": self._conn.failovers}

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


KafkaProducer = Producer


def _as_bytes(v, what: str):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(f"{what} must be bytes, str or None (or pass a {what}_serializer), "
                    f"not {type(v).__name__}")


def _left_ms(deadline: float) -> float:
    return max((deadline - time.monotonic()) * 1000.0, 0)
