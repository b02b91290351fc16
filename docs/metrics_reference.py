"""The metrics reference, generated from the code that registers the metrics.

- Services: every `tel.counter(...)` / `tel.gauge(...)` call under services/ (the observable
  instruments of services.common.telemetry), found by reading the source: the name, the type, the
  unit, the description, and the attributes (Prometheus labels) its callback sets: the string
  keys of the dict literals in the callback, in the local function it names, or in the
  services.common.metrics_core method it calls. A name built at run time must be one this
  module knows how to expand (SHARDED_PREFIX); anything else is an error, so the page cannot
  silently miss a metric.
- The SDK: the instruments riverbed.client_otel registers (recorded from a stand-in meter, and
  their attributes from their callbacks over a stand-in client), and the keys of the clients'
  `metrics()` dicts (riverbed.client_metrics).
- Prometheus names: what the OpenTelemetry Prometheus exporter makes of each instrument (dots
  as underscores, the unit as a suffix, `_total` on counters), computed with the exporter.

The docs build (docs/hooks.py) writes `page()` to reference/metrics.md; tests/unit/sdk/
test_docs_build.py checks that the series the Grafana dashboard queries are on it.
"""
from __future__ import annotations

import ast
import importlib
import pathlib
import sys
from typing import Any, NamedTuple

REPO = pathlib.Path(__file__).resolve().parents[1]
SERVICES = REPO / "services"
METRICS_CORE = SERVICES / "common" / "metrics_core.py"
# services.common.sharded_service registers f"{prefix}.requests" etc. with prefix
# "riverbed." + the role's name, for both sharded roles
SHARDED_PREFIX = {"prefix": ("riverbed.group_coordinator", "riverbed.offset_manager")}
ROLE_OF_PACKAGE = {"storage_node": "storage node", "controller": "controller",
                   "gateway": "gateway", "group_coordinator": "group coordinator",
                   "offset_manager": "offset manager"}
KINDS = {"counter": "counter", "gauge": "gauge"}

GENERATED = ("<!-- generated from the code that registers the metrics by docs/metrics_reference.py "
             "when the site is built: edit the code, not this page -->")


class Metric(NamedTuple):
    name: str                   # OpenTelemetry name (riverbed.server.bytes_in)
    kind: str                   # counter | gauge
    unit: str
    description: str
    labels: tuple[str, ...]
    roles: tuple[str, ...]      # who serves it
    source: str                 # file:line


class UnresolvedMetric(Exception):
    """A registration whose name this module cannot work out."""


def _defs(tree: ast.AST) -> dict[str, ast.AST]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                                ast.AsyncFunctionDef))}


_CORE_DEFS = None


def _core_defs() -> dict[str, ast.AST]:
    global _CORE_DEFS
    if _CORE_DEFS is None:
        _CORE_DEFS = _defs(ast.parse(METRICS_CORE.read_text()))
    return _CORE_DEFS


def _labels(expr: ast.AST, local: dict[str, ast.AST], seen: set[int]) -> set[str]:
    """String keys of the dict literals in `expr` and in the functions it names."""
    out: set[str] = set()
    if id(expr) in seen:
        return out
    seen.add(id(expr))
    for node in ast.walk(expr):
        if isinstance(node, ast.Dict):
            out.update(k.value for k in node.keys
                       if isinstance(k, ast.Constant) and isinstance(k.value, str))
        elif isinstance(node, ast.Name) and node.id in local:
            out |= _labels(local[node.id], local, seen)
        elif isinstance(node, ast.Attribute) and node.attr in _core_defs():
            out |= _labels(_core_defs()[node.attr], local, seen)
    return out


def _text(node: ast.AST | None, module: str) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Constant):
        return str(node.value)
    # an f-string description: evaluated in its module (module constants)
    namespace = vars(importlib.import_module(module))
    return str(eval(compile(ast.Expression(node), "<description>", "eval"), dict(namespace)))


def _names(node: ast.AST, path: pathlib.Path, line: int) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts: list[list[str]] = [[""]]
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append([str(v.value)])
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) \
                    and v.value.id in SHARDED_PREFIX:
                parts.append(list(SHARDED_PREFIX[v.value.id]))
            else:
                raise UnresolvedMetric(f"{path}:{line}: a metric name built from "
                                       f"{ast.unparse(v)}: teach docs/metrics_reference.py")
        names = [""]
        for options in parts:
            names = [n + o for n in names for o in options]
        return names
    raise UnresolvedMetric(f"{path}:{line}: a metric name that is not a string: "
                           f"{ast.unparse(node)}")


