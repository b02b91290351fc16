"""`partitions reassign --generate|--execute|--verify` (Kafka's kafka-reassign-partitions.sh).

The JSON files are Kafka's:
  topics to move:  {"version":1,"topics":[{"topic":"foo"}]}
  reassignment:    {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}
  with log dirs:   ... "replicas":[1,2],"log_dirs":["/data2/riverbed","any"]   (KIP-113: per replica,
                   the log dir of that node to hold it; "any" leaves it where the node puts it)
--generate only prints (current and proposed assignment); --execute asks the controller (through
a gateway) to start the moves; --verify reports, per partition, whether its move has finished.
Raising a partition's replication factor is a reassignment with a longer replica list.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Mapping

from riverbed.replica_assignment import place, rack_alternated
from riverbed.tools.common import add_bootstrap, bootstrap_of


def add_command(subparsers) -> None:
    p = subparsers.add_parser("partitions", help="move partitions between storage nodes",
                              description="Partition tools, like Kafka's kafka-reassign-partitions.sh.")
    actions = p.add_subparsers(dest="partitions_action", metavar="ACTION")
    actions.required = True
    r = actions.add_parser(
        "reassign", help="generate, execute or verify a partition reassignment",
        description="Generate, execute or verify a partition reassignment "
                    "(kafka-reassign-partitions.sh).")
    add_bootstrap(r)
    mode = r.add_mutually_exclusive_group(required=True)
    mode.add_argument("--generate", action="store_true",
                      help="propose an assignment of --topics-to-move-json-file over --broker-list")
    mode.add_argument("--execute", action="store_true",
                      help="start the reassignment in --reassignment-json-file")
    mode.add_argument("--verify", action="store_true",
                      help="report whether the reassignment in --reassignment-json-file finished")
    r.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='{"version":1,"topics":[{"topic":"foo"}]} (with --generate)')
    r.add_argument("--broker-list", metavar="IDS",
                   help="storage node ids to move to, comma-separated, e.g. 1,2,3 (with --generate)")
    r.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]} '
                        "(with --execute / --verify)")
    r.set_defaults(func=_run)


def assignment_json(assignment: dict[tuple[str, int], tuple[int, ...]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def parse_reassignment(text: str) -> dict[tuple[str, int], tuple[int, ...]]:
    obj = json.loads(text)
    if not isinstance(obj, dict) or not isinstance(obj.get("partitions"), list):
        raise ValueError('expected {"version":1,"partitions":[...]}')
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for item in obj["partitions"]:
        try:
            tp = (str(item["topic"]), int(item["partition"]))
            replicas = tuple(int(r) for r in item["replicas"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad partition entry {item!r}: {e}") from None
        if tp in out:
            raise ValueError(f"partition {tp[0]}-{tp[1]} is listed twice")
        out[tp] = replicas
    return out


def parse_log_dirs(text: str) -> dict[tuple[str, int, int], str]:
    """The `log_dirs` of a reassignment (KIP-113): {(topic, partition, node id): log dir} for
    every replica whose entry is not "any"."""
    obj = json.loads(text)
    out: dict[tuple[str, int, int], str] = {}
    for item in obj.get("partitions", []) if isinstance(obj, dict) else []:
        dirs = item.get("log_dirs") if isinstance(item, dict) else None
        if dirs is None:
            continue
        replicas = item.get("replicas") or []
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise ValueError(f"{item.get('topic')}-{item.get('partition')}: log_dirs must list "
                             f"one dir (or \"any\") per replica")
        for node, d in zip(replicas, dirs):
            if d != "any":
                out[(str(item["topic"]), int(item["partition"]), int(node))] = str(d)
    return out


def parse_topics_to_move(text: str) -> list[str]:
    obj = json.loads(text)
    if not isinstance(obj, dict) or not isinstance(obj.get("topics"), list):
        raise ValueError('expected {"version":1,"topics":[{"topic":"foo"}]}')
    return [str(t["topic"]) for t in obj["topics"]]


def propose(current: dict[tuple[str, int], tuple[int, ...]], brokers: list[int],
            rng: random.Random, racks: Mapping[int, str] | None = None
            ) -> dict[tuple[str, int], tuple[int, ...]]:
    """Seed 002's assignment over `brokers`, keeping each partition's replica count: per topic a
    random start s; partition i's replica j on brokers[(s + i + j) mod n] -- rack-aware when
    `racks` names a rack for every broker of the list (riverbed.replica_assignment, the
    controller's own placement)."""
    nodes = rack_alternated(brokers, racks)
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for topic in sorted({t for t, _ in current}):
        start = rng.randrange(len(nodes))
        for (t, p), replicas in sorted(current.items()):
            if t != topic:
                continue
            if len(replicas) > len(nodes):
                raise ValueError(f"{t}-{p} has {len(replicas)} replicas but the broker list "
                                 f"has only {len(nodes)} nodes")
            out[(t, p)] = place(nodes, start + p, len(replicas), racks)
    return out


def _read(path: str | None, flag: str) -> str:
    if not path:
        raise SystemExit(f"error: {flag} is required")
    with open(path, encoding="utf-8") as f:
        return f.read()


def _current(admin, topics) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(d.name, p.partition): tuple(p.replicas)
            for d in admin.describe_topics(sorted(set(topics))) for p in d.partitions}


