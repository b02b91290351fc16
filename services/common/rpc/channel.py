"""Calling other services: AsyncChannel (one DEALER, pipelined calls matched by correlation id)
and ChannelPool (one channel per endpoint). With CURVE (services.common.rpc.security) every
channel authenticates with the process's own key and checks the server's key, found by endpoint
in the trusted keys directory.

A connection that breaks (the peer process stopped or restarted, its host went away, the
network was cut) takes with it every request sent on it and not answered yet: a DEALER with
ZMQ_IMMEDIATE drops a broken connection's queue, and an answer the old process owed never comes
from the new one. ZeroMQ reconnects by itself, so nothing else would tell the caller, who would
wait out the request's timeout (30 s by default; issue 24: a controller's LEADER_AND_ISR to a
node that restarted held everything for that node behind it that long). So each channel watches
its connection (ZeroMQ's socket monitor, riverbed.wire.liveness) and, when a connection that had
completed its handshake is lost (`after_connection_lost`):
- a request whose API is safe to repeat (riverbed.wire.apis: reads, LEADER_AND_ISR, FETCH,
  ALTER_PARTITION...) is sent again, first in line, on the next connection, within its own
  timeout (at most MAX_RESENDS times);
- any other (PRODUCE, CREATE_TOPICS, OFFSET_COMMIT...) fails at once with NETWORK_EXCEPTION
  (retriable): it may or may not have been carried out, and its caller knows whether and how to
  retry (the producer's idempotence, the gateway's client).
Requests sent while there is no connection wait for the next one, within their timeout, as
before. A host or network that goes silent is noticed by TCP (keepalive and TCP_USER_TIMEOUT:
riverbed.wire.dealer.configure_tcp_liveness) and ends the same way."""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import random
from typing import Awaitable, Sequence

import zmq
import zmq.asyncio

from riverbed import errors
from riverbed.wire.apis import APIS, api_name
from riverbed.wire.dealer import configure_dealer, configure_tcp_liveness
from riverbed.wire.liveness import ConnectionWatch
from riverbed.wire.framing import (
    Response,
    WireError,
    current_trace_context,
    decode_response,
    encode_request,
)
from riverbed.wire.security import ClientSecurity
from services.common.rpc.affinity import CLIENT, apply_affinity
from services.common.rpc.security import process_security
from services.common.rpc.server import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["AsyncChannel", "ChannelPool", "after_connection_lost", "safe_to_repeat"]

log = logging.getLogger(__name__)

_CORR_MASK = (1 << 64) - 1


def safe_to_repeat(api: int) -> bool:
    """Whether a request of `api` may be sent again after its connection broke (ApiSpec)."""
    spec = APIS.get(api)
    return spec is not None and spec.safe_to_repeat


# A request lost with this many connections in a row fails instead (NETWORK_EXCEPTION): a peer
# that drops the connection on it (a frame over its socket.request.max.bytes, a crash on it)
# would otherwise get it again until its timeout.
MAX_RESENDS = 3


def after_connection_lost(calls) -> tuple[list[int], list[int]]:
    """The connection carrying `calls` broke. `calls` is (correlation id, api, on the wire,
    times already resent) in the order they were sent, "on the wire" meaning handed to the
    connection that broke (not waiting for one). Returns (resend, fail): the lost requests safe
    to repeat and resent fewer than MAX_RESENDS times, in their order, to go first on the next
    connection, and the others, to fail now. Requests still waiting for a connection are in
    neither list: they go on the next connection as they are."""
    resend: list[int] = []
    fail: list[int] = []
    for corr, api, on_wire, resends in calls:
        if on_wire:
            (resend if safe_to_repeat(api) and resends < MAX_RESENDS else fail).append(corr)
    return resend, fail


class _Call:
    """A request awaiting its answer: its future, its api, its frames when it may be sent again
    (safe to repeat; None otherwise) and whether it is on the current connection."""

    __slots__ = ("fut", "api", "frames", "on_wire", "resends")

    def __init__(self, fut: asyncio.Future, api: int, frames: list | None):
        self.fut = fut
        self.api = api
        self.frames = frames
        self.on_wire = False
        self.resends = 0


