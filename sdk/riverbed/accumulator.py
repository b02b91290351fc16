"""The producer's record accumulator (Kafka's RecordAccumulator, seed 003). Pure: no sockets, no
threads of its own, time passed in; app threads append, the sender thread checks readiness,
drains, re-enqueues and deallocates.

    per partition: deque[ProducerBatch]   (oldest first; the last one is open for appends)

- A batch is sendable when it is full (or not the only batch of its deque), linger_ms has passed
  since it was created, or someone waits: flush(), close(), an append blocked on buffer_memory.
  A batch being retried waits retry_backoff_ms since its last attempt.
- `drain` takes head batches of ready partitions for one request of at most max_request_size
  bytes (the first batch always goes), starting where the previous drain stopped, so no
  partition starves (Kafka's drainIndex).
- Ordering: with guarantee_order (max_in_flight_requests_per_connection == 1) a partition is
  "muted" while one of its batches is in flight (seed 003). With idempotence the
  IdempotenceState decides (sequence numbers, up to 5 incomplete batches per partition, retries
  one at a time in sequence order).
- Memory: a batch reserves max(its capacity, its first record) bytes of buffer_memory until it
  completes; an append that finds no room blocks up to max_block_ms, then BufferExhaustedError.
- Adaptive batch size: a partition's batches start at batch_size. A batch that filled up before
  the sender took it (load above what batches of that size carry), or a new batch needed while
  full ones still wait in the deque (a backlog), doubles the next one's capacity, up to
  batch_size_max; a batch the sender took before it filled halves it again, down to batch_size.
  So bytes per request grow with the load, the record size and what the idempotence window (a
  number of batches) allows, without anyone tuning batch_size; at light load batches stay at
  batch_size. batch_size_max == batch_size turns it off.
  Keyless records move from partition to partition (the sticky partitioner fills one batch,
  then moves on), so a partition sees a batch only now and then and its own capacity never
  learns the load: with many partitions every batch stayed near batch_size (1,000 partitions
  ran at 0.06 of 10, issue 15). The capacity follows the sticky run instead: the first batch
  on the partition it moved to (`after`: the partition it left) takes the capacity the left
  partition's next batch would have (doubled while its full batch still waits in its deque;
  as the sender's drain set it once it was taken).
- Partial batches wait for answers (Nagle's rule for requests): once linger_ms has passed, a
  batch that is not full is sendable only while fewer than `hold_partial_at_in_flight` (2)
  requests are in flight on the connection; otherwise it keeps filling until it is full or an
  answer comes back. At light load nothing is in flight and a record goes at once; under load
  records ride in fewer, fuller requests instead of one request per wake-up, which is what the
  gateway and the storage node pay for per request. `hold_partial_at_in_flight=0` turns it off.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Callable, Sequence

from riverbed import errors
from riverbed.futures import BatchResult, FutureRecordMetadata
from riverbed.idempotence import IdempotenceState, stamp_producer
from riverbed.records import BatchBuilder, Compression
from riverbed.records.codec import size_of_varint
from riverbed.structs import TopicPartition

__all__ = ["ProducerBatch", "RecordAccumulator", "ReadyCheck", "RECORD_OVERHEAD", "BATCH_OVERHEAD"]

# Per-record overhead of a v2 record beyond key and value (length, attributes, deltas, lengths,
# header count: at most ~21 bytes) and the batch header, for size estimates.
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61
# Nagle's rule for requests: partial batches wait while this many requests are in flight.
# 2, not 1: at light load a record never waits behind the one request before it.
HOLD_PARTIAL_AT_IN_FLIGHT = 2


# A zigzag varint of k bytes holds the signed values in [-b, b) for b = 2 ** (7k - 1).
_VARINT_BANDS = tuple(1 << (7 * k - 1) for k in range(1, 11))


def _same_size(value: int) -> tuple[int, int]:
    """[lo, hi): the values on `value`'s side of zero whose zigzag varints are as long as its
    (one varint size is two ranges, [-b, -b') and [b', b), but for one byte: [-64, 64)), within
    a varlong's range."""
    prev = 0
    for b in _VARINT_BANDS:
        if -b <= value < b:
            if not prev:
                return -b, b
            return (prev, min(b, 1 << 63)) if value >= 0 else (max(-b, -(1 << 63)), -prev)
        prev = b
    raise ValueError(f"{value} does not fit a varlong")