def _run(args: argparse.Namespace) -> int:
    from riverbed.admin import Admin

    out = sys.stdout
    try:
        if args.generate:
            topics = parse_topics_to_move(_read(args.topics_to_move_json_file,
                                                "--topics-to-move-json-file"))
            if not args.broker_list:
                raise SystemExit("error: --broker-list is required with --generate")
            brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
        else:
            text = _read(args.reassignment_json_file, "--reassignment-json-file")
            wanted = parse_reassignment(text)
            dirs = parse_log_dirs(text)
    except (ValueError, OSError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    with Admin(bootstrap_of(args)) as admin:
        if args.generate:
            current = _current(admin, topics)
            racks = {b.node_id: b.rack for b in admin.describe_cluster().brokers if b.rack}
            try:
                proposed = propose(current, brokers, random.Random(), racks)
            except ValueError as e:
                print(f"Error: {e}", file=sys.stderr)
                return 2
            print("Current partition replica assignment\n", file=out)
            print(assignment_json(current), file=out)
            print("Proposed partition reassignment configuration\n", file=out)
            print(assignment_json(proposed), file=out)
            return 0
        if args.execute:
            current = _current(admin, {t for t, _ in wanted})
            print("Current partition replica assignment\n", file=out)
            print(assignment_json({tp: current[tp] for tp in wanted if tp in current}), file=out)
            print("\nSave this to use as the --reassignment-json-file option during rollback",
                  file=out)
            if dirs:     # first, so that replicas still to be created go to their dir too
                admin.alter_replica_log_dirs(dirs)
            if any(current.get(tp) != r for tp, r in wanted.items()):
                admin.alter_partition_reassignments(wanted)
            print(f"Successfully started reassignment of partitions {assignment_json(wanted)}",
                  file=out)
            if dirs:
                print(f"Successfully moved {len(dirs)} replica(s) between log dirs", file=out)
            return 0
        # --verify
        in_progress = admin.list_partition_reassignments(wanted)
        current = _current(admin, {t for t, _ in wanted})
        print("Status of partition reassignment:", file=out)
        failed = False
        for (t, p), replicas in sorted(wanted.items()):
            if (t, p) in in_progress:
                print(f"Reassignment of partition {t}-{p} is still in progress", file=out)
            elif current.get((t, p)) == replicas:
                print(f"Reassignment of partition {t}-{p} completed successfully", file=out)
            else:
                failed = True
                print(f"Reassignment of partition {t}-{p} failed", file=out)
        if dirs:
            where = {(r.topic, r.partition, n.node_id): d.path
                     for n in admin.describe_log_dirs({b for _, _, b in dirs},
                                                      {t for t, _, _ in dirs})
                     for d in n.log_dirs for r in d.replicas if not r.is_future}
            for (t, p, b), d in sorted(dirs.items()):
                if where.get((t, p, b)) == os.path.abspath(d):
                    print(f"Reassignment of replica {t}-{p}-{b} to {d} completed successfully",
                          file=out)
                else:
                    failed = True
                    print(f"Reassignment of replica {t}-{p}-{b} to {d} is not done "
                          f"(it is in {where.get((t, p, b), 'no log dir')})", file=out)
        return 1 if failed else 0
