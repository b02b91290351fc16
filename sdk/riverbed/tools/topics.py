"""`topics create|list|describe|alter|delete` (Kafka's kafka-topics.sh); `list` and
`describe` take `--json` for scripts."""
from __future__ import annotations

import argparse
import json
import sys

from riverbed.tools.common import add_bootstrap, bootstrap_of, parse_kv


def add_command(subparsers) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, alter or delete topics",
                              description="Manage topics, like Kafka's kafka-topics.sh.")
    actions = p.add_subparsers(dest="topics_action", metavar="ACTION")
    actions.required = True

    def action(name: str, help_: str, topic_required: bool) -> argparse.ArgumentParser:
        a = actions.add_parser(name, help=help_, description=help_)
        add_bootstrap(a)
        a.add_argument("--topic", required=topic_required, help="topic name")
        a.set_defaults(func=_run)
        return a

    c = action("create", "create a topic", True)
    c.add_argument("--partitions", type=int, default=-1, help="number of partitions (default: the cluster's num.partitions)")
    c.add_argument("--replication-factor", type=int, default=-1, help="replicas per partition (default: the cluster's default.replication.factor)")
    c.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config override; repeat for more")
    c.add_argument("--if-not-exists", action="store_true", help="do nothing if the topic exists")
    li = action("list", "list topics", False)
    li.add_argument("--json", action="store_true", help="print a JSON list on stdout")
    d = action("describe", "describe topics: partitions, leaders, replicas, ISR, eligible "
               "leader replicas (Elr, LastKnownElr), configs", False)
    d.add_argument("--json", action="store_true",
                   help="print the topics as JSON on stdout (leader null where none)")
    d.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replica set")
    d.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions without a leader")
    a = action("alter", "change a topic's configs or grow its partitions", True)
    a.add_argument("--partitions", type=int, help="the new (larger) number of partitions")
    a.add_argument("--config", action="append", metavar="KEY=VALUE", help="set a config; repeat for more")
    a.add_argument("--delete-config", action="append", metavar="KEY", help="remove a config override; repeat for more")
    x = action("delete", "delete a topic", True)
    x.add_argument("--if-exists", action="store_true", help="do nothing if the topic does not exist")


def _ids(nodes) -> str:
    return ",".join(map(str, nodes))


def format_description(desc) -> list[str]:
    """Kafka 0.8's describe output: a topic line, then one tab-indented line per partition,
    with Kafka 4's `Elr:` and `LastKnownElr:` after `Isr:` (eligible leader replicas, KIP-966:
    replicas outside the ISR that may still be elected cleanly, and those that no longer may)
    and Kafka 1.0's `Offline:` replicas (down, or their log dir offline) when there are."""
    configs = ",".join(f"{k}={v}" for k, v in sorted(desc.configs.items()))
    lines = [f"Topic:{desc.name}\tPartitionCount:{len(desc.partitions)}\t"
             f"ReplicationFactor:{desc.replication_factor}\tConfigs:{configs}"]
    for p in desc.partitions:
        lines.append(f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: "
                     f"{p.leader if p.leader >= 0 else 'none'}\t"
                     f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}\t"
                     f"Elr: {_ids(p.elr)}\tLastKnownElr: {_ids(p.last_known_elr)}"
                     + (f"\tOffline: {_ids(p.offline_replicas)}"
                        if p.offline_replicas else ""))   # KIP-112: replicas whose log dir failed
    return lines


def description_json(desc) -> dict:
    return {"name": desc.name, "internal": desc.is_internal,
            "replication_factor": desc.replication_factor, "configs": dict(desc.configs),
            "partitions": [{"partition": p.partition,
                            "leader": p.leader if p.leader >= 0 else None,
                            "replicas": list(p.replicas), "isr": list(p.isr),
                            "elr": list(p.elr), "last_known_elr": list(p.last_known_elr),
                            "offline_replicas": list(p.offline_replicas)}
                           for p in desc.partitions]}


def _run(args: argparse.Namespace) -> int:
    from riverbed import errors
    from riverbed.admin import Admin
    from riverbed.structs import NewTopic

    out = sys.stdout
    with Admin(bootstrap_of(args)) as admin:
        act = args.topics_action
        if act == "create":
            try:
                admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor,
                                              parse_kv(args.config, "--config"))])
            except errors.TopicAlreadyExistsError:
                if args.if_not_exists:
                    return 0
                raise
            print(f'Created topic "{args.topic}".', file=out)
        elif act == "list":
            names = [n for n in admin.list_topics() if args.topic is None or args.topic == n]
            if args.json:
                print(json.dumps(names), file=out)
            else:
                for name in names:
                    print(name, file=out)
        elif act == "describe":
            names = [args.topic] if args.topic else None
            descs = admin.describe_topics(names)
            if args.json:
                items = [description_json(d) for d in descs]
                if args.under_replicated_partitions or args.unavailable_partitions:
                    for item in items:
                        item["partitions"] = [
                            p for p in item["partitions"]
                            if (args.under_replicated_partitions and len(p["isr"]) < len(p["replicas"]))
                            or (args.unavailable_partitions and p["leader"] is None)]
                print(json.dumps(items, indent=2), file=out)
                return 0
            for desc in descs:
                lines = format_description(desc)
                parts = list(desc.partitions)
                if args.under_replicated_partitions or args.unavailable_partitions:
                    keep = [i for i, p in enumerate(parts)
                            if (args.under_replicated_partitions and len(p.isr) < len(p.replicas))
                            or (args.unavailable_partitions and p.leader < 0)]
                    lines = [lines[i + 1] for i in keep]
                for line in lines:
                    print(line, file=out)
        elif act == "alter":
            if args.partitions is None and not args.config and not args.delete_config:
                print("Error: alter needs --partitions, --config or --delete-config", file=sys.stderr)
                return 2
            if args.config or args.delete_config:
                admin.alter_configs(args.topic, set=parse_kv(args.config, "--config"),
                                    delete=args.delete_config or ())
                print(f'Updated config for topic "{args.topic}".', file=out)
            if args.partitions is not None:
                admin.create_partitions(args.topic, args.partitions)
                print(f'Topic "{args.topic}" now has {args.partitions} partitions.', file=out)
        elif act == "delete":
            try:
                admin.delete_topics([args.topic])
            except errors.UnknownTopicOrPartitionError:
                if args.if_exists:
                    return 0
                raise
            print(f"Topic {args.topic} is marked for deletion.", file=out)
    return 0