class AsyncChannel:
    """A DEALER to one endpoint; many concurrent calls pipelined on one socket and matched by
    correlation id. Same socket choices as riverbed.wire.Channel (ZMQ_IMMEDIATE: nothing queues
    for a peer that is down; sends wait for a connection within the request's timeout).

    I/O: a plain socket watched with loop.add_reader (as RpcServer). Requests are sent NOBLOCK
    at once; one that cannot go yet (no connection, or the high-water mark) waits in a FIFO
    outbox flushed when ZMQ_EVENTS reports POLLOUT. The reader drains every waiting response
    and resolves its call's future; after any send the reader is run again once (call_soon)
    since a send can consume the FD's edge.

    Connection loss (the module's doc): the socket monitor is read by its own loop reader and
    before every send, so a request is counted on the connection it really went out on (up to
    libzmq's own delay in reporting the loss)."""

    def __init__(self, endpoint: str, *, client_id: str = "",
                 context: zmq.asyncio.Context | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, linger_ms: int = 0,
                 reconnect_ivl_ms: int = 100, reconnect_ivl_max_ms: int = 2000,
                 security: ClientSecurity | None = None):
        self.endpoint = endpoint
        self.client_id = client_id
        ctx = context or zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.DEALER, socket_class=zmq.Socket)
        configure_dealer(sock, max_message_bytes=max_message_bytes, linger_ms=linger_ms,
                         reconnect_ivl_ms=reconnect_ivl_ms,
                         reconnect_ivl_max_ms=reconnect_ivl_max_ms)
        apply_affinity(sock, ctx, CLIENT)     # connections it makes: the other I/O threads
        configure_tcp_liveness(sock)
        watch: ConnectionWatch | None = None
        try:
            (security or process_security().client).apply(sock, endpoint)
            watch = ConnectionWatch(sock, endpoint, heartbeats=False)
            sock.connect(endpoint)
        except Exception:
            if watch is not None:
                watch.close()
            sock.close(linger=0)
            raise
        self._sock = sock
        self._fd = sock.getsockopt(zmq.FD)
        self._conn = watch
        self._mon_fd = watch.socket.getsockopt(zmq.FD)
        self._losses_seen = 0
        self._corr = itertools.count(random.getrandbits(32))
        self._pending: dict[int, _Call] = {}
        # (frames, the future resolved once sent (None: nobody waits for that), the call it
        # carries (None: one-way)): requests libzmq could not take yet, and lost ones to resend
        self._outbox: collections.deque[tuple[list, asyncio.Future | None, _Call | None]] = \
            collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None   # the loop watching the socket
        self._io_scheduled = False
        self._closed = False
        self.stale_responses_dropped = 0
        self.connections_lost = 0          # lost after their handshake, with requests or not
        self.requests_resent = 0           # lost with a connection, sent again (safe to repeat)
        self.requests_failed_on_loss = 0   # lost with a connection, failed (not safe to repeat)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connected(self) -> bool:
        """Whether a connection to the peer is up (its handshake succeeded)."""
        self._check_connection()
        return self._conn.up

    def _watch(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            old, self._loop = self._loop, loop
            if old is not None and not old.is_closed():
                try:
                    old.remove_reader(self._fd)
                    old.remove_reader(self._mon_fd)
                except Exception:  # another thread's loop: it keeps a stale watch, harmless
                    pass
            loop.add_reader(self._fd, self._on_events)
            loop.add_reader(self._mon_fd, self._on_monitor)
            self._io_scheduled = False
            self._schedule_io()
        return loop

    def _on_monitor(self) -> None:
        if self._closed:
            return
        try:
            self._check_connection()
        except zmq.ZMQError:  # closed under us: the socket's reader reports it
            return
        self._schedule_io()

    def _check_connection(self) -> None:
        """Read the monitor's events; if a connection broke since the last look, answers that
        arrived before it are delivered first, then the requests it carried are resent or
        failed (after_connection_lost)."""
        conn = self._conn
        if not conn.socket.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            return                    # no event waiting (the common case, before every send)
        conn.process()
        if conn.connections_lost == self._losses_seen:
            return
        self._losses_seen = conn.connections_lost
        self.connections_lost += 1
        self._drain()
        calls = self._pending
        resend, fail = after_connection_lost(
            (corr, c.api, c.on_wire, c.resends) for corr, c in calls.items())
        if resend:
            again = []
            for corr in resend:
                c = calls[corr]
                c.on_wire = False
                c.resends += 1
                again.append((c.frames, None, c))
            self._outbox.extendleft(reversed(again))    # first in line, in their order
            self.requests_resent += len(resend)
        for corr in fail:
            c = calls.pop(corr)
            if not c.fut.done():
                c.fut.set_exception(errors.NetworkError(
                    f"{api_name(c.api)} to {self.endpoint}: the connection was lost before "
                    "the answer came (not resent: the request may have been carried out)"))
        self.requests_failed_on_loss += len(fail)
        if resend or fail:
            log.info("connection to %s lost: %d request(s) sent again on the next connection, "
                     "%d failed", self.endpoint, len(resend), len(fail))
        else:
            log.debug("connection to %s lost (nothing awaited on it)", self.endpoint)

    def _drain(self) -> None:
        """Deliver every answer waiting in the socket."""
        recv = self._sock.recv_multipart
        while True:
            try:
                frames = recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self._deliver(frames)

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
                loop.remove_reader(self._mon_fd)

    def _flush(self) -> None:
        self._check_connection()
        outbox = self._outbox
        send = self._sock.send_multipart
        while outbox:
            frames, fut, call = outbox[0]
            # timed out (or cancelled) while waiting
            if (fut is not None and fut.done()) or (call is not None and call.fut.done()):
                outbox.popleft()
                continue
            try:
                send(frames, zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            outbox.popleft()
            if call is not None:
                call.on_wire = True
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
        call = pending.pop(resp.header.correlation_id, None)
        if call is None or call.fut.done():
            self.stale_responses_dropped += 1
            log.debug("dropping stale response corr=%d from %s",
                      resp.header.correlation_id, self.endpoint)
            return
        call.fut.set_result(resp)

    def _fail_all(self, exc: Exception) -> None:
        for call in self._pending.values():
            if not call.fut.done():
                call.fut.set_exception(exc)
        self._pending.clear()
        for _, fut, _ in self._outbox:
            if fut is not None and not fut.done():
                fut.set_exception(exc)
        self._outbox.clear()

    def _send_now(self, loop: asyncio.AbstractEventLoop, frames: list,
                  call: _Call | None = None) -> asyncio.Future | None:
        """Send at once if possible (None); else queue and return a future resolved when sent."""
        self._check_connection()      # a loss not read yet concerns what went out before this
        if not self._outbox:
            try:
                self._sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
            except zmq.Again:
                pass
            else:
                if call is not None:
                    call.on_wire = True
                self._schedule_io()     # the send may have consumed a response's edge
                return None
        fut = loop.create_future()
        self._outbox.append((frames, fut, call))
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
        return await self.start_call(api, body, payloads=payloads, timeout_ms=timeout_ms,
                                     api_version=api_version)

    def start_call(self, api: int, body, *, payloads: Sequence = (), timeout_ms: int = 30000,
                   api_version: int = 0) -> Awaitable[Response]:
        """call() in two steps: the request is sent (or queued behind this channel's earlier
        ones) before this returns, and the awaitable returned waits for its response. Requests
        started one after the other leave in that order, whoever awaits them first; await the
        result (an unawaited one keeps its slot until an answer or close())."""
        if self._closed:
            raise errors.ClientError(f"channel to {self.endpoint} is closed")
        loop = self._watch()
        corr, frames = self._encode(api, body, payloads, timeout_ms, api_version)
        fut = loop.create_future()
        call = _Call(fut, api, frames if safe_to_repeat(api) else None)
        pending = self._pending
        pending[corr] = call
        try:
            sending = self._send_now(loop, frames, call)
        except BaseException:
            pending.pop(corr, None)
            raise
        return self._answer(api, corr, fut, sending, timeout_ms)

    async def _answer(self, api: int, corr: int, fut: asyncio.Future,
                      sending: asyncio.Future | None, timeout_ms: int) -> Response:
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
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
            self._pending.pop(corr, None)
        resp.raise_for_error()
        return resp

    async def send_oneway(self, api: int, body, *, payloads: Sequence = (),
                          timeout_ms: int = 30000, api_version: int = 0) -> None:
        """Send a request whose response is not awaited (e.g. produce acks=0); any response that
        does come is dropped. Raises errors.RequestTimedOutError if no connection takes it in time."""
        await self.start_oneway(api, body, payloads=payloads, timeout_ms=timeout_ms,
                                api_version=api_version)

    def start_oneway(self, api: int, body, *, payloads: Sequence = (), timeout_ms: int = 30000,
                     api_version: int = 0) -> Awaitable[None]:
        """send_oneway() in two steps, as start_call(): sent (or queued in order) before this
        returns; the awaitable returned waits until a connection took it."""
        if self._closed:
            raise errors.ClientError(f"channel to {self.endpoint} is closed")
        loop = self._watch()   # drains (and drops) any responses
        _, frames = self._encode(api, body, payloads, timeout_ms, api_version)
        return self._taken(api, self._send_now(loop, frames), timeout_ms)

    async def _taken(self, api: int, sending: asyncio.Future | None, timeout_ms: int) -> None:
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
                loop.remove_reader(self._mon_fd)
            except Exception:  # another thread's loop
                pass
        self._fail_all(errors.NetworkError(f"channel to {self.endpoint} closed"))
        self._conn.close()        # the monitor stops before the socket closes (liveness.py)
        self._sock.close()


class ChannelPool:
    """One AsyncChannel per endpoint, created on first use."""

    def __init__(self, *, client_id: str = "", context: zmq.asyncio.Context | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 security: ClientSecurity | None = None):
        self._client_id = client_id
        self._security = security
        self._context = context
        self._max_message_bytes = max_message_bytes
        self._channels: dict[str, AsyncChannel] = {}

    def get(self, endpoint: str) -> AsyncChannel:
        ch = self._channels.get(endpoint)
        if ch is None or ch.closed:
            ch = AsyncChannel(endpoint, client_id=self._client_id, context=self._context,
                              max_message_bytes=self._max_message_bytes,
                              security=self._security)
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
