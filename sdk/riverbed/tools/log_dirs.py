"""`log-dirs describe` (Kafka's kafka-log-dirs.sh --describe): per storage node, each log dir
with its state (online, offline after an I/O error, low-space below log.dir.free.bytes.min),
file-system size and free space, and its replicas with their sizes, lag and role.
Replicas move between a node's dirs with `partitions reassign` and a `log_dirs` list."""
from __future__ import annotations

import argparse
import json
import sys

from riverbed.tools.common import add_bootstrap, bootstrap_of


def add_command(subparsers) -> None:
    p = subparsers.add_parser("log-dirs", help="describe the storage nodes' log dirs",
                              description=__doc__.split("\n\n")[0])
    actions = p.add_subparsers(dest="log_dirs_action", metavar="ACTION")
    actions.required = True
    d = actions.add_parser("describe", help="each node's log dirs, their space and replicas",
                           description=__doc__)
    add_bootstrap(d)
    d.add_argument("--broker-list", metavar="IDS",
                   help="storage node ids, comma-separated (default: every live node)")
    d.add_argument("--topic-list", metavar="TOPICS",
                   help="only these topics' replicas, comma-separated (default: all)")
    d.add_argument("--json", action="store_true",
                   help="Kafka's JSON ({\"version\":1,\"brokers\":[...]}) instead of a table")
    d.set_defaults(func=_describe)


def _ids(text: str | None) -> list[int]:
    return [int(x) for x in (text or "").split(",") if x.strip()]


def _mib(n: int) -> str:
    return "-" if n < 0 else f"{n / (1 << 20):.1f} MiB"


def as_json(nodes) -> dict:
    return {"version": 1, "brokers": [{
        "broker": n.node_id, "error": n.error, "logDirs": [{
            "logDir": d.path, "state": d.state, "error": d.error, "totalBytes": d.total_bytes,
            "freeBytes": d.free_bytes, "sizeBytes": d.size_bytes, "partitions": [{
                "partition": f"{r.topic}-{r.partition}", "size": r.size_bytes,
                "offsetLag": r.offset_lag, "isFuture": r.is_future, "role": r.role}
                for r in d.replicas]} for d in n.log_dirs]} for n in nodes]}


def _describe(args: argparse.Namespace) -> int:
    from riverbed.admin import Admin

    try:
        brokers = _ids(args.broker_list)
    except ValueError:
        print(f"Error: --broker-list expects node ids, got {args.broker_list!r}", file=sys.stderr)
        return 2
    topics = [t for t in (args.topic_list or "").split(",") if t.strip()]
    with Admin(bootstrap_of(args)) as admin:
        nodes = admin.describe_log_dirs(brokers or None, topics or None)
    if args.json:
        print(json.dumps(as_json(nodes), separators=(",", ":")))
        return 1 if any(n.error for n in nodes) else 0
    bad = False
    for n in nodes:
        if n.error:
            bad = True
            print(f"Node {n.node_id}: {n.error} {n.error_message}")
            continue
        for d in n.log_dirs:
            print(f"Node {n.node_id}\tLogDir: {d.path}\tState: {d.state}\tSize: {_mib(d.size_bytes)}"
                  f"\tFree: {_mib(d.free_bytes)} of {_mib(d.total_bytes)}"
                  f"\tReplicas: {len(d.replicas)}")
            for r in d.replicas:
                extra = "\tFuture: yes" if r.is_future else ""
                print(f"\tPartition: {r.topic}-{r.partition}\tSize: {r.size_bytes}"
                      f"\tOffsetLag: {r.offset_lag}\tRole: {r.role or '-'}{extra}")
    return 1 if bad else 0
