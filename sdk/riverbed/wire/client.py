"""The SDK's synchronous RPC channel: one DEALER socket to one endpoint, pipelined requests
matched by correlation id.

Not thread-safe: one thread owns a Channel (the SDK's sender/fetcher thread).

Socket choices
- DEALER with ZMQ_IMMEDIATE=1: messages are queued only to a completed connection. While the
  server is down (or before the first connect completes) nothing piles up inside libzmq, and
  when a connection breaks its queued messages are discarded instead of being delivered late
  after the reconnect. A request that libzmq cannot take yet waits in the channel's own small
  outbox (bounded by `max_pending`), is flushed by `recv`/`call`/`flush`, and expires with its
  deadline like any other request.
- ZMQ_SNDHWM bounds what libzmq queues on a live connection (messages, not bytes);
  ZMQ_MAXMSGSIZE bounds a received frame: a larger one makes libzmq drop the connection (the
  pending requests then time out and the DEALER reconnects by itself).
- Reconnects are automatic (ZMQ_RECONNECT_IVL, with a cap). A response whose correlation id is
  no longer awaited (timed out, or a one-way request) is dropped.
- Fail fast (riverbed.wire.liveness, with fail_fast=True, as the SDK's clients open their
  gateway channels; off by default for other callers, whose requests wait out their own
  timeouts as before): a socket monitor and ZMTP
  heartbeats tell the channel when a connection attempt fails or the connection breaks
  (refused, lost, silent peer). Every request awaiting an answer then ends at once with a
  synthetic REQUEST_TIMED_OUT naming the reason, so callers move to another gateway within
  about a second instead of waiting out their request timeouts. A request sent while the peer
  is away waits for libzmq's next attempt (at most reconnect_ivl_max_ms): sent if it connects,
  failed if it does not.
"""
from __future__ import annotations

import collections
import functools
import heapq
import logging
import random
import time
from typing import Any, Sequence

import zmq

from riverbed import errors
from riverbed.wire.apis import api_name
from riverbed.wire.dealer import DEFAULT_HWM, configure_dealer
from riverbed.wire.liveness import ConnectionWatch
from riverbed.wire.framing import (
    REQUEST_TIMED_OUT,
    Response,
    WireError,
    current_trace_context,
    decode_response,
    encode_request,
    synthetic_response,
)

__all__ = ["Channel", "Response", "secure_channel_factory"]

log = logging.getLogger(__name__)

