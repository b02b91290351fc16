"""The Producer: kafka-python's API over Riverbed's gateways, built like Kafka's Java producer.

    app threads ── send() ──> RecordAccumulator ── ready()/drain() ──> Sender thread ── PRODUCE ──> gateway
                  (partition,   per-partition deques of                (owns the Channel,
                   append)      ProducerBatch (seed 003)                pipelines, retries)

- `send()` picks the partition (murmur2 of the key, sticky for keyless records), appends the
  record to the partition's open batch and returns a thin `FutureRecordMetadata` (its batch's
  `BatchResult` + its index). No thread hop and no concurrent.futures.Future per record: one
  completion per batch. `send_many()` appends a list of keyless values with
  BatchBuilder.append_values (the fast path).
- The sender thread (riverbed.sender) alone owns the gateway connection; the accumulator
  (riverbed.accumulator) is pure; idempotence state lives in riverbed.idempotence.
- Delivery: a record is acknowledged, or fails with its error, or fails with KafkaTimeoutError
  when not acknowledged within delivery_timeout_ms of its batch's creation (retries included).
- Ordering per partition: with max_in_flight_requests_per_connection == 1 a partition is muted
  while one of its batches is in flight. With idempotence (default with acks="all") up to 5
  requests may be in flight and order still holds: batches carry producer id, epoch and
  sequence numbers, the storage node rejects gaps and recognises duplicates. Without either,
  a retry may reorder (and a retry after a lost answer may duplicate) records, as in Kafka.
- If the cluster does not serve INIT_PRODUCER_ID, the producer logs a WARNING and runs without
  idempotence, muting partitions (one request per partition in flight) to keep order.
- Nothing is lost at exit: a producer not closed by the program is closed when the interpreter
  exits (an atexit hook), sending what is buffered and waiting at most `close_timeout_ms`; if
  records could still not be delivered, a WARNING names how many.
- Transactions (KIP-98; Kafka's Java producer API): with `transactional_id`, the producer is
  idempotent and transactional: `init_transactions()` once (fences every older instance with
  the same id and aborts its open transaction), then per transaction `begin_transaction()`,
  `send()`s, optionally `send_offsets_to_transaction(offsets, consumer.group_metadata())`, and
  `commit_transaction()` or `abort_transaction()`. Errors are Kafka's classes: a fatal one
  (`errors.ProducerFencedError`: a newer instance took the id; authorization) ends the
  producer (close it), an abortable one (`txn_requires_abort` is set on it) only the
  transaction (call abort_transaction() and go on). riverbed.transactions has the rules.
  `prepare_transaction()` (KIP-939's two-phase commit) flushes a transaction and leaves it open
  for another process to end (`Admin.complete_transaction`).
- A producer belongs to the process that created it: after `os.fork()` the child's copy raises
  `errors.ForkedClientError` from send()/send_many()/flush()/partitions_for() and from waiting on
  futures of the parent's records; its close() is a no-op (riverbed.process_owner).
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Iterable, Sequence

from riverbed import client_otel, errors, process_owner
from riverbed._proto.v1 import header_pb2
from riverbed.accumulator import BATCH_OVERHEAD, RECORD_OVERHEAD, ProducerBatch, ReadyCheck, \
    RecordAccumulator
from riverbed.cluster import (
    bootstrap_timeout,
    GatewayConnection,
    require_gateway,
    resolve_bootstrap,
)
from riverbed.futures import FutureRecordMetadata
from riverbed.idempotence import MAX_IN_FLIGHT_PER_PARTITION, IdempotenceState
from riverbed.partitioner import DefaultPartitioner
from riverbed.kafka_python_types import kafka_python_settings
from riverbed.serializer import serializer_of
from riverbed.records import Compression
from riverbed.sender import Sender
from riverbed.structs import OffsetAndMetadata, TopicPartition
from riverbed.transactions import (ConsumerGroupMetadata, PreparedTxnState, TransactionManager,
                                   TxnRequest, TxnState)
from riverbed.wire.client import secure_channel_factory

__all__ = ["Producer", "KafkaProducer", "RecordAccumulator", "ProducerBatch", "ReadyCheck",
           "Sender", "compression_from_name"]

log = logging.getLogger(__name__)

_COMPRESSION = {None: Compression.NONE, "none": Compression.NONE, "gzip": Compression.GZIP,
                "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
_time_ns = time.time_ns
# Keys and values below this size (or half of what max_request_size leaves) skip the
# max_request_size check on the hot path: they cannot exceed it.
_SIZE_CHECK_FLOOR = 4096
# Adaptive batch size: under a backlog a partition's batches grow from batch_size up to this
# (riverbed.accumulator). Below the storage node's message.max.bytes default (1000012), so a
# grown batch is never refused as too large; 512 KiB is where 100 B and 1 KiB records stop
# gaining from bigger batches here, and what five batches in flight per partition need to
# cover an acks=all round trip.
BATCH_SIZE_MAX_DEFAULT = 524288
# Producers not closed yet, closed by one atexit hook (weakly held: no leak, no atexit entry each).
_LIVE_PRODUCERS: "weakref.WeakSet[Producer]" = weakref.WeakSet()


def _close_live_producers() -> None:
    """The interpreter is exiting: close every producer this process created and did not close,
    each bounded by its close_timeout_ms (a forked child leaves its parent's producers alone)."""
    for producer in list(_LIVE_PRODUCERS):
        if producer._owner_pid == process_owner.current_pid():
            try:
                producer.close(timeout=producer._close_timeout_ms / 1000.0)
            except Exception:  # noqa: BLE001 - one producer's failure must not skip the others
                log.exception("closing producer %s at exit failed", producer.client_id)


atexit.register(_close_live_producers)


def compression_from_name(name: str | None) -> Compression:
    try:
        return _COMPRESSION[name.lower() if isinstance(name, str) else name]
    except KeyError:
        raise ValueError(f"compression_type {name!r}: expected None, gzip, snappy, lz4 or zstd") \
            from None


class Producer:
    """Publishes records to Riverbed topics (kafka-python's KafkaProducer API).

        with Producer(bootstrap_servers=["tcp://127.0.0.1:9092"]) as p:
            fut = p.send("orders", b"value", key=b"k")
            print(fut.result(timeout=10))      # RecordMetadata(topic, partition, offset, timestamp)

    Thread-safe: any number of threads may call send(). See the module doc for batching,
    retries, ordering and idempotence."""

    _sender_class = Sender      # riverbed.aio's producer runs a Sender whose waits are asyncio's
    # Serializers see None keys and values too (kafka-python's way: KafkaProducer)? Producer's
    # leave None alone (no key; a tombstone).
    _serialize_none = False

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, *,
                 acks: int | str = 1,
                 client_id: str | None = None, batch_size: int = 16384, linger_ms: float = 0,
                 buffer_memory: int = 33554432, max_block_ms: int = 60000,
                 compression_type: str | None = None, max_request_size: int = 1048576,
                 retries: int = 3, retry_backoff_ms: int = 100, request_timeout_ms: int = 30000,
                 delivery_timeout_ms: int | None = None,
                 max_in_flight_requests_per_connection: int = 5,
                 enable_idempotence: bool | None = None,
                 partitioner: Callable | None = None, key_serializer: Callable | None = None,
                 value_serializer: Callable | None = None, metadata_max_age_ms: int = 300000,
                 bootstrap: str | Sequence[str] | None = None,
                 close_timeout_ms: float = 30000,
                 security_protocol: str | None = None, curve_secret_key_file: str | None = None,
                 curve_server_public_key: str | None = None,
                 curve_server_keys_dir: str | None = None,
                 batch_size_max: int | None = None,
                 transactional_id: str | None = None, transaction_timeout_ms: int = 60000,
                 _channel_factory: Callable | None = None):
        bootstrap = resolve_bootstrap(bootstrap_servers, bootstrap)
        if transactional_id is not None:
            # Kafka: a transactional producer is idempotent, acks=all; asking otherwise is a
            # configuration error
            if not transactional_id:
                raise ValueError("transactional_id must not be empty")
            if enable_idempotence is False:
                raise errors.ClientError("transactional_id needs enable_idempotence")
            if acks in (0, "0"):
                raise errors.ClientError("transactional_id needs acks='all', not acks=0")
            acks = -1                # the default acks=1 becomes all, as Kafka's does
            enable_idempotence = True
            if transaction_timeout_ms < 1:
                raise ValueError("transaction_timeout_ms must be positive")
        _channel_factory = secure_channel_factory(
            _channel_factory, security_protocol=security_protocol,
            curve_secret_key_file=curve_secret_key_file,
            curve_server_public_key=curve_server_public_key,
            curve_server_keys_dir=curve_server_keys_dir)
        if close_timeout_ms < 0:
            raise ValueError(f"close_timeout_ms={close_timeout_ms}: must be >= 0")
        if acks == "all":
            acks = -1
        acks = int(acks)
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks={acks}: expected 0, 1, -1 or 'all'")
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be >= 1")
        if batch_size < 1 or buffer_memory < batch_size:
            raise ValueError("need 1 <= batch_size <= buffer_memory")
        if batch_size_max is None:
            batch_size_max = min(BATCH_SIZE_MAX_DEFAULT, max_request_size, buffer_memory // 8)
        batch_size_max = max(batch_size, batch_size_max)
        # Kafka 3.x: idempotence is on by default with acks=all; asking for it with other acks,
        # more than 5 requests in flight or no retries is a configuration error.
        if enable_idempotence is None:
            enable_idempotence = acks == -1 and \
                max_in_flight_requests_per_connection <= MAX_IN_FLIGHT_PER_PARTITION and retries > 0
        elif enable_idempotence:
            if acks != -1:
                raise errors.ClientError(
                    f"enable_idempotence=True needs acks='all' (-1), not acks={acks}")
            if max_in_flight_requests_per_connection > MAX_IN_FLIGHT_PER_PARTITION:
                raise errors.ClientError(
                    "enable_idempotence=True needs max_in_flight_requests_per_connection <= "
                    f"{MAX_IN_FLIGHT_PER_PARTITION}")
            if retries < 1:
                raise errors.ClientError("enable_idempotence=True needs retries >= 1")
        if delivery_timeout_ms is None:
            delivery_timeout_ms = max(120000, int(linger_ms + request_timeout_ms))
        elif delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise errors.ClientError(
                f"delivery_timeout_ms={delivery_timeout_ms} must be >= linger_ms + "
                f"request_timeout_ms ({linger_ms + request_timeout_ms})")
        self.config = dict(acks=acks, batch_size=batch_size, batch_size_max=batch_size_max,
                           linger_ms=linger_ms,
                           buffer_memory=buffer_memory, max_block_ms=max_block_ms,
                           compression_type=compression_type, max_request_size=max_request_size,
                           retries=retries, retry_backoff_ms=retry_backoff_ms,
                           request_timeout_ms=request_timeout_ms,
                           delivery_timeout_ms=delivery_timeout_ms,
                           enable_idempotence=bool(enable_idempotence),
                           max_in_flight_requests_per_connection=max_in_flight_requests_per_connection)
        self.client_id = client_id or f"riverbed-producer-{os.getpid()}-{id(self):x}"
        self._max_block_ms = max_block_ms
        self._max_request_size = max_request_size
        # key and value each below this cannot make a record larger than max_request_size
        self._size_check_floor = min(_SIZE_CHECK_FLOOR,
                                     max(0, max_request_size - RECORD_OVERHEAD - BATCH_OVERHEAD) // 2)
        # fn(topic, headers, data): a function's or a kafka-python Serializer's
        self._key_serializer = serializer_of(key_serializer)
        self._value_serializer = serializer_of(value_serializer)
        self._custom_partitioner = partitioner
        self._partitioner = DefaultPartitioner()
        self._metadata_changed = threading.Condition()
        self._conn = GatewayConnection(bootstrap, client_id=self.client_id,
                                       request_timeout_ms=request_timeout_ms,
                                       channel_factory=_channel_factory)
        self._idempotence = IdempotenceState() if enable_idempotence else None
        self._txn: TransactionManager | None = None
        self._txn_cond: Any = threading.Condition()
        if transactional_id is not None:
            assert self._idempotence is not None
            self._txn = TransactionManager(transactional_id, transaction_timeout_ms,
                                           self._idempotence)
            self._idempotence.transactions = self._txn
        self.config["transactional_id"] = transactional_id
        self.config["transaction_timeout_ms"] = transaction_timeout_ms
        self._accumulator = RecordAccumulator(
            batch_size=batch_size, buffer_memory=buffer_memory,
            compression=compression_from_name(compression_type), linger_ms=linger_ms,
            retry_backoff_ms=retry_backoff_ms,
            guarantee_order=max_in_flight_requests_per_connection == 1,
            idempotence=self._idempotence, batch_size_max=batch_size_max)
        self._sender = self._sender_class(self._conn, self._accumulator, acks=acks, retries=retries,
                              max_in_flight=max_in_flight_requests_per_connection,
                              max_request_size=max_request_size,
                              request_timeout_ms=request_timeout_ms,
                              retry_backoff_ms=retry_backoff_ms,
                              metadata_max_age_ms=metadata_max_age_ms,
                              metadata_changed=self._metadata_changed,
                              delivery_timeout_ms=delivery_timeout_ms,
                              idempotence=self._idempotence)
        self._accumulator._on_ready = self._sender.wakeup
        if self._txn is not None:
            self._accumulator.transactions = self._txn
            self._sender.transactions = self._txn
            self._sender.txn_cond = self._txn_cond
        # send()'s inlined hot path reads these directly (never rebound)
        self._acc_lock = self._accumulator._lock
        self._acc_batches = self._accumulator._batches
        self._linger_zero = linger_ms <= 0
        self._metadata = self._conn.metadata
        # topic -> its TopicPartitions (no tuple built per record); cleared on metadata updates
        self._tp_cache: dict[str, list[TopicPartition]] = {}
        self._metadata.listeners.append(self._tp_cache.clear)
        # send()'s inlined hot path applies: open, no serializers, no custom partitioner, no
        # transactions (a transactional send checks the transaction's state first)
        self._plain = key_serializer is None and value_serializer is None and partitioner is None \
            and self._txn is None
        self._closed = False
        self._close_timeout_ms = close_timeout_ms
        self._owner_pid = process_owner.current_pid()
        self._start_io()

    def _start_io(self) -> None:
        """Start the sender thread; closed at exit, refused after fork. (riverbed.aio's
        producer runs the same Sender as an asyncio task instead.)"""
        self._thread = threading.Thread(target=self._sender.run, name=f"{self.client_id}-sender",
                                        daemon=True)
        self._thread.start()
        _LIVE_PRODUCERS.add(self)
        process_owner.register_fork_listener(self)
        client_otel.register("producer", self)     # only with the application's MeterProvider

    def _on_fork(self) -> None:
        """In a forked child: leave the inlined send path so that _send() raises."""
        self._plain = False

    # -- sending ------------------------------------------------------------------------------
    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             headers: Iterable[tuple[str, bytes]] | None = None,
             timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """Queue one record; returns a future of RecordMetadata. Blocks at most max_block_ms
        (for the topic's metadata, or for buffer memory)."""
        # The hot path (bytes, no headers, known topic, room in the open batch) is inlined here:
        # one lock, one append (a list append for a keyless value), one slotted handle.
        # Everything else: _send().
        if self._plain and value.__class__ is bytes and not headers:
            tps = self._tp_cache.get(topic)
            n = len(value)
            if tps is not None and n < self._size_check_floor:
                sticky = False
                if partition is None:
                    if key is None:
                        # the sticky partition's open batch, inlined below like an explicit
                        # partition's; a new batch (moving on) is _send_sticky's
                        partition = self._partitioner.sticky_partition(topic)
                        if partition is None or partition >= len(tps):
                            return self._send_sticky(topic, tps, timestamp_ms, value, ())
                        sticky = True
                    elif key.__class__ is not bytes or len(key) >= self._size_check_floor:
                        return self._send(topic, value, key, partition, headers, timestamp_ms)
                    else:
                        partition = self._partitioner.hash_key(key) % len(tps)
                elif partition >= len(tps) or (key is not None and (
                        key.__class__ is not bytes or len(key) >= self._size_check_floor)):
                    return self._send(topic, value, key, partition, headers, timestamp_ms)
                if timestamp_ms is None:
                    timestamp_ms = _time_ns() // 1_000_000
                tp = tps[partition]
                # RecordAccumulator.try_append, inlined: one lock hold (acquire/release, cheaper
                # than `with`), the wake bookkeeping inline, and the wake pipe written after the
                # lock is released (os.write drops the GIL: never while holding the lock).
                # A keyless value inside the batch's fast-append window (ProducerBatch) is
                # only listed: the sender encodes the batch's values in runs.
                acc = self._accumulator
                lock = self._acc_lock
                lock.acquire()
                try:
                    dq = self._acc_batches.get(tp)
                    if dq:
                        last = dq[-1]
                        if not last.full:
                            if key is None and n == last.d_vlen and last.d_room and \
                                    last.d_ts_lo <= timestamp_ms < last.d_ts_hi:
                                last.d_room -= 1
                                pending = last.pending
                                if timestamp_ms != last.d_ts:
                                    last.runs.append((len(pending), timestamp_ms))
                                    last.d_ts = timestamp_ms
                                pending.append(value)
                                index = last.record_count
                                last.record_count = index + 1
                            else:
                                index = last.add(timestamp_ms, key, value, ())
                            if index >= 0:
                                wake = False
                                # it may be sendable now (not while partial batches
                                # wait for an answer: RecordAccumulator.holding)
                                if (self._linger_zero and not acc.holding) or len(dq) > 1:
                                    acc._ready_seq += 1
                                    if acc.sender_sleeping:
                                        acc.sender_sleeping = False
                                        wake = True
                                fut = FutureRecordMetadata(last.result, index, timestamp_ms)
                                if not wake:
                                    return fut
                            else:
                                fut = None
                        else:
                            fut = None
                    else:
                        fut = None
                finally:
                    lock.release()
                if fut is not None:
                    self._sender.wakeup()
                    return fut
                if sticky:
                    return self._send_sticky(topic, tps, timestamp_ms, value, ())
                return acc.append(tp, timestamp_ms, key, value, (),
                                  max_block_ms=self._max_block_ms)
        return self._send(topic, value, key, partition, headers, timestamp_ms)

    def _send(self, topic: str, value: Any, key: Any, partition: int | None, headers,
              timestamp_ms: int | None) -> FutureRecordMetadata:
        """send() for everything but the hot path: serializers, str values, headers, large
        records, custom partitioners, unknown topics, a closed producer."""
        process_owner.check_owner(self._owner_pid, "this producer")
        if self._closed:
            raise errors.ClientError("producer is closed")
        if self._txn is not None:
            self._txn.check_send()
        if value is None and key is None:
            raise ValueError("need a value or a key (None, None is not a record)")
        if self._key_serializer is not None and (key is not None or self._serialize_none):
            key = self._key_serializer(topic, headers or [], key)
        if key is not None and key.__class__ is not bytes:
            key = _as_bytes(key, "key")
        if self._value_serializer is not None and (value is not None or self._serialize_none):
            value = self._value_serializer(topic, headers or [], value)
        if value is not None and value.__class__ is not bytes:
            value = _as_bytes(value, "value")
        if headers:
            headers = tuple(headers)
            size = sum(len(h[0]) + len(h[1] or b"") + 10 for h in headers)
        else:
            headers = ()
            size = 0
        if value is not None:
            size += len(value)
        if key is not None:
            size += len(key)
        if size >= self._size_check_floor and \
                size + RECORD_OVERHEAD + BATCH_OVERHEAD > self._max_request_size:
            raise errors.MessageTooLargeError(
                f"record of about {size + RECORD_OVERHEAD + BATCH_OVERHEAD} bytes exceeds "
                f"max_request_size={self._max_request_size}", topic=topic, partition=partition)
        tps = self._tp_cache.get(topic)
        if tps is None or (partition is not None and partition >= len(tps)):
            tps = self._topic_partitions(topic, partition)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        if partition is None:
            if key is not None and self._custom_partitioner is None:
                partition = self._partitioner.partition(topic, key, len(tps))
            elif key is None and self._custom_partitioner is None:
                return self._send_sticky(topic, tps, timestamp_ms, value, headers)
            else:
                meta = self._conn.metadata
                partition = self._custom_partitioner(
                    key, list(range(len(tps))), list(meta.available_partitions_for_topic(topic)))
        tp = tps[partition]
        acc = self._accumulator
        fut = acc.try_append(tp, timestamp_ms, key, value, headers)
        if fut is None:
            fut = acc.append(tp, timestamp_ms, key, value, headers,
                             max_block_ms=self._max_block_ms)
        return fut

    def _topic_partitions(self, topic: str, partition: int | None) -> list[TopicPartition]:
        """The topic's TopicPartition objects (cached: no tuple built per record), waiting up to
        max_block_ms for metadata."""
        n = self._metadata.partition_counts.get(topic)
        if n is None or (partition is not None and partition >= n):
            n = self._wait_on_metadata(topic, partition,
                                       time.monotonic() + self._max_block_ms / 1000.0)
        tps = [TopicPartition(topic, p) for p in range(n)]
        self._tp_cache[topic] = tps
        return tps

    def _send_sticky(self, topic: str, tps: list[TopicPartition], timestamp_ms: int | None, value,
                     headers) -> FutureRecordMetadata:
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        part = self._partitioner
        num_partitions = len(tps)
        p = part.sticky_partition(topic)
        if p is None or p >= num_partitions:
            p = part.partition(topic, None, num_partitions,
                               self._conn.metadata.available_partitions_for_topic(topic))
        acc = self._accumulator
        fut = acc.try_append(tps[p], timestamp_ms, None, value, headers)
        if fut is not None:
            return fut
        fut = acc.append(tps[p], timestamp_ms, None, value, headers, abort_on_new_batch=True)
        if fut is None:
            # The sticky partition's batch is full: move on (KIP-480's onNewBatch), then append.
            left = p
            p = part.on_new_batch(topic, num_partitions,
                                  self._conn.metadata.available_partitions_for_topic(topic), p)
            fut = acc.append(tps[p], timestamp_ms, None, value, headers,
                             max_block_ms=self._max_block_ms, after=tps[left])
        return fut

    def send_many(self, topic: str, values: Sequence[bytes], partition: int | None = None,
                  timestamp_ms: int | None = None) -> list[FutureRecordMetadata]:
        """Queue many keyless values to one topic, built with BatchBuilder.append_values (the
        fast path). Without a partition, batches are filled on the sticky partition, moving on
        per batch like keyless send(). Returns one future per batch touched: the handle of this
        call's last record in it; waiting on all of them waits for every record."""
        process_owner.check_owner(self._owner_pid, "this producer")
        if self._closed:
            raise errors.ClientError("producer is closed")
        if self._txn is not None:
            self._txn.check_send()
        if not isinstance(values, (list, tuple)):
            values = list(values)
        if self._value_serializer is not None:
            serialize = self._value_serializer
            values = [serialize(topic, [], v) for v in values]
        if not values:
            return []
        num_partitions = self._metadata.partition_counts.get(topic)
        if num_partitions is None or (partition is not None and partition >= num_partitions):
            num_partitions = self._wait_on_metadata(
                topic, partition, time.monotonic() + self._max_block_ms / 1000.0)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        acc = self._accumulator
        if partition is not None:
            return acc.append_values(TopicPartition(topic, partition), timestamp_ms, values,
                                     max_block_ms=self._max_block_ms)
        futures: list[FutureRecordMetadata] = []
        part = self._partitioner
        meta = self._conn.metadata
        left: TopicPartition | None = None     # the partition the sticky run just left
        while values:
            p = part.partition(topic, None, num_partitions,
                               meta.available_partitions_for_topic(topic))
            tp = TopicPartition(topic, p)
            futs, n = acc.append_values_counted(tp, timestamp_ms, values,
                                                max_block_ms=self._max_block_ms, one_batch=True,
                                                after=left)
            futures += futs
            values = values[n:]
            if values:      # that batch is full: the next goes elsewhere
                part.on_new_batch(topic, num_partitions,
                                  meta.available_partitions_for_topic(topic), p)
                left = tp
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
                # No gateway reachable and none ever was: say so now (kafka-python raises
                # NoBrokersAvailable from its constructor) rather than after max_block_ms.
                self._metadata_changed.wait_for(
                    lambda: meta.version != version or self._unreachable() is not None,
                    timeout=left)
                unreachable = self._unreachable()
                if unreachable is not None:
                    raise unreachable
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

    def _unreachable(self) -> errors.NoBrokersAvailable | None:
        err = self._sender.metadata_error
        if self._conn.metadata.version == 0 and isinstance(err, errors.NoBrokersAvailable):
            return err
        return None

    # -- metadata ------------------------------------------------------------------------------
    def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition numbers (waits up to max_block_ms for metadata)."""
        process_owner.check_owner(self._owner_pid, "this producer")
        self._wait_on_metadata(topic, None, time.monotonic() + self._max_block_ms / 1000.0)
        return self._conn.metadata.partitions_for_topic(topic) or set()

    # -- flush / close -------------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it completed (either way)."""
        process_owner.check_owner(self._owner_pid, "this producer")
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
        """Send what is queued, wait (at most timeout s; None: until every record is
        acknowledged or expired by delivery_timeout_ms) for it, then stop. Records not done by
        then fail with ClientError, and a WARNING names how many records of this close could not
        be delivered. In a forked child, close() only marks the copy closed (the parent owns the
        connection and the sender thread)."""
        if self._closed:
            return
        self._closed = True
        self._plain = False
        _LIVE_PRODUCERS.discard(self)
        if self._owner_pid != process_owner.current_pid():
            return
        pending = self._accumulator.incomplete()
        self._sender.running = False
        self._accumulator.close()
        self._sender.wakeup()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._sender.force_close = True
            self._sender.wakeup()
            self._thread.join()
        client_otel.unregister(self)
        undelivered = sum(b.record_count for b in pending
                          if b.result.is_done and b.result.error is not None)
        self.undelivered_at_close = undelivered
        if undelivered:
            log.warning("producer %s closed: %d record(s) could not be delivered (timeout %s s)",
                        self.client_id, undelivered, timeout)

    # -- transactions ------------------------------------------------------------------------
    def _transactions(self) -> TransactionManager:
        process_owner.check_owner(self._owner_pid, "this producer")
        if self._txn is None:
            raise errors.IllegalStateError("not a transactional producer (no transactional_id)")
        if self._closed:
            raise errors.ClientError("producer is closed")
        return self._txn

    def _await_txn(self, req: TxnRequest | None, timeout: float | None, what: str) -> None:
        """Wait until the sender has the coordinator's answer to `req`; raise its error."""
        if req is None:
            return
        self._sender.wakeup()
        cond = self._txn_cond
        with cond:
            done = cond.wait_for(lambda: req.done, timeout=timeout)
        if not done:
            raise errors.KafkaTimeoutError(
                f"{what} did not complete within {timeout} s (call it again to keep waiting)")
        if req.error is not None:
            raise req.error

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the transactional id's producer id and a new epoch from its coordinator: every
        older producer with this id is fenced (its requests fail with ProducerFencedError) and
        a transaction it left open is aborted first. Call once, before the first transaction;
        after a KafkaTimeoutError, call again to keep waiting."""
        txn = self._transactions()
        with self._txn_cond:
            req = txn.begin_init()
        self._await_txn(req, timeout, "init_transactions")

    def begin_transaction(self) -> None:
        """Start a transaction (local only: the coordinator hears of it with its first
        partition or offsets)."""
        txn = self._transactions()
        with self._txn_cond:
            txn.begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                                    group_metadata: "ConsumerGroupMetadata | str",
                                    timeout: float | None = None) -> None:
        """Commit a consumer group's offsets (the next offset to read, per partition) as part
        of this transaction (KIP-447: `group_metadata` is `consumer.group_metadata()`, checked
        against the group's generation; a group id alone skips that check). They count only if
        the transaction commits."""
        txn = self._transactions()
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        if not group_metadata.group_id:
            raise ValueError("send_offsets_to_transaction needs a group id")
        offsets = {TopicPartition(*tp): om for tp, om in offsets.items()}
        with self._txn_cond:
            req = txn.begin_send_offsets(offsets, group_metadata)
        self._await_txn(req, timeout, "send_offsets_to_transaction")

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it: once this returns, the
        records (and offsets) are committed and read_committed consumers will see them. An
        abortable error (a record that failed) leaves the transaction to abort_transaction();
        after a KafkaTimeoutError, call again to keep waiting."""
        txn = self._transactions()
        with self._txn_cond:
            if txn.state is TxnState.COMMITTING_TRANSACTION and txn.requests:
                req = txn.requests[-1] if txn.requests[-1].api == _END_TXN else None
            else:
                req = txn.begin_commit()
        acc = self._accumulator
        acc.begin_flush()
        try:
            self._sender.wakeup()
            if req is None:
                self._wait_batches(acc.incomplete(), timeout, "commit_transaction")
                with self._txn_cond:
                    if txn.state is TxnState.ABORTABLE_ERROR:
                        raise txn.last_error   # type: ignore[misc]
                return
            self._await_txn(req, timeout, "commit_transaction")
        finally:
            acc.end_flush()

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTxnState:
        """Two-phase commit (KIP-939): send every record of the transaction and wait for each
        (a record that failed raises its abortable error, as commit_transaction() would), then
        leave the transaction open and prepared, and return its PreparedTxnState (transactional
        id, producer id, epoch: plain data that pickles). Any process may then commit or abort
        it with `Admin.complete_transaction(state, commit=...)`; this producer may still
        commit_transaction() or abort_transaction() it, and nothing more may be sent in it.
        Closing the producer leaves it open until someone ends it, a newer instance of the
        transactional id aborts it (init_transactions), or transaction_timeout_ms passes and
        the coordinator aborts it. After a KafkaTimeoutError, call again to keep waiting."""
        txn = self._transactions()
        with self._txn_cond:
            txn.check_prepare()
        acc = self._accumulator
        acc.begin_flush()
        try:
            self._sender.wakeup()
            self._wait_batches(acc.incomplete(), timeout, "prepare_transaction")
        finally:
            acc.end_flush()
        with self._txn_cond:
            if txn.state is TxnState.ABORTABLE_ERROR:
                raise txn.last_error   # type: ignore[misc]
            return txn.prepared()

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet are dropped (their futures fail with
        TransactionAbortedError), those in flight are waited for, then the coordinator writes
        ABORT markers: read_committed consumers never see any of it. After an abortable error
        this is how to go on."""
        txn = self._transactions()
        with self._txn_cond:
            if txn.state is TxnState.ABORTING_TRANSACTION and txn.requests:
                req = txn.requests[-1]
            else:
                req = txn.begin_abort()
        pending = self._accumulator.incomplete()
        self._sender.wakeup()
        self._wait_batches(pending, timeout, "abort_transaction")
        self._await_txn(req, timeout, "abort_transaction")
        # an epoch bump (KIP-360) queued by the abort: wait for it too
        with self._txn_cond:
            bump = txn.requests[0] if txn.state is TxnState.INITIALIZING and txn.requests \
                else None
        self._await_txn(bump, timeout, "abort_transaction (epoch bump)")

    def _wait_batches(self, batches, timeout: float | None, what: str) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for batch in batches:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not batch.result.wait(left):
                raise errors.KafkaTimeoutError(f"{what}: records not completed within {timeout} s")

    @property
    def transaction_state(self) -> str | None:
        """The transactional producer's state name (Kafka's), None without transactions."""
        return self._txn.state.value if self._txn is not None else None

    @property
    def idempotent(self) -> bool:
        """True while batches carry producer id/epoch/sequences (False after a fallback)."""
        return self._idempotence is not None and self._idempotence.enabled

    undelivered_at_close = 0
    """How many records of the batches pending when close() began failed (0 before close)."""

    def metrics(self, raw: bool = False) -> dict[str, Any]:
        """This producer's metrics, one flat dict (kafka-python's metrics() with `raw` accepted
        and changing nothing). Kafka's producer-metrics names, counted per request or per batch
        (riverbed.client_metrics: rates per second and avg/max over two 30 s windows; NaN when
        nothing was measured in them; times in ms, sizes in bytes):

        record-send-rate/-total, records-per-request-avg, request-rate/-total,
        request-size-avg/-max, outgoing-byte-rate/-total, batch-size-avg/-max,
        compression-rate-avg (compressed / uncompressed), record-queue-time-avg/-max,
        request-latency-avg/-max, response-total, requests-in-flight, buffer-total-bytes,
        buffer-available-bytes, record-error-rate/-total, record-retry-rate/-total (every
        batch sent again, also one the idempotent producer resends behind an earlier batch
        without charging `retries`), errors-by-code ({Kafka error name: batches retried or
        failed with it}).

        And Riverbed's own: requests_sent, in_flight, buffer_memory_used, batches_expired,
        idempotent, producer_id, producer_epoch, gateway, gateway_failovers."""
        idem = self._idempotence
        ours = {"requests_sent": self._sender.requests_sent,
                "in_flight": len(self._sender.in_flight),
                "buffer_memory_used": self._accumulator.memory_used,
                "batches_expired": self._sender.batches_expired,
                # quotas: throttle_time_ms of the gateway's PRODUCE answers (Kafka's
                # produce-throttle-time-max / -avg, over the producer's life)
                "produce_throttle_time_max": self._sender.throttle_time_ms_max,
                "produce_throttle_time_avg": (self._sender.throttle_time_ms_total
                                              / max(self._sender.produce_responses, 1)),
                "produce_throttled_responses": self._sender.throttled_responses,
                "idempotent": self.idempotent,
                "producer_id": idem.producer_id if idem is not None else -1,
                "producer_epoch": idem.producer_epoch if idem is not None else -1,
                "gateway": self._conn.endpoint, "gateway_failovers": self._conn.failovers}
        sender, acc = self._sender, self._accumulator
        kafka = sender.metrics.snapshot(time.monotonic() * 1000.0,
                                        in_flight=len(sender.in_flight),
                                        buffer_total_bytes=acc.buffer_memory,
                                        buffer_used_bytes=acc.memory_used)
        return {**kafka, **ours}

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# kafka-python 3.0's retries default (unbounded: delivery_timeout_ms bounds a record), as an int
KAFKA_PYTHON_RETRIES = 2147483647


class KafkaProducer(Producer):
    """kafka-python 3.0's `KafkaProducer`: a `Producer` with kafka-python 3.0's defaults
    (`acks='all'`, hence idempotence, KIP-679; `retries` unbounded, delivery_timeout_ms bounds
    a record's time instead), `send()`'s argument order (topic, value, key, headers, partition,
    timestamp_ms), serializers called for None keys and values too (kafka-python's way: a
    Serializer may turn None into bytes), and its constructor check: it waits up to
    `bootstrap_timeout_ms` (30000; kafka-python 2.x's `api_version_auto_timeout_ms` is taken
    too) for a bootstrap address to answer and raises `riverbed.errors.NoBrokersAvailable` (a
    `KafkaTimeoutError`, what kafka-python 3.0 raises), naming each address and why, when none
    does. kafka-python's
    settings for Kafka connections, TLS, SASL and metrics reporters (`api_version`, `ssl_*`,
    `sasl_*`, ...) are accepted and ignored (riverbed.kafka_python_types). `Producer` itself
    connects lazily: an unreachable cluster is reported by the first `send()`."""

    _serialize_none = True

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None,
                 **configs: Any) -> None:
        timeout_ms, setting = bootstrap_timeout(configs)
        configs = kafka_python_settings(configs)
        configs.setdefault("acks", "all")
        configs.setdefault("retries", KAFKA_PYTHON_RETRIES)
        super().__init__(bootstrap_servers, **configs)
        try:
            require_gateway(self._conn, timeout_ms, setting)
        except BaseException:
            self.close(timeout=0)
            raise

    def send(self, topic: str, value: Any = None, key: Any = None,  # type: ignore[override]
             headers: Iterable[tuple[str, bytes]] | None = None, partition: int | None = None,
             timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """kafka-python's argument order: headers before partition. A partition the topic does
        not have is a ValueError, as in kafka-python 3.0."""
        try:
            return Producer.send(self, topic, value, key, partition, headers, timestamp_ms)
        except errors.UnknownTopicOrPartitionError as e:
            if partition is None or e.partition != partition:
                raise
            raise ValueError(f"Unrecognized partition {partition} for topic {topic}") from e

    def bootstrap_connected(self) -> bool:
        """True: the constructor waited for a gateway to answer (False once closed)."""
        return not self._closed

    def close(self, timeout: float | None = None, null_logger: bool = False) -> None:
        super().close(timeout)


_END_TXN = header_pb2.ApiKey.END_TXN


def _as_bytes(v, what: str):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(f"{what} must be bytes, str or None (or pass a {what}_serializer), "
                    f"not {type(v).__name__}")
