"""services.common.rpc.affinity: bound sockets' connections on the first half of a context's
I/O threads, connected sockets' on the rest; nothing set with one thread."""
from __future__ import annotations

import pytest
import zmq

from services.common.rpc.affinity import CLIENT, SERVER, apply_affinity, io_thread_mask


@pytest.mark.parametrize("n, server, client", [
    (0, 0, 0), (1, 0, 0),
    (2, 0b1, 0b10),
    (3, 0b11, 0b100),
    (4, 0b11, 0b1100),
    (5, 0b111, 0b11000),
])
def test_masks_split_the_threads(n, server, client):
    assert io_thread_mask(n, SERVER) == server
    assert io_thread_mask(n, CLIENT) == client


def test_masks_never_overlap_and_cover_every_thread():
    for n in range(2, 70):
        s, c = io_thread_mask(n, SERVER), io_thread_mask(n, CLIENT)
        assert s and c and s & c == 0
        assert s | c == (1 << min(n, 64)) - 1


def test_unknown_side_is_refused():
    with pytest.raises(ValueError):
        io_thread_mask(2, "both")


@pytest.mark.parametrize("io_threads, want", [(1, 0), (2, 0b10)])
def test_apply_sets_the_socket_option_from_the_context(io_threads, want):
    ctx = zmq.Context(io_threads=io_threads)
    try:
        sock = ctx.socket(zmq.DEALER)
        apply_affinity(sock, ctx, CLIENT)
        assert sock.getsockopt(zmq.AFFINITY) == want
        # the socket still works on its thread: an inproc pair round trip
        peer = ctx.socket(zmq.ROUTER)
        apply_affinity(peer, ctx, SERVER)
        peer.bind("inproc://affinity-test")
        sock.connect("inproc://affinity-test")
        sock.send(b"ping")
        ident, msg = peer.recv_multipart()
        assert msg == b"ping"
        sock.close(0)
        peer.close(0)
    finally:
        ctx.term()
