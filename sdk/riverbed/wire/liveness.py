"""Fail fast on a gateway that is not there: ZeroMQ's socket monitor and ZMTP heartbeats on the
SDK's DEALER (riverbed.wire.client.Channel).

A DEALER with ZMQ_IMMEDIATE queues nothing while it has no connection, so without help a
request to an address nobody listens on, or to a gateway that died, just waits out its request
timeout (30 s). This module watches the socket instead:

- ZeroMQ's socket monitor reports connection events on an inproc PAIR socket: CONNECTED,
  DISCONNECTED, CONNECT_RETRIED (a connect that failed: refused, unreachable, timed out) and
  the handshake's failures. The Channel polls it beside its DEALER.
- ZMTP heartbeats (ZMQ_HEARTBEAT_IVL / ZMQ_HEARTBEAT_TIMEOUT) turn a silent peer (a host gone,
  a process stopped) into a DISCONNECTED within HEARTBEAT_TIMEOUT_MS; a killed process is seen
  at once (its kernel closes the TCP connection). ZMQ_CONNECT_TIMEOUT bounds a connect to an
  address that drops SYNs.

`ConnectionWatch.process()` folds the events into what the Channel acts on: a connection
attempt failed or the connection broke (with a reason for people) — then every request waiting
for this connection is failed — or nothing happened. libzmq keeps reconnecting by itself
(ZMQ_RECONNECT_IVL, doubling up to its cap): each failed attempt fails what waits for it, so a
request sent while the peer is away fails at the next attempt (within the cap, 2 s) and one
sent just before the peer is back is delivered. The next CONNECTED clears `down_reason`.

The wire is unchanged: heartbeats are ZMTP 3.1 PING/PONG commands that libzmq answers on the
gateway's side without any option set there.
"""
from __future__ import annotations

import errno
import itertools
import logging
import os
import socket
import weakref
from urllib.parse import urlsplit

import zmq
from zmq.utils.monitor import recv_monitor_message

__all__ = ["ConnectionWatch", "HEARTBEAT_IVL_MS", "HEARTBEAT_TIMEOUT_MS", "CONNECT_TIMEOUT_MS",
           "close_monitor", "probe_tcp", "unbounded_monitor"]

log = logging.getLogger(__name__)

# A PING every 250 ms; no traffic for 1 s means the peer is gone ("noticed within a second").
# libzmq answers PINGs in its I/O thread, so a busy (GIL-bound) gateway still answers in time.
HEARTBEAT_IVL_MS = 250
HEARTBEAT_TIMEOUT_MS = 1000
# A TCP connect to an address that drops SYNs gives up after this (Linux would wait ~2 min).
CONNECT_TIMEOUT_MS = 1000

_WATCHED = (zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED
            | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
_HANDSHAKE_FAILED: dict[int, str] = {zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshake failed",
                     zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "ZMTP handshake failed (not a "
                                                          "Riverbed gateway?)",
                     zmq.EVENT_HANDSHAKE_FAILED_AUTH: "authentication failed"}


_MONITOR_IDS = itertools.count()


def unbounded_monitor(sock: zmq.Socket, events: int, *,
                      thread_owned: bool = False) -> zmq.Socket:
    """`sock.get_monitor_socket(events)`, but on a pipe with no high-water mark; close it with
    close_monitor(sock, mon), never on its own.

    libzmq's I/O thread writes a socket's monitor events with a blocking send, and every socket
    of the context waits while it blocks: every client of the process stops connecting and
    sending, for good. It blocks when the pipe is full or when the pipe is gone:
    - full: with the default pipe (1,000 messages), a monitor nobody reads for a while (an idle
      client retrying a gateway that is gone, once per reconnect interval) fills it. Our end's
      RCVHWM 0 makes the inproc pipe unbounded (libzmq bounds an inproc pipe only when both
      ends have a limit); an unread event costs a few dozen bytes.
    - gone: the reader closed while the monitored socket lives on (its next event has nowhere
      to go). close_monitor stops the monitor first; an owner that may be dropped unclosed
      registers it as its finalizer (ConnectionWatch does), so the garbage collector's order
      of freeing the two sockets does not matter.

    thread_owned: the reader is a plain zmq.Socket left out of the context's socket list, for a
    thread of its own that polls it and closes it when the context terminates (as the ZAP
    handler does). Context.destroy closes every listed socket from the calling thread, and
    closing a socket under another thread's poll crashes the process."""
    addr = f"inproc://riverbed-monitor-{os.getpid()}-{id(sock)}-{next(_MONITOR_IDS)}"
    sock.monitor(addr, events)
    # a plain socket also under an asyncio context (the services' channels read it NOBLOCK)
    mon = zmq.Socket(sock.context, zmq.PAIR) if thread_owned \
        else sock.context.socket(zmq.PAIR, socket_class=zmq.Socket)
    mon.setsockopt(zmq.RCVHWM, 0)
    mon.setsockopt(zmq.LINGER, 0)
    mon.connect(addr)
    return mon


def close_monitor(sock: zmq.Socket, mon: zmq.Socket) -> None:
    """Stop `sock`'s monitor, then close its reader `mon` (the reverse would leave libzmq's I/O
    thread blocked on the next event; see unbounded_monitor)."""
    if not sock.closed:
        try:
            sock.disable_monitor()
        except zmq.ZMQError:     # the context is going away: nothing sends any more
            pass
    if not mon.closed:
        mon.close(linger=0)


def configure_heartbeats(sock: zmq.Socket) -> None:
    """ZMTP heartbeats and a connect timeout on a new DEALER (before connect)."""
    sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
    sock.setsockopt(zmq.CONNECT_TIMEOUT, CONNECT_TIMEOUT_MS)


def probe_tcp(endpoint: str, timeout_s: float = 0.5) -> str:
    """Why a plain TCP connect to a tcp:// endpoint fails ("connection refused", ...), or ""
    when it succeeds or the endpoint is not TCP. Used only to word an error for people: libzmq's
    CONNECT_RETRIED event does not carry the errno."""
    parts = urlsplit(endpoint)
    if parts.scheme != "tcp" or not parts.hostname or parts.port is None:
        return ""
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s):
            return ""
    except socket.timeout:
        return "connect timed out"
    except OSError as e:
        if e.errno is not None and e.errno in errno.errorcode:
            return os.strerror(e.errno).lower()
        return str(e) or type(e).__name__


