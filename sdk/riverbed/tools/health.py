"""`cluster health`: one verdict on a running cluster, for people and for automation (the
Ansible rolling restart's gate).

    riverbed cluster health [--bootstrap-server URL] [--node-id ID ...] [--json]

Exit codes: 0 healthy; 1 unhealthy, with one line per reason on stderr (or in the JSON);
2 the cluster could not be asked (no gateway answered within --timeout-ms).

Unhealthy means any of (Kafka's operations chapter, "Monitoring": the two numbers an operator
must keep at zero, and the controller):
- no active controller;
- an offline partition (no leader);
- an under-replicated partition (ISR smaller than the replica list);
- a storage node named in some partition's replicas that is not registered (down);
- a storage node named with --node-id that is not registered, or not in the ISR of every
  partition it is a replica of (the gate after restarting that node).

`assess(...)` is the pure decision (tested directly); `_run` only asks the gateway.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

from riverbed.tools.common import add_bootstrap, bootstrap_of

__all__ = ["HealthReport", "assess", "add_command"]

EXIT_HEALTHY = 0
EXIT_UNHEALTHY = 1
EXIT_UNREACHABLE = 2


@dataclass
class HealthReport:
    healthy: bool
    controller_id: int
    live_nodes: list[int]
    partitions: int
    offline_partitions: list[str] = field(default_factory=list)
    under_replicated_partitions: list[str] = field(default_factory=list)
    down_nodes: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def _names(tps: Iterable[tuple[str, int]], limit: int = 10) -> str:
    tps = sorted(tps)
    shown = ", ".join(f"{t}-{p}" for t, p in tps[:limit])
    return shown + (f" and {len(tps) - limit} more" if len(tps) > limit else "")


def assess(controller_id: int, live_nodes: Iterable[int], partitions: Sequence,
           expected_nodes: Iterable[int] = ()) -> HealthReport:
    """The verdict from what the gateway reported. `partitions` are PartitionInfo-like objects
    (topic, partition, leader, replicas, isr)."""
    live = sorted(set(live_nodes))
    live_set = set(live)
    expected = sorted(set(expected_nodes))
    offline: list[tuple[str, int]] = []
    under: list[tuple[str, int]] = []
    down: set[int] = set()
    not_in_isr: dict[int, list[tuple[str, int]]] = {n: [] for n in expected}
    for p in partitions:
        tp = (p.topic, p.partition)
        if p.leader < 0:
            offline.append(tp)
        if len(set(p.isr)) < len(set(p.replicas)):
            under.append(tp)
        for r in p.replicas:
            if r not in live_set:
                down.add(r)
            if r in not_in_isr and r not in p.isr:
                not_in_isr[r].append(tp)
    reasons = []
    if controller_id < 0:
        reasons.append("no active controller")
    if offline:
        reasons.append(f"{len(offline)} offline partition(s) (no leader): {_names(offline)}")
    if under:
        reasons.append(f"{len(under)} under-replicated partition(s): {_names(under)}")
    for n in expected:
        if n not in live_set:
            down.add(n)
    for n in sorted(down):
        reasons.append(f"storage node {n} is not registered (down)")
    for n, tps in not_in_isr.items():
        if tps and n in live_set:
            reasons.append(f"storage node {n} is not in the ISR of {len(tps)} partition(s) "
                           f"it replicates: {_names(tps)}")
    return HealthReport(
        healthy=not reasons, controller_id=controller_id, live_nodes=live,
        partitions=len(partitions), offline_partitions=[f"{t}-{p}" for t, p in sorted(offline)],
        under_replicated_partitions=[f"{t}-{p}" for t, p in sorted(under)],
        down_nodes=sorted(down), reasons=reasons)


def add_command(subparsers) -> None:
    p = subparsers.add_parser("cluster", help="the cluster as a whole (health)",
                              description="The cluster as a whole.")
    actions = p.add_subparsers(dest="cluster_action", metavar="ACTION")
    actions.required = True
    h = actions.add_parser(
        "health", help="exit 0 when healthy, 1 with reasons when not, 2 when unreachable",
        description="Check the cluster: an active controller, no offline or under-replicated "
                    "partition, every storage node named in a replica list registered, and each "
                    "--node-id registered and in the ISR of every partition it replicates. "
                    "Exit 0 healthy, 1 unhealthy (reasons on stderr), 2 unreachable.")
    add_bootstrap(h)
    h.add_argument("--node-id", type=int, action="append", default=[], metavar="ID",
                   help="a storage node that must be up and in sync (repeatable)")
    h.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    h.add_argument("--timeout-ms", type=int, default=5000,
                   help="how long to wait for a gateway's answer (default 5000)")
    h.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from riverbed import errors
    from riverbed.admin import Admin

    try:
        with Admin(bootstrap_of(args), request_timeout_ms=args.timeout_ms,
                   client_id="riverbed-cluster-health") as admin:
            cluster = admin.describe_cluster()
            topics = admin.describe_topics(None)
    except (errors.KafkaTimeoutError, errors.KafkaError) as e:
        msg = f"cluster unreachable through {bootstrap_of(args)}: {type(e).__name__}: {e}"
        if args.json:
            print(json.dumps({"healthy": False, "reachable": False, "reasons": [msg]}))
        else:
            print(f"UNREACHABLE: {msg}", file=sys.stderr)
        return EXIT_UNREACHABLE
    partitions = [p for t in topics for p in t.partitions]
    report = assess(cluster.controller_id, (b.node_id for b in cluster.brokers), partitions,
                    args.node_id)
    if args.json:
        print(json.dumps({**report.to_json(), "reachable": True}, indent=2))
    elif report.healthy:
        print(f"HEALTHY: controller {report.controller_id}, storage nodes "
              f"{','.join(map(str, report.live_nodes)) or '-'}, {report.partitions} partitions "
              "in sync")
    if not report.healthy:
        if not args.json:
            print("UNHEALTHY", file=sys.stderr)
        for r in report.reasons:
            print(f"  {r}", file=sys.stderr)
    return EXIT_HEALTHY if report.healthy else EXIT_UNHEALTHY
