"""Prometheus scrape configuration for a Riverbed fleet: one static target per process's metrics
endpoint, labelled with its role, process name and host, so dashboards can group by role.

    text = scrape_config([Target("storage-1", "storage_node", "127.0.0.1:9301", "127.0.0.1")])

The local fleet launcher writes it as D/prometheus.yml; the Ansible roles render the same shape
from their inventory. Pure: text in, text out.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["Target", "scrape_config", "target_of"]


@dataclasses.dataclass(frozen=True)
class Target:
    name: str          # process name, e.g. storage-1
    role: str          # storage_node, controller, gateway, group_coordinator, offset_manager
    address: str       # host:port of its metrics endpoint
    host: str          # the host it runs on (label)


def target_of(name: str, role: str, metrics_endpoint: str, host: str | None = None) -> Target:
    u = urlsplit(metrics_endpoint)
    if u.scheme != "http" or not u.hostname or not u.port:
        raise ValueError(f"{name}: metrics endpoint {metrics_endpoint!r} is not http://host:port/...")
    return Target(name, role, f"{u.hostname}:{u.port}", host or u.hostname)


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def scrape_config(targets: Iterable[Target], *, job: str = "riverbed",
                  scrape_interval: str = "5s") -> str:
    lines = ["# Prometheus scrape configuration for Riverbed (written by Riverbed; regenerated).",
             "global:", f"  scrape_interval: {scrape_interval}",
             f"  evaluation_interval: {scrape_interval}", "scrape_configs:",
             f"  - job_name: {_q(job)}", "    metrics_path: /metrics", "    static_configs:"]
    for t in sorted(targets, key=lambda t: (t.role, t.name)):
        lines += [f"      - targets: [{_q(t.address)}]", "        labels:",
                  f"          role: {_q(t.role)}", f"          process: {_q(t.name)}",
                  f"          host: {_q(t.host)}"]
    return "\n".join(lines) + "\n"
