"""What transactions cost (issue 26 item 5), measured against their baselines in the same run:

- the transactional producer, in transactions of 100, 1,000 and 10,000 records, against the
  idempotent producer writing the same records (records/s; the aim: 1,000-record transactions
  at >= 0.7 of the idempotent producer);
- read_committed consumption against read_uncommitted of the same records;
- the LSO lag: from commit_transaction() returning to a read_committed reader seeing the
  records (LIST_OFFSETS v1 polled every millisecond), per transaction.

    .venv/bin/python -m loadgen.txn_bench                       # its own fleet, 3 rounds
    .venv/bin/python -m loadgen.txn_bench --num-records 200000 --rounds 5 --json out.json
    .venv/bin/python -m loadgen.txn_bench --bootstrap-server tcp://127.0.0.1:9092

Without --bootstrap-server it starts its own fleet (ZooKeeper, a controller,
--storage-nodes storage nodes (1), a gateway, a group coordinator, an offset manager, a
transaction coordinator) in a temporary directory and stops it at the end. Records are
--record-size bytes (100), written with send_many to one partition of a topic replicated on
every storage node (acks=all; the transactional producer always uses it), each measurement on a
topic of its own. Each round measures every variant once, interleaved, so a busy machine slows
them alike; the ratios are per round, and of the medians.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition

TXN_SIZES = (100, 1000, 10000)


def _topic(admin: Admin, name: str, rf: int) -> str:
    admin.create_topics([NewTopic(name, 1, rf)])
    admin.describe_topics([name])
    return name


def produce_idempotent(bootstrap: str, topic: str, values: list[bytes]) -> float:
    with Producer(bootstrap, acks="all", linger_ms=5) as p:
        p.partitions_for(topic)
        t0 = time.perf_counter()
        for i in range(0, len(values), 10000):
            p.send_many(topic, values[i:i + 10000], partition=0)
        p.flush()
        return len(values) / (time.perf_counter() - t0)


def produce_transactional(bootstrap: str, topic: str, values: list[bytes], per_txn: int,
                          tid: str, lso_lag: list[float] | None = None) -> float:
    with Producer(bootstrap, transactional_id=tid, linger_ms=5) as p, \
            Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed") as probe:
        p.partitions_for(topic)
        p.init_transactions(timeout=120)
        tp = TopicPartition(topic, 0)
        written = 0
        elapsed = 0.0
        for i in range(0, len(values), per_txn):
            chunk = values[i:i + per_txn]
            t0 = time.perf_counter()
            p.begin_transaction()
            p.send_many(topic, chunk, partition=0)
            p.commit_transaction(timeout=120)
            elapsed += time.perf_counter() - t0
            written += len(chunk)
            if lso_lag is not None:
                t1 = time.perf_counter()
                # visible once the LSO passes the records and their marker
                while probe.end_offsets([tp])[tp] < written + written // per_txn:
                    time.sleep(0.001)
                lso_lag.append((time.perf_counter() - t1) * 1000)
        return len(values) / elapsed


def consume(bootstrap: str, topic: str, n: int, isolation: str) -> float:
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                  max_poll_records=10000, fetch_max_wait_ms=100) as c:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            got += sum(len(r) for r in c.poll(timeout_ms=1000).values())
        return got / (time.perf_counter() - t0)


def run(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    values = [os.urandom(args.record_size) for _ in range(args.num_records)]
    rounds = []
    lso_lag: list[float] = []
    with Admin(bootstrap) as admin:
        for r in range(args.rounds):
            row: dict[str, Any] = {}
            base = _topic(admin, f"txnb-idem-{r}", args.replication_factor)
            row["idempotent"] = produce_idempotent(bootstrap, base, values)
            for size in TXN_SIZES:
                t = _topic(admin, f"txnb-txn{size}-{r}", args.replication_factor)
                rate = produce_transactional(
                    bootstrap, t, values, size, f"txn-bench-{size}",
                    lso_lag if size == 1000 and r == 0 else None)
                row[f"txn_{size}"] = rate
                row[f"txn_{size}_ratio"] = rate / row["idempotent"]
            t1000 = f"txnb-txn1000-{r}"
            row["read_uncommitted"] = consume(bootstrap, t1000, args.num_records,
                                              "read_uncommitted")
            row["read_committed"] = consume(bootstrap, t1000, args.num_records, "read_committed")
            row["read_committed_ratio"] = row["read_committed"] / row["read_uncommitted"]
            rounds.append({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
            print(f"round {r + 1}: idempotent {row['idempotent']:,.0f} records/s; "
                  + "; ".join(f"txn of {s}: {row[f'txn_{s}']:,.0f} "
                              f"({row[f'txn_{s}_ratio']:.2f})" for s in TXN_SIZES)
                  + f"; read_committed {row['read_committed']:,.0f} vs read_uncommitted "
                    f"{row['read_uncommitted']:,.0f} ({row['read_committed_ratio']:.2f})",
                  file=sys.stderr, flush=True)

    def med(key: str) -> float:
        return statistics.median(x[key] for x in rounds)
    out = {"num_records": args.num_records, "record_size": args.record_size,
           "replication_factor": args.replication_factor, "cpus": os.cpu_count(),
           "load_average": os.getloadavg(), "rounds": rounds,
           "idempotent_median": med("idempotent"),
           "read_committed_median": med("read_committed"),
           "read_uncommitted_median": med("read_uncommitted"),
           "read_committed_ratio_of_medians": round(med("read_committed")
                                                    / med("read_uncommitted"), 3),
           "lso_lag_ms_median": round(statistics.median(lso_lag), 2) if lso_lag else None,
           "lso_lag_ms_p99": round(sorted(lso_lag)[int(len(lso_lag) * 0.99) - 1], 2)
           if lso_lag else None}
    for s in TXN_SIZES:
        out[f"txn_{s}_median"] = med(f"txn_{s}")
        out[f"txn_{s}_ratio_of_medians"] = round(med(f"txn_{s}") / med("idempotent"), 3)
        out[f"txn_{s}_median_ratio"] = med(f"txn_{s}_ratio")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.txn_bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-server", dest="bootstrap", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num-records", type=int, default=100_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--storage-nodes", type=int, default=1)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    args.replication_factor = max(1, min(3, args.storage_nodes))
    if args.bootstrap:
        result = run(args.bootstrap, args)
    else:
        from deploy.fleet import Fleet, free_base_port
        with tempfile.TemporaryDirectory(prefix="txn-bench-") as tmp:
            fleet = Fleet(tmp, free_base_port(), storage_nodes=args.storage_nodes,
                          controllers=1, gateways=1)
            try:
                fleet.up()
                assert fleet.gateway_endpoint is not None
                result = run(fleet.gateway_endpoint, args)
            finally:
                fleet.down()
    print("; ".join(f"transactions of {s}: {result[f'txn_{s}_median']:,.0f} records/s = "
                    f"{result[f'txn_{s}_ratio_of_medians']:.2f} x idempotent"
                    for s in TXN_SIZES)
          + f" (idempotent {result['idempotent_median']:,.0f} records/s); read_committed = "
            f"{result['read_committed_ratio_of_medians']:.2f} x read_uncommitted; LSO lag "
            f"median {result['lso_lag_ms_median']} ms, p99 {result['lso_lag_ms_p99']} ms; "
            f"load average {result['load_average'][0]:.1f} on {result['cpus']} CPUs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
