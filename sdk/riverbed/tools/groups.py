"""`groups list|describe|reset-offsets|delete-offsets` (Kafka's kafka-consumer-groups.sh).

    riverbed groups list
    riverbed groups describe GROUP
    riverbed groups reset-offsets --group G --topic T|--all-topics
                                  --to-earliest|--to-latest|--to-current|--to-offset N|
                                  --shift-by N|--to-datetime 2026-11-21T10:00:00|--by-duration PT1H
                                  [--partitions 0,1] [--execute]

`--json` on list, describe and reset-offsets prints the same facts as JSON on stdout. describe
of a group the cluster does not know says so on stderr and exits 1.

describe prints kafka-consumer-groups.sh --describe's columns (the seeds' ConsumerOffsetChecker
Offset/logSize/Lag/Owner): GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID
HOST CLIENT-ID, "-" where unknown. reset-offsets is a dry run (prints the plan) unless
--execute, and refuses a group that has members.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time

from riverbed.tools.common import add_bootstrap, bootstrap_of
from riverbed.tools.record_format import FormatError, parse_duration_ms


def add_command(subparsers) -> None:
    p = subparsers.add_parser("groups", help="list and describe consumer groups, reset their offsets",
                              description="Consumer groups, like Kafka's kafka-consumer-groups.sh.")
    actions = p.add_subparsers(dest="groups_action", metavar="ACTION")
    actions.required = True

    a = actions.add_parser("list", help="list consumer groups")
    add_bootstrap(a)
    a.add_argument("--state", action="append", default=[],
                   help="only groups in this state (Empty, Stable, PreparingRebalance, ...)")
    a.add_argument("--json", action="store_true", help="print JSON on stdout")
    a.set_defaults(func=_run)

    d = actions.add_parser("describe", help="committed offsets, log end offsets, lag and owners")
    add_bootstrap(d)
    d.add_argument("group", nargs="?", help="the group id")
    d.add_argument("--group", dest="group_opt", help="the group id (same as the positional)")
    d.add_argument("--members", action="store_true", help="list the members instead of partitions")
    d.add_argument("--json", action="store_true",
                   help="print the group (state, members, partitions with offsets and lag) as JSON")
    d.set_defaults(func=_run)

    r = actions.add_parser("reset-offsets",
                           help="move an inactive group's committed offsets (dry run unless --execute)")
    add_bootstrap(r)
    r.add_argument("--group", required=True, help="the group id")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic")
    which.add_argument("--all-topics", action="store_true",
                       help="every topic the group has committed offsets for")
    r.add_argument("--partitions", help="comma-separated partitions (default: all; not with "
                                        "--all-topics)")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offsets")
    to.add_argument("--to-latest", action="store_true", help="the log end offsets")
    to.add_argument("--to-current", action="store_true",
                    help="the committed offsets (the log end where none)")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped into the log)")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="the committed offsets plus N (negative: back), clamped into the log")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS[.fff][+HH:MM]",
                    help="the first offset at or after this time (local time without an offset)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS",
                    help="the first offset at or after now minus this ISO 8601 duration "
                         "(e.g. PT15M, P1DT2H)")
    r.add_argument("--execute", action="store_true", help="commit the new offsets (default: dry run)")
    r.add_argument("--json", action="store_true", help="print the plan as JSON on stdout")
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


def _reset_target(args: argparse.Namespace):
    """The reset-offsets flag -> Admin.plan_reset_offsets' `to` (ValueError/FormatError when bad)."""
    if args.to_earliest:
        return "earliest"
    if args.to_latest:
        return "latest"
    if args.to_current:
        return "current"
    if args.to_offset is not None:
        return args.to_offset
    if args.shift_by is not None:
        return ("shift", args.shift_by)
    if args.by_duration is not None:
        return ("datetime", int(time.time() * 1000) - parse_duration_ms(args.by_duration))
    return ("datetime", parse_datetime_ms(args.to_datetime))


