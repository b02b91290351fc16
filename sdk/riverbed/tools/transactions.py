"""`transactions list|describe` (Kafka's kafka-transactions.sh, KIP-664).

    riverbed transactions list [--state Ongoing] [--producer-id N] [--json]
    riverbed transactions describe --transactional-id ID [--json]

list prints TransactionalId, Coordinator, ProducerId and TransactionState, one row per id the
transaction coordinators know (only Describe-authorized ones). describe prints the id's
coordinator, state, producer id and epoch, timeout, when its open transaction started, and the
partitions in it; an id no coordinator knows is said so on stderr with exit code 1.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from riverbed.tools.common import add_bootstrap, bootstrap_of


def add_command(subparsers) -> None:
    p = subparsers.add_parser("transactions", help="list and describe transactional ids",
                              description="Transactions, like Kafka's kafka-transactions.sh.")
    actions = p.add_subparsers(dest="transactions_action", metavar="ACTION")
    actions.required = True

    a = actions.add_parser("list", help="list the transactional ids the coordinators know")
    add_bootstrap(a)
    a.add_argument("--state", action="append", default=[],
                   help="only ids in this state (Empty, Ongoing, PrepareCommit, PrepareAbort, "
                        "CompleteCommit, CompleteAbort); repeatable")
    a.add_argument("--producer-id", type=int, action="append", default=[],
                   help="only ids of this producer id; repeatable")
    a.add_argument("--json", action="store_true", help="print JSON on stdout")
    a.set_defaults(func=_run)

    d = actions.add_parser("describe", help="one transactional id's state and open partitions")
    add_bootstrap(d)
    d.add_argument("--transactional-id", required=True, help="the transactional id")
    d.add_argument("--json", action="store_true", help="print JSON on stdout")
    d.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from riverbed import errors
    from riverbed.admin import Admin

    try:
        with Admin(bootstrap_of(args)) as admin:
            if args.transactions_action == "list":
                rows = admin.list_transactions(args.state, args.producer_id)
                if args.json:
                    print(json.dumps([{"transactional_id": r.transactional_id,
                                       "coordinator": r.coordinator_id,
                                       "producer_id": r.producer_id, "state": r.state}
                                      for r in rows], indent=2))
                    return 0
                table = [("TransactionalId", "Coordinator", "ProducerId", "TransactionState")]
                table += [(r.transactional_id, str(r.coordinator_id), str(r.producer_id), r.state)
                          for r in rows]
                _print_table(table)
                return 0
            (d,) = admin.describe_transactions([args.transactional_id])
            parts = [f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions]
            if args.json:
                print(json.dumps({"transactional_id": d.transactional_id,
                                  "coordinator": d.coordinator_id, "state": d.state,
                                  "producer_id": d.producer_id,
                                  "producer_epoch": d.producer_epoch,
                                  "transaction_timeout_ms": d.transaction_timeout_ms,
                                  "transaction_start_time_ms": d.transaction_start_time_ms,
                                  "topic_partitions": parts}, indent=2))
                return 0
            age = "-" if d.transaction_start_time_ms < 0 else \
                str(int(time.time() * 1000) - d.transaction_start_time_ms)
            _print_table([
                ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                 "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                 "TransactionDurationMs", "TopicPartitions"),
                (str(d.coordinator_id), d.transactional_id, str(d.producer_id),
                 str(d.producer_epoch), d.state, str(d.transaction_timeout_ms),
                 str(d.transaction_start_time_ms), age, ",".join(parts) or "-")])
            return 0
    except errors.TransactionalIdNotFoundError:
        print(f"transactional id {args.transactional_id!r} is not known to any transaction "
              "coordinator", file=sys.stderr)
        return 1


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
