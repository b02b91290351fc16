"""Telemetry every service shares: an OpenTelemetry MeterProvider exported as a Prometheus text
endpoint (`metrics.port`) and, when the standard `OTEL_EXPORTER_OTLP_*` variables are set, over
OTLP; process metrics (CPU, RSS, open files, GC pauses); and the tracer provider from the
standard `OTEL_*` variables.

Hot paths never call an OpenTelemetry instrument (about 7 us per call with attributes, measured
here): they bump plain counters (`RequestMetrics`, `TopicCounters` in
services.common.metrics_core) and the instruments registered here are *observable* — their
callbacks read those counters when Prometheus scrapes or the OTLP reader collects.

    tel = Telemetry("storage_node", "1", host="127.0.0.1", port=cfg.metrics_port)
    tel.counter("riverbed.server.bytes_in", lambda: [(n, {"topic": t}) for t, n in ...], unit="By")
    tel.gauge("riverbed.server.leader_count", lambda: [(count, {})])
    url = tel.start()          # "http://127.0.0.1:PORT/metrics", None when port < 0
    ...
    tel.shutdown()

Names use the `riverbed.` prefix; Prometheus sees them with dots as underscores, the unit as a
suffix and `_total` on counters (`riverbed_server_bytes_in_bytes_total`).
"""
from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource

log = logging.getLogger(__name__)

__all__ = ["Telemetry", "Observations", "otlp_configured", "setup_tracing"]

Observations = Callable[[], Iterable[tuple[float, dict[str, Any]]]]

# Seconds a stop waits for the metrics endpoint's serve loop to end (Telemetry.shutdown).
SHUTDOWN_WAIT_S = 2.0
_OTLP_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
_OTLP_TRACE_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def otlp_configured(env: dict[str, str] | None = None, kind: str = "metrics") -> bool:
    env = os.environ if env is None else env
    names = _OTLP_VARS if kind == "metrics" else _OTLP_TRACE_VARS
    exporter = env.get(f"OTEL_{kind.upper()}_EXPORTER", "")
    return any(env.get(n) for n in names) and exporter.lower() != "none"


def setup_tracing(service: str, instance: str):
    """A global TracerProvider exporting over OTLP/HTTP when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT
    is set; sampling from OTEL_TRACES_SAMPLER(_ARG) (the SDK reads them). Without it the
    services trace nothing (the API's no-op provider). Returns the provider (shut it down at
    exit to export what is batched), or None."""
    if not otlp_configured(kind="traces"):
        return None
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    provider = TracerProvider(resource=_resource(service, instance))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def _resource(service: str, instance: str) -> Resource:
    return Resource.create({"service.name": f"riverbed-{service.replace('_', '-')}",
                            "service.instance.id": str(instance),
                            "service.namespace": "riverbed"})


class _GcPauses:
    """GC pauses from gc.callbacks: count and total seconds per generation."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            gen = info.get("generation", 0)
            self.count[gen] += 1
            self.seconds[gen] += time.perf_counter() - self._start


class Telemetry:
    """`port` < 0 turns metrics off: no endpoint, no instruments, no process metrics (the
    services then also stop timing requests); OTLP still reads nothing."""

    def __init__(self, service: str, instance: str | int, *, host: str = "127.0.0.1",
                 port: int = -1, process_metrics: bool = True):
        from prometheus_client import CollectorRegistry
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        self.service = service
        self.instance = str(instance)
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=True)
        readers: list = []
        if port >= 0:
            readers.append(PrometheusMetricReader(registry=self.registry))
        if port >= 0 and otlp_configured():
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        self.provider = MeterProvider(metric_readers=readers,
                                      resource=_resource(service, self.instance))
        self.meter = self.provider.get_meter("riverbed")
        self._server = None
        self._thread: threading.Thread | None = None
        self.endpoint: str | None = None
        self._gc: _GcPauses | None = None
        if process_metrics and port >= 0:
            self._process_metrics()

    # -- instruments: observable, read at collection -----------------------------------------
    @staticmethod
    def _wrap(fn: Observations) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            try:
                return [Observation(v, a) for v, a in fn()]
            except Exception:      # a metric must never break a scrape or the service
                log.exception("metric callback failed")
                return []
        return callback

    def counter(self, name: str, fn: Observations, *, unit: str = "", description: str = "") -> None:
        """A monotonic total (requests, bytes) read from `fn` at collection."""
        self.meter.create_observable_counter(name, [self._wrap(fn)], unit=unit,
                                             description=description)

    def gauge(self, name: str, fn: Observations, *, unit: str = "", description: str = "") -> None:
        """A value now (partition counts, sizes, lag) read from `fn` at collection."""
        self.meter.create_observable_gauge(name, [self._wrap(fn)], unit=unit,
                                           description=description)

    def _process_metrics(self) -> None:
        import psutil
        proc = psutil.Process()
        self._gc = gc_pauses = _GcPauses()
        gc.callbacks.append(gc_pauses)

        def cpu():
            t = proc.cpu_times()
            return [(t.user, {"state": "user"}), (t.system, {"state": "system"})]

        def open_files():
            try:
                return [(proc.num_fds(), {})]
            except (AttributeError, psutil.Error):
                return []

        self.counter("riverbed.process.cpu.time", cpu, unit="s",
                     description="CPU time of this process")
        self.gauge("riverbed.process.memory.rss", lambda: [(proc.memory_info().rss, {})],
                   unit="By", description="resident set size")
        self.gauge("riverbed.process.open_file_descriptors", open_files,
                   description="open file descriptors (sockets included)")
        self.counter("riverbed.process.gc.pauses", lambda: [
            (c, {"generation": str(g)}) for g, c in enumerate(gc_pauses.count)],
            description="garbage collections")
        self.counter("riverbed.process.gc.pause.time", lambda: [
            (s, {"generation": str(g)}) for g, s in enumerate(gc_pauses.seconds)],
            unit="s", description="time spent in garbage collection")

    # -- the endpoint ------------------------------------------------------------------------
    def start(self) -> str | None:
        """Serve the Prometheus text format on http://host:port/metrics (port 0 picks a free
        one; a negative port serves nothing). Returns the URL."""
        if self.port < 0:
            return None
        from prometheus_client import start_http_server
        self._server, self._thread = start_http_server(self.port, addr=self.host,
                                                       registry=self.registry)
        port = self._server.server_port
        self.endpoint = f"http://{self.host}:{port}/metrics"
        log.info("[%s-%s] metrics on %s", self.service, self.instance, self.endpoint)
        return self.endpoint

    def shutdown(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            # BaseServer.shutdown() waits for serve_forever to end, forever: a scrape still
            # being answered, or a server thread that never got to serve_forever, held a
            # stopping service here until it was killed. Wait a bounded time instead; the
            # server thread is a daemon.
            stopper = threading.Thread(target=server.shutdown, daemon=True,
                                       name="metrics-endpoint-shutdown")
            stopper.start()
            stopper.join(SHUTDOWN_WAIT_S)
            if stopper.is_alive():
                log.warning("[%s-%s] metrics endpoint did not stop within %.0f s; closing it",
                            self.service, self.instance, SHUTDOWN_WAIT_S)
            server.server_close()
        if self._gc is not None:
            try:
                gc.callbacks.remove(self._gc)
            except ValueError:
                pass
            self._gc = None
        try:
            self.provider.shutdown()
        except Exception:   # noqa: BLE001 - an exporter that cannot flush must not block a stop
            log.debug("meter provider shutdown failed", exc_info=True)
