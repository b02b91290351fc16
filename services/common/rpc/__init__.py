"""Server-side RPC over ZeroMQ (asyncio): the ROUTER request loop every service runs, the
DEALER channel services use to call each other, and PUB/SUB for metadata fan-out.

Message layout (riverbed.wire.framing): a DEALER client sends [header, body, *payloads]; the
ROUTER sees [peer identity, header, body, *payloads] and answers [identity, header, body,
*payloads]. REQ clients (which add an empty delimiter frame) are not supported.

Limits
- `socket.request.max.bytes` is enforced twice: libzmq's ZMQ_MAXMSGSIZE refuses any single
  frame above it — libzmq then *drops the sender's connection* without a reply (an AsyncChannel
  fails that request at once with NETWORK_EXCEPTION, or resends one safe to repeat; its DEALER
  reconnects by itself) — and the server checks the total of all
  frames of a request, answering MESSAGE_TOO_LARGE when it is above the limit.
- `queued.max.requests` bounds requests being handled at once; beyond it the server stops
  reading, so backpressure reaches clients through ZMQ's high-water marks.

Errors: undecodable frames, unknown apis and versions, oversize requests get an envelope error
(ResponseHeader.error_code) and the server keeps serving. A handler raising errors.KafkaError
answers with its code and message; any other exception answers UNKNOWN_SERVER_ERROR and is
logged with its traceback.

Replies use ROUTER_MANDATORY and never block: a reply to a client that is gone (or whose queue
is full) is dropped, counted in `statistics().replies_dropped` and logged at DEBUG.

Modules: `server` (RpcServer, Reply, remote_wait), `channel` (AsyncChannel, ChannelPool),
`pubsub` (Publisher, Subscriber), `security` (CURVE keys, the ZAP handler, the process's
settings), `affinity` (which I/O threads a socket's connections use: accepted ones the first
half, made ones the rest). `from services.common.rpc import X` keeps working for all of them.

Security: with `security.protocol=CURVE` (services.common.rpc.security) every socket here is
encrypted and authenticated; handlers see `Request.principal` (`User:<name>`) and `Request.host`.
Stalled handshakes are dropped after `socket.handshake.timeout.ms` (ZMQ_HANDSHAKE_IVL).
"""
from services.common.rpc.channel import AsyncChannel, ChannelPool
from services.common.rpc.pubsub import Publisher, Subscriber
from services.common.rpc.server import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Handler,
    Reply,
    Request,
    Response,
    RpcServer,
    ServerStatistics,
    remote_seconds,
    remote_wait,
)

__all__ = [
    "Handler", "Reply", "RpcServer", "ServerStatistics", "AsyncChannel", "ChannelPool",
    "Publisher", "Subscriber", "Request", "Response", "remote_wait", "remote_seconds", "DEFAULT_MAX_MESSAGE_BYTES",
]