_CORR_MASK = (1 << 64) - 1
# libzmq's per-connection queue bound (riverbed.wire.dealer.DEFAULT_HWM, far above the SDK's own
# in-flight limits).
DEFAULT_SNDHWM = DEFAULT_HWM


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Channel:
    """A synchronous, pipelining request channel to one endpoint (one DEALER socket)."""

    # Zero-copy sends (pyzmq hands large frames to libzmq and frees them from its garbage
    # thread). riverbed.aio's channel copies instead: there, one thread runs everything, and a
    # zero-copy send waits for that garbage thread to hand back the GIL (about 4 ms a send).
    _send_copy = False

    def __init__(self, endpoint: str, *, client_id: str = "", context: zmq.Context | None = None,
                 max_message_bytes: int = 100 * 1024 * 1024, linger_ms: int = 0,
                 max_pending: int = 10_000, reconnect_ivl_ms: int = 100,
                 reconnect_ivl_max_ms: int = 2000, security=None,
                 fail_fast: bool = False):
        """`security`: a riverbed.wire.security.ClientSecurity; None reads the RIVERBED_*
        environment variables (riverbed.wire.security.client_security)."""
        self.endpoint = endpoint
        self.client_id = client_id
        self._ctx = context or zmq.Context.instance()
        sock = self._ctx.socket(zmq.DEALER)
        configure_dealer(sock, max_message_bytes=max_message_bytes, linger_ms=linger_ms,
                         reconnect_ivl_ms=reconnect_ivl_ms,
                         reconnect_ivl_max_ms=reconnect_ivl_max_ms)
        try:
            from riverbed.wire import security as _security
            if security is None:
                security = _security.client_security()
            try:
                security.apply(sock, endpoint)
            except _security.SecurityConfigError as e:
                if "no CURVE public key known" not in str(e):
                    raise
                # a server whose key we do not know cannot be reached securely: to this
                # client it is unreachable (retriable; the SDK fails over to another gateway)
                raise errors.NetworkError(str(e)) from None
            self._watch = ConnectionWatch(sock, endpoint) if fail_fast else None
            sock.connect(endpoint)
        except Exception:
            sock.close(linger=0)
            raise
        self._sock = sock
        self._poller = zmq.Poller()
        self._poller.register(sock, zmq.POLLIN)
        if self._watch is not None:
            self._poller.register(self._watch.socket, zmq.POLLIN)
        self._polling_out = False
        self._max_pending = max_pending
        self._next_corr = random.getrandbits(32)
        # corr id -> (api, deadline_ms); only requests that expect a response
        self._pending: dict[int, tuple[int, float]] = {}
        self._deadlines: list[tuple[float, int]] = []     # heap, lazily cleaned
        # (corr id, frames, expects_response): requests libzmq could not take yet
        self._outbox: collections.deque[tuple[int, list, bool]] = collections.deque()
        self._ready: collections.deque[Response] = collections.deque()  # buffered by call()
        self._closed = False
        self.stale_responses_dropped = 0

    # -- properties -----------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Requests sent (or waiting in the outbox) whose response has not been returned yet."""
        return len(self._pending)

    @property
    def socket(self) -> zmq.Socket:
        """The DEALER socket, for zmq.Poller.register(channel.socket, zmq.POLLIN)."""
        return self._sock

    def fileno(self) -> int:
        """ZMQ_FD (edge-triggered; after it fires call recv(0) until it returns None)."""
        return self._sock.getsockopt(zmq.FD)

    @property
    def monitor_socket(self) -> zmq.Socket | None:
        """The connection monitor's socket (None without fail_fast): a caller polling this
        channel's socket itself should poll this one too and then call recv(0)."""
        return None if self._watch is None else self._watch.socket

    @property
    def connected(self) -> bool | None:
        """True once the ZMTP handshake with the peer succeeded (and until the connection
        breaks); None without fail_fast (nothing watches the connection)."""
        return None if self._watch is None else self._watch.up

    @property
    def connection_state(self) -> str | None:
        """Where the connection stands ("connected", "not connected yet", "TCP connected, but
        the ZMTP/CURVE handshake has not completed", "reconnecting"); None without fail_fast."""
        return None if self._watch is None else self._watch.state()

    @property
    def down_reason(self) -> str | None:
        """Why the connection is known to be down ("connection refused", "connection lost"),
        or None while it is up or still being attempted."""
        return None if self._watch is None else self._watch.down_reason

    @property
    def wants_write(self) -> bool:
        """True while requests wait in the outbox for the connection: a caller polling many
        channels itself should then also poll this socket for POLLOUT and call flush()."""
        return bool(self._outbox)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- sending --------------------------------------------------------------------------
    def send(self, api: int, body, *, payloads: Sequence = (), timeout_ms: int = 30000,
             api_version: int = 0, expect_response: bool = True) -> int:
        """Send a request without waiting; returns its correlation id. With expect_response,
        its answer (or a synthetic REQUEST_TIMED_OUT Response after timeout_ms) comes from recv()."""
        if self._closed:
            raise errors.ClientError("channel is closed")
        if len(self._outbox) >= self._max_pending:
            raise errors.KafkaTimeoutError(
                f"{len(self._outbox)} requests waiting for a connection to {self.endpoint}")
        corr = self._next_corr
        self._next_corr = (corr + 1) & _CORR_MASK
        frames = encode_request(api, body, correlation_id=corr, client_id=self.client_id,
                                api_version=api_version, timeout_ms=timeout_ms,
                                trace=current_trace_context(), payloads=payloads)
        watch = self._watch
        if watch is not None and not watch.up and watch.process() is not None:
            self._fail_pending()          # attempts that failed before this request: not its own
        if expect_response:
            deadline = _now_ms() + timeout_ms
            self._pending[corr] = (api, deadline)
            dl = self._deadlines
            if len(dl) > 2 * len(self._pending) + 64:   # drop entries of answered requests
                dl[:] = [(d, c) for c, (_, d) in self._pending.items()]
                heapq.heapify(dl)
            else:
                heapq.heappush(dl, (deadline, corr))
        if self._outbox or not self._try_send(frames):
            self._outbox.append((corr, frames, expect_response))
            self._want_out(True)
        return corr

    def _try_send(self, frames: list) -> bool:
        try:
            self._sock.send_multipart(frames, zmq.NOBLOCK, copy=self._send_copy)
            return True
        except zmq.Again:
            return False

    def _want_out(self, on: bool) -> None:
        if on != self._polling_out:
            self._poller.modify(self._sock, zmq.POLLIN | zmq.POLLOUT if on else zmq.POLLIN)
            self._polling_out = on

    def flush(self) -> int:
        """Hand queued requests to libzmq as far as the connection allows; returns how many wait."""
        ob = self._outbox
        while ob:
            corr, frames, expects_response = ob[0]
            # A request that timed out before it could be sent is not sent late.
            if (not expects_response or corr in self._pending) and not self._try_send(frames):
                break
            ob.popleft()
        if not ob:
            self._want_out(False)
        return len(ob)

    # -- receiving ------------------------------------------------------------------------
    def recv(self, timeout_ms: int) -> Response | None:
        """The next response to arrive (any correlation id), a synthetic REQUEST_TIMED_OUT
        Response for an expired request, or None if nothing happened within timeout_ms."""
        if self._ready:
            return self._ready.popleft()
        end = _now_ms() + max(timeout_ms, 0)
        while True:
            expired = self._pop_expired(_now_ms())
            if expired is not None:
                return expired
            resp = self._poll_once(end)
            if resp is not None:
                return resp
            if _now_ms() >= end:
                return None

    def _poll_once(self, end_ms: float) -> Response | None:
        """Poll until end_ms or the next deadline; flush the outbox; return a matched response."""
        now = _now_ms()
        wait = end_ms - now
        if self._deadlines:
            wait = min(wait, self._deadlines[0][0] - now)
        ev = self._wait(max(0, int(wait + 0.999)))
        if ev & zmq.POLLOUT:
            self.flush()
        if ev & zmq.POLLIN:
            while True:
                try:
                    frames = self._sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    return None
                resp = self._match(frames)
                if resp is not None:
                    return resp
        return None

    def _wait(self, timeout_ms: int) -> int:
        """Block until the socket is readable (or writable while the outbox waits) or
        timeout_ms passed; the events. riverbed.aio's channel awaits here instead."""
        events = dict(self._poller.poll(timeout_ms))
        if self._watch is not None and events.get(self._watch.socket):
            reason = self._watch.process()      # refused, lost or silent: fail what waits
            if reason is not None:
                self._fail_pending()
        return events.get(self._sock, 0)

    def _match(self, frames: list) -> Response | None:
        try:
            resp = decode_response(frames)
        except WireError as e:
            corr = e.correlation_id
            if corr is None or corr not in self._pending:
                log.debug("dropping undecodable response from %s: %s", self.endpoint, e)
                return None
            api, _ = self._pending.pop(corr)
            return synthetic_response(corr, api, e.code, e.message)
        if self._pending.pop(resp.header.correlation_id, None) is None:
            self.stale_responses_dropped += 1
            log.debug("dropping stale response corr=%d from %s", resp.header.correlation_id,
                      self.endpoint)
            return None
        return resp

    def _fail_pending(self) -> None:
        """The connection is down: what libzmq had taken is lost with it, what waits in the
        outbox would go nowhere; every awaited request expires now (see _pop_expired)."""
        now = _now_ms()
        for corr, (api, _) in self._pending.items():
            self._pending[corr] = (api, now)
            heapq.heappush(self._deadlines, (now, corr))
        self._outbox.clear()
        self._want_out(False)

    def _expiry_message(self, api: int) -> str:
        reason = self.down_reason
        if reason is not None:
            return f"{api_name(api)} to {self.endpoint} failed: {reason}"
        return f"no response to {api_name(api)} from {self.endpoint} in time"

    def _pop_expired(self, now: float) -> Response | None:
        dl = self._deadlines
        while dl and dl[0][0] <= now:
            deadline, corr = heapq.heappop(dl)
            entry = self._pending.get(corr)
            if entry is None or entry[1] != deadline:
                continue  # already answered
            del self._pending[corr]
            api = entry[0]
            return synthetic_response(corr, api, REQUEST_TIMED_OUT, self._expiry_message(api))
        return None

    # -- request/response -----------------------------------------------------------------
    def call(self, api: int, body, *, payloads: Sequence = (), timeout_ms: int = 30000,
             api_version: int = 0) -> Response:
        """Send and wait for this request's response. Other responses arriving meanwhile are
        kept for recv(). Raises errors.RequestTimedOutError on timeout and errors.for_code(...)
        when the envelope carries an error."""
        corr = self.send(api, body, payloads=payloads, timeout_ms=timeout_ms,
                         api_version=api_version)
        while True:
            now = _now_ms()
            entry = self._pending.get(corr)
            deadline = entry[1] if entry is not None else now
            if now >= deadline:
                self._pending.pop(corr, None)
                if self.down_reason is not None:
                    raise errors.RequestTimedOutError(self._expiry_message(api))
                state = self.connection_state
                raise errors.RequestTimedOutError(
                    f"no response to {api_name(api)} from {self.endpoint} in {timeout_ms} ms"
                    + (f" ({state})" if state is not None else ""))
            expired = self._pop_expired(now)     # other requests' timeouts: kept for recv()
            if expired is not None:
                self._ready.append(expired)
                continue
            resp = self._poll_once(deadline)
            if resp is None:
                continue
            if resp.header.correlation_id == corr:
                resp.raise_for_error()
                return resp
            self._ready.append(resp)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            # the monitor stops before the DEALER closes: the events of the socket's teardown
            # would otherwise go to a closed reader and block libzmq's I/O thread for good
            if self._watch is not None:
                self._watch.close()
            self._close_socket()
            self._pending.clear()
            self._outbox.clear()

    def _close_socket(self) -> None:
        self._sock.close()

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            if not self._closed:
                if self._watch is not None:
                    self._watch.close()
                self._sock.close(linger=0)
        except Exception:
            pass


def secure_channel_factory(channel_factory: Any = None, **settings: Any) -> Any:
    """The channel factory a client uses: `channel_factory` as given (tests' fakes), else
    Channel with the security from `settings` (client_security's
    arguments) — checked now, so a bad setting fails the client's constructor — and
    fail_fast on."""
    if channel_factory is not None:
        return channel_factory
    from riverbed.wire.security import client_security
    # the clients' gateway channel: it also fails fast (riverbed.wire.liveness), so a refused or
    # lost gateway ends the requests awaiting it at once and the client moves on
    return functools.partial(Channel, security=client_security(**settings), fail_fast=True)
