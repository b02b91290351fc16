"""Server-side RPC over ZeroMQ (asyncio): the ROUTER request loop every service runs, the
DEALER channel services use to call each other, and PUB/SUB for metadata fan-out.

Message layout (riverbed.wire.framing): a DEALER client sends [header, body, *payloads]; the
ROUTER sees [peer identity, header, body, *payloads] and answers [identity, header, body,
*payloads]. REQ clients (which add an empty delimiter frame) are not supported.

Limits
- `socket.request.max.bytes` is enforced twice: libzmq's ZMQ_MAXMSGSIZE refuses any single
  frame above it — libzmq then *drops the sender's connection* without a reply (the client's
  request times out; its DEALER reconnects by itself) — and the server checks the total of all
  frames of a request, answering MESSAGE_TOO_LARGE when it is above the limit.
- `queued.max.requests` bounds requests being handled at once; beyond it the server stops
  reading, so backpressure reaches clients through ZMQ's high-water marks.

Errors: undecodable frames, unknown apis and versions, oversize requests get an envelope error
(ResponseHeader.error_code) and the server keeps serving. A handler raising errors.KafkaError
answers with its code and message; any other exception answers UNKNOWN_SERVER_ERROR and is
logged with its traceback.

Replies use ROUTER_MANDATORY and never block: a reply to a client that is gone (or whose queue
is full) is dropped, counted in `statistics().replies_dropped` and logged at DEBUG.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import itertools
import logging
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Sequence

import zmq
import zmq.asyncio
from google.protobuf.message import Message
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from riverbed.wire.apis import api_name
from riverbed.wire.dealer import DEFAULT_HWM, configure_dealer
from services.common.metrics_core import RequestMetrics
from riverbed.wire.framing import (
    CORRUPT_MESSAGE,
    INVALID_REQUEST,
    MESSAGE_TOO_LARGE,
    UNKNOWN_SERVER_ERROR,
    Request,
    Response,
    WireError,
    current_trace_context,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    error_response,
    frame_nbytes,
)

__all__ = [
    "Handler", "Reply", "RpcServer", "ServerStatistics", "AsyncChannel", "ChannelPool",
    "Publisher", "Subscriber", "Request", "Response", "remote_wait",
]

log = logging.getLogger(__name__)

_CORR_MASK = (1 << 64) - 1
# DEFAULT_HWM (riverbed.wire.dealer): messages libzmq queues per connection (not bytes), for the
# ROUTER and publisher here too. Callers bound their in-flight requests far below it.
DEFAULT_MAX_MESSAGE_BYTES = 100 * 1024 * 1024   # Kafka's socket.request.max.bytes default


@dataclass(slots=True)
class Reply:
    body: Message
    payloads: Sequence = ()


Handler = Callable[[Request], Awaitable[Reply | None]]   # None: send no response (acks=0)


@dataclass(frozen=True, slots=True)
class ServerStatistics:
    requests_received: int
    requests_in_flight: int
    replies_sent: int
    replies_dropped: int
    envelope_errors: int       # error replies: bad frames, unknown api/version, oversize, failures
    handler_failures: int      # handlers raising something other than errors.KafkaError


# Seconds a request's handler spent waiting on others (followers' fetches for acks=all, new data
# for a long-polled fetch): Kafka's "remote time". One cell per request task (see remote_wait).
_REMOTE: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "riverbed_rpc_remote", default=None)


@contextlib.contextmanager
def remote_wait():
    """Count the time inside as the current request's remote time (a no-op outside a request)."""
    cell = _REMOTE.get()
    if cell is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        cell[0] += time.perf_counter() - t0


def _span_parent(tc: header_pb2.TraceContext):
    if len(tc.trace_id) != 16 or len(tc.span_id) != 8:
        return None
    sc = SpanContext(trace_id=int.from_bytes(tc.trace_id, "big"),
                     span_id=int.from_bytes(tc.span_id, "big"), is_remote=True,
                     trace_flags=TraceFlags(tc.trace_flags & 0xFF))
    if not sc.is_valid:
        return None
    return trace.set_span_in_context(NonRecordingSpan(sc))