def describe_json(desc, rows) -> dict:
    return {"group_id": desc.group_id, "state": desc.state, "protocol_type": desc.protocol_type,
            "protocol": desc.protocol, "generation_id": desc.generation_id,
            "members": [{"member_id": m.member_id, "client_id": m.client_id,
                         "host": m.client_host,
                         "assignment": [{"topic": tp.topic, "partition": tp.partition}
                                        for tp in m.assignment]} for m in desc.members],
            "partitions": [{"topic": r.topic, "partition": r.partition,
                            "current_offset": r.current_offset,
                            "log_end_offset": r.log_end_offset, "lag": r.lag,
                            "consumer_id": r.consumer_id or None, "host": r.host or None,
                            "client_id": r.client_id or None} for r in rows]}


def _run(args: argparse.Namespace) -> int:
    from riverbed.admin import Admin
    from riverbed.structs import TopicPartition

    out = sys.stdout
    with Admin(bootstrap_of(args)) as admin:
        act = args.groups_action
        if act == "list":
            listing = admin.list_groups(args.state)
            if args.json:
                print(json.dumps([{"group_id": g.group_id, "protocol_type": g.protocol_type,
                                   "state": g.state} for g in listing], indent=2), file=out)
            else:
                for g in listing:
                    print(g.group_id, file=out)
        elif act == "describe":
            group = args.group or args.group_opt
            if not group:
                print("Error: describe needs a group id", file=sys.stderr)
                return 2
            desc, rows = admin.describe_group_offsets(group)
            if desc.state == "Dead" and not desc.members and not rows:
                print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
                return 1
            if args.json:
                print(json.dumps(describe_json(desc, rows), indent=2), file=out)
                return 0
            if args.members:
                for line in format_table(
                        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                        [[group, m.member_id, m.client_host, m.client_id, len(m.assignment),
                          ",".join(f"{t}-{p}" for t, p in m.assignment)] for m in desc.members]):
                    print(line, file=out)
                return 0
            for line in format_describe(desc, rows):
                print(line, file=out)
        elif act == "reset-offsets":
            try:
                to = _reset_target(args)
            except (ValueError, FormatError) as e:
                flag = "--by-duration" if args.by_duration is not None else "--to-datetime"
                print(f"Error: {flag}: {e}", file=sys.stderr)
                return 2
            if args.all_topics:
                if args.partitions:
                    print("Error: --partitions needs --topic", file=sys.stderr)
                    return 2
                topics = sorted({tp.topic for tp in admin.list_group_offsets(args.group)})
                if not topics:
                    print(f"Error: Consumer group '{args.group}' has no committed offsets.",
                          file=sys.stderr)
                    return 1
            else:
                topics = [args.topic]
            plan: dict = {}
            for topic in topics:
                plan.update(admin.reset_offsets(args.group, topic, to,
                                                _partitions(args.partitions),
                                                execute=args.execute))
            if args.json:
                print(json.dumps([{"group": args.group, "topic": tp.topic,
                                   "partition": tp.partition, "current_offset": cur,
                                   "new_offset": new} for tp, (cur, new) in sorted(plan.items())],
                                 indent=2), file=out)
            else:
                for line in format_table(
                        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                        [[args.group, tp.topic, tp.partition, cur, new]
                         for tp, (cur, new) in sorted(plan.items())]):
                    print(line, file=out)
            if not args.execute:
                print("(dry run: nothing committed; add --execute to apply)", file=sys.stderr)
        elif act == "delete-offsets":
            parts = _partitions(args.partitions)
            if parts is None:
                (tdesc,) = admin.describe_topics([args.topic])
                parts = [p.partition for p in tdesc.partitions]
            admin.delete_group_offsets(args.group, [TopicPartition(args.topic, p) for p in parts])
            print(f"Deleted offsets of group '{args.group}' for {args.topic} partitions "
                  f"{','.join(map(str, parts))}.", file=out)
    return 0