class ConnectionWatch:
    """The monitor of one DEALER: `socket` is polled for POLLIN; `process()` reads its events.

    `heartbeats=False` leaves ZMTP heartbeats off (the services' channels: libzmq counts only a
    whole received frame as traffic, so a heartbeat timeout would also cut a healthy connection
    that takes longer than it to carry one large frame over a slow link; they detect dead peers
    with TCP keepalive and TCP_USER_TIMEOUT instead, riverbed.wire.dealer)."""

    def __init__(self, sock: zmq.Socket, endpoint: str, *, heartbeats: bool = True):
        if heartbeats:
            configure_heartbeats(sock)
        self.endpoint = endpoint
        self.socket: zmq.Socket = unbounded_monitor(sock, _WATCHED)
        # closes the reader after stopping the monitor, also when the channel is dropped
        # unclosed (the finalizer holds both sockets, so neither goes first)
        self._finalizer = weakref.finalize(self, close_monitor, sock, self.socket)
        # not at interpreter exit: the SDK's own exit hook still flushes through this channel
        # then (finalize's hook may run first), and the process's end closes everything anyway
        self._finalizer.atexit = False
        self.up = False
        self.ever_up = False
        self.tcp_connected = False              # CONNECTED seen, no DISCONNECTED since
        self.down_reason: str | None = None     # set while the connection is known down
        # Connections that broke after their handshake had succeeded: what was sent on them and
        # not answered yet is lost (a DEALER with ZMQ_IMMEDIATE drops a broken pipe's queue).
        self.connections_lost = 0

    def state(self) -> str:
        """Where the connection stands, for an error that says no answer came: it tells a peer
        that never accepted the TCP connection from one whose handshake never completed (a
        server that accepts but does not answer the ZMTP or CURVE handshake) from one that is
        connected and slow."""
        if self.up:
            return "connected"
        if self.tcp_connected:
            return "TCP connected, but the ZMTP/CURVE handshake has not completed"
        if self.ever_up:
            return "reconnecting"
        return "not connected yet"

    def process(self) -> str | None:
        """Read every pending event. Returns the reason when a connection attempt failed or
        the connection broke since the last call (a refused or timed-out connect, a lost
        connection, a failed handshake), else None."""
        went_down: str | None = None
        while True:
            try:
                ev = recv_monitor_message(self.socket, zmq.NOBLOCK)
            except zmq.Again:
                return went_down
            except zmq.ZMQError:     # monitor stopped (socket closed)
                return went_down
            kind = ev["event"]
            reason: str | None = None
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED or kind == zmq.EVENT_CONNECTED:
                if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self.up = self.ever_up = True
                self.tcp_connected = True
                self.down_reason = None
                continue
            if kind == zmq.EVENT_DISCONNECTED:
                if self.up:
                    reason = "connection lost"
                    self.connections_lost += 1
                self.up = self.tcp_connected = False
            elif kind == zmq.EVENT_CONNECT_RETRIED:
                if not self.up:
                    reason = self.down_reason
                    if reason is None:      # the first failed attempt: find out why, once
                        reason = probe_tcp(self.endpoint) or "cannot connect"
            elif kind in _HANDSHAKE_FAILED:
                self.up = self.tcp_connected = False
                reason = _HANDSHAKE_FAILED[kind]
            if reason is not None:
                if self.down_reason is None:
                    log.debug("connection to %s down: %s", self.endpoint, reason)
                self.down_reason = reason
                went_down = reason

    def close(self) -> None:
        self._finalizer()
