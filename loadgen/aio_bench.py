"""riverbed.aio's producer against the sync one: `riverbed-perf produce` and
`riverbed-perf produce --asyncio`, interleaved, on one fleet, in the same run.

    .venv/bin/python -m loadgen.aio_bench                      # 5 rounds of 200,000 records
    .venv/bin/python -m loadgen.aio_bench --rounds 7 --num-records 500000 --json out.json
    .venv/bin/python -m loadgen.aio_bench --bootstrap-server tcp://127.0.0.1:9092   # a fleet you run

Without --bootstrap-server it starts its own fleet (ZooKeeper, a controller, one storage node,
a gateway) on free ports in a temporary directory and stops it at the end (by PID). Each round
runs the sync producer, then the asyncio one (same topic, settings and record count, in this
process); the figures are records/s (wall clock) and records per CPU second of this process (all
its threads: time.process_time), with the ratios asyncio/sync per round and of the medians.

Why both: the sync producer runs two threads (the application's and its sender), the asyncio one
a single thread. On an idle machine that costs the sync one GIL hand-offs; on a machine whose
cores are oversubscribed by other work, the scheduler gives a two-thread process about twice the
CPU time of a one-thread process, which the wall-clock ratio then shows rather than the
producers' own costs. The CPU-second ratio compares what each spends per record.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from loadgen import options, perf


def produce_once(bootstrap: str, topic: str, num_records: int, record_size: int,
                 use_asyncio: bool, extra: list[str]) -> tuple[float, float]:
    """(records/s, records per CPU second) of one riverbed-perf produce run in this process."""
    argv = ["produce", "--bootstrap-server", bootstrap, "--topic", topic, "--num-records",
            str(num_records), "--record-size", str(record_size), "--no-progress", *extra]
    if use_asyncio:
        argv.append("--asyncio")
    cpu = time.process_time()
    summary, rc = perf.run(options.parse_args(argv), live=False, out=io.StringIO())
    cpu = time.process_time() - cpu
    if rc != 0:
        raise RuntimeError(f"riverbed-perf {' '.join(argv)} failed ({summary.errors} errors)")
    return summary.records / summary.elapsed_s, summary.records / max(cpu, 1e-9)


def run(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    extra = ["--create-topic", "--partitions", str(args.partitions), "--replication-factor", "1"]
    produce_once(bootstrap, args.topic, 1000, args.record_size, False, extra)   # topic, warm-up
    rounds = []
    for r in range(args.rounds):
        sync, sync_cpu = produce_once(bootstrap, args.topic, args.num_records, args.record_size,
                                      False, [])
        aio, aio_cpu = produce_once(bootstrap, args.topic, args.num_records, args.record_size,
                                    True, [])
        rounds.append({"sync": round(sync), "asyncio": round(aio), "ratio": round(aio / sync, 3),
                       "sync_per_cpu_s": round(sync_cpu), "asyncio_per_cpu_s": round(aio_cpu),
                       "cpu_ratio": round(aio_cpu / sync_cpu, 3)})
        print(f"round {r + 1}: sync {sync:,.0f} records/s ({sync_cpu:,.0f}/CPU-s), asyncio "
              f"{aio:,.0f} records/s ({aio_cpu:,.0f}/CPU-s): ratio {aio / sync:.2f} "
              f"(per CPU second {aio_cpu / sync_cpu:.2f})", file=sys.stderr, flush=True)

    def med(key: str) -> float:
        return statistics.median(x[key] for x in rounds)
    return {"num_records": args.num_records, "record_size": args.record_size,
            "partitions": args.partitions, "cpus": os.cpu_count(),
            "load_average": os.getloadavg(), "rounds": rounds,
            "sync_median": med("sync"), "asyncio_median": med("asyncio"),
            "ratio_of_medians": round(med("asyncio") / med("sync"), 3),
            "median_ratio": med("ratio"),
            "sync_per_cpu_s_median": med("sync_per_cpu_s"),
            "asyncio_per_cpu_s_median": med("asyncio_per_cpu_s"),
            "cpu_ratio_of_medians": round(med("asyncio_per_cpu_s") / med("sync_per_cpu_s"), 3)}


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
          f"{result['median_ratio']:.2f}); per CPU second: sync "
          f"{result['sync_per_cpu_s_median']:,.0f}, asyncio "
          f"{result['asyncio_per_cpu_s_median']:,.0f}, asyncio/sync = "
          f"{result['cpu_ratio_of_medians']:.2f}; load average {result['load_average'][0]:.1f} "
          f"on {result['cpus']} CPUs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
