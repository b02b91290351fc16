"""Metadata fan-out: Publisher (a bound PUB) and Subscriber (a SUB to many publishers). With
CURVE the publisher is a CURVE server (subscribers are admitted by the ZAP handler like any
client) and a subscriber authenticates with the process's key."""
from __future__ import annotations

import asyncio
from typing import Iterable

import zmq
import zmq.asyncio

from riverbed.wire.dealer import DEFAULT_HWM, configure_tcp_liveness
from riverbed.wire.security import ClientSecurity
from services.common.rpc.affinity import CLIENT, SERVER, apply_affinity
from services.common.rpc.security import ServerSecurity, process_security
from services.common.rpc.server import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["Publisher", "Subscriber"]


class Publisher:
    """A PUB socket (bound). Messages are [topic, *frames]. PUB never blocks: a subscriber that
    falls behind its high-water mark loses messages, and a new subscriber misses what was sent
    before its subscription reached us, so publish full snapshots, not deltas."""

    def __init__(self, endpoint: str, *, context: zmq.asyncio.Context | None = None,
                 sndhwm: int = DEFAULT_HWM, security: ServerSecurity | None = None,
                 max_message_bytes: int = 1024 * 1024):
        ctx = context or zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.PUB, socket_class=zmq.Socket)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, sndhwm)
        # subscribers only send subscriptions: a frame above this drops that peer
        sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
        apply_affinity(sock, ctx, SERVER)
        try:
            (security or process_security()).apply_server(sock, ctx)
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
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 security: ClientSecurity | None = None):
        self._security = security or process_security().client
        ctx = context or zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.SUB, socket_class=zmq.Socket)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
        apply_affinity(sock, ctx, CLIENT)
        # a publisher gone silent (its host, a network cut): reconnect within seconds of its
        # return rather than after TCP's retransmission backoff (riverbed.wire.dealer)
        configure_tcp_liveness(sock)
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
            # CURVE options apply to the next connect: set per publisher (each has its own key)
            self._security.apply(self._sock, endpoint)
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