class ProducerBatch:
    """One batch being filled (then sent, maybe retried) for one partition.

    Keyless records without headers are not encoded when appended: their values wait in
    `pending` (timestamps as runs: `runs` holds (position in pending, timestamp) where the
    timestamp changes) and `close()` encodes them with BatchBuilder.append_run, which lays
    out a run of records with one join instead of Python bytecode per record. Records that are
    not deferred (a key, headers, a value that is not `bytes`) first encode what is pending, so
    the batch keeps the order of its records; the bytes built are BatchBuilder.append's, record
    by record (tests/unit/sdk/test_deferred_batch.py).

    What fits is still decided per record, exactly: `_defer_slow` computes a record's encoded
    size (its offset and timestamp deltas' varints included) and how many more records of the
    same value length fit before the batch's capacity is reached or the offset delta's varint
    grows (`d_room`), for timestamps whose deltas' varints keep their size ([d_ts_lo,
    d_ts_hi)); within that window an append is a few comparisons and a list append
    (Producer.send inlines it)."""

    __slots__ = ("tp", "builder", "result", "created_ms", "attempts", "last_attempt_ms",
                 "uncompressed_size",
                 "payload", "record_count", "reserved", "full", "producer_epoch",
                 "base_sequence", "stamped", "on_wire", "order", "capacity",
                 "pending", "runs", "d_ts", "d_vlen", "d_room", "d_ts_lo", "d_ts_hi",
                 "d_rec", "d_size", "d_count0", "base_ts", "__weakref__")

    def __init__(self, tp: TopicPartition, builder: BatchBuilder, now_ms: float, reserved: int):
        self.tp = tp
        self.builder: BatchBuilder | None = builder
        self.result = BatchResult(tp.topic, tp.partition)
        self.created_ms = now_ms
        self.attempts = 0
        self.last_attempt_ms = now_ms
        self.payload: bytes | None = None
        self.uncompressed_size = 0         # bytes before compression (set when built; metrics)
        self.record_count = 0
        self.reserved = reserved
        self.full = False
        self.producer_epoch = -1          # idempotence: set when first drained
        self.base_sequence = -1
        self.stamped: tuple | None = None  # (producer_id, epoch, sequence) in the payload
        self.on_wire = False               # part of a request not answered yet
        self.order = 0                     # creation order in the accumulator (re-enqueue)
        self.capacity = reserved           # bytes it may hold (adaptive batch size)
        # deferred records (class docstring): values not yet encoded, timestamp runs
        self.pending: list[bytes] = []
        self.runs: list[tuple[int, int]] = []
        self.d_ts = None                   # the last deferred record's timestamp
        # the fast append's window: value length, records left, timestamp range, record size
        self.d_vlen = -1
        self.d_room = 0
        self.d_ts_lo = 0
        self.d_ts_hi = 0
        self.d_rec = 0
        self.d_size = 0                    # encoded size once d_count0 records are in
        self.d_count0 = 0
        self.base_ts = 0                   # the batch's base timestamp (its first record's)

    def add(self, timestamp_ms: int, key, value, headers) -> int:
        """Append one record: its index in the batch, or -1 (and the batch full) when it does
        not fit. Lock held by the caller, as for every append."""
        if key is None and value.__class__ is bytes and not headers:
            # deferred (bytes are immutable: the value is kept, not copied)
            if len(value) == self.d_vlen and self.d_room and \
                    self.d_ts_lo <= timestamp_ms < self.d_ts_hi:
                # the fast append (Producer.send inlines it): inside the window
                self.d_room -= 1
                pending = self.pending
                if timestamp_ms != self.d_ts:
                    self.runs.append((len(pending), timestamp_ms))
                    self.d_ts = timestamp_ms
                pending.append(value)
                index = self.record_count
                self.record_count = index + 1
                return index
            return self._defer_slow(timestamp_ms, value)
        b = self.builder
        if b is None:
            self.full = True
            return -1
        if self.pending:
            self.materialize()
        if not b.append(timestamp_ms, key, value, headers):
            self.full = True
            return -1
        index = self.record_count
        self.record_count = index + 1
        return index

    def _defer_slow(self, timestamp_ms: int, value: bytes) -> int:
        """Defer one keyless value outside the fast append's window, and compute the window
        anew: its index, or -1 and the batch full."""
        b = self.builder
        if b is None:
            self.full = True
            return -1
        count = self.record_count
        if b.record_count:
            base = self.base_ts = b.base_timestamp
        elif count:
            base = self.base_ts                 # the first deferred record's
        else:
            base = self.base_ts = timestamp_ms
        delta = timestamp_ms - base
        n = len(value)
        body = 3 + size_of_varint(delta) + size_of_varint(count) + size_of_varint(n) + n
        rec = size_of_varint(body) + body
        size = self.estimated_size
        limit = b.batch_size
        if limit is None:
            limit = 1 << 62
        if count and size + rec > limit:
            self.full = True
            self.d_room = 0
            return -1
        # the fast append's window, where every record has this one's size: the same value
        # length, offset deltas and timestamp deltas whose varints are as long, and room left
        lo, hi = _same_size(delta)
        self.d_ts_lo = base + lo
        self.d_ts_hi = base + hi
        self.d_vlen = n
        self.d_rec = rec
        self.d_size = size + rec
        self.d_count0 = count + 1
        self.d_room = max(0, min(_same_size(count)[1] - 1 - count, (limit - size - rec) // rec))
        pending = self.pending
        if timestamp_ms != self.d_ts:
            self.runs.append((len(pending), timestamp_ms))
            self.d_ts = timestamp_ms
        pending.append(value)
        self.record_count = count + 1
        return count

    def materialize(self) -> None:
        """Encode the pending values into the builder (in order, runs of one timestamp each)."""
        pending = self.pending
        if not pending:
            return
        b = self.builder
        assert b is not None
        runs = self.runs
        last = len(runs) - 1
        for i, (start, ts) in enumerate(runs):
            end = runs[i + 1][0] if i < last else len(pending)
            b.append_run(ts, pending if start == 0 and end == len(pending)
                         else pending[start:end])
        self.pending = []
        self.runs = []
        self.d_ts = None
        self.d_room = 0
        self.d_vlen = -1

    def try_append(self, timestamp_ms: int, key, value, headers) -> FutureRecordMetadata | None:
        index = self.add(timestamp_ms, key, value, headers)
        if index < 0:
            return None
        return FutureRecordMetadata(self.result, index, timestamp_ms)

    def close(self) -> bytes:
        """Build the batch bytes (once; a retry sends the same bytes)."""
        if self.payload is None:
            assert self.builder is not None
            self.materialize()
            self.uncompressed_size = self.builder.estimated_size
            self.payload = self.builder.build()
            self.builder = None
            self.full = True
        return self.payload

    @property
    def estimated_size(self) -> int:
        """Bytes of the batch built uncompressed (exact: the deferred records' sizes are
        counted as they will be encoded)."""
        if self.pending:
            return self.d_size + (self.record_count - self.d_count0) * self.d_rec
        return self.builder.estimated_size if self.builder is not None else 0

    @property
    def size_in_bytes(self) -> int:
        if self.payload is not None:
            return len(self.payload)
        return self.estimated_size

    def __repr__(self) -> str:
        seq = f" seq={self.base_sequence}" if self.base_sequence >= 0 else ""
        return f"<ProducerBatch {self.tp.topic}-{self.tp.partition} n={self.record_count}{seq}>"


class ReadyCheck:
    __slots__ = ("ready", "next_ready_check_delay_ms", "unknown_leader_topics", "held")

    def __init__(self, ready, delay, unknown, held=False):
        self.ready: list[TopicPartition] = ready
        self.next_ready_check_delay_ms: float = delay
        self.unknown_leader_topics: set[str] = unknown
        self.held: bool = held          # partial batches wait for an answer (Nagle's rule)


class RecordAccumulator:
    """Per-partition deques of batches. Thread-safe (one lock)."""

    def __init__(self, *, batch_size: int = 16384, buffer_memory: int = 33554432,
                 compression: Compression = Compression.NONE, linger_ms: float = 0,
                 retry_backoff_ms: float = 100, guarantee_order: bool = False,
                 idempotence: IdempotenceState | None = None,
                 on_ready: Callable[[], None] | None = None,
                 batch_size_max: int | None = None,
                 hold_partial_at_in_flight: int = HOLD_PARTIAL_AT_IN_FLIGHT):
        self.batch_size = batch_size
        # adaptive batch size: the cap of a partition's batch capacity under a backlog
        self.batch_size_max = max(batch_size, batch_size_max or batch_size)
        self._capacity: dict[TopicPartition, int] = {}
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.guarantee_order = guarantee_order
        self.idempotence = idempotence
        # A transactional producer's TransactionManager: batches are transactional, and each
        # new batch's partition is noted for AddPartitionsToTxn (riverbed.transactions).
        self.transactions = None
        self._on_ready = on_ready
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._batches: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self._tps: list[TopicPartition] = []      # drain order (creation order)
        self._incomplete: set[ProducerBatch] = set()
        self._muted: set[TopicPartition] = set()
        self._used = 0
        self._waiting_for_memory = 0
        self._flushes = 0
        self.closed = False
        self._drain_index = 0
        self._batch_counter = 0
        self.sender_sleeping = False  # set under the lock by the sender before it sleeps
        self._ready_seq = 0           # bumped by every event that may make a partition ready
        self._seq_at_ready = 0        # its value at the sender's last ready() check
        # Nagle's rule: partial batches wait while this many requests are in flight (0: never)
        self.hold_partial_at_in_flight = hold_partial_at_in_flight
        # set by ready() under the lock: partial batches are held, so an append that does not
        # fill a batch cannot make anything sendable (appenders neither bump nor wake)
        self.holding = False

    # -- app side ---------------------------------------------------------------------------
    def try_append(self, tp: TopicPartition, timestamp_ms: int, key, value, headers):
        """The hot path: append to the partition's open batch, or None when a new batch is
        needed (then call append()). No clock read, no allocation but the record's handle.
        The sender's wake pipe is written after the lock is released."""
        lock = self._lock
        lock.acquire()
        try:
            dq = self._batches.get(tp)
            if not dq:
                return None
            last = dq[-1]
            if last.full:
                return None
            index = last.add(timestamp_ms, key, value, headers)
            if index < 0:
                return None
            fut = FutureRecordMetadata(last.result, index, timestamp_ms)
            if (self.linger_ms > 0 or self.holding) and len(dq) == 1:
                return fut
            self._ready_seq += 1                # it may be sendable now
            if not self.sender_sleeping or self._on_ready is None:
                return fut
            self.sender_sleeping = False
        finally:
            lock.release()
        self._on_ready()
        return fut

    def append(self, tp: TopicPartition, timestamp_ms: int, key, value, headers=(), *,
               now_ms: float | None = None, max_block_ms: float = 0,
               abort_on_new_batch: bool = False,
               after: TopicPartition | None = None) -> FutureRecordMetadata | None:
        """Append one record. None only with abort_on_new_batch when the record would need a
        new batch (the sticky partitioner then moves on). Blocks up to max_block_ms for memory.
        now_ms is read from the clock only when a batch is created (None: read it then).
        `after`: the sticky partitioner just moved here from that partition (its batch is
        full): a new batch here is sized by the sticky run (see the module docstring)."""
        if self.closed:
            raise errors.ClientError("producer is closed")
        with self._lock:
            dq = self._batches.get(tp)
            if dq:
                last = dq[-1]
                if not last.full and last.add(timestamp_ms, key, value, headers) >= 0:
                    index = last.record_count - 1
                    if (self.linger_ms <= 0 and not self.holding) or len(dq) > 1:
                        self._wake()            # it may be sendable now
                    return FutureRecordMetadata(last.result, index, timestamp_ms)
                last.full = True
            if self.closed:
                raise errors.ClientError("producer is closed")
            if abort_on_new_batch:
                return None
            if dq is None:
                dq = self._new_deque(tp)
            if now_ms is None:
                now_ms = time.monotonic() * 1000.0
            size = len(key or b"") + len(value or b"") + RECORD_OVERHEAD + BATCH_OVERHEAD
            capacity = self._next_capacity(tp, dq, after)
            reserve = max(capacity, size)
            self._reserve(reserve, max_block_ms)
            batch = self._new_batch(tp, now_ms, reserve, capacity)
            fut = batch.try_append(timestamp_ms, key, value, headers)
            assert fut is not None, "the first record always fits"
            dq.append(batch)
            self._wake()
            return fut

    def append_values(self, tp: TopicPartition, timestamp_ms: int, values: Sequence, *,
                      now_ms: float | None = None,
                      max_block_ms: float = 0) -> list[FutureRecordMetadata]:
        """Append keyless values with BatchBuilder.append_values; one future per batch touched
        (the handle of this call's last record in that batch)."""
        return self.append_values_counted(tp, timestamp_ms, values, now_ms=now_ms,
                                          max_block_ms=max_block_ms)[0]

    def append_values_counted(self, tp: TopicPartition, timestamp_ms: int, values: Sequence, *,
                              now_ms: float | None = None, max_block_ms: float = 0,
                              one_batch: bool = False, after: TopicPartition | None = None
                              ) -> tuple[list[FutureRecordMetadata], int]:
        """append_values returning (futures, values consumed). With one_batch, stops when the
        batch it appended into is full (the sticky partitioner then moves on). `after` as in
        append()."""
        futures: list[FutureRecordMetadata] = []
        start = 0
        total = len(values)
        if self.closed:
            raise errors.ClientError("producer is closed")
        while start < total:
            # The lock is taken per batch, not for the whole call: the sender drains full
            # batches while the rest of a long list is still being appended.
            with self._lock:
                dq = self._batches.get(tp)
                if dq is None:
                    dq = self._new_deque(tp)
                batch = dq[-1] if dq else None
                if batch is None or batch.full:
                    if one_batch and futures:
                        break
                    if now_ms is None:
                        now_ms = time.monotonic() * 1000.0
                    capacity = self._next_capacity(tp, dq, after)
                    after = None                # only the first new batch continues the run
                    reserve = max(capacity,
                                  len(values[start]) + RECORD_OVERHEAD + BATCH_OVERHEAD)
                    self._reserve(reserve, max_block_ms)
                    batch = self._new_batch(tp, now_ms, reserve, capacity)
                    dq.append(batch)
                batch.materialize()             # what send() deferred goes first
                builder = batch.builder
                # Slice about one batch's worth (not values[start:]: that is O(n) per batch).
                room = batch.capacity - builder.estimated_size
                est = room // (len(values[start]) + 4) + 16
                chunk = values if start == 0 and est >= total else values[start:start + est]
                n = builder.append_values(timestamp_ms, chunk)
                if n:
                    batch.record_count += n
                    start += n
                    futures.append(FutureRecordMetadata(batch.result, batch.record_count - 1,
                                                        timestamp_ms))
                stop = False
                if n < len(chunk) or n == 0:
                    batch.full = True
                    stop = one_batch
                if batch.full or not self.holding or len(dq) > 1:
                    self._wake()
            if stop:
                break
        return futures, start

    def _new_deque(self, tp: TopicPartition) -> collections.deque:
        dq = self._batches[tp] = collections.deque()
        self._tps.append(tp)
        return dq

    def _next_capacity(self, tp: TopicPartition, dq,
                       after: TopicPartition | None = None) -> int:
        """The capacity of tp's next batch (lock held; dq: its deque before the append;
        after: the partition a sticky run just left for tp, or None)."""
        if self.batch_size_max <= self.batch_size:
            return self.batch_size
        if dq:                                            # full batches wait: grow
            cap = self._capacity[tp] = min(self.batch_size_max,
                                           2 * self._capacity.get(tp, self.batch_size))
        elif after is not None and after != tp:
            # the sticky run goes on from `after`: what its next batch would hold
            left = self._batches.get(after)
            if left:                                      # its full batch still waits: grow
                cap = min(self.batch_size_max, 2 * left[-1].capacity)
            else:                                         # taken: as _drained set it
                cap = self._capacity.get(after, self.batch_size)
            self._capacity[tp] = cap
        else:
            cap = self._capacity.get(tp, self.batch_size)
        return cap

    def _drained(self, batch: ProducerBatch, was_full: bool) -> None:
        """A first attempt left its deque (lock held): a batch that filled up before the sender
        took it doubles the partition's next capacity, one taken before it filled halves it."""
        if self.batch_size_max <= self.batch_size:
            return
        if was_full:
            cap = min(self.batch_size_max, 2 * batch.capacity)
        else:
            cap = max(self.batch_size, batch.capacity // 2)
        self._capacity[batch.tp] = cap

    def _new_batch(self, tp: TopicPartition, now_ms: float, reserve: int,
                   capacity: int | None = None) -> ProducerBatch:
        capacity = capacity or self.batch_size
        builder = BatchBuilder(compression=self.compression, batch_size=capacity,
                               is_transactional=self.transactions is not None)
        if self.transactions is not None:
            self.transactions.note_partition(tp)     # under our lock; the manager's is inner
            self._wake()      # the sender adds the partition to the transaction now, not at linger
        batch = ProducerBatch(tp, builder, now_ms, reserve)
        batch.capacity = capacity
        self._batch_counter += 1
        batch.order = self._batch_counter
        self._incomplete.add(batch)
        return batch

    def _reserve(self, nbytes: int, max_block_ms: float) -> None:
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
    def ready(self, leader_of: Callable[[TopicPartition], int], now_ms: float,
              in_flight: int = 0) -> ReadyCheck:
        """Partitions with a sendable first batch, the delay until the next may become ready,
        and topics with batches but no known leader. in_flight: requests in flight on the
        connection (partial batches wait while there are hold_partial_at_in_flight of them)."""
        ready: list[TopicPartition] = []
        unknown: set[str] = set()
        delay = float("inf")
        idem = self.idempotence
        if idem is not None and not idem.enabled:
            idem = None
        with self._lock:
            self._seq_at_ready = self._ready_seq
            force = self._waiting_for_memory > 0 or self.closed or self._flushes > 0
            linger = self.linger_ms
            backoff = self.retry_backoff_ms
            hold = 0 < self.hold_partial_at_in_flight <= in_flight
            held = False
            for tp, dq in self._batches.items():
                if not dq or tp in self._muted:
                    continue
                if leader_of(tp) < 0:
                    unknown.add(tp.topic)
                    continue
                batch = dq[0]
                if idem is not None and not idem.can_drain(batch):
                    continue            # waits for an answer (the sender wakes up for it)
                if batch.attempts > 0:
                    waited = now_ms - batch.last_attempt_ms
                    if waited < backoff:
                        delay = min(delay, backoff - waited)
                        continue
                    ready.append(tp)
                    continue
                if force or batch.full or len(dq) > 1:
                    ready.append(tp)
                    continue
                waited = now_ms - batch.created_ms
                if waited < linger:
                    delay = min(delay, linger - waited)
                elif hold:
                    held = True         # until it fills or an answer comes back
                else:
                    ready.append(tp)
            self.holding = held
        return ReadyCheck(ready, delay, unknown, held)

    def drain(self, ready: Sequence[TopicPartition], max_request_size: int,
              now_ms: float) -> list[ProducerBatch]:
        """Take batches from the ready partitions' heads for one request of at most
        max_request_size bytes (the first batch always goes). Several batches of one partition
        may go together, in order. Starts at the partition after the one where the previous
        drain stopped (no starvation). Muted partitions are skipped; with idempotence, batches
        get their sequence numbers here."""
        out: list[ProducerBatch] = []
        if not ready:
            return out
        size = 0
        idem = self.idempotence
        if idem is not None and not idem.enabled:
            idem = None
        ready_set = set(ready)
        with self._lock:
            tps = self._tps
            n = len(tps)
            start = self._drain_index % n if n else 0
            next_start = (start + 1) % n if n else 0      # rotate by one when all were served
            for k in range(n):
                index = (start + k) % n
                tp = tps[index]
                if tp not in ready_set or tp in self._muted:
                    continue
                dq = self._batches.get(tp)
                taken = False
                request_full = False
                while dq:
                    first = dq[0]
                    if first.attempts > 0 and \
                            first.last_attempt_ms + self.retry_backoff_ms > now_ms:
                        break
                    if idem is not None and not idem.can_drain(first):
                        break
                    first_size = first.size_in_bytes
                    if out and size + first_size > max_request_size:
                        request_full = True
                        break
                    dq.popleft()
                    if first.attempts == 0:
                        self._drained(first, first.full)
                    first.full = True           # out of the deque: no append reaches it
                    if idem is not None:
                        idem.assign(first)
                    size += first_size
                    out.append(first)
                    taken = True
                    if first.attempts > 0:
                        break   # a retried batch travels alone: its partition's order stays intact
                if taken and self.guarantee_order:
                    self._muted.add(tp)
                if request_full or (out and size >= max_request_size):
                    # the next drain starts with this partition if it got nothing this time,
                    # else with the one after it
                    next_start = (index + 1) % n if taken else index
                    break
            self._drain_index = next_start
        # Build (compress, CRC) outside the lock: appenders are not held up meanwhile.
        for batch in out:
            payload = batch.close()
            if idem is not None:
                stamp = (idem.producer_id, batch.producer_epoch, batch.base_sequence)
                if batch.stamped != stamp:
                    batch.payload = stamp_producer(payload, *stamp)
                    batch.stamped = stamp
        return out

    def reenqueue(self, batch: ProducerBatch, now_ms: float, *, count_attempt: bool = True) -> None:
        """Put a batch that failed with a retriable error back at the head of its deque, in
        creation order among the batches there (= sequence order with idempotence)."""
        with self._lock:
            if count_attempt:
                batch.attempts += 1
            else:
                batch.attempts = max(batch.attempts, 1)   # still backs off; not counted
            batch.last_attempt_ms = now_ms
            dq = self._batches.get(batch.tp)
            if dq is None:
                dq = self._new_deque(batch.tp)
            # Back in creation order: several batches of one partition answered by one response
            # (or retried one by one) keep their order; with idempotence that is sequence order.
            i = 0
            order = batch.order
            for b in dq:
                if b.order > order:
                    break
                i += 1
            dq.insert(i, batch)
            self._ready_seq += 1

    def unmute(self, tp: TopicPartition) -> None:
        with self._lock:
            self._muted.discard(tp)
            self._ready_seq += 1

    def deallocate_many(self, batches: Sequence[ProducerBatch]) -> None:
        """deallocate() for several batches under one lock hold (one answer's batches)."""
        with self._lock:
            incomplete = self._incomplete
            freed = 0
            for batch in batches:
                if batch in incomplete:
                    incomplete.discard(batch)
                    freed += batch.reserved
            self._used -= freed
            if freed and self._waiting_for_memory:
                self._cond.notify_all()

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch completed (either way): free its memory and wake blocked appenders/flushes."""
        with self._lock:
            if batch in self._incomplete:
                self._incomplete.discard(batch)
                self._used -= batch.reserved
                if self._waiting_for_memory:
                    self._cond.notify_all()

    def expire(self, now_ms: float, delivery_timeout_ms: float) -> list[ProducerBatch]:
        """Queued (not in flight) batches created more than delivery_timeout_ms ago, removed
        from the heads of their deques; the sender fails them (Kafka's expiredBatches)."""
        out: list[ProducerBatch] = []
        limit = now_ms - delivery_timeout_ms
        with self._lock:
            for dq in self._batches.values():
                while dq and dq[0].created_ms <= limit:
                    b = dq.popleft()
                    b.full = True               # never built: it is failed, not sent
                    out.append(b)
        return out

    def abort_all(self) -> list[ProducerBatch]:
        """Remove every queued (not in-flight) batch; the caller fails them."""
        with self._lock:
            out = [b for dq in self._batches.values() for b in dq]
            for dq in self._batches.values():
                dq.clear()
        return out

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes += 1
            self._wake()

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def incomplete(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._incomplete)

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def queued(self, tp: TopicPartition) -> list[ProducerBatch]:
        with self._lock:
            return list(self._batches.get(tp, ()))

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._cond.notify_all()
            self._wake()

    @property
    def memory_used(self) -> int:
        return self._used
