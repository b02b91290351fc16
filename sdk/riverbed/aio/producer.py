"""The asyncio producer (aiokafka's AIOKafkaProducer API) over the sync producer's parts.

    async with Producer(bootstrap_servers="tcp://127.0.0.1:9092") as p:
        fut = await p.send("orders", b"value", key=b"k")     # queued: a future
        md = await fut                                        # RecordMetadata once acknowledged
        md = await p.send_and_wait("orders", b"v2")

What is shared, what differs (no copy of the logic):
- send() is riverbed.producer.Producer's own send path (serializers, partitioner, size checks,
  RecordAccumulator append), called directly on the loop: no greenlet, no thread hop per record.
  Only a send that would wait (topic metadata unknown, buffer_memory full) is rerun inside
  riverbed.aio.bridge.run_sync, where its waits (the producer's metadata condition, the
  accumulator's memory condition) are awaited on the loop.
- The riverbed.sender.Sender (drain, PRODUCE requests, retries, idempotence, expiry, failover)
  runs as one asyncio task instead of a thread: its waits on the gateway's DEALER are awaited
  through riverbed.aio.channel.AsyncChannel, and a send that makes a batch ready wakes it.
- Futures are the sync producer's FutureRecordMetadata (one completion per batch), awaitable.
- Transactions (aiokafka's names): `await init_transactions()`, `await begin_transaction()`,
  `await send_offsets_to_transaction(offsets, group_id_or_metadata)`,
  `await commit_transaction()`, `await abort_transaction()`, and `async with
  producer.transaction():` (commits on exit, aborts on an exception). The sync producer's
  transaction manager and sender do the work; its waits on the coordinator's answers are an
  asyncio condition here, its waits on batches asyncio futures.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable, Sequence

from riverbed import errors
from riverbed.aio import bridge
from riverbed.aio.channel import AsyncChannel
from riverbed.futures import FutureRecordMetadata
from riverbed.producer import Producer as _SyncProducer
from riverbed.sender import Sender
from riverbed.structs import RecordMetadata, TopicPartition

__all__ = ["Producer", "AIOKafkaProducer", "BatchBuilder"]

log = logging.getLogger(__name__)

# send() yields to the loop (asyncio.sleep(0)) when the thread has run this long (CPU time,
# time.thread_time_ns) since it last did, checked every _YIELD_CHECK records: a program that
# only sends (never awaits anything that waits) still lets the sender task handle answers and
# put what accumulated on the wire, in requests of a few milliseconds' worth of records -- like
# the sync producer's sender thread, which gets the GIL after the application thread has held it
# for the switch interval (5 ms). CPU time, not wall time: on a busy machine a descheduled
# thread appends nothing, and a request per few records would cost more than the records. A loop round per record would cost more than
# the record; one request per few records would pay a send syscall (and, on a busy machine, a
# reschedule) for each.
_YIELD_INTERVAL_NS = 5_000_000
_YIELD_CHECK = 32


class _AioSender(Sender):
    """The Sender with its waits on the loop: a wakeup resolves the waiter future, the DEALER's
    readiness comes from AsyncChannel.poll_async."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._waiter: asyncio.Future[None] | None = None
        self.woken = False          # a wakeup is pending: the task has not run since

    def wakeup(self) -> None:
        self.woken = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _poll(self, ready_delay_ms: float, now: float) -> None:
        timeout = self._poll_timeout(ready_delay_ms, now)
        woken, self.woken = self.woken, False
        if timeout > 0 and not woken:
            acc = self.acc
            can_send = len(self.in_flight) < self.max_in_flight
            if can_send and acc._ready_seq != acc._seq_at_ready:
                timeout = 0     # something became ready after our ready() check
            else:
                acc.sender_sleeping = can_send
            if timeout > 0:
                bridge.await_(self._wait(timeout))
                self.woken = False
            acc.sender_sleeping = False
        self.handle_responses()

    async def _wait(self, timeout_ms: float) -> None:
        """Until an answer arrives on the gateway's DEALER (its zmq.asyncio shadow's poll), a
        wakeup, or timeout_ms."""
        chan = self.conn.channel
        assert isinstance(chan, AsyncChannel)
        if chan.readable():
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        polled = chan.poll_async(timeout_ms)
        polled.add_done_callback(lambda _f: _resolve(waiter))
        try:
            await waiter
        finally:
            self._waiter = None
            if not polled.done():
                polled.cancel()


