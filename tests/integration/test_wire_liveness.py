"""riverbed.wire.liveness through the SDK's Channel (fail_fast=True, as the clients open their
gateway channels), with real sockets and a real peer process.

Each request here has a two-minute timeout: an answer naming the reason ("connection refused",
"connection lost") can only come from the connection monitor or the heartbeats, not from a
timeout (whose message says "no response ... in time").
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
import zmq

from riverbed import errors
from riverbed._proto.v1 import header_pb2, metadata_pb2
from riverbed.wire.client import Channel
from riverbed.wire.liveness import ConnectionWatch

pytestmark = pytest.mark.integration

LONG_MS = 120_000
METADATA = header_pb2.ApiKey.METADATA

# A ROUTER that never answers (a hung gateway once it is SIGSTOPped); prints its port.
SILENT_PEER = textwrap.dedent("""
    import sys, time, zmq
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    while True:
        if sock.poll(100):
            sock.recv_multipart()
""")


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_refused_connection_ends_a_call_with_the_reason():
    with Channel(f"tcp://127.0.0.1:{_closed_port()}", fail_fast=True) as ch:
        with pytest.raises(errors.RequestTimedOutError, match="connection refused"):
            ch.call(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=LONG_MS)
        assert ch.down_reason == "connection refused"
        # while down, a new request fails at the next connection attempt (REQUEST_TIMED_OUT)
        ch.send(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=LONG_MS)
        resp = ch.recv(LONG_MS)
        assert resp is not None and not resp.ok and "connection refused" in resp.error_message


def test_lost_connection_ends_requests_in_flight():
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    try:
        with Channel(f"tcp://127.0.0.1:{port}", fail_fast=True) as ch:
            corr = ch.send(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=LONG_MS)
            for _ in range(600):                 # the channel hands it over once connected
                assert ch.recv(50) is None
                if router.poll(0):
                    break
            else:
                raise AssertionError("the request never arrived")
            router.recv_multipart()              # taken, never answered
            router.close(linger=0)
            resp = ch.recv(LONG_MS)
            assert resp is not None and resp.correlation_id == corr
            assert not resp.ok and "connection lost" in resp.error_message
    finally:
        router.close(linger=0)


def test_a_stopped_peer_is_noticed_by_the_heartbeats():
    peer = subprocess.Popen([sys.executable, "-c", SILENT_PEER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(peer.stdout.readline())
        with Channel(f"tcp://127.0.0.1:{port}", fail_fast=True) as ch:
            # connected: a request to the live (silent) peer is not failed
            ch.send(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=LONG_MS)
            for _ in range(600):
                assert ch.recv(50) is None and ch.down_reason is None
                if ch.connected:
                    break
            assert ch.connected
            os.kill(peer.pid, signal.SIGSTOP)    # its TCP stays open; only PONGs stop
            resp = ch.recv(LONG_MS)
            assert resp is not None and not resp.ok
            assert "connection lost" in resp.error_message
    finally:
        os.kill(peer.pid, signal.SIGCONT)
        peer.kill()
        peer.wait(timeout=30)


def test_a_channel_refused_at_first_works_once_the_peer_listens():
    port = _closed_port()
    with Channel(f"tcp://127.0.0.1:{port}", fail_fast=True) as ch:
        with pytest.raises(errors.RequestTimedOutError, match="connection refused"):
            ch.call(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=LONG_MS)
        router = zmq.Context.instance().socket(zmq.ROUTER)
        try:
            router.bind(f"tcp://127.0.0.1:{port}")
            # libzmq reconnects by itself; the channel notices and sends again
            deadline = time.monotonic() + 60
            while not router.poll(0):
                assert time.monotonic() < deadline, "never reconnected"
                ch.send(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=LONG_MS)
                resp = ch.recv(50)
                assert resp is None or "connection refused" in resp.error_message
                time.sleep(0.02)
            assert ch.down_reason is None
        finally:
            router.close(linger=0)


def test_a_timeout_says_whether_the_handshake_ever_completed():
    """No answer at all: the error tells a peer that accepts TCP but never answers the ZMTP
    handshake (a listener that is not a gateway, or one whose handshake hangs) from a connected
    peer that is slow."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)                           # the kernel accepts; nobody speaks ZMTP
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    try:
        with Channel(f"tcp://127.0.0.1:{listener.getsockname()[1]}", fail_fast=True) as ch:
            with pytest.raises(errors.RequestTimedOutError,
                               match="TCP connected, but the ZMTP/CURVE handshake has not"):
                ch.call(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=5000)
        with Channel(f"tcp://127.0.0.1:{port}", fail_fast=True) as ch:
            with pytest.raises(errors.RequestTimedOutError, match=r"in 5000 ms \(connected\)"):
                ch.call(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=5000)
            assert ch.connection_state == "connected"
    finally:
        router.close(linger=0)
        listener.close()


