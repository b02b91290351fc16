"""The SDK's request channel (riverbed.wire.client.Channel) waiting on asyncio.

Everything of the sync Channel (DEALER options, pipelining, correlation ids, deadlines, the
outbox) is reused; only the wait differs: instead of zmq_poll, a zmq.asyncio shadow of the same
DEALER is awaited, through riverbed.aio.bridge, so the loop runs other tasks while a request is
in flight. A zero timeout never leaves the loop (a plain non-blocking poll).
"""
from __future__ import annotations

from typing import Any

import zmq
import zmq.asyncio

from riverbed.aio.bridge import await_
from riverbed.wire.client import Channel

__all__ = ["AsyncChannel"]


class AsyncChannel(Channel):
    """A Channel whose waits are awaited on the running asyncio loop (inside run_sync)."""

    _send_copy = True   # see Channel._send_copy: no GIL hand-off to pyzmq's garbage thread

    def __init__(self, endpoint: str, **kwargs: Any):
        super().__init__(endpoint, **kwargs)
        self._asock = zmq.asyncio.Socket.from_socket(self._sock)

    def _wait(self, timeout_ms: int) -> int:
        flags = zmq.POLLIN | (zmq.POLLOUT if self._outbox else 0)
        if timeout_ms <= 0:
            return super()._wait(0)
        events: Any = await_(self._asock.poll(timeout_ms, flags))  # type: ignore[call-arg]
        return int(events)

    def poll_async(self, timeout_ms: float, flags: int = zmq.POLLIN) -> "zmq.asyncio.Future":
        """An asyncio future of the socket's events within timeout_ms (for a caller waiting on
        several things at once, like the producer's sender task)."""
        if self._outbox:
            flags |= zmq.POLLOUT
        return self._asock.poll(timeout_ms, flags)  # type: ignore[call-arg,return-value]

    def readable(self) -> bool:
        """A message waits in libzmq (or a request waits to be flushed and can be); reading
        ZMQ_EVENTS also resets the edge of ZMQ_FD."""
        ev = self._sock.getsockopt(zmq.EVENTS)
        return bool(ev & zmq.POLLIN or (self._outbox and ev & zmq.POLLOUT))

    def _close_socket(self) -> None:
        self._asock.close(linger=0)         # drops its loop watchers; closes the DEALER
