"""The ROUTER request loop every service runs (see services.common.rpc for limits and errors).

Security (services.common.rpc.security): with CURVE the socket is a CURVE server; each request's
`principal` comes from the connection's ZAP `User-Id` and `host` from its `Peer-Address`, never
from the body; a request needing ClusterAction (services.common.cluster_action) from a principal
that does not hold it is answered CLUSTER_AUTHORIZATION_FAILED before any handler runs.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence

import zmq
import zmq.asyncio
from google.protobuf.message import Message
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from riverbed.wire.apis import api_name
from riverbed.wire.dealer import DEFAULT_HWM
from riverbed.wire.security import ANONYMOUS
from services.common.cluster_action import requires_cluster_action
from services.common.metrics_core import RequestMetrics
from services.common.rpc.affinity import SERVER, apply_affinity
from services.common.rpc.security import ServerSecurity, process_security
from riverbed.wire.framing import (
    CORRUPT_MESSAGE,
    INVALID_REQUEST,
    MESSAGE_TOO_LARGE,
    UNKNOWN_SERVER_ERROR,
    Request,
    Response,
    WireError,
    decode_request,
    encode_response,
    error_response,
    frame_nbytes,
)

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "Handler", "Reply", "RpcServer", "ServerStatistics",
           "Request", "Response", "remote_wait"]

CLUSTER_AUTHORIZATION_FAILED = errors.ErrorCode.Value("CLUSTER_AUTHORIZATION_FAILED")

log = logging.getLogger(__name__)

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
    cluster_authorization_failures: int = 0   # ClusterAction asked by a principal without it


# Seconds a request's handler spent waiting on others (followers' fetches for acks=all, new data
# for a long-polled fetch): Kafka's "remote time". One cell per request task (see remote_wait).
_REMOTE: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "riverbed_rpc_remote", default=None)


def remote_seconds() -> float:
    """The current request's time waiting on other services so far (0.0 when not counted)."""
    cell = _REMOTE.get()
    return cell[0] if cell else 0.0


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
                 metrics: RequestMetrics | None = None,
                 security: ServerSecurity | None = None,
                 cluster_action_apis: frozenset[int] = frozenset()):
        """`cluster_action_apis`: APIs that need ClusterAction on this server only, beyond
        those every server guards (services.common.cluster_action) — e.g. a storage node's
        log-dir APIs, which clients reach through a gateway."""
        if queued_max_requests < 1:
            raise ValueError("queued_max_requests must be >= 1")
        self.name = name
        self._handlers = dict(handlers)
        self._cluster_action_apis = frozenset(cluster_action_apis)
        self._max_bytes = socket_request_max_bytes
        self._queued_max_requests = queued_max_requests
        self.security = security = security or process_security()
        ctx = context or zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.ROUTER, socket_class=zmq.Socket)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.MAXMSGSIZE, socket_request_max_bytes)
        sock.setsockopt(zmq.SNDHWM, DEFAULT_HWM)
        sock.setsockopt(zmq.RCVHWM, DEFAULT_HWM)
        apply_affinity(sock, ctx, SERVER)     # accepted connections: the first I/O threads
        try:
            security.apply_server(sock, ctx)
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
        self._unauthorized = 0
        # Per-API counts and time split (queue, local, remote, send); None: not measured.
        self.metrics = metrics

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(self._received, len(self._tasks), self._sent, self._dropped,
                                self._envelope_errors, self._handler_failures, self._unauthorized)

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
        # who is asking: from the connection (ZAP User-Id, Peer-Address), never from the body
        req.principal, req.host = _peer(msg[0], self.security.curve)
        if (api in self._cluster_action_apis or requires_cluster_action(api, req.body)) and \
                not self.security.holds_cluster_action(req.principal):
            self._unauthorized += 1
            log.warning("[%s] %s from %s (%s) refused: ClusterAction not held", self.name,
                        api_name(api), req.principal, req.host)
            self._error(identity, corr, api, CLUSTER_AUTHORIZATION_FAILED,
                        f"{req.principal} is not authorized for ClusterAction ({api_name(api)})")
            return
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


def _peer(frame, curve: bool) -> tuple[str, str]:
    """(principal, peer IP) of the connection a frame came on; ("User:ANONYMOUS", "") when
    the frame carries no properties (bytes, or an inproc peer)."""
    get = getattr(frame, "get", None)
    if get is None:
        return ANONYMOUS, ""
    principal = ANONYMOUS
    if curve:
        try:
            principal = get("User-Id") or ANONYMOUS
        except zmq.ZMQError:
            pass
    try:
        host = get("Peer-Address")
    except zmq.ZMQError:
        host = ""
    return principal, host


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
