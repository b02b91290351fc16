"""The DEALER socket options every request channel uses: the SDK's Channel (riverbed.wire.client)
and the services' async channel (services.common.rpc). Why each option: riverbed.wire.client's
"Socket choices".
"""
from __future__ import annotations

import zmq

__all__ = ["DEFAULT_HWM", "configure_dealer"]

# libzmq queues at most this many messages per connection; the SDK's own in-flight limits
# (max.in.flight.requests.per.connection) keep far below it. Bounded so a stuck peer cannot
# grow memory without limit.
DEFAULT_HWM = 1000


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
