"""`riverbed top`: a live view of a running fleet, read from every process's Prometheus endpoint.

    riverbed top --data-dir run                 # a local fleet (its fleet.json names the endpoints)
    riverbed top --prometheus-config prometheus.yml   # the scrape config Riverbed writes
    riverbed top --endpoint http://host:9300/metrics --endpoint ...
    riverbed top --data-dir run --once          # one frame on stdout (two scrapes --interval apart)

Shows per topic records/s and MB/s in and out, under-replicated and offline partitions, the
active controller, requests and errors per second per process with its memory, and the lag of
each consumer group. Rates are the difference of two scrapes over the time between them.

`Sample`/`frame_data` are pure (parsed scrapes in, numbers out); the rest fetches and draws.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Iterable

__all__ = ["Sample", "Target", "frame_data", "parse_metrics", "targets_from_fleet",
           "targets_from_prometheus_config", "add_command"]

Key = tuple[str, tuple[tuple[str, str], ...]]     # (metric name, sorted labels)


@dataclass(frozen=True)
class Target:
    name: str
    role: str
    url: str


@dataclass
class Sample:
    """One scrape of one process: series -> value (None when the process did not answer)."""
    target: Target
    at: float
    values: dict[Key, float] | None

    def get(self, name: str, **labels: str) -> float:
        """Sum of the series named `name` whose labels include `labels`."""
        if not self.values:
            return 0.0
        total = 0.0
        want = set(labels.items())
        for (n, lab), v in self.values.items():
            if n == name and want <= set(lab):
                total += v
        return total

    def series(self, name: str) -> list[tuple[dict[str, str], float]]:
        if not self.values:
            return []
        return [(dict(lab), v) for (n, lab), v in self.values.items() if n == name]


_IGNORED_LABELS = {"otel_scope_name", "otel_scope_schema_url", "otel_scope_version"}


def parse_metrics(text: str) -> dict[Key, float]:
    """Prometheus text format -> {(series name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families
    out: dict[Key, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k not in _IGNORED_LABELS))
            out[(s.name, labels)] = out.get((s.name, labels), 0.0) + float(s.value)
    return out


# -- where the endpoints are --------------------------------------------------------------------

def targets_from_fleet(data_dir: str) -> list[Target]:
    with open(f"{data_dir}/fleet.json", encoding="utf-8") as f:
        state = json.load(f)
    out = []
    for p in state.get("processes", []):
        url = (p.get("extra") or {}).get("metrics_endpoint")
        if url:
            out.append(Target(p["name"], p["role"], url))
    return out


_TARGET = re.compile(r'^\s*-\s*targets:\s*\[\s*"([^"]+)"\s*\]')
_LABEL = re.compile(r'^\s*(role|process):\s*"([^"]*)"')


def targets_from_prometheus_config(text: str, metrics_path: str = "/metrics") -> list[Target]:
    """The targets of a scrape config in the shape Riverbed writes (deploy/prometheus.py and the
    Ansible template): one `- targets: ["host:port"]` per process, labels role and process."""
    out: list[Target] = []
    cur: dict[str, str] | None = None
    for line in text.splitlines():
        m = _TARGET.match(line)
        if m:
            if cur:
                out.append(Target(cur.get("process", cur["addr"]), cur.get("role", "?"),
                                  f"http://{cur['addr']}{metrics_path}"))
            cur = {"addr": m.group(1)}
            continue
        m = _LABEL.match(line)
        if m and cur is not None:
            cur[m.group(1)] = m.group(2)
    if cur:
        out.append(Target(cur.get("process", cur["addr"]), cur.get("role", "?"),
                          f"http://{cur['addr']}{metrics_path}"))
    return out


def scrape(targets: Iterable[Target], timeout_s: float = 2.0) -> list[Sample]:
    out = []
    for t in targets:
        now = time.monotonic()
        try:
            with urllib.request.urlopen(t.url, timeout=timeout_s) as r:
                values = parse_metrics(r.read().decode("utf-8", "replace"))
        except (OSError, ValueError):
            values = None
        out.append(Sample(t, now, values))
    return out


# -- the numbers of a frame ---------------------------------------------------------------------

@dataclass
class FrameData:
    controller: str | None = None
    controller_epoch: int | None = None
    active_controllers: int = 0
    offline_partitions: int = 0
    under_replicated: int = 0
    topics: dict[str, dict[str, float]] = field(default_factory=dict)
    processes: list[dict] = field(default_factory=list)
    groups: dict[str, dict[str, float]] = field(default_factory=dict)


def _rate(new: Sample, old: Sample | None, name: str, **labels: str) -> float:
    if old is None or not old.values or not new.values or new.at <= old.at:
        return 0.0
    return max(0.0, (new.get(name, **labels) - old.get(name, **labels)) / (new.at - old.at))


def frame_data(now: list[Sample], before: list[Sample]) -> FrameData:
    prev = {s.target.url: s for s in before}
    fd = FrameData()
    for s in now:
        old = prev.get(s.target.url)
        role = s.target.role
        up = s.values is not None
        requests = errors = 0.0
        if up:
            if role == "controller":
                active = s.get("riverbed_controller_active_controller_count")
                if active >= 1:
                    fd.active_controllers += 1
                    fd.controller = s.target.name
                    fd.controller_epoch = int(s.get("riverbed_controller_epoch"))
                    fd.offline_partitions = int(s.get("riverbed_controller_offline_partitions_count"))
            if role == "storage_node":
                fd.under_replicated += int(s.get("riverbed_server_under_replicated_partitions"))
                for labels, _ in s.series("riverbed_server_messages_in_total"):
                    fd.topics.setdefault(labels["topic"], {})
                for labels, _ in s.series("riverbed_server_bytes_out_bytes_total"):
                    fd.topics.setdefault(labels["topic"], {})
                for topic, row in fd.topics.items():
                    row["records_in"] = row.get("records_in", 0.0) + _rate(
                        s, old, "riverbed_server_messages_in_total", topic=topic)
                    row["bytes_in"] = row.get("bytes_in", 0.0) + _rate(
                        s, old, "riverbed_server_bytes_in_bytes_total", topic=topic)
                    row["bytes_out"] = row.get("bytes_out", 0.0) + _rate(
                        s, old, "riverbed_server_bytes_out_bytes_total", topic=topic)
            if role == "offset_manager":
                for labels, v in s.series("riverbed_group_lag"):
                    g = fd.groups.setdefault(labels["group"], {"lag": 0.0, "partitions": 0})
                    g["lag"] += v
                    g["partitions"] += 1
            prefix = {"storage_node": "riverbed_server", "gateway": "riverbed_gateway"}.get(
                role, f"riverbed_{role}")
            requests = _rate(s, old, f"{prefix}_requests_total")
            errors = _rate(s, old, f"{prefix}_request_errors_total")
        fd.processes.append({
            "name": s.target.name, "role": role, "up": up, "requests_per_s": requests,
            "errors_per_s": errors,
            "rss_mb": s.get("riverbed_process_memory_rss_bytes") / 1e6 if up else 0.0})
    return fd


# -- drawing ------------------------------------------------------------------------------------

def render(fd: FrameData):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text()
    if fd.controller:
        head.append(f"controller: {fd.controller} (epoch {fd.controller_epoch})  ")
    else:
        head.append("controller: NONE ACTIVE  ", style="bold red")
    if fd.active_controllers > 1:
        head.append(f"{fd.active_controllers} active controllers!  ", style="bold red")
    head.append(f"offline partitions: {fd.offline_partitions}  ",
                style="bold red" if fd.offline_partitions else "green")
    head.append(f"under-replicated: {fd.under_replicated}",
                style="bold yellow" if fd.under_replicated else "green")

    topics = Table(title="topics", expand=True)
    for col in ("topic", "records/s in", "MB/s in", "MB/s out"):
        topics.add_column(col, justify="left" if col == "topic" else "right")
    for name in sorted(fd.topics):
        row = fd.topics[name]
        topics.add_row(name, f"{row.get('records_in', 0):,.0f}",
                       f"{row.get('bytes_in', 0) / 1e6:.2f}", f"{row.get('bytes_out', 0) / 1e6:.2f}")

    procs = Table(title="processes", expand=True)
    for col in ("process", "role", "state", "requests/s", "errors/s", "RSS MB"):
        procs.add_column(col, justify="left" if col in ("process", "role", "state") else "right")
    for p in fd.processes:
        procs.add_row(p["name"], p["role"], "up" if p["up"] else "[red]DOWN[/red]",
                      f"{p['requests_per_s']:,.0f}", f"{p['errors_per_s']:,.1f}",
                      f"{p['rss_mb']:.0f}")

    groups = Table(title="consumer groups", expand=True)
    for col in ("group", "partitions", "lag"):
        groups.add_column(col, justify="left" if col == "group" else "right")
    for name in sorted(fd.groups):
        g = fd.groups[name]
        groups.add_row(name, str(int(g["partitions"])), f"{g['lag']:,.0f}")
    return Group(head, topics, procs, groups)


def add_command(subparsers) -> None:
    p = subparsers.add_parser(
        "top", help="a live view of a fleet from its metrics endpoints",
        description="A live view of a running fleet: throughput per topic, under-replicated and "
                    "offline partitions, the active controller, requests and errors per process, "
                    "lag per consumer group. Reads each process's Prometheus endpoint.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data-dir", help="a local fleet's state directory (its fleet.json)")
    src.add_argument("--prometheus-config", metavar="FILE",
                     help="a scrape config as Riverbed writes it (prometheus.yml)")
    src.add_argument("--endpoint", action="append", metavar="URL",
                     help="a metrics endpoint, http://host:port/metrics (repeatable)")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between frames (2)")
    p.add_argument("--once", action="store_true",
                   help="print one frame (two scrapes --interval apart) and exit")
    p.set_defaults(func=_run)


def _targets(args: argparse.Namespace) -> list[Target]:
    if args.data_dir:
        return targets_from_fleet(args.data_dir)
    if args.prometheus_config:
        with open(args.prometheus_config, encoding="utf-8") as f:
            return targets_from_prometheus_config(f.read())
    return [Target(u, "?", u) for u in args.endpoint]


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live

    try:
        targets = _targets(args)
    except (OSError, ValueError, KeyError) as e:
        print(f"Error: cannot read the endpoints: {e}", file=sys.stderr)
        return 2
    if not targets:
        print("Error: no metrics endpoints found", file=sys.stderr)
        return 2
    before = scrape(targets)
    if args.once:
        time.sleep(args.interval)
        Console().print(render(frame_data(scrape(targets), before)))
        return 0
    with Live(render(frame_data(before, [])), refresh_per_second=4, screen=False) as live:
        while True:
            time.sleep(args.interval)
            now = scrape(targets)
            live.update(render(frame_data(now, before)))
            before = now
