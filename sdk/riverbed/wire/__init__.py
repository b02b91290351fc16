"""Riverbed's wire: API table, multipart framing, and the synchronous client channel.

    from riverbed.wire import APIS, ApiKey, Channel, encode_request, decode_response
"""
from riverbed.wire.apis import APIS, ApiKey, ApiSpec, api_name
from riverbed.wire.framing import (
    Request,
    Response,
    WireError,
    current_trace_context,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    error_response,
    synthetic_response,
)

__all__ = [
    "APIS", "ApiKey", "ApiSpec", "api_name", "Request", "Response", "WireError",
    "current_trace_context", "decode_request", "decode_response", "encode_request",
    "encode_response", "error_response", "synthetic_response", "Channel",
]


def __getattr__(name):  # Channel imports zmq: load it only when asked for
    if name == "Channel":
        from riverbed.wire.client import Channel
        globals()["Channel"] = Channel      # found directly from now on (and by pdoc)
        return Channel
    raise AttributeError(name)