def _role(path: pathlib.Path, name: str) -> tuple[str, ...]:
    parts = path.relative_to(SERVICES).parts
    if parts[0] in ROLE_OF_PACKAGE:
        return (ROLE_OF_PACKAGE[parts[0]],)
    for package, role in ROLE_OF_PACKAGE.items():
        if name.startswith(f"riverbed.{package}."):
            return (role,)
    return ("every service",)


def service_metrics() -> list[Metric]:
    """Every instrument the services register, in file order."""
    out: list[Metric] = []
    for path in sorted(SERVICES.rglob("*.py")):
        source = path.read_text()
        if ".counter" not in source and ".gauge" not in source:
            continue
        tree = ast.parse(source)
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                               ast.AsyncFunctionDef))]:
            local = _defs(fn)
            local.pop(fn.name, None)
            aliases: dict[str, str] = {}
            for node in ast.walk(fn):         # c, g = tel.counter, tel.gauge
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple) and \
                        len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
                    for t, v in zip(node.targets[0].elts, node.value.elts):
                        if isinstance(t, ast.Name) and isinstance(v, ast.Attribute) and \
                                v.attr in KINDS:
                            aliases[t.id] = v.attr
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                f = node.func
                kind = (f.attr if isinstance(f, ast.Attribute) and f.attr in KINDS else
                        aliases.get(f.id) if isinstance(f, ast.Name) else None)
                if kind is None:
                    continue
                first = node.args[0]
                if not (isinstance(first, ast.JoinedStr) or (
                        isinstance(first, ast.Constant) and isinstance(first.value, str)
                        and first.value.startswith("riverbed."))):
                    continue
                kw = {k.arg: k.value for k in node.keywords}
                labels = tuple(sorted(_labels(node.args[1], local, set()))) \
                    if len(node.args) > 1 else ()
                for name in _names(first, path, node.lineno):
                    out.append(Metric(name, KINDS[kind], _text(kw.get("unit"), module),
                                      _text(kw.get("description"), module), labels,
                                      _role(path, name),
                                      f"{path.relative_to(REPO)}:{node.lineno}"))
    # one entry per name (a role may register the same name from two places: keep the first)
    seen: dict[str, Metric] = {}
    for m in out:
        seen.setdefault(m.name, m)
    return list(seen.values())


class _RecordingMeter:
    def __init__(self) -> None:
        self.instruments: list[tuple[str, str, str, str, list]] = []

    def create_observable_counter(self, name, callbacks, unit="", description=""):
        self.instruments.append((name, "counter", unit, description, callbacks))

    def create_observable_gauge(self, name, callbacks, unit="", description=""):
        self.instruments.append((name, "gauge", unit, description, callbacks))


class _StandInClient:
    """A client whose metrics() has every key: the callbacks then show their attributes."""

    def __init__(self, kind: str) -> None:
        from riverbed.client_metrics import CONSUMER_METRICS, PRODUCER_METRICS
        table = PRODUCER_METRICS if kind == "producer" else CONSUMER_METRICS
        self.client_id = "app-1"
        self._metrics: dict[str, Any] = {k: 1.0 for k in table}
        self._metrics["errors-by-code"] = {"NOT_LEADER_FOR_PARTITION": 1}
        self._metrics["records-lag"] = {"orders-0": 1}

    def metrics(self) -> dict[str, Any]:
        return self._metrics


def sdk_metrics() -> list[Metric]:
    """The instruments riverbed.client_otel registers for producers and consumers."""
    from riverbed import client_otel
    out = []
    for kind in ("producer", "consumer"):
        meter = _RecordingMeter()
        clients = client_otel._Clients(kind, meter)
        client = _StandInClient(kind)
        clients.clients.add(client)
        for name, itype, unit, desc, callbacks in meter.instruments:
            labels: set[str] = set()
            for cb in callbacks:
                for obs in cb(None):
                    labels.update(obs.attributes or {})
            out.append(Metric(name, itype, unit, desc, tuple(sorted(labels)),
                              (f"SDK {kind}",), "sdk/riverbed/client_otel.py"))
    return out


