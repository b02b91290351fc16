"""The DEALER socket options every request channel uses: the SDK's Channel (riverbed.wire.client)
and the services' async channel (services.common.rpc). Why each option: riverbed.wire.client's
"Socket choices".
"""
from __future__ import annotations

import zmq

__all__ = ["DEFAULT_HWM", "TCP_CONNECT_TIMEOUT_MS", "TCP_KEEPALIVE_IDLE_S", "TCP_KEEPALIVE_INTVL_S",
           "TCP_USER_TIMEOUT_MS", "configure_dealer", "configure_tcp_liveness"]

# libzmq queues at most this many messages per connection; the SDK's own in-flight limits
# (max.in.flight.requests.per.connection) keep far below it. Bounded so a stuck peer cannot
# grow memory without limit.
DEFAULT_HWM = 1000

# A connection whose peer is gone without closing it (its host down, a network cut) looks alive
# to TCP: a request on it waits out its timeout, the next one goes on the same dead connection,
# and when the network returns, TCP's retransmission backoff (doubling up to tens of seconds)
# delays the first bytes again. So the kernel is told to give up on it quickly:
# - keepalive: an idle connection (a request sent and acknowledged, its answer awaited) is probed
#   after TCP_KEEPALIVE_IDLE_S of silence, then every TCP_KEEPALIVE_INTVL_S;
# - TCP_USER_TIMEOUT (ZMQ_TCP_MAXRT on Linux): the connection is closed when data it sent, or
#   its keepalive probes, stay unacknowledged for TCP_USER_TIMEOUT_MS.
# libzmq then reports the connection lost and reconnects (ZMQ_RECONNECT_IVL, capped); each
# connect attempt gives up after TCP_CONNECT_TIMEOUT_MS (ZMQ_CONNECT_TIMEOUT: without it a SYN
# to a silent address is retried by the kernel for two minutes, its retransmissions backing off
# to 32 s), so once the network is back a new connection carries requests within a few
# seconds. A live peer's kernel acknowledges whatever its process is doing (busy, or stopped
# with SIGSTOP), and a slow link still acknowledges: only silence of TCP_USER_TIMEOUT_MS counts,
# never a large message's duration (unlike ZMTP heartbeats, whose timeout counts only whole
# received frames).
TCP_KEEPALIVE_IDLE_S = 1
TCP_KEEPALIVE_INTVL_S = 1
TCP_USER_TIMEOUT_MS = 5000
TCP_CONNECT_TIMEOUT_MS = 1000


def configure_dealer(sock: zmq.Socket, *, max_message_bytes: int, linger_ms: int,
                     reconnect_ivl_ms: int, reconnect_ivl_max_ms: int) -> None:
    """Set a new DEALER's options (before connect): ZMQ_IMMEDIATE, both high-water marks at
    DEFAULT_HWM, ZMQ_MAXMSGSIZE, linger and the reconnect interval with its cap."""
    sock.setsockopt(zmq.LINGER, linger_ms)
    sock.setsockopt(zmq.IMMEDIATE, 1)
    sock.setsockopt(zmq.SNDHWM, DEFAULT_HWM)
    sock.setsockopt(zmq.RCVHWM, DEFAULT_HWM)
    sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
    sock.setsockopt(zmq.RECONNECT_IVL, reconnect_ivl_ms)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, reconnect_ivl_max_ms)


def configure_tcp_liveness(sock: zmq.Socket, *,
                           user_timeout_ms: int = TCP_USER_TIMEOUT_MS) -> None:
    """TCP keepalive, TCP_USER_TIMEOUT and the connect timeout on a socket's TCP connections
    (before connect or bind; a bound socket passes the first two on to the connections it
    accepts). See above."""
    sock.setsockopt(zmq.CONNECT_TIMEOUT, TCP_CONNECT_TIMEOUT_MS)
    sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
    sock.setsockopt(zmq.TCP_KEEPALIVE_IDLE, TCP_KEEPALIVE_IDLE_S)
    sock.setsockopt(zmq.TCP_KEEPALIVE_INTVL, TCP_KEEPALIVE_INTVL_S)
    sock.setsockopt(zmq.TCP_MAXRT, user_timeout_ms)
