"""Issue 15's replication, large-record and latency figures, each beside a baseline measured in
the same run (`make bench` runs it after the matrix; by hand:)

    .venv/bin/python -m loadgen.repl_bench                    # starts its own fleet
    .venv/bin/python -m loadgen.repl_bench --rounds 3 --json out.json
    ... [--bootstrap-server tcp://HOST:PORT]                  # a running fleet instead
    ... [--only acks,large,e2e]                               # a subset of the rows
    ... [--security-protocol NONE]                            # an unencrypted fleet (default CURVE)

Every row is a `riverbed-perf` command with the producer's *default* settings (no --batch-size,
--linger-ms or --max-in-flight) unless the row says "tuned"; 100 B records unless it says 1 KiB;
`--bulk` (send_many) for throughput rows; 3 partitions, round-robin, for the acks rows.

Rows (a round runs each once, back to back; with --rounds R the medians are printed):
- acks=1, RF 1, 3 partitions (the baseline) and acks=all, RF 3, min.insync.replicas 2,
  3 partitions, idempotent (the default with acks=all): ratio = acks=all ÷ acks=1. Also acks=1
  at RF 3 (the same replication work, nobody waits for it; its CPU counted until the followers
  caught up): acks=all ÷ that is what waiting for the followers costs. With its own fleet, each
  of these rows also gets the CPU seconds per million records of the client, the gateway, the
  storage nodes and the other services (loadgen.proc_cpu) and the cores busy meanwhile: when
  both rows keep the cores busy, CPU per record(acks=1 RF 1) ÷ CPU per record(acks=all RF 3) is
  the most the ratio can be on them.
- 1 KiB records, acks=1, RF 1, 1 partition: defaults against tuned (batch.size 262144,
  linger.ms 5): ratio = defaults ÷ tuned (MB/s). Both start after a 2 s pause (the earlier
  rows' writeback) and take turns going first, round by round.
- end-to-end latency through the gateway (`riverbed-perf e2e`, acks=1, RF 1, 1 partition,
  fetch.min.bytes 1) at 1,000 and at 50,000 records/s: p50, p99, p99.9, max of every record
  (the row's figure), and the same after the first second of records (`--warmup-records`
  = the rate: the steady state, without a new topic's first requests and fetches).

Starts its own fleet like `loadgen.bench` (3 storage nodes, 1 controller, 1 gateway) unless
--bootstrap-server is given. Only the driver lives here: it uses loadgen.perf, deploy.fleet and
the SDK of whatever tree is on the path, so the same file measures a before and an after tree
(PYTHONPATH=<other tree>).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid

ACKS_RECORDS = 600_000
LARGE_RECORDS = 150_000
E2E = ((1_000, 10_000), (50_000, 250_000))     # (records/s, records)
SETTLE_S = 2.0      # before the 1 KiB and e2e rows: the earlier rows' writeback settles first
REPLICATED_TIMEOUT_S = 120.0
TUNED = ["--batch-size", "262144", "--linger-ms", "5"]


def _perf(argv: list[str]):
    from loadgen import options
    from loadgen.perf import run
    args = options.parse_args(argv)
    out = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        summary, rc = run(args, live=False, out=out)
    if rc != 0:
        raise RuntimeError(f"riverbed-perf {' '.join(argv)} failed (rc {rc}):\n{out.getvalue()}")
    return summary


def _delete(bootstrap: str, topic: str) -> None:
    from riverbed import Admin
    try:
        with Admin(bootstrap=[bootstrap]) as admin:
            admin.delete_topics([topic])
    except Exception as e:  # noqa: BLE001 - the figures stand; only disk is at stake
        print(f"  (could not delete {topic}: {e})", file=sys.stderr)


def _produce(bootstrap: str, *, records: int, size: int, acks: str, rf: int, partitions: int,
             extra: list[str] = (), topic_configs: list[str] = (), after=None) -> dict:
    """One `riverbed-perf produce --bulk` row; `after(topic, partitions)` runs before the topic
    is deleted."""
    topic = f"rb-{acks}-rf{rf}-{size}-{uuid.uuid4().hex[:6]}"
    argv = ["produce", "--bootstrap-server", bootstrap, "--topic", topic, "--num-records",
            str(records), "--record-size", str(size), "--bulk", "--acks", acks,
            "--create-topic", "--partitions", str(partitions), "--replication-factor", str(rf),
            "--reporting-interval", "60000", "--no-progress", *extra]
    for kv in topic_configs:
        argv += ["--topic-config", kv]
    try:
        s = _perf(argv)
        if after is not None:
            after(topic, partitions)
    finally:
        _delete(bootstrap, topic)
    return {"records_per_sec": s.records_per_sec, "mb_per_sec": s.mb_per_sec,
            "latency_ms": dict(s.latency_ms), "errors": s.errors}


def _e2e(bootstrap: str, rate: int, records: int) -> dict:
    topic = f"rb-e2e-{rate}-{uuid.uuid4().hex[:6]}"
    try:
        s = _perf(["e2e", "--bootstrap-server", bootstrap, "--topic", topic, "--num-records",
                   str(records), "--throughput", str(rate), "--record-size", "100", "--acks",
                   "1", "--partition", "0", "--fetch-min-bytes", "1", "--create-topic",
                   "--partitions", "1", "--replication-factor", "1", "--reporting-interval",
                   "60000", "--no-progress", "--warmup-records", str(min(rate, records // 2))])
    finally:
        _delete(bootstrap, topic)
    steady = s.steady_state or {}
    return {"records_per_sec": s.records_per_sec, "latency_ms": dict(s.latency_ms),
            "steady_latency_ms": dict(steady.get("latency_ms") or {})}


def _replicated(bootstrap: str, records: int):
    """An `after` for _produce: wait until the high watermarks (the followers' copies, with
    acks=1 still arriving after the last acknowledgement) reach `records`."""
    def wait(topic: str, partitions: int) -> None:
        from riverbed import Consumer, TopicPartition
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        deadline = time.monotonic() + REPLICATED_TIMEOUT_S
        with contextlib.closing(Consumer(bootstrap=bootstrap)) as c:
            while sum(c.end_offsets(tps).values()) < records:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{topic}: followers did not catch up within "
                                       f"{REPLICATED_TIMEOUT_S} s")
                time.sleep(0.05)
    return wait


def _with_cpu(pids: dict[str, list[int]] | None, records: int, row):
    """Run `row()` (a _produce); with `pids`, add its CPU seconds per million records by group
    and the cores busy on average (bench._cpu_row's measure, per record instead of per GB),
    both up to the end of `row()` (for acks=1 at RF 3: until the followers caught up)."""
    if not pids:
        return row()
    from loadgen import proc_cpu
    before, t0 = proc_cpu.snapshot(pids), time.perf_counter()
    out = row()
    seconds = time.perf_counter() - t0
    used = proc_cpu.delta(before, proc_cpu.snapshot(pids))
    out["cpu_s_per_m"] = {g: c.total / records * 1e6 for g, c in used.items()}
    out["cores"] = sum(c.total for c in used.values()) / seconds if seconds > 0 else 0.0
    return out


def one_round(bootstrap: str, only: set[str], scale: float,
              pids: dict[str, list[int]] | None = None, index: int = 0) -> dict:
    """One round of the rows in `only`; `index` (the round's number) alternates which of the two
    1 KiB rows goes first, so neither always pays the other's writeback."""
    out: dict = {}
    n = max(10_000, int(ACKS_RECORDS * scale))
    if "acks" in only:
        out["acks1_rf1"] = _with_cpu(pids, n, lambda: _produce(
            bootstrap, records=n, size=100, acks="1", rf=1, partitions=3))
        out["acks1_rf3"] = _with_cpu(pids, n, lambda: _produce(
            bootstrap, records=n, size=100, acks="1", rf=3, partitions=3,
            topic_configs=["min.insync.replicas=2"], after=_replicated(bootstrap, n)))
        out["acksall_rf3"] = _with_cpu(pids, n, lambda: _produce(
            bootstrap, records=n, size=100, acks="all", rf=3, partitions=3,
            topic_configs=["min.insync.replicas=2"]))
        out["acks_ratio"] = out["acksall_rf3"]["records_per_sec"] / \
            out["acks1_rf1"]["records_per_sec"]
        out["wait_ratio"] = out["acksall_rf3"]["records_per_sec"] / \
            out["acks1_rf3"]["records_per_sec"]
        cpu1, cpuall = (sum(out[k].get("cpu_s_per_m", {}).values())
                        for k in ("acks1_rf1", "acksall_rf3"))
        if cpu1 and cpuall:
            out["cpu_ratio"] = cpu1 / cpuall
    if "large" in only:
        n = max(5_000, int(LARGE_RECORDS * scale))
        rows = [("large_default", []), ("large_tuned", TUNED)]
        time.sleep(SETTLE_S)
        for key, extra in (rows if index % 2 == 0 else rows[::-1]):
            out[key] = _produce(bootstrap, records=n, size=1024, acks="1", rf=1, partitions=1,
                                extra=["--partition", "0", *extra])
        out["large_ratio"] = out["large_default"]["mb_per_sec"] / \
            out["large_tuned"]["mb_per_sec"]
    if "e2e" in only:
        for rate, records in E2E:
            time.sleep(SETTLE_S)
            out[f"e2e_{rate}"] = _e2e(bootstrap, rate, max(2_000, int(records * scale)))
    return out


def _median(rounds: list[dict], *path):
    vals = []
    for r in rounds:
        v = r
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None:
            vals.append(v)
    return statistics.median(vals) if vals else None


def format_report(rounds: list[dict]) -> str:
    m = lambda *p: _median(rounds, *p)   # noqa: E731
    lines = [f"issue-15 rows, medians of {len(rounds)} round(s), producer defaults unless tuned"]
    if m("acks_ratio") is not None:
        lines.append(f"  acks=1   RF1 3p 100 B bulk:               {m('acks1_rf1', 'records_per_sec'):>11,.0f} records/s (baseline)")
        lines.append(f"  acks=all RF3 min.insync 2 3p idempotent:  {m('acksall_rf3', 'records_per_sec'):>11,.0f} records/s  "
                     f"ratio {m('acks_ratio'):.2f}  (p99 {m('acksall_rf3', 'latency_ms', 'p99'):.1f} ms)")
        if m("wait_ratio") is not None:
            lines.append(f"  acks=1   RF3 min.insync 2 3p:              {m('acks1_rf3', 'records_per_sec'):>11,.0f} records/s  "
                         f"acks=all ÷ this {m('wait_ratio'):.2f} (the cost of waiting for followers)")
        if m("cpu_ratio") is not None:
            for key, label in (("acks1_rf1", "acks=1 RF1"), ("acks1_rf3", "acks=1 RF3"),
                               ("acksall_rf3", "acks=all RF3")):
                groups = ", ".join(f"{g} {m(key, 'cpu_s_per_m', g):.2f}" for g in
                                   (rounds[0].get(key, {}).get("cpu_s_per_m") or {}))
                lines.append(f"    CPU s per M records, {label:<12}: "
                             f"{sum(m(key, 'cpu_s_per_m', g) for g in (rounds[0][key].get('cpu_s_per_m') or {})):.2f} "
                             f"({groups}); {m(key, 'cores'):.2f} cores busy")
            lines.append(f"  CPU per record acks=1 RF1 ÷ acks=all RF3:  {m('cpu_ratio'):.2f} "
                         f"(the most the ratio can be where both rows keep the cores busy)")
    if m("large_ratio") is not None:
        lines.append(f"  1 KiB acks=1 RF1 1p, tuned (batch 256 KiB): {m('large_tuned', 'mb_per_sec'):>8.1f} MB/s (baseline)")
        lines.append(f"  1 KiB acks=1 RF1 1p, defaults:              {m('large_default', 'mb_per_sec'):>8.1f} MB/s  "
                     f"ratio {m('large_ratio'):.2f}")
    for rate, _ in E2E:
        if m(f"e2e_{rate}", "latency_ms", "p99") is None:
            continue
        lat = lambda k: m(f"e2e_{rate}", "latency_ms", k)   # noqa: E731
        lines.append(f"  e2e at {rate:>6,}/s via the gateway: p50 {lat('p50'):.2f}  p95 "
                     f"{lat('p95'):.2f}  p99 {lat('p99'):.2f}  p99.9 {lat('p99_9'):.2f}  max "
                     f"{lat('max'):.2f} ms")
        if m(f"e2e_{rate}", "steady_latency_ms", "p99") is not None:
            st = lambda k: m(f"e2e_{rate}", "steady_latency_ms", k)   # noqa: E731
            lines.append(f"    after its first second (steady state): p50 {st('p50'):.2f}  "
                         f"p95 {st('p95'):.2f}  p99 {st('p99'):.2f}  p99.9 {st('p99_9'):.2f}  "
                         f"max {st('max'):.2f} ms")
    return "\n".join(lines)


@contextlib.contextmanager
def _fleet(bootstrap: str | None, security_protocol: str = "CURVE"):
    """(gateway endpoint, the fleet's pids by CPU group or None for a fleet not started here)."""
    if bootstrap:
        yield bootstrap, None
        return
    from deploy.fleet import Fleet, free_base_port
    d = tempfile.mkdtemp(prefix="riverbed-repl-bench-")
    base = free_base_port()
    print(f"starting a fleet (3 storage nodes, 1 controller, 1 gateway) under {d}, base "
          f"port {base}", file=sys.stderr, flush=True)
    with Fleet(d, base, storage_nodes=3, controllers=1, gateways=1,
               security_protocol=security_protocol) as fleet:
        fleet.up(detach=True)
        from loadgen.proc_cpu import fleet_pids
        yield fleet.gateway_endpoint, fleet_pids(fleet)
    shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen.repl_bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", help="a running fleet's gateway (default: start one)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply records per row")
    parser.add_argument("--only", default="acks,large,e2e")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--security-protocol", choices=("CURVE", "NONE"), default="CURVE",
                        help="of the fleet started here (default CURVE, the fleet's default)")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    rounds = []
    with _fleet(args.bootstrap_server, args.security_protocol) as (bootstrap, pids):
        for i in range(args.rounds):
            r = one_round(bootstrap, only, args.scale, pids, index=i)
            rounds.append(r)
            print(f"round {i + 1}: " + json.dumps({k: v for k, v in r.items()
                                                   if k.endswith("ratio")}), file=sys.stderr,
                  flush=True)
    print(format_report(rounds))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rounds, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
