"""Measurements for the consumer-group note (not a test): run by hand.

    .venv/bin/python tests/integration/group_failover_bench.py [--runs 5] [--commits 1000]
        [--session-timeout-ms 6000] [--heartbeat-interval-ms 1000]

Starts a local fleet (1 controller, 3 storage nodes, 1 group coordinator, 1 offset manager,
1 gateway) in a temp dir, then
- failover: per run a new group of 3 members on a 6-partition topic with a backlog (one member a
  subprocess consuming 20 records per 20 ms, two on threads); SIGKILL the subprocess and time
  (a) until the survivors own all 6 partitions, (b) until they consume a record of the killed
  member's partitions. Median/min/max over the runs.
- commits: one member with 6 partitions, synchronous commit() of all 6 positions in a loop:
  commits/s and latency p50/p99.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

import test_consumer_groups as t  # noqa: E402

from deploy.fleet import Fleet, free_base_port  # noqa: E402
from riverbed import Consumer  # noqa: E402


def failover_run(bootstrap, group):
    proc = t.ProcMember(bootstrap, group)
    members = []
    try:
        t.wait_for(lambda: proc.assigned, 60, "process member assignment")
        members = [t.Member(bootstrap, group, f"{group}-thread-{i}") for i in range(2)]
        for m in members:
            m.start()
        t.wait_for(lambda: all(len(o) == 2 for o in [proc.assigned] + [m.assigned for m in members]),
                   60, "balanced group")
        killed = proc.assigned
        t.wait_for(lambda: len(proc.records) >= 40, 30, "process consuming")
        t_kill = time.monotonic()
        proc.kill()
        t.wait_for(lambda: frozenset().union(*(m.assigned for m in members)) == frozenset(range(6)),
                   60, "re-owned")
        t_owned = time.monotonic()

        def first():
            ts = [w for m in members for (p, _, w) in m.records if p in killed and w > t_kill]
            return min(ts) if ts else None
        t.wait_for(lambda: first() is not None, 30, "re-consumed")
        return t_owned - t_kill, first() - t_kill
    finally:
        proc.stop()
        for m in members:
            m.stop()


def commit_bench(bootstrap, n):
    with Consumer(bootstrap=bootstrap, group_id="bench-commits", auto_offset_reset="earliest",
                  enable_auto_commit=False, fetch_max_wait_ms=100,
                  session_timeout_ms=t.SESSION_TIMEOUT_MS, heartbeat_interval_ms=t.HEARTBEAT_MS) as c:
        c.subscribe([t.TOPIC])
        deadline = time.monotonic() + 60
        while len(c.assignment()) < 6 and time.monotonic() < deadline:
            c.poll(timeout_ms=200)
        c.poll(timeout_ms=200)
        lat = []
        start = time.perf_counter()
        for _ in range(n):
            t0 = time.perf_counter()
            c.commit()
            lat.append((time.perf_counter() - t0) * 1000)
        total = time.perf_counter() - start
    lat.sort()
    return n / total, lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--session-timeout-ms", type=int, default=t.SESSION_TIMEOUT_MS,
                    help="the members' session.timeout.ms (the SDK's default is 10000)")
    ap.add_argument("--heartbeat-interval-ms", type=int, default=t.HEARTBEAT_MS,
                    help="the members' heartbeat.interval.ms (the SDK's default is 3000)")
    args = ap.parse_args()
    # the members (threads and the subprocess) read these module settings when they start
    t.SESSION_TIMEOUT_MS = args.session_timeout_ms
    t.HEARTBEAT_MS = args.heartbeat_interval_ms
    with tempfile.TemporaryDirectory(dir=os.environ.get("GROUP_BENCH_DIR")) as d:
        fleet = Fleet(d, free_base_port(), storage_nodes=3, controllers=1, gateways=1)
        try:
            fleet.up()
            bootstrap = [fleet.gateway_endpoint]
            t.create_topic(bootstrap, t.TOPIC, t.PARTITIONS)
            t.produce(bootstrap, t.TOPIC, 2000)
            owned, consumed = [], []
            for i in range(args.runs):
                a, b = failover_run(bootstrap, f"bench-failover-{i}")
                owned.append(a)
                consumed.append(b)
                print(f"run {i}: re-owned {a:.2f} s, re-consumed {b:.2f} s", flush=True)
            print(f"SIGKILL -> re-owned: median {statistics.median(owned):.2f} s "
                  f"(min {min(owned):.2f}, max {max(owned):.2f}); -> consumed again: median "
                  f"{statistics.median(consumed):.2f} s (min {min(consumed):.2f}, max {max(consumed):.2f}) "
                  f"over {args.runs} runs; session.timeout.ms={t.SESSION_TIMEOUT_MS}, "
                  f"heartbeat.interval.ms={t.HEARTBEAT_MS}")
            rate, p50, p99 = commit_bench(bootstrap, args.commits)
            print(f"sync commit of 6 partitions x {args.commits}: {rate:.0f} commits/s, "
                  f"p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        finally:
            fleet.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