class RpcServer:
    """A ROUTER socket serving `handlers` (api key -> async handler).

    The socket is bound in the constructor so `bound_endpoint` is known at once (port 0 or
    "tcp://127.0.0.1:*" pick a free port); `serve()` reads requests until cancelled.

    I/O: a plain (not zmq.asyncio) socket whose ZMQ_FD is watched with loop.add_reader; the
    reader drains every waiting request (NOBLOCK) and starts one task per request, and replies
    are sent NOBLOCK at once — no future per message. ZMQ_FD is edge-triggered (it signals
    libzmq commands, not readable messages), so after any send the reader is run again once
    (call_soon) and after it stopped at queued_max_requests a finishing handler restarts it:
    no request is left unread without a new edge.
    """

    def __init__(self, endpoint: str, handlers: dict[int, Handler], *, name: str,
                 socket_request_max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 queued_max_requests: int = 500,
                 context: zmq.asyncio.Context | None = None,
                 tracer_provider: trace.TracerProvider | None = None,
                 metrics: RequestMetrics | None = None):
        if queued_max_requests < 1:
            raise ValueError("queued_max_requests must be >= 1")
        self.name = name
        self._handlers = dict(handlers)
        self._max_bytes = socket_request_max_bytes
        self._queued_max_requests = queued_max_requests
        ctx = context or zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.ROUTER, socket_class=zmq.Socket)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.MAXMSGSIZE, socket_request_max_bytes)
        sock.setsockopt(zmq.SNDHWM, DEFAULT_HWM)
        sock.setsockopt(zmq.RCVHWM, DEFAULT_HWM)
        try:
            sock.bind(endpoint)
        except Exception:
            sock.close(linger=0)
            raise
        self._sock = sock
        self._fd = sock.getsockopt(zmq.FD)
        self.bound_endpoint: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._tracer = trace.get_tracer("riverbed.rpc", tracer_provider=tracer_provider)
        self._tasks: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None   # set while serving
        self._stopped: asyncio.Future | None = None
        self._drain_scheduled = False
        self._closed = False
        self._received = 0
        self._sent = 0
        self._dropped = 0
        self._envelope_errors = 0
        self._handler_failures = 0
        # Per-API counts and time split (queue, local, remote, send); None: not measured.
        self.metrics = metrics

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(self._received, len(self._tasks), self._sent, self._dropped,
                                self._envelope_errors, self._handler_failures)

    async def serve(self) -> None:
        """Read and dispatch requests until cancelled, or until close() (then it returns).
        Each request is handled in its own task; at most queued_max_requests at once."""
        if self._closed:
            raise RuntimeError(f"{self.name}: server is closed")
        if self._loop is not None:
            raise RuntimeError(f"{self.name}: already serving")
        loop = asyncio.get_running_loop()
        self._stopped = stopped = loop.create_future()
        self._loop = loop
        log.info("[%s] serving on %s", self.name, self.bound_endpoint)
        loop.add_reader(self._fd, self._drain)
        self._drain_scheduled = False
        self._schedule_drain()      # requests may already wait without a new edge
        try:
            await stopped
        except (zmq.ZMQError, asyncio.CancelledError) as e:
            if not self._closed or (isinstance(e, asyncio.CancelledError)
                                    and asyncio.current_task().cancelling()):
                raise
            log.debug("[%s] socket closed: %r", self.name, e)
        finally:
            self._unwatch()
            for t in list(self._tasks):
                t.cancel()

    def _unwatch(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._fd)

    def _schedule_drain(self) -> None:
        if not self._drain_scheduled and self._loop is not None:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        """Read every waiting request (up to queued_max_requests in flight), one task each."""
        self._drain_scheduled = False
        loop = self._loop
        if loop is None or self._closed:
            return
        tasks = self._tasks
        limit = self._queued_max_requests
        recv = self._sock.recv_multipart
        handle = self._handle
        done = self._task_done
        try:
            while len(tasks) < limit:
                try:
                    frames = recv(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    return
                self._received += 1
                task = loop.create_task(handle(frames, time.perf_counter()))
                tasks.add(task)
                task.add_done_callback(done)
        except zmq.ZMQError as e:
            stopped = self._stopped
            if stopped is not None and not stopped.done():
                stopped.set_exception(e)
            self._unwatch()
        # at the limit: requests stay queued in libzmq (backpressure); _task_done reads on

    def _task_done(self, task: asyncio.Task) -> None:
        tasks = self._tasks
        tasks.discard(task)
        if len(tasks) == self._queued_max_requests - 1:
            self._schedule_drain()      # the reader may have stopped at the limit

    async def _handle(self, frames: list, received: float = 0.0) -> None:
        started = time.perf_counter()
        identity = frames[0]
        msg = frames[1:]
        total = 0
        for f in msg:
            total += frame_nbytes(f)
        if total > self._max_bytes:
            corr, api = _peek_header(msg)
            self._error(identity, corr, api, MESSAGE_TOO_LARGE,
                        f"request of {total} bytes exceeds socket.request.max.bytes={self._max_bytes}")
            return
        try:
            req = decode_request(msg)
        except WireError as e:
            log.debug("[%s] bad request: %s", self.name, e)
            self._error(identity, e.correlation_id or 0, e.api, e.code, e.message)
            return
        corr = req.header.correlation_id
        api = req.api
        handler = self._handlers.get(api)
        if handler is None:
            self._error(identity, corr, api, INVALID_REQUEST,
                        f"{api_name(api)} is not served by {self.name}")
            return
        metrics = self.metrics
        remote = [0.0]
        if metrics is not None:
            _REMOTE.set(remote)          # this task's own context: one cell per request
        try:
            if req.header.HasField("trace"):
                reply = await self._traced(handler, req)
            else:
                reply = await handler(req)
        except errors.KafkaError as e:
            self._error(identity, corr, api, e.code, e.message or e.name)
            if metrics is not None:
                metrics.error(api_name(api), e.name)
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._handler_failures += 1
            log.exception("[%s] handler for %s failed (corr=%d client=%s)", self.name,
                          api_name(api), corr, req.header.client_id)
            self._error(identity, corr, api, UNKNOWN_SERVER_ERROR,
                        f"{type(e).__name__} in {api_name(api)} handler")
            if metrics is not None:
                metrics.error(api_name(api), "UNKNOWN_SERVER_ERROR")
            return
        if reply is None:
            if metrics is not None:
                done = time.perf_counter()
                metrics.record(api_name(api), started - received,
                               done - started - remote[0], remote[0], 0.0, req.header.client_id)
            return
        if metrics is None:
            self._send(identity, encode_response(corr, api, reply.body, reply.payloads))
            return
        handled = time.perf_counter()
        self._send(identity, encode_response(corr, api, reply.body, reply.payloads))
        sent = time.perf_counter()
        metrics.record(api_name(api), started - received if received else 0.0,
                       handled - started - remote[0], remote[0], sent - handled,
                       req.header.client_id)

    async def _traced(self, handler: Handler, req: Request) -> Reply | None:
        parent = _span_parent(req.header.trace)
        if parent is None:
            return await handler(req)
        with self._tracer.start_as_current_span(
                f"{self.name} {api_name(req.api)}", context=parent, kind=SpanKind.SERVER,
                attributes={"rpc.system": "riverbed", "rpc.method": api_name(req.api),
                            "riverbed.correlation_id": req.header.correlation_id,
                            "riverbed.client_id": req.header.client_id}):
            return await handler(req)

    def _error(self, identity, corr: int, api: int, code: int, message: str) -> None:
        self._envelope_errors += 1
        self._send(identity, error_response(corr, api, code, message))

    def _send(self, identity, frames: list) -> None:
        if self._closed:
            return
        frames.insert(0, identity)
        # NOBLOCK: never waits on a slow or vanished client (ROUTER_MANDATORY: EHOSTUNREACH
        # for a client that is gone, EAGAIN for one whose queue is full). Frames under
        # zmq.COPY_THRESHOLD are copied by pyzmq, larger ones go zero-copy.
        try:
            self._sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
        except zmq.ZMQError as e:
            self._dropped += 1
            log.debug("[%s] reply dropped (%s): client gone or not reading", self.name, e)
        else:
            self._sent += 1
        # the send may have consumed the edge of a request that arrived meanwhile
        self._schedule_drain()

    async def close(self) -> None:
        """Cancel in-flight handlers and close the socket (unsent replies are discarded)."""
        if self._closed:
            return
        self._closed = True
        stopped = self._stopped
        if stopped is not None and not stopped.done():
            stopped.set_result(None)
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._unwatch()
        self._sock.close(linger=0)


def _peek_header(msg: list) -> tuple[int, int]:
    """Correlation id and api of a request we refuse without decoding its body (0, 0 if unreadable)."""
    if not msg:
        return 0, 0
    h = header_pb2.RequestHeader()
    try:
        h.ParseFromString(getattr(msg[0], "buffer", msg[0]))
    except Exception:
        return 0, 0
    return h.correlation_id, h.api


# ---------------------------------------------------------------------------------------------
# calling other services

class AsyncChannel:
    """A DEALER to one endpoint; many concurrent calls pipelined on one socket and matched by
    correlation id. Same socket choices as riverbed.wire.Channel (ZMQ_IMMEDIATE: nothing queues
    for a peer that is down; sends wait for a connection within the request's timeout).

    I/O: a plain socket watched with loop.add_reader (as RpcServer). Requests are sent NOBLOCK
    at once; one that cannot go yet (no connection, or the high-water mark) waits in a FIFO
    outbox flushed when ZMQ_EVENTS reports POLLOUT. The reader drains every waiting response
    and resolves its call's future; after any send the reader is run again once (call_soon)
    since a send can consume the FD's edge."""

    def __init__(self, endpoint: str, *, client_id: str = "",
                 context: zmq.asyncio.Context | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, linger_ms: int = 0,
                 reconnect_ivl_ms: int = 100, reconnect_ivl_max_ms: int = 2000):
        self.endpoint = endpoint
        self.client_id = client_id
        ctx = context or zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.DEALER, socket_class=zmq.Socket)
        configure_dealer(sock, max_message_bytes=max_message_bytes, linger_ms=linger_ms,
                         reconnect_ivl_ms=reconnect_ivl_ms,
                         reconnect_ivl_max_ms=reconnect_ivl_max_ms)
        sock.connect(endpoint)
        self._sock = sock
        self._fd = sock.getsockopt(zmq.FD)
        self._corr = itertools.count(random.getrandbits(32))
        self._pending: dict[int, asyncio.Future] = {}
        self._outbox: collections.deque[tuple[list, asyncio.Future | None]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None   # the loop watching the socket
        self._io_scheduled = False
        self._closed = False
        self.stale_responses_dropped = 0

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def closed(self) -> bool:
        return self._closed

    def _watch(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            old, self._loop = self._loop, loop
            if old is not None and not old.is_closed():
                try:
                    old.remove_reader(self._fd)
                except Exception:  # another thread's loop: it keeps a stale watch, harmless
                    pass
            loop.add_reader(self._fd, self._on_events)
            self._io_scheduled = False
            self._schedule_io()
        return loop

    def _schedule_io(self) -> None:
        if not self._io_scheduled and self._loop is not None:
            self._io_scheduled = True
            self._loop.call_soon(self._on_events)

    def _on_events(self) -> None:
        """Drain responses, flush the outbox; until ZMQ_EVENTS shows nothing more to do."""
        self._io_scheduled = False
        if self._closed:
            return
        sock = self._sock
        recv = sock.recv_multipart
        deliver = self._deliver
        outbox = self._outbox
        try:
            while True:
                while True:
                    try:
                        frames = recv(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    deliver(frames)
                if outbox:
                    self._flush()
                events = sock.getsockopt(zmq.EVENTS)
                if not (events & zmq.POLLIN or (outbox and events & zmq.POLLOUT)):
                    return
        except zmq.ZMQError as e:  # socket closed under us: fail the waiters loudly
            if not self._closed:
                log.exception("reader for %s failed", self.endpoint)
            self._fail_all(errors.NetworkError(f"channel to {self.endpoint}: {e}"))
            loop, self._loop = self._loop, None
            if loop is not None and not loop.is_closed():
                loop.remove_reader(self._fd)

    def _flush(self) -> None:
        outbox = self._outbox
        send = self._sock.send_multipart
        while outbox:
            frames, fut = outbox[0]
            if fut is not None and fut.done():     # timed out (or cancelled) while waiting
                outbox.popleft()
                continue
            try:
                send(frames, zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            outbox.popleft()
            if fut is not None:
                fut.set_result(None)

    def _deliver(self, frames: list) -> None:
        pending = self._pending
        try:
            resp = decode_response(frames)
        except WireError as e:
            fut = pending.pop(e.correlation_id, None) if e.correlation_id is not None else None
            if fut is not None and not fut.done():
                fut.set_exception(e.to_kafka_error())
            else:
                log.debug("dropping undecodable response from %s: %s", self.endpoint, e)
            return
        fut = pending.pop(resp.header.correlation_id, None)
        if fut is None or fut.done():
            self.stale_responses_dropped += 1
            log.debug("dropping stale response corr=%d from %s",
                      resp.header.correlation_id, self.endpoint)
            return
        fut.set_result(resp)

    def _fail_all(self, exc: Exception) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()
        for _, fut in self._outbox:
            if fut is not None and not fut.done():
                fut.set_exception(exc)
        self._outbox.clear()

    def _send_now(self, loop: asyncio.AbstractEventLoop, frames: list) -> asyncio.Future | None:
        """Send at once if possible (None); else queue and return a future resolved when sent."""
        if not self._outbox:
            try:
                self._sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
            except zmq.Again:
                pass
            else:
                self._schedule_io()     # the send may have consumed a response's edge
                return None
        fut = loop.create_future()
        self._outbox.append((frames, fut))
        self._schedule_io()
        return fut

    def _encode(self, api, body, payloads, timeout_ms, api_version) -> tuple[int, list]:
        corr = next(self._corr) & _CORR_MASK
        return corr, encode_request(api, body, correlation_id=corr, client_id=self.client_id,
                                    api_version=api_version, timeout_ms=timeout_ms,
                                    trace=current_trace_context(), payloads=payloads)

    async def call(self, api: int, body, *, payloads: Sequence = (), timeout_ms: int = 30000,
                   api_version: int = 0) -> Response:
        """Send a request and wait for its response. Raises errors.RequestTimedOutError after
        timeout_ms (including time spent waiting for a connection) and errors.for_code(...) when
        the envelope carries an error."""
        if self._closed:
            raise errors.ClientError(f"channel to {self.endpoint} is closed")
        loop = self._watch()
        corr, frames = self._encode(api, body, payloads, timeout_ms, api_version)
        fut = loop.create_future()
        pending = self._pending
        pending[corr] = fut
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                sending = self._send_now(loop, frames)
                if sending is not None:
                    try:
                        await sending
                    finally:
                        sending.cancel()   # a timed-out request is never sent later
                resp = await fut
        except TimeoutError:
            raise errors.RequestTimedOutError(
                f"no response to {api_name(api)} from {self.endpoint} in {timeout_ms} ms") from None
        finally:
            pending.pop(corr, None)
        resp.raise_for_error()
        return resp

    async def send_oneway(self, api: int, body, *, payloads: Sequence = (),
                          timeout_ms: int = 30000, api_version: int = 0) -> None:
        """Send a request whose response is not awaited (e.g. produce acks=0); any response that
        does come is dropped. Raises errors.RequestTimedOutError if no connection takes it in time."""
        if self._closed:
            raise errors.ClientError(f"channel to {self.endpoint} is closed")
        loop = self._watch()   # drains (and drops) any responses
        _, frames = self._encode(api, body, payloads, timeout_ms, api_version)
        sending = self._send_now(loop, frames)
        if sending is None:
            return
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                await sending
        except TimeoutError:
            raise errors.RequestTimedOutError(
                f"could not send {api_name(api)} to {self.endpoint} in {timeout_ms} ms") from None
        finally:
            sending.cancel()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            try:
                loop.remove_reader(self._fd)
            except Exception:  # another thread's loop
                pass
        self._fail_all(errors.NetworkError(f"channel to {self.endpoint} closed"))
        self._sock.close()


class ChannelPool:
    """One AsyncChannel per endpoint, created on first use."""

    def __init__(self, *, client_id: str = "", context: zmq.asyncio.Context | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        self._client_id = client_id
        self._context = context
        self._max_message_bytes = max_message_bytes
        self._channels: dict[str, AsyncChannel] = {}

    def get(self, endpoint: str) -> AsyncChannel:
        ch = self._channels.get(endpoint)
        if ch is None or ch.closed:
            ch = AsyncChannel(endpoint, client_id=self._client_id, context=self._context,
                              max_message_bytes=self._max_message_bytes)
            self._channels[endpoint] = ch
        return ch

    def __contains__(self, endpoint: str) -> bool:
        return endpoint in self._channels

    async def discard(self, endpoint: str) -> None:
        """Close and forget the channel to `endpoint` (a node left the cluster)."""
        ch = self._channels.pop(endpoint, None)
        if ch is not None:
            await ch.close()

    async def close_all(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            await ch.close()


# ---------------------------------------------------------------------------------------------
# metadata fan-out

class Publisher:
    """A PUB socket (bound). Messages are [topic, *frames]. PUB never blocks: a subscriber that
    falls behind its high-water mark loses messages, and a new subscriber misses what was sent
    before its subscription reached us, so publish full snapshots, not deltas."""

    def __init__(self, endpoint: str, *, context: zmq.asyncio.Context | None = None,
                 sndhwm: int = DEFAULT_HWM):
        ctx = context or zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.PUB, socket_class=zmq.Socket)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, sndhwm)
        try:
            sock.bind(endpoint)
        except Exception:
            sock.close(linger=0)
            raise
        self._sock = sock
        self.bound_endpoint: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)

    async def publish(self, topic: bytes, frames: Iterable) -> None:
        try:   # a PUB socket drops rather than blocks; NOBLOCK is only a guarantee
            self._sock.send_multipart([topic, *frames], zmq.NOBLOCK, copy=False)
        except zmq.Again:
            pass

    async def close(self) -> None:
        self._sock.close(linger=0)


class Subscriber:
    """A SUB socket connected to one or more publishers, subscribed to topic prefixes."""

    def __init__(self, endpoints: str | Iterable[str] = (), topics: Iterable[bytes] = (b"",), *,
                 context: zmq.asyncio.Context | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        ctx = context or zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.SUB, socket_class=zmq.Socket)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
        for t in topics:
            sock.setsockopt(zmq.SUBSCRIBE, t)
        self._sock = sock
        self._fd = sock.getsockopt(zmq.FD)
        self._waiters: set[asyncio.Future] = set()
        self._endpoints: set[str] = set()
        for ep in ([endpoints] if isinstance(endpoints, str) else endpoints):
            self.connect(ep)

    @property
    def endpoints(self) -> frozenset[str]:
        return frozenset(self._endpoints)

    def connect(self, endpoint: str) -> None:
        if endpoint not in self._endpoints:
            self._sock.connect(endpoint)
            self._endpoints.add(endpoint)

    def disconnect(self, endpoint: str) -> None:
        if endpoint in self._endpoints:
            self._endpoints.discard(endpoint)
            try:
                self._sock.disconnect(endpoint)
            except zmq.ZMQError:  # already gone
                pass

    def subscribe(self, topic: bytes) -> None:
        self._sock.setsockopt(zmq.SUBSCRIBE, topic)

    async def recv(self) -> tuple[bytes, list[bytes]]:
        """The next message: (topic, frames)."""
        sock = self._sock
        while True:
            try:
                msg = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                pass
            else:
                return msg[0], msg[1:]
            # nothing waiting (and the Again above processed libzmq's commands): the FD
            # signals the next change
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            waiters = self._waiters
            if not waiters:
                loop.add_reader(self._fd, self._wake)
            waiters.add(fut)
            try:
                await fut
            finally:
                waiters.discard(fut)
                if not waiters and not sock.closed:
                    loop.remove_reader(self._fd)

    def _wake(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)

    async def close(self) -> None:
        if self._waiters:
            try:
                asyncio.get_running_loop().remove_reader(self._fd)
            except Exception:
                pass
            for fut in self._waiters:
                if not fut.done():
                    fut.cancel()
        self._sock.close(linger=0)
