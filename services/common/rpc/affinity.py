"""Which of a context's ZeroMQ I/O threads a socket's connections use (ZMQ_AFFINITY).

An I/O thread frames every message of the connections it owns and, with CURVE, encrypts and
decrypts them: one connection's crypto always runs in one thread. libzmq gives a new connection
to the least loaded thread by its count of file descriptors, which in a service often puts the
connections it accepts (clients' requests: decrypted there) and the connections it makes
(requests forwarded to a leader: encrypted there) on the same thread — measured on a gateway
with num.network.threads 2: every byte's decrypt and re-encrypt in one thread, the other idle.

So with two or more I/O threads a process splits them: the sockets it binds (its ROUTER and
metadata PUB: the connections clients make to it) use the first half, the sockets it connects
(its DEALER channels and SUB: the connections it makes) the second half. The gateway's decrypt
of a client's batch and its encrypt of the same batch towards the leader then run on two
cores; a storage node's serving and its replica fetching likewise. One I/O thread: no affinity.
"""
from __future__ import annotations

import zmq

__all__ = ["SERVER", "CLIENT", "io_thread_mask", "apply_affinity"]

SERVER = "server"     # connections accepted by a bound socket
CLIENT = "client"     # connections a socket makes


def io_thread_mask(io_threads: int, side: str) -> int:
    """The ZMQ_AFFINITY bitmask of `side` for a context of `io_threads` I/O threads; 0 (any
    thread, libzmq's default) with fewer than two. The server side gets the first
    ceil(n / 2) threads, the client side the rest (at most 64: the mask's width)."""
    if side not in (SERVER, CLIENT):
        raise ValueError(f"side must be {SERVER!r} or {CLIENT!r}, not {side!r}")
    n = min(int(io_threads), 64)
    if n < 2:
        return 0
    first = (n + 1) // 2
    if side == SERVER:
        return (1 << first) - 1
    return ((1 << n) - 1) & ~((1 << first) - 1)


def apply_affinity(sock: zmq.Socket, ctx: zmq.Context, side: str) -> None:
    """Set `sock`'s ZMQ_AFFINITY for `side` from its context's I/O thread count (before bind or
    connect). A context of one I/O thread leaves the socket as it is."""
    mask = io_thread_mask(ctx.get(zmq.IO_THREADS), side)
    if mask:
        sock.setsockopt(zmq.AFFINITY, mask)
