"""`groups list|describe|reset-offsets|delete-offsets` (Kafka's kafka-consumer-groups.sh).

    riverbed groups list
    riverbed groups describe GROUP
    riverbed groups reset-offsets --group G --topic T --to-earliest|--to-latest|--to-offset N|
                                  --to-datetime 2026-11-21T10:00:00 [--partitions 0,1] [--execute]

describe prints kafka-consumer-groups.sh --describe's columns (the seeds' ConsumerOffsetChecker
Offset/logSize/Lag/Owner): GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID
HOST CLIENT-ID, "-" where unknown. reset-offsets is a dry run (prints the plan) unless
--execute, and refuses a group that has members.
"""
from __future__ import annotations

import argparse
import datetime as dt
import sys

from riverbed.tools.common import add_bootstrap, bootstrap_of


def add_command(subparsers) -> None:
    p = subparsers.add_parser("groups", help="list and describe consumer groups, reset their offsets",
                              description="Consumer groups, like Kafka's kafka-consumer-groups.sh.")
    actions = p.add_subparsers(dest="groups_action", metavar="ACTION")
    actions.required = True

    a = actions.add_parser("list", help="list consumer groups")
    add_bootstrap(a)
    a.add_argument("--state", action="append", default=[],
                   help="only groups in this state (Empty, Stable, PreparingRebalance, ...)")
    a.set_defaults(func=_run)

    d = actions.add_parser("describe", help="committed offsets, log end offsets, lag and owners")
    add_bootstrap(d)
    d.add_argument("group", nargs="?", help="the group id")
    d.add_argument("--group", dest="group_opt", help="the group id (same as the positional)")
    d.add_argument("--members", action="store_true", help="list the members instead of partitions")
    d.set_defaults(func=_run)

    r = actions.add_parser("reset-offsets",
                           help="move an inactive group's committed offsets (dry run unless --execute)")
    add_bootstrap(r)
    r.add_argument("--group", required=True, help="the group id")
    r.add_argument("--topic", required=True, help="the topic")
    r.add_argument("--partitions", help="comma-separated partitions (default: all)")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offsets")
    to.add_argument("--to-latest", action="store_true", help="the log end offsets")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped into the log)")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS[.fff][+HH:MM]",
                    help="the first offset at or after this time (local time without an offset)")
    r.add_argument("--execute", action="store_true", help="commit the new offsets (default: dry run)")
    r.set_defaults(func=_run)

    x = actions.add_parser("delete-offsets", help="forget an inactive group's committed offsets")
    add_bootstrap(x)
    x.add_argument("--group", required=True)
    x.add_argument("--topic", required=True)
    x.add_argument("--partitions", help="comma-separated partitions (default: all)")
    x.set_defaults(func=_run)


def parse_datetime_ms(text: str) -> int:
    """ISO 8601 → ms since the epoch; a time without a zone is local time (Kafka's tool)."""
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.astimezone()
    return int(t.timestamp() * 1000)


def format_table(header: list[str], rows: list[list]) -> list[str]:
    cells = [header] + [["-" if v is None or v == "" else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


DESCRIBE_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                   "CONSUMER-ID", "HOST", "CLIENT-ID"]


def format_describe(desc, rows) -> list[str]:
    lines = [f"Consumer group '{desc.group_id}': state {desc.state}, generation "
             f"{desc.generation_id}, strategy {desc.protocol or '-'}, {len(desc.members)} member(s)"]
    if not rows:
        lines.append(f"Consumer group '{desc.group_id}' has no committed offsets and no assigned partitions.")
        return lines
    lines.append("")
    lines += format_table(DESCRIBE_HEADER, [
        [desc.group_id, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag,
         r.consumer_id, r.host, r.client_id] for r in rows])
    return lines


def _partitions(text: str | None) -> list[int] | None:
    if not text:
        return None
    return sorted({int(p) for p in text.split(",") if p.strip()})


def _run(args: argparse.Namespace) -> int:
    from riverbed.admin import Admin
    from riverbed.structs import TopicPartition

    out = sys.stdout
    with Admin(bootstrap_of(args)) as admin:
        act = args.groups_action
        if act == "list":
            for g in admin.list_groups(args.state):
                print(g.group_id, file=out)
        elif act == "describe":
            group = args.group or args.group_opt
            if not group:
                print("Error: describe needs a group id", file=sys.stderr)
                return 2
            if args.members:
                (desc,) = admin.describe_groups([group])
                for line in format_table(
                        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                        [[group, m.member_id, m.client_host, m.client_id, len(m.assignment),
                          ",".join(f"{t}-{p}" for t, p in m.assignment)] for m in desc.members]):
                    print(line, file=out)
                return 0
            desc, rows = admin.describe_group_offsets(group)
            for line in format_describe(desc, rows):
                print(line, file=out)
        elif act == "reset-offsets":
            if args.to_earliest:
                to: object = "earliest"
            elif args.to_latest:
                to = "latest"
            elif args.to_offset is not None:
                to = args.to_offset
            else:
                try:
                    to = ("datetime", parse_datetime_ms(args.to_datetime))
                except ValueError as e:
                    print(f"Error: --to-datetime {args.to_datetime!r}: {e}", file=sys.stderr)
                    return 2
            plan = admin.reset_offsets(args.group, args.topic, to, _partitions(args.partitions),
                                       execute=args.execute)
            for line in format_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                                     [[args.group, tp.topic, tp.partition, cur, new]
                                      for tp, (cur, new) in sorted(plan.items())]):
                print(line, file=out)
            if not args.execute:
                print("(dry run: nothing committed; add --execute to apply)", file=sys.stderr)
        elif act == "delete-offsets":
            parts = _partitions(args.partitions)
            if parts is None:
                (desc,) = admin.describe_topics([args.topic])
                parts = [p.partition for p in desc.partitions]
            admin.delete_group_offsets(args.group, [TopicPartition(args.topic, p) for p in parts])
            print(f"Deleted offsets of group '{args.group}' for {args.topic} partitions "
                  f"{','.join(map(str, parts))}.", file=out)
    return 0
