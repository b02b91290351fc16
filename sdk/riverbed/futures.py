"""Completion handles for produced records: one completion object per batch, a thin handle per
record (Kafka's ProduceRequestResult and FutureRecordMetadata).

A `concurrent.futures.Future` costs ~2 µs per record (RECIPES.md); a slotted handle ~0.1 µs. So
`Producer.send` returns a `FutureRecordMetadata` that only knows its batch's `BatchResult` and its
index in the batch: offset = batch base offset + index. The batch result is completed once by the
sender thread; waiting, `done()` and callbacks all go through it.

In asyncio code a record's future is awaitable (`await fut` -> RecordMetadata, as aiokafka's):
the first await on a pending batch makes one asyncio future for the whole batch, completed on
the awaiting loop when the batch completes (from riverbed.aio's sender task or from a sync
producer's sender thread alike).
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable, Generator

from riverbed import errors, process_owner
from riverbed.structs import RecordMetadata

__all__ = ["BatchResult", "FutureRecordMetadata"]

log = logging.getLogger(__name__)


class BatchResult:
    """The outcome of one produced batch: base offset (or -1) and log-append time, or an error."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time_ms", "error",
                 "_event", "_callbacks", "_done", "_owner_pid", "_aio")

    def __init__(self, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        self._event: threading.Event | None = None   # made only when someone waits
        self._callbacks: list | None = None
        self._done = False
        self._owner_pid = process_owner.current_pid()   # the sender thread lives there
        self._aio: asyncio.Future | None = None         # made by the first await

    @property
    def is_done(self) -> bool:
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        """Block until completed (at most timeout s); True if completed. The Event is created on
        the first wait: most batches complete without anyone blocking on them, and an Event
        (a Condition and two locks) costs more than the rest of the batch's bookkeeping."""
        if self._done:
            return True
        # after os.fork() nobody in this process will ever complete it: fail now, not hang
        process_owner.check_owner(self._owner_pid, f"the producer of this {self.topic} record")
        with _CALLBACK_LOCK:
            if self._done:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> None:
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self._finish()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self._finish()

    def _finish(self) -> None:
        with _CALLBACK_LOCK:
            assert not self._done, "a batch result is completed once"
            self._done = True
            callbacks, self._callbacks = self._callbacks, None
            event = self._event
        if event is not None:
            event.set()
        if callbacks:
            for fn, handle in callbacks:
                _run_callback(fn, handle)

    def asyncio_future(self) -> "asyncio.Future[None]":
        """An asyncio future (of the running loop) done when this batch completes."""
        fut = self._aio
        if fut is None:
            loop = asyncio.get_running_loop()
            loop_thread = threading.get_ident()
            fut = self._aio = loop.create_future()

            def on_done(_handle: Any) -> None:
                if threading.get_ident() == loop_thread:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    loop.call_soon_threadsafe(_set_done, fut)
            self.add_callback(on_done, None)  # type: ignore[arg-type]
        return fut

    def add_callback(self, fn: Callable[[Any], Any], handle: "FutureRecordMetadata") -> None:
        with _CALLBACK_LOCK:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((fn, handle))
                return
        _run_callback(fn, handle)


def _set_done(fut: "asyncio.Future[None]") -> None:
    if not fut.done():
        fut.set_result(None)


# Guards registration against completion; held only for a list append (one lock for all batches).
_CALLBACK_LOCK = threading.Lock()


def _run_callback(fn, handle) -> None:
    try:
        fn(handle)
    except Exception:
        log.exception("producer callback %r raised", fn)


class FutureRecordMetadata:
    """The future of one sent record: resolves to RecordMetadata(topic, partition, offset, timestamp)."""

    __slots__ = ("_batch", "_index", "_timestamp")

    def __init__(self, batch: BatchResult, index: int, timestamp_ms: int):
        self._batch = batch
        self._index = index
        self._timestamp = timestamp_ms

    # -- concurrent.futures-like --------------------------------------------------------
    def done(self) -> bool:
        return self._batch._done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait (at most timeout seconds) and return the metadata, or raise the send's error
        (a riverbed.errors.KafkaError naming topic/partition), or KafkaTimeoutError."""
        b = self._batch
        if not b._done and not b.wait(timeout):
            raise errors.KafkaTimeoutError(
                f"record for {b.topic}-{b.partition} not acknowledged within {timeout} s")
        if b.error is not None:
            raise b.error
        return self._metadata()

    get = result  # kafka-python's name

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        """`await fut` in asyncio code: the RecordMetadata, or the send's error raised."""
        b = self._batch
        if not b._done:
            yield from b.asyncio_future().__await__()
        if b.error is not None:
            raise b.error
        return self._metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        b = self._batch
        if not b._done and not b.wait(timeout):
            raise errors.KafkaTimeoutError(
                f"record for {b.topic}-{b.partition} not acknowledged within {timeout} s")
        return b.error

    def succeeded(self) -> bool:
        return self._batch._done and self._batch.error is None

    def failed(self) -> bool:
        return self._batch._done and self._batch.error is not None

    def add_done_callback(self, fn: Callable[["FutureRecordMetadata"], Any]) -> "FutureRecordMetadata":
        """Call fn(self) once the record's batch completes (at once if it already has), on the
        thread that completes it (the producer's sender thread): keep it short."""
        self._batch.add_callback(fn, self)
        return self

    def add_callback(self, fn: Callable[..., Any], *args, **kwargs) -> "FutureRecordMetadata":
        """kafka-python's: fn(*args, record_metadata, **kwargs) on success."""
        def on_done(f: FutureRecordMetadata) -> None:
            if f._batch.error is None:
                fn(*args, f._metadata(), **kwargs)
        return self.add_done_callback(on_done)

    def add_errback(self, fn: Callable[..., Any], *args, **kwargs) -> "FutureRecordMetadata":
        """kafka-python's: fn(*args, exception, **kwargs) on failure."""
        def on_done(f: FutureRecordMetadata) -> None:
            if f._batch.error is not None:
                fn(*args, f._batch.error, **kwargs)
        return self.add_done_callback(on_done)

    # -- values ----------------------------------------------------------------------------
    @property
    def topic(self) -> str:
        return self._batch.topic

    @property
    def partition(self) -> int:
        return self._batch.partition

    def _metadata(self) -> RecordMetadata:
        b = self._batch
        offset = b.base_offset + self._index if b.base_offset >= 0 else -1
        ts = b.log_append_time_ms if b.log_append_time_ms >= 0 else self._timestamp
        return RecordMetadata(b.topic, b.partition, offset, ts)

    def __repr__(self) -> str:
        b = self._batch
        state = "pending" if not b._done else ("failed" if b.error else "done")
        return f"<FutureRecordMetadata {b.topic}-{b.partition} #{self._index} {state}>"
