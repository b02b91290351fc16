"""The asyncio consumer (aiokafka's AIOKafkaConsumer API) over the sync consumer's logic.

    consumer = Consumer("orders", bootstrap_servers="tcp://127.0.0.1:9092", group_id="g",
                        auto_offset_reset="earliest")
    await consumer.start()
    try:
        async for record in consumer:
            print(record.partition, record.offset, record.value)
    finally:
        await consumer.stop()

What is shared, what differs: the records, fetch pipelining, positions, seeks, group membership
(eager and cooperative rebalancing), commits and LIST_OFFSETS are riverbed.consumer.Consumer's
own. Its channels are riverbed.aio.channel.AsyncChannel and its sleeps asyncio's, and every call
that talks to the cluster runs through riverbed.aio.bridge.run_sync: while it waits for an
answer the loop runs other tasks (no thread). Calls are serialised (an asyncio.Lock): a commit
issued while getmany() waits runs when that getmany returns (at most its timeout_ms).

Group heartbeats are sent from getone()/getmany() and, while the application does something
else, from a task of the loop every heartbeat_interval_ms (as aiokafka's); the rejoin after a
rebalance happens in the next getone()/getmany(). A heartbeat is a long poll the coordinator
holds (riverbed.group_membership): while one is in flight the task looks for its answer every
_HEARTBEAT_ANSWER_POLL_MS, so a rebalance is noticed as soon as it begins.
"""
from __future__ import annotations

import asyncio
import collections
import inspect
from typing import Any, AsyncIterator, Callable, Iterable, Sequence, TypeVar

from riverbed import errors
from riverbed.aio import bridge
from riverbed.aio.channel import AsyncChannel
from riverbed.consumer import Consumer as _SyncConsumer
from riverbed.consumer_groups import ConsumerRebalanceListener
from riverbed.group_membership import _HEARTBEAT_ANSWER_POLL_MS
from riverbed.structs import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

__all__ = ["Consumer", "AIOKafkaConsumer"]

T = TypeVar("T")


class _ConsumerCore(_SyncConsumer):
    """riverbed.consumer.Consumer whose waits are asyncio's (run inside run_sync)."""

    _sleep = staticmethod(bridge.sleep)  # type: ignore[assignment]


