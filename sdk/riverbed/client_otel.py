"""The clients' Kafka metrics (riverbed.client_metrics) as OpenTelemetry instruments, when the
application configured a MeterProvider (`opentelemetry.metrics.set_meter_provider(...)`) before
creating the client; otherwise nothing is registered and nothing costs anything (one isinstance
check per client construction), like riverbed.tracing.

The instruments are observable: at collection their callbacks read each live client's
`metrics()` dict (the same counters `metrics()` returns), so the produce and consume paths never
call OpenTelemetry. Names: `riverbed.producer.<kafka name, - as _>` and
`riverbed.consumer.<...>` (`riverbed.producer.record_send_rate`,
`riverbed.consumer.records_lag_max`), attribute `client.id`; plus `riverbed.producer.errors`
(attribute `error`: Kafka's error name) and `riverbed.consumer.records_lag` (attributes
`messaging.destination.name`, `messaging.destination.partition.id`).

Instruments are created once per MeterProvider and kind; clients join a weak set on construction
and leave it on close().
"""
from __future__ import annotations

import logging
import time
import weakref
from typing import Any, Callable

from riverbed.client_metrics import CONSUMER_METRICS, PRODUCER_METRICS

try:
    from opentelemetry import metrics as _otel_metrics
    from opentelemetry.metrics import NoOpMeterProvider as _NoOp
    from opentelemetry.metrics import Observation as _Observation
    from opentelemetry.metrics._internal import _ProxyMeterProvider as _Proxy
except ImportError:  # pragma: no cover - opentelemetry-api is a dependency
    _otel_metrics = None  # type: ignore[assignment]

__all__ = ["register", "unregister", "meter_configured"]

log = logging.getLogger(__name__)

_TABLES = {"producer": PRODUCER_METRICS, "consumer": CONSUMER_METRICS}
# a client's metrics() dict is read once per collection, not once per instrument
_SNAPSHOT_REUSE_S = 0.5


def _provider():
    return _otel_metrics.get_meter_provider()


def meter_configured() -> bool:
    if _otel_metrics is None:
        return False
    return not isinstance(_provider(), (_Proxy, _NoOp))


class _Clients:
    """The instruments of one kind under one MeterProvider, reading every live client."""

    def __init__(self, kind: str, meter) -> None:
        self.kind = kind
        self.clients: weakref.WeakSet = weakref.WeakSet()
        self._cache: dict[int, tuple[float, dict[str, Any]]] = {}
        prefix = f"riverbed.{kind}."
        for key, (itype, unit, desc) in _TABLES[kind].items():
            cb = self._callback(key)
            name = prefix + key.replace("-", "_")
            if itype == "counter":
                meter.create_observable_counter(name, [cb], unit=unit, description=desc)
            else:
                meter.create_observable_gauge(name, [cb], unit=unit, description=desc)
        if kind == "producer":
            meter.create_observable_counter(
                prefix + "errors", [self._errors], unit="{error}",
                description="batches retried or failed, per Kafka error name")
        else:
            meter.create_observable_gauge(
                prefix + "records_lag", [self._lag], unit="{record}",
                description="high watermark - position per assigned partition")

    def _snapshots(self):
        now = time.monotonic()
        out = []
        live = set()
        for c in list(self.clients):
            key = id(c)
            live.add(key)
            hit = self._cache.get(key)
            if hit is None or now - hit[0] > _SNAPSHOT_REUSE_S:
                try:
                    hit = self._cache[key] = (now, c.metrics())
                except Exception:        # a closed or broken client: skip it, never the scrape
                    log.debug("metrics() of %r failed", c, exc_info=True)
                    continue
            out.append((c.client_id, hit[1]))
        for key in list(self._cache):
            if key not in live:
                del self._cache[key]
        return out

    def _callback(self, key: str) -> Callable:
        def callback(options):
            out = []
            for client_id, m in self._snapshots():
                v = m.get(key)
                if isinstance(v, (int, float)) and v == v:       # NaN: nothing measured
                    out.append(_Observation(v, {"client.id": client_id}))
            return out
        return callback

    def _errors(self, options):
        return [_Observation(n, {"client.id": cid, "error": e})
                for cid, m in self._snapshots() for e, n in m.get("errors-by-code", {}).items()]

    def _lag(self, options):
        out = []
        for cid, m in self._snapshots():
            for tp, lag in m.get("records-lag", {}).items():
                topic, _, partition = tp.rpartition("-")
                out.append(_Observation(lag, {"client.id": cid,
                                              "messaging.destination.name": topic,
                                              "messaging.destination.partition.id": partition}))
        return out


_registries: dict[tuple[int, str], _Clients] = {}


def register(kind: str, client) -> None:
    """Expose `client.metrics()` (a Producer or Consumer with a client_id) through the
    application's MeterProvider, if it configured one."""
    if not meter_configured():
        return
    provider = _provider()
    key = (id(provider), kind)
    reg = _registries.get(key)
    if reg is None:
        for k in [k for k in _registries if k[1] == kind]:
            del _registries[k]         # a provider replaced: its instruments went with it
        reg = _registries[key] = _Clients(kind, provider.get_meter("riverbed.sdk"))
    reg.clients.add(client)


def unregister(client) -> None:
    for reg in _registries.values():
        reg.clients.discard(client)
