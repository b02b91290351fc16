"""riverbed.aio's producer against the sync one: `riverbed-perf produce` and
`riverbed-perf produce --asyncio`, interleaved, on one fleet, in the same run.

    .venv/bin/python -m loadgen.aio_bench                      # 5 rounds of 200,000 records
    .venv/bin/python -m loadgen.aio_bench --rounds 7 --num-records 500000 --json out.json
    .venv/bin/python -m loadgen.aio_bench --bootstrap-server tcp://127.0.0.1:9092   # a fleet you run

Without --bootstrap-server it starts its own fleet (ZooKeeper, a controller, one storage node,
a gateway) on free ports in a temporary directory and stops it at the end (by PID). Each round
runs the sync producer, then the asyncio one (same topic, settings and record count, one
process each); the figure is records/s, and the ratio asyncio/sync per round and of the medians.
"""
from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
from typing import Any

from loadgen import options, perf


def produce_once(bootstrap: str, topic: str, num_records: int, record_size: int,
                 use_asyncio: bool, extra: list[str]) -> float:
    argv = ["produce", "--bootstrap-server", bootstrap, "--topic", topic, "--num-records",
            str(num_records), "--record-size", str(record_size), "--no-progress", *extra]
    if use_asyncio:
        argv.append("--asyncio")
    summary, rc = perf.run(options.parse_args(argv), live=False, out=io.StringIO())
    if rc != 0:
        raise RuntimeError(f"riverbed-perf {' '.join(argv)} failed ({summary.errors} errors)")
    return summary.records / summary.elapsed_s


def run(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    extra = ["--create-topic", "--partitions", str(args.partitions), "--replication-factor", "1"]
    produce_once(bootstrap, args.topic, 1000, args.record_size, False, extra)   # topic, warm-up
    rounds = []
    for r in range(args.rounds):
        sync = produce_once(bootstrap, args.topic, args.num_records, args.record_size, False, [])
        aio = produce_once(bootstrap, args.topic, args.num_records, args.record_size, True, [])
        rounds.append({"sync": round(sync), "asyncio": round(aio), "ratio": round(aio / sync, 3)})
        print(f"round {r + 1}: sync {sync:,.0f} records/s, asyncio {aio:,.0f} records/s, "
              f"ratio {aio / sync:.2f}", file=sys.stderr, flush=True)
    sync_med = statistics.median(x["sync"] for x in rounds)
    aio_med = statistics.median(x["asyncio"] for x in rounds)
    return {"num_records": args.num_records, "record_size": args.record_size,
            "partitions": args.partitions, "rounds": rounds, "sync_median": sync_med,
            "asyncio_median": aio_med, "ratio_of_medians": round(aio_med / sync_med, 3),
            "median_ratio": statistics.median(x["ratio"] for x in rounds)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.aio_bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-server", dest="bootstrap", default=None)
    ap.add_argument("--topic", default="aio-bench")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--num-records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if args.bootstrap:
        result = run(args.bootstrap, args)
    else:
        from deploy.fleet import Fleet, free_base_port
        with tempfile.TemporaryDirectory(prefix="aio-bench-") as tmp:
            fleet = Fleet(tmp, free_base_port(), storage_nodes=1, controllers=1, gateways=1)
            try:
                fleet.up()
                assert fleet.gateway_endpoint is not None
                result = run(fleet.gateway_endpoint, args)
            finally:
                fleet.down()
    print(f"sync median {result['sync_median']:,.0f} records/s, asyncio median "
          f"{result['asyncio_median']:,.0f} records/s: asyncio/sync = "
          f"{result['ratio_of_medians']:.2f} (median of the per-round ratios "
          f"{result['median_ratio']:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
