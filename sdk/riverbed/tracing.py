"""OpenTelemetry spans for the SDK, off unless the application has set a tracer provider
(`opentelemetry.trace.set_tracer_provider(...)`): then produce requests become PRODUCER spans
(`send <topic>`), fetches CONSUMER spans (`poll <topic>`, operation type `receive`), group joins,
syncs and commits CLIENT spans (`JoinGroup <group>`, `SyncGroup <group>`, `commit <topic>`),
with OpenTelemetry's messaging attribute names, and their context travels in the request header
to the gateway and on to the storage node or the group's coordinator / offset manager.

`tracer()` is called per request, never per record; without a configured provider it costs one
isinstance check.
"""
from __future__ import annotations

import contextlib
from typing import Any

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace import ProxyTracerProvider as _Proxy
    from opentelemetry.trace import SpanKind, Status, StatusCode, use_span
except ImportError:  # pragma: no cover - opentelemetry-api is a dependency
    _trace = None
    _Proxy = None

__all__ = ["tracer", "current_span", "SYSTEM", "SpanKind", "Status", "StatusCode", "use_span"]

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


_NO_SPAN = contextlib.nullcontext()


def current_span(name: str, kind, attributes: dict[str, Any]):
    """A context manager making a new span current while tracing (its context then travels in
    the headers of the requests sent inside; an exception is recorded on it), else a no-op one
    that yields None. For calls that wait for their answer (group join/sync, commits)."""
    t = tracer()
    if t is None:
        return _NO_SPAN
    return t.start_as_current_span(name, kind=kind, attributes=attributes)