def _delivers(ctx: zmq.Context) -> bool:
    """A request from a new channel of `ctx` reaches a ROUTER of it (the I/O thread works)."""
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    try:
        with Channel(f"tcp://127.0.0.1:{port}", context=ctx, fail_fast=True) as ch:
            ch.send(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=LONG_MS)
            for _ in range(200):
                ch.recv(50)
                if router.poll(0):
                    return True
        return False
    finally:
        router.close(linger=0)


@pytest.mark.parametrize("how", ["closed", "garbage-collected"])
def test_a_watch_gone_before_its_socket_does_not_stall_the_others(how):
    """A connection watch closed, or dropped and collected, while its socket lives on and keeps
    retrying: libzmq's next monitor event had no reader and blocked the context's I/O thread."""
    import gc
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.RECONNECT_IVL, 1)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1)
    watch = ConnectionWatch(sock, f"tcp://127.0.0.1:{_closed_port()}")
    sock.connect(watch.endpoint)
    ok = False
    try:
        time.sleep(0.2)
        if how == "closed":
            watch.close()
        else:
            del watch
            gc.collect()
        time.sleep(0.3)               # hundreds of reconnect attempts, each an event
        ok = _delivers(ctx)
        assert ok, "the request never left: the context's I/O thread is stuck"
    finally:
        if ok:                        # a stuck I/O thread would hang the context's teardown
            sock.close(linger=0)
            ctx.destroy(linger=0)


def test_an_idle_client_retrying_a_dead_gateway_does_not_stall_the_others():
    """Nobody reads the monitor of a client that sits idle while its gateway is gone, and
    libzmq's I/O thread writes each reconnect attempt's event there with a blocking send: on a
    bounded pipe it blocked once 1,000 were queued, and every other socket of the context
    (every client of the process) stopped connecting and sending, for good."""
    ctx = zmq.Context()
    idle = Channel(f"tcp://127.0.0.1:{_closed_port()}", context=ctx, fail_fast=True,
                   reconnect_ivl_ms=1, reconnect_ivl_max_ms=1)
    ok = False
    try:
        time.sleep(3)                 # thousands of unread CONNECT_RETRIED events
        ok = _delivers(ctx)
        assert ok, "the request never left: the context's I/O thread is stuck"
    finally:
        if ok:                        # a stuck I/O thread would hang the context's teardown
            idle.close()
            ctx.destroy(linger=0)


@pytest.mark.parametrize("peer", ["refused", "lost"])
def test_closing_a_channel_while_it_reconnects_does_not_stall_the_others(peer):
    """Channel.close() closed its DEALER first and the monitor's reader after it: the monitor
    was still on, so the DISCONNECTED/CLOSED events of the socket's teardown went to a reader
    that was gone, and libzmq's I/O thread blocked on them for good (every later client of the
    process then stayed "not connected yet"). The monitor must stop before either closes."""
    ctx = zmq.Context()
    ok = True
    try:
        for i in range(300):
            if peer == "refused":
                ch = Channel(f"tcp://127.0.0.1:{_closed_port()}", context=ctx, fail_fast=True,
                             reconnect_ivl_ms=1, reconnect_ivl_max_ms=1)
                time.sleep((i % 10) / 1000)
            else:
                router = ctx.socket(zmq.ROUTER)
                port = router.bind_to_random_port("tcp://127.0.0.1")
                ch = Channel(f"tcp://127.0.0.1:{port}", context=ctx, fail_fast=True,
                             reconnect_ivl_ms=1, reconnect_ivl_max_ms=1)
                ch.send(METADATA, metadata_pb2.MetadataRequest(), timeout_ms=LONG_MS)
                for _ in range(200):
                    ch.recv(5)
                    if router.poll(0):
                        break
                router.close(linger=0)            # the channel reconnects, every 1 ms
                ch.recv(i % 7)
            ch.close()
            if i % 25 == 24:
                ok = _delivers(ctx)
                assert ok, f"the request never left after {i + 1} closes: the I/O thread is stuck"
    finally:
        if ok:                        # a stuck I/O thread would hang the context's teardown
            ctx.destroy(linger=0)
