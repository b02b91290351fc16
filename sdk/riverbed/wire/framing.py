"""Multipart framing of requests and responses: pure functions, no sockets.

    request:  [RequestHeader][request body][payload 0][payload 1]...
    response: [ResponseHeader][response body][payload 0]...

Headers and bodies are protobufs (proto/riverbed/v1/header.proto and the per-API files).
Payload frames carry raw record-batch bytes; they are passed through as given (bytes,
memoryview or zmq.Frame) and never copied into a protobuf. Decoding reads protobufs straight
from the frames' buffers (no copy) and keeps payload frames as they arrived.

Decoding never trusts its input: anything malformed becomes a `WireError` carrying the Kafka
error code to answer with (INVALID_REQUEST, CORRUPT_MESSAGE, UNSUPPORTED_VERSION) and, when the
header could be read, the correlation id and api to answer to.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from google.protobuf.message import Message

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from riverbed.wire.apis import APIS, api_name

RequestHeader = header_pb2.RequestHeader
ResponseHeader = header_pb2.ResponseHeader
TraceContext = header_pb2.TraceContext

ErrorCode = errors.ErrorCode
NONE = 0
INVALID_REQUEST = ErrorCode.Value("INVALID_REQUEST")
CORRUPT_MESSAGE = ErrorCode.Value("CORRUPT_MESSAGE")
UNSUPPORTED_VERSION = ErrorCode.Value("UNSUPPORTED_VERSION")
REQUEST_TIMED_OUT = ErrorCode.Value("REQUEST_TIMED_OUT")
MESSAGE_TOO_LARGE = ErrorCode.Value("MESSAGE_TOO_LARGE")
UNKNOWN_SERVER_ERROR = ErrorCode.Value("UNKNOWN_SERVER_ERROR")

_UINT32_MAX = (1 << 32) - 1

# A frame as it is sent or received: bytes, a memoryview, or a zmq.Frame (not imported here).
FrameLike = Any


class WireError(errors.RiverbedError):
    """A message that cannot be decoded. `code` is the ErrorCode to answer with;
    `correlation_id` and `api` are set when the header was readable (else None / 0)."""

    def __init__(self, code: int, message: str, correlation_id: int | None = None, api: int = 0):
        self.code = code
        self.message = message
        self.correlation_id = correlation_id
        self.api = api
        super().__init__(f"{ErrorCode.Name(code)}: {message}")

    def to_kafka_error(self) -> errors.KafkaError:
        return errors.for_code(self.code, self.message)


@dataclass(slots=True)
class Request:
    header: header_pb2.RequestHeader
    api: int
    body: Message                      # parsed with APIS[api].request_type
    payloads: list = field(default_factory=list)  # frames after the body, as received
    principal: str = "User:ANONYMOUS"   # authenticated principal (CURVE User-Id), set by the RpcServer
    host: str = ""                       # the peer's IP address (ZMQ Peer-Address), set by the RpcServer
    # Which connection it came on, where the client id does not tell (a gateway's Kafka
    # listener: every librdkafka client is "rdkafka"); "" for the ZeroMQ port.
    connection: str = ""

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def api_version(self) -> int:
        return self.header.api_version


@dataclass(slots=True)
class Response:
    header: header_pb2.ResponseHeader
    api: int
    body: Message | None               # None when the envelope error_code != NONE
    payloads: list = field(default_factory=list)

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def error_code(self) -> int:
        return self.header.error_code

    @property
    def error_message(self) -> str:
        return self.header.error_message

    @property
    def ok(self) -> bool:
        return self.header.error_code == NONE

    def raise_for_error(self) -> None:
        """Raise errors.for_code(...) if the envelope carries an error; else do nothing."""
        if self.header.error_code != NONE:
            raise errors.for_code(self.header.error_code, self.header.error_message)


def _buf(frame: FrameLike):
    # zmq.Frame exposes its bytes as a memoryview via .buffer (no copy); bytes/memoryview as is.
    return getattr(frame, "buffer", frame)


def frame_nbytes(frame: FrameLike) -> int:
    """Size of one frame in bytes (bytes, memoryview or zmq.Frame)."""
    if isinstance(frame, memoryview):
        return frame.nbytes
    return len(frame)


def current_trace_context() -> header_pb2.TraceContext | None:
    """The active OpenTelemetry span as a TraceContext, or None (no span, or no opentelemetry)."""
    if _otel_trace is None:
        return None
    ctx = _otel_trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return header_pb2.TraceContext(trace_id=ctx.trace_id.to_bytes(16, "big"),
                                   span_id=ctx.span_id.to_bytes(8, "big"),
                                   trace_flags=int(ctx.trace_flags))


try:  # opentelemetry-api is a dependency, but the wire must work without it
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover
    _otel_trace = None


# ---------------------------------------------------------------------------------------------
# requests

def encode_request(api: int, body_msg: Message, *, correlation_id: int, client_id: str = "",
                   api_version: int = 0, timeout_ms: int = 0,
                   trace: header_pb2.TraceContext | None = None,
                   payloads: Sequence[FrameLike] = ()) -> list:
    """[header bytes, body bytes, *payloads]. Payload frames are passed through untouched."""
    header = header_pb2.RequestHeader(api=api, api_version=api_version,
                                      correlation_id=correlation_id, client_id=client_id,
                                      timeout_ms=min(max(int(timeout_ms), 0), _UINT32_MAX))
    if trace is not None:
        header.trace.CopyFrom(trace)
    frames = [header.SerializeToString(), body_msg.SerializeToString()]
    if payloads:
        frames.extend(payloads)
    return frames


def decode_request(frames: Sequence[FrameLike]) -> Request:
    """Parse [header, body, *payloads]. Raises WireError on anything malformed."""
    if len(frames) < 2:
        raise WireError(INVALID_REQUEST, f"expected at least 2 frames (header, body), got {len(frames)}")
    header = header_pb2.RequestHeader()
    try:
        header.ParseFromString(_buf(frames[0]))
    except Exception as e:  # protobuf DecodeError (and anything else a parser may raise)
        raise WireError(CORRUPT_MESSAGE, f"unparsable request header: {e}") from None
    api = header.api
    corr = header.correlation_id
    spec = APIS.get(api)
    if spec is None:
        raise WireError(INVALID_REQUEST, f"unknown api {api_name(api)}", corr, api)
    if header.api_version not in spec.valid_versions:
        raise WireError(UNSUPPORTED_VERSION,
                        f"{spec.name} v{header.api_version} not supported; valid versions "
                        f"{list(spec.valid_versions)}", corr, api)
    body = spec.request_type()
    try:
        body.ParseFromString(_buf(frames[1]))
    except Exception as e:
        raise WireError(CORRUPT_MESSAGE, f"unparsable {spec.name} request body: {e}", corr, api) from None
    return Request(header, api, body, list(frames[2:]))


# ---------------------------------------------------------------------------------------------
# responses

def encode_response(correlation_id: int, api: int, body_msg: Message | None,
                    payloads: Sequence[FrameLike] = (), *, error_code: int = NONE,
                    error_message: str = "") -> list:
    """[header bytes, body bytes, *payloads]. With an error_code, body_msg may be None (empty frame)."""
    header = header_pb2.ResponseHeader(correlation_id=correlation_id, api=api,
                                       error_code=error_code, error_message=error_message)
    frames = [header.SerializeToString(), b"" if body_msg is None else body_msg.SerializeToString()]
    if payloads:
        frames.extend(payloads)
    return frames


def error_response(correlation_id: int, api: int, code: int, message: str) -> list:
    """An envelope error: [ResponseHeader(error_code=code), empty body]."""
    return encode_response(correlation_id or 0, api or 0, None, error_code=code, error_message=message)


def decode_response(frames: Sequence[FrameLike]) -> Response:
    """Parse [header, body, *payloads]. The body is None when the envelope carries an error.
    Raises WireError (CORRUPT_MESSAGE; correlation id set when the header was readable)."""
    if len(frames) < 2:
        raise WireError(CORRUPT_MESSAGE, f"expected at least 2 frames (header, body), got {len(frames)}")
    header = header_pb2.ResponseHeader()
    try:
        header.ParseFromString(_buf(frames[0]))
    except Exception as e:
        raise WireError(CORRUPT_MESSAGE, f"unparsable response header: {e}") from None
    api = header.api
    if header.error_code != NONE:
        return Response(header, api, None, list(frames[2:]))
    spec = APIS.get(api)
    if spec is None:
        raise WireError(CORRUPT_MESSAGE, f"response for unknown api {api_name(api)}",
                        header.correlation_id, api)
    body = spec.response_type()
    try:
        body.ParseFromString(_buf(frames[1]))
    except Exception as e:
        raise WireError(CORRUPT_MESSAGE, f"unparsable {spec.name} response body: {e}",
                        header.correlation_id, api) from None
    return Response(header, api, body, list(frames[2:]))


def synthetic_response(correlation_id: int, api: int, code: int, message: str) -> Response:
    """A Response made on the client side (timeout, undecodable reply) so callers can match it."""
    header = header_pb2.ResponseHeader(correlation_id=correlation_id, api=api, error_code=code,
                                       error_message=message)
    return Response(header, api, None, [])