def _resolve(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_result(None)


class _ProducerCore(_SyncProducer):
    """riverbed.producer.Producer without its sender thread: its waits are asyncio's."""

    _sender_class = _AioSender

    def _start_io(self) -> None:
        self._thread = None  # type: ignore[assignment]  # the sender is the aio producer's task
        cond: Any = bridge.AsyncCondition()        # threading.Condition's interface
        self._metadata_changed = cond
        self._sender.metadata_changed = cond
        acc = self._accumulator
        acc._cond = bridge.AsyncCondition(acc._lock)  # type: ignore[assignment]
        self._txn_cond = bridge.AsyncCondition()    # the transactional answers' waits
        if self._txn is not None:
            self._sender.txn_cond = self._txn_cond

    def _wait_batches(self, batches, timeout: float | None, what: str) -> None:
        """The sync producer's wait on batches, awaited on the loop (inside run_sync)."""
        pending = [b.result.asyncio_future() for b in batches if not b.result.is_done]
        if not pending:
            return
        _done, not_done = bridge.await_(asyncio.wait(pending, timeout=timeout))
        if not_done:
            raise errors.KafkaTimeoutError(f"{what}: records not completed within {timeout} s")


class Producer:
    """Publishes records from asyncio code (aiokafka's AIOKafkaProducer): `await start()`,
    `await send(...)` -> awaitable future, `await send_and_wait(...)`, `await flush()`,
    `await stop()`; also an async context manager. Takes riverbed.Producer's settings
    (bootstrap_servers, acks, linger_ms, batch_size, compression_type, enable_idempotence,
    key_serializer, value_serializer, ...). Use it from one event loop."""

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, *,
                 client_id: str | None = None, **config: Any):
        self._args = dict(bootstrap_servers=bootstrap_servers, client_id=client_id, **config)
        self._core: _ProducerCore | None = None
        self._task: asyncio.Task[None] | None = None
        self._sender: _AioSender | None = None
        self._sends_without_yield = 0
        self._last_yield_ns = 0

    # -- life cycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect and start the sender task (no request is sent before the first record)."""
        if self._core is not None:
            return
        core = _ProducerCore(_channel_factory=AsyncChannel, **self._args)
        self._core = core
        sender = core._sender
        assert isinstance(sender, _AioSender)
        self._sender = sender
        self._task = asyncio.ensure_future(bridge.run_sync(sender.run))

    async def stop(self, timeout: float | None = None) -> None:
        """Send what is queued, wait for it (at most timeout s; None: until acknowledged or
        expired by delivery_timeout_ms), stop the sender task. Records not done by then fail."""
        core, task, sender = self._core, self._task, self._sender
        if core is None or task is None or sender is None or core._closed:
            return
        core._closed = True
        core._plain = False
        core._accumulator.close()
        sender.running = False
        sender.wakeup()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            sender.force_close = True
            sender.wakeup()
            await task

    close = stop

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def _started(self) -> _ProducerCore:
        core = self._core
        if core is None:
            raise errors.ClientError("producer not started: await producer.start() first")
        task = self._task
        if task is not None and task.done() and not core._closed:
            task.result()                           # the sender died: raise why
        return core

    # -- sending --------------------------------------------------------------------------------
    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Iterable[tuple[str, bytes]] | None = None) -> FutureRecordMetadata:
        """Queue one record; returns its future (`await` it for the RecordMetadata). Waits
        only for the topic's metadata or for buffer memory (max_block_ms)."""
        core = self._core
        if core is None or core._closed:
            core = self._started()
            if core._closed:
                raise errors.ClientError("producer is closed")
        try:
            fut = core.send(topic, value, key, partition, headers, timestamp_ms)
        except bridge.WouldBlock:
            fut = await bridge.run_sync(core.send, topic, value, key, partition, headers,
                                        timestamp_ms)
            self._sends_without_yield = 0
            return fut
        n = self._sends_without_yield + 1
        if n >= _YIELD_CHECK:
            n = 0
            now = time.thread_time_ns()
            if now - self._last_yield_ns >= _YIELD_INTERVAL_NS:
                task = self._task
                if task is not None and task.done():
                    task.result()               # the sender died: raise why
                await asyncio.sleep(0)
                self._last_yield_ns = time.thread_time_ns()
        self._sends_without_yield = n
        return fut

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: Iterable[tuple[str, bytes]] | None = None) -> RecordMetadata:
        """send() and wait for the acknowledgement."""
        fut = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await fut

    def create_batch(self) -> "BatchBuilder":
        """A batch of records to send with send_batch (aiokafka's create_batch)."""
        return BatchBuilder()

    async def send_batch(self, batch: "BatchBuilder", topic: str, *,
                         partition: int) -> FutureRecordMetadata:
        """Queue the batch's records, as they are (bytes: no serializer, as aiokafka's batches),
        to one partition; returns the future of its last record (done when every record of
        the batch is)."""
        core = self._started()
        if not batch._records:
            raise ValueError("empty batch")

        def append() -> list[FutureRecordMetadata]:
            max_block_ms = core._max_block_ms
            core._wait_on_metadata(topic, partition, time.monotonic() + max_block_ms / 1000.0)
            tp = TopicPartition(topic, partition)
            now = time.time_ns() // 1_000_000
            futs = [core._accumulator.append(tp, now if ts is None else ts, key, value,
                                             tuple(headers or ()), max_block_ms=max_block_ms)
                    for key, value, ts, headers in batch._records]
            return [f for f in futs if f is not None]   # None only with abort_on_new_batch
        futs = await bridge.run_sync(append)
        self._sender.wakeup()  # type: ignore[union-attr]
        return futs[-1]

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it completed (either way)."""
        core = self._started()
        acc = core._accumulator
        acc.begin_flush()
        self._sender.wakeup()  # type: ignore[union-attr]
        try:
            pending = [b.result.asyncio_future() for b in acc.incomplete()
                       if not b.result.is_done]
            if pending:
                done, not_done = await asyncio.wait(pending, timeout=timeout)
                if not_done:
                    raise errors.KafkaTimeoutError(f"flush did not complete within {timeout} s")
        finally:
            acc.end_flush()

    async def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition numbers (waits up to max_block_ms for metadata)."""
        return await bridge.run_sync(self._started().partitions_for, topic)

    # -- transactions (aiokafka's API over riverbed.producer.Producer's) ------------------------
    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get the transactional id's producer id and a new epoch (fences older instances)."""
        await bridge.run_sync(self._started().init_transactions, timeout)

    async def begin_transaction(self) -> None:
        self._started().begin_transaction()

    async def send_offsets_to_transaction(self, offsets: dict, group_id: Any,
                                          timeout: float | None = None) -> None:
        """`group_id`: a group id, or the consumer's group_metadata() (KIP-447)."""
        await bridge.run_sync(self._started().send_offsets_to_transaction, offsets, group_id,
                              timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        await bridge.run_sync(self._started().commit_transaction, timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        await bridge.run_sync(self._started().abort_transaction, timeout)

    def transaction(self) -> "_Transaction":
        """`async with producer.transaction():` begins a transaction, commits it on exit, or
        aborts it when the block raises (aiokafka's TransactionContext)."""
        return _Transaction(self)

    @property
    def transaction_state(self) -> str | None:
        return self._started().transaction_state

    # -- information ----------------------------------------------------------------------------
    @property
    def client_id(self) -> str:
        return self._started().client_id

    def metrics(self) -> dict[str, Any]:
        return self._started().metrics()


AIOKafkaProducer = Producer


class _Transaction:
    def __init__(self, producer: Producer):
        self._producer = producer

    async def __aenter__(self) -> "_Transaction":
        await self._producer.begin_transaction()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            await self._producer.commit_transaction()
            return
        if getattr(exc, "fatal", False):
            return                      # a fenced producer cannot abort: the error goes on
        await self._producer.abort_transaction()


class BatchBuilder:
    """Records for send_batch (aiokafka's BatchBuilder: append, record_count): keys and values
    are bytes (or None) as they go on the wire."""

    def __init__(self) -> None:
        self._records: list[tuple[bytes | None, bytes | None, int | None, Any]] = []

    def append(self, *, timestamp: int | None = None, key: bytes | None = None,
               value: bytes | None = None, headers: Any = None) -> "BatchBuilder":
        if key is None and value is None:
            raise ValueError("need a value or a key")
        self._records.append((key, value, timestamp, headers))
        return self

    def record_count(self) -> int:
        return len(self._records)
