"""`leaders elect-preferred` (Kafka's kafka-preferred-replica-election.sh /
kafka-leader-election.sh --election-type preferred): move leadership back to each partition's
first replica where it is live and in the ISR."""
from __future__ import annotations

import argparse
import json
import sys

from riverbed.tools.common import add_bootstrap, bootstrap_of


def add_command(subparsers) -> None:
    p = subparsers.add_parser("leaders", help="leader elections",
                              description="Leader elections, like Kafka's kafka-leader-election.sh.")
    actions = p.add_subparsers(dest="leaders_action", metavar="ACTION")
    actions.required = True
    e = actions.add_parser(
        "elect-preferred", help="elect the preferred (first) replica as leader",
        description="Elect each partition's preferred replica as its leader.")
    add_bootstrap(e)
    which = e.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="every partition of every topic")
    which.add_argument("--topic", help="one topic (all its partitions unless --partition)")
    which.add_argument("--path-to-json-file", metavar="FILE",
                       help='{"partitions":[{"topic":"foo","partition":1}]}')
    e.add_argument("--partition", type=int, help="one partition of --topic")
    e.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from riverbed import errors
    from riverbed.admin import Admin

    if args.partition is not None and not args.topic:
        print("Error: --partition needs --topic", file=sys.stderr)
        return 2
    with Admin(bootstrap_of(args)) as admin:
        if args.all:
            partitions = None
        elif args.path_to_json_file:
            with open(args.path_to_json_file, encoding="utf-8") as f:
                obj = json.load(f)
            partitions = [(str(i["topic"]), int(i["partition"])) for i in obj["partitions"]]
        elif args.partition is not None:
            partitions = [(args.topic, args.partition)]
        else:
            (desc,) = admin.describe_topics([args.topic])
            partitions = [(args.topic, p.partition) for p in desc.partitions]
        results = admin.elect_leaders(partitions)
    done = [tp for tp, e in results.items() if e is None]
    not_needed = [tp for tp, e in results.items() if isinstance(e, errors.ElectionNotNeededError)]
    failed = {tp: e for tp, e in results.items() if e is not None and tp not in not_needed}
    fmt = lambda tps: ", ".join(f"{t}-{p}" for t, p in sorted(tps))  # noqa: E731
    if done:
        print(f"Successfully completed leader election (PREFERRED) for partitions {fmt(done)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {fmt(not_needed)}")
    for (t, p), e in sorted(failed.items()):
        print(f"Error completing leader election (PREFERRED) for partition {t}-{p}: "
              f"{type(e).__name__}: {e}", file=sys.stderr)
    return 1 if failed else 0
