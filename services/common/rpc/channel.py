"""Calling other services: AsyncChannel (one DEALER, pipelined calls matched by correlation id)
and ChannelPool (one channel per endpoint). With CURVE (services.common.rpc.security) every
channel authenticates with the process's own key and checks the server's key, found by endpoint
in the trusted keys directory."""
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
from riverbed.wire.apis import api_name
from riverbed.wire.dealer import configure_dealer
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

__all__ = ["AsyncChannel", "ChannelPool"]

log = logging.getLogger(__name__)

_CORR_MASK = (1 << 64) - 1


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
        try:
            (security or process_security().client).apply(sock, endpoint)
            sock.connect(endpoint)
        except Exception:
            sock.close(linger=0)
            raise
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
        pending = self._pending
        pending[corr] = fut
        try:
            sending = self._send_now(loop, frames)
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
            except Exception:  # another thread's loop
                pass
        self._fail_all(errors.NetworkError(f"channel to {self.endpoint} closed"))
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