class _Listener(ConsumerRebalanceListener):
    """Calls the application's listener from the consumer's calls (inside run_sync): aiokafka's
    listeners may be coroutines, awaited here on the loop."""

    def __init__(self, listener: ConsumerRebalanceListener):
        self.listener = listener

    def _call(self, method: str, tps: set[TopicPartition]) -> None:
        fn = getattr(self.listener, method, None)
        if fn is None:
            return
        result = fn(tps)
        if inspect.isawaitable(result):
            bridge.await_(result)

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._call("on_partitions_revoked", revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._call("on_partitions_assigned", assigned)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        own = getattr(type(self.listener), "on_partitions_lost", None)
        if own is None or own is ConsumerRebalanceListener.on_partitions_lost:
            self._call("on_partitions_revoked", lost)     # (it may be a coroutine function)
        else:
            self._call("on_partitions_lost", lost)


class Consumer:
    """Reads records from asyncio code (aiokafka's AIOKafkaConsumer). Takes riverbed.Consumer's
    settings (group_id, auto_offset_reset, enable_auto_commit, partition_assignment_strategy,
    key_deserializer, ...); `await start()` before use, `await stop()` after."""

    def __init__(self, *topics: str, bootstrap_servers: str | Sequence[str] | None = None,
                 **config: Any):
        self._topics = topics
        self._args = dict(bootstrap_servers=bootstrap_servers, **config)
        self._core: _ConsumerCore | None = None
        self._lock = asyncio.Lock()
        self._buffer: collections.deque[ConsumerRecord] = collections.deque()
        self._heartbeats: asyncio.Task[None] | None = None

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        async with self._lock:
            return await bridge.run_sync(fn, *args, **kwargs)

    def _started(self) -> _ConsumerCore:
        if self._core is None:
            raise errors.ClientError("consumer not started: await consumer.start() first")
        return self._core

    # -- life cycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect; with topics given to the constructor, subscribe (with a group_id) or assign
        all their partitions."""
        if self._core is not None:
            return

        def make() -> _ConsumerCore:
            core = _ConsumerCore(*self._topics, _channel_factory=AsyncChannel, **self._args)
            if core._group is not None:
                core._group._sleep = bridge.sleep
            if self._topics:    # partitions_for_topic() answers from this metadata
                core._conn.fetch_metadata(self._topics)
            return core
        self._core = await self._run(make)
        group = self._core._group
        if group is not None:
            self._heartbeats = asyncio.ensure_future(
                self._heartbeat_loop(group.heartbeat_interval_ms / 1000.0))

    async def _heartbeat_loop(self, interval_s: float) -> None:
        """Heartbeats while no call of the application holds the consumer (a call in progress
        sends its own)."""
        core = self._core
        assert core is not None and core._group is not None
        group = core._group
        while not core._closed:
            if group.heartbeat_in_flight:    # a held heartbeat: its answer may say "rebalance"
                await asyncio.sleep(min(interval_s / 4, _HEARTBEAT_ANSWER_POLL_MS / 1000.0))
            else:
                await asyncio.sleep(interval_s / 4)
            if not self._lock.locked():
                try:
                    await self._run(group.heartbeat_if_due)
                except errors.RiverbedError:
                    pass            # the next getone()/getmany() sees the same and acts

    async def stop(self) -> None:
        """Commit (enable_auto_commit), leave the group, close the connections."""
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            try:
                await self._heartbeats
            except asyncio.CancelledError:
                pass
            self._heartbeats = None
        if self._core is not None:
            await self._run(self._core.close)

    close = stop

    async def __aenter__(self) -> "Consumer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # -- assignment -----------------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] = (), pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the group for these topics (or a pattern); the assignment arrives with the next
        getone()/getmany(). Needs a group_id (aiokafka's rule)."""
        core = self._started()
        if core._group is None:
            raise errors.ClientError("subscribe() needs a group_id (or use assign())")
        core.subscribe(topics, pattern, None if listener is None else _Listener(listener))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._started().assign(partitions)
        self._buffer.clear()

    def assignment(self) -> set[TopicPartition]:
        return self._started().assignment()

    def subscription(self) -> set[str]:
        return self._started().subscription()

    async def unsubscribe(self) -> None:
        self._buffer.clear()
        await self._run(self._started().unsubscribe)

    # -- reading --------------------------------------------------------------------------------
    async def getmany(self, *partitions: TopicPartition, timeout_ms: float = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records that arrived within timeout_ms: {TopicPartition: [ConsumerRecord, ...]}
        (only of `partitions` when given; the others stay buffered)."""
        core = self._started()
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        if self._buffer:
            keep: collections.deque[ConsumerRecord] = collections.deque()
            limit = max_records or core.max_poll_records
            while self._buffer and limit:
                r = self._buffer.popleft()
                tp = TopicPartition(r.topic, r.partition)
                if partitions and tp not in partitions:
                    keep.append(r)
                    continue
                out.setdefault(tp, []).append(r)
                limit -= 1
            keep.extend(self._buffer)
            self._buffer = keep
            if out:
                return out
        if partitions:
            others = [tp for tp in core.assignment() if tp not in partitions]
            paused = core.paused()
            core.pause(*others)
            try:
                return await self._run(core.poll, timeout_ms, max_records)
            finally:
                core.resume(*(tp for tp in others if tp not in paused and
                              tp in core.assignment()))
        return await self._run(core.poll, timeout_ms, max_records)

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord:
        """The next record (of `partitions` when given), waiting as long as it takes."""
        while True:
            for i, r in enumerate(self._buffer):
                if not partitions or TopicPartition(r.topic, r.partition) in partitions:
                    del self._buffer[i]
                    return r
            got = await self.getmany(*partitions, timeout_ms=1000)
            for recs in got.values():
                self._buffer.extend(recs)

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self

    async def __anext__(self) -> ConsumerRecord:
        try:
            return await self.getone()
        except errors.ClientError:
            if self._core is not None and self._core._closed:
                raise StopAsyncIteration from None
            raise

    # -- offsets --------------------------------------------------------------------------------
    async def commit(self, offsets: dict | None = None) -> None:
        """Commit {TopicPartition: offset | OffsetAndMetadata} (default: the positions)."""
        await self._run(self._started().commit, offsets)

    async def committed(self, partition: TopicPartition) -> int | None:
        return await self._run(self._started().committed, partition)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._drop_buffered(partition)
        self._started().seek(partition, offset)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._started().assignment()):
            self._drop_buffered(tp)
        self._started().seek_to_beginning(*partitions)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._started().assignment()):
            self._drop_buffered(tp)
        self._started().seek_to_end(*partitions)

    async def seek_to_committed(self, *partitions: TopicPartition) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for tp in partitions or tuple(self._started().assignment()):
            offset = await self.committed(tp)
            out[tp] = offset
            if offset is not None:
                self.seek(tp, offset)
        return out

    def _drop_buffered(self, tp: TopicPartition) -> None:
        tp = TopicPartition(*tp)
        if self._buffer:
            self._buffer = collections.deque(
                r for r in self._buffer if (r.topic, r.partition) != (tp.topic, tp.partition))

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record for this partition (records getone() buffered count
        as not yet read)."""
        pos = await self._run(self._started().position, partition)
        for r in self._buffer:
            if (r.topic, r.partition) == (partition[0], partition[1]):
                return r.offset
        return pos

    def highwater(self, partition: TopicPartition) -> int | None:
        return self._started().highwater(partition)

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]
                                ) -> dict[TopicPartition, int]:
        return await self._run(self._started().beginning_offsets, list(partitions))

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._run(self._started().end_offsets, list(partitions))

    async def offsets_for_times(self, timestamps: dict[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return await self._run(self._started().offsets_for_times, timestamps)

    def pause(self, *partitions: TopicPartition) -> None:
        self._started().pause(*partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._started().resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self._started().paused()

    # -- metadata -------------------------------------------------------------------------------
    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The topic's partitions from the metadata this consumer has (None if unknown)."""
        return self._started()._conn.metadata.partitions_for_topic(topic)

    async def topics(self) -> set[str]:
        return await self._run(self._started().topics)

    def group_metadata(self) -> Any:
        """The member's group metadata for send_offsets_to_transaction (KIP-447)."""
        return self._started().group_metadata()

    def metrics(self) -> dict[str, Any]:
        return self._started().metrics()


AIOKafkaConsumer = Consumer

__all__ += ["OffsetAndMetadata"]