def prometheus_names(metrics: list[Metric]) -> dict[str, str]:
    """OpenTelemetry name -> the series name the services' Prometheus endpoint shows, as the
    exporter (opentelemetry-exporter-prometheus) makes it."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.metrics import Observation
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import CollectorRegistry
    out: dict[str, str] = {}
    for m in metrics:
        registry = CollectorRegistry(auto_describe=True)
        provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
        meter = provider.get_meter("docs")
        create = meter.create_observable_counter if m.kind == "counter" else \
            meter.create_observable_gauge
        create(m.name, [lambda options: [Observation(1)]], unit=m.unit)
        families = [f for f in registry.collect() if f.samples and f.type != "info"]
        name = families[0].samples[0].name if families else "?"
        provider.shutdown()
        out[m.name] = name
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(metrics: list[Metric], prom: dict[str, str], with_roles: bool) -> list[str]:
    head = "| Prometheus series | type | labels | meaning |" if not with_roles else \
        "| Prometheus series | type | labels | served by | meaning |"
    lines = [head, "|---|---|---|---|---|" if with_roles else "|---|---|---|---|"]
    for m in metrics:
        labels = ", ".join(f"`{label}`" for label in m.labels) or "—"
        unit = f" ({m.unit})" if m.unit else ""
        cells = [f"`{prom[m.name]}`<br>`{m.name}`{unit}", m.kind, labels]
        if with_roles:
            cells.append(", ".join(m.roles))
        cells.append(_cell(m.description))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def page() -> str:
    services = service_metrics()
    sdk = sdk_metrics()
    prom = prometheus_names(services + sdk)
    lines = ["# Metrics", "", GENERATED, "",
             "Every service serves its metrics in Prometheus' text format on "
             "`http://<host.name>:<metrics.port>/metrics` (`metrics.port` 0 picks a free port, "
             "-1 turns metrics off; `riverbed fleet status --json` lists each process's "
             "`metrics_endpoint`). The instruments are OpenTelemetry's observable ones, read "
             "when scraped; with the standard `OTEL_EXPORTER_OTLP_*` variables set they also go "
             "out over OTLP. Each row gives the Prometheus series and, below it, the "
             "OpenTelemetry name and unit; counters are totals since the process started. See "
             "[Observability](../operations/observability.md) for dashboards and alerts.", ""]
    by_role: dict[str, list[Metric]] = {}
    for m in services:
        by_role.setdefault(m.roles[0], []).append(m)
    order = ["every service", "storage node", "controller", "gateway", "group coordinator",
             "offset manager"]
    for role in sorted(by_role, key=lambda r: order.index(r) if r in order else len(order)):
        lines += [f"## {role[0].upper() + role[1:]}", ""]
        lines += _table(by_role[role], prom, with_roles=False)
        lines.append("")
    lines += ["## SDK clients (OpenTelemetry)", "",
              "When the application has set an OpenTelemetry MeterProvider before creating a "
              "client, the producer's and consumer's metrics are also observable instruments "
              "(`riverbed.client_otel`), read from the same counters as `metrics()`; the "
              "application's exporter decides where they go (the Prometheus names below are "
              "what a Prometheus exporter would make of them).", ""]
    lines += _table(sdk, prom, with_roles=True)
    lines += ["", "## SDK clients: `metrics()`", "",
              "`producer.metrics()` and `consumer.metrics()` return flat dicts with the Kafka "
              "clients' names (`riverbed.client_metrics`), counted per request, batch, poll "
              "and commit, never per record. `*-total` counts since the client started; "
              "`*-rate` is per second and `*-avg` / `*-max` cover two 30 s windows (Kafka's "
              "`metrics.num.samples` × `metrics.sample.window.ms`; NaN when nothing was "
              "measured in them); times in ms, sizes in bytes. Riverbed's earlier keys "
              "(`requests_sent`, `in_flight`, `records_lag`, ...) are there too.", ""]
    from riverbed.client_metrics import CONSUMER_METRICS, PRODUCER_METRICS
    for title, table in (("Producer", PRODUCER_METRICS), ("Consumer", CONSUMER_METRICS)):
        lines += [f"### {title}", "", "| key | type | unit | meaning |", "|---|---|---|---|"]
        lines += [f"| `{k}` | {t} | {_cell(u) or '—'} | {_cell(d)} |"
                  for k, (t, u, d) in table.items()]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(page())
