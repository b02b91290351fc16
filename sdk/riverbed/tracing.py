"""OpenTelemetry spans for the SDK, off unless the application has set a tracer provider
(`opentelemetry.trace.set_tracer_provider(...)`): then produce requests become PRODUCER spans
and fetches CONSUMER spans named after OpenTelemetry's messaging conventions, and their context
travels in the request header to the gateway and the storage node.

`tracer()` is called per request, never per record; without a configured provider it costs one
isinstance check.
"""
from __future__ import annotations

from typing import Any

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace import ProxyTracerProvider as _Proxy
    from opentelemetry.trace import SpanKind, Status, StatusCode, use_span
except ImportError:  # pragma: no cover - opentelemetry-api is a dependency
    _trace = None
    _Proxy = None

__all__ = ["tracer", "SYSTEM", "SpanKind", "Status", "StatusCode", "use_span"]

SYSTEM = "riverbed"
_cache: dict[int, Any] = {}


def tracer():
    """The SDK's tracer when the application configured a provider, else None."""
    if _trace is None:
        return None
    provider = _trace.get_tracer_provider()
    if isinstance(provider, _Proxy):
        return None
    t = _cache.get(id(provider))
    if t is None:
        _cache.clear()
        t = _cache[id(provider)] = provider.get_tracer("riverbed.sdk")
    return t
