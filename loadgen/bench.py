"""`make bench`: a fixed produce matrix against a fleet of our own, each row beside a baseline.

    .venv/bin/python -m loadgen.bench            # the matrix (a few minutes)
    .venv/bin/python -m loadgen.bench --quick    # issue 3's figure: one producer, 100 B, acks=1,
                                                 # one partition, through the gateway; one consumer;
                                                 # issue 6's e2e latency at 50,000 records/s;
                                                 # each produce row beside its --null-sink baseline
    ... [--bootstrap-server tcp://HOST:PORT]     # use a running fleet instead of starting one
    ... [--json FILE]                            # the rows as JSON too
    .venv/bin/python -m loadgen.bench --security # CURVE on vs off in the same run: a NONE and a
                                                 # CURVE fleet side by side, the same rows on each,
                                                 # alternating, best of --rounds (2):
                                                 # bulk produce (send_many, 100 B and 1 KiB,
                                                 # acks=1, RF 1), consume, e2e latency at 50,000/s;
                                                 # ratio = CURVE ÷ NONE (aim: >= 0.8 in bulk);
                                                 # then where the CPU went (seconds per GB of
                                                 # records per process group, ZeroMQ I/O threads
                                                 # + the rest) and the bound: the raw socket
                                                 # ceiling (one PUSH->PULL stream, NONE vs CURVE,
                                                 # measured first in the same run) and the ratio
                                                 # CPU allows (NONE s/GB ÷ CURVE s/GB)
    ... --security [--ceiling-seconds 1]         # per raw stream; 0 skips the ceiling

The fleet bench starts runs with `--security-protocol` (default CURVE, the fleet's default).
    ... [--no-issue15]                           # the matrix without issue 15's rows

Matrix: record size 100 B and 1 KiB × acks 1 and all × replication factor 1 and 3 × compression
none and lz4. acks=all with replication factor 1 is skipped (an ISR of one answers acks=all at
once: the same path as acks=1) unless --full: 12 rows, 16 with --full. Every row produces to a
fresh one-partition topic with Producer.send_many (the SDK's fast path) from this process, with
batch.size 262144, linger.ms 5, max.in.flight 5.

Baseline ("baseline/s" and "ratio" columns): the same SDK building and discarding the same
batches with no network, measured in the same run — the row's own `riverbed-perf produce`
command with `--null-sink` (loadgen.nullsink): the same Producer, settings, send_many calls,
accumulator, sender thread and request encoding, its requests answered in-process instead of by
a gateway. ratio = row records/s ÷ baseline records/s: the share of the SDK's own speed the
whole path (sockets, gateway, storage node, replication, all on the same cores) keeps.
"build/s" and "÷build": the lower bound of the SDK's cost alone — BatchBuilder.append_values +
build() into nothing, same size, batch size and compression (no accumulator, no sender thread).

After the matrix, issue 15's rows (loadgen.repl_bench, on the same fleet, producer defaults):
acks=all RF 3 min.insync.replicas 2 idempotent 3 partitions ÷ acks=1 RF 1 3 partitions; 1 KiB
records with default settings ÷ the same with batch.size 262144 (MB/s); end-to-end latency
percentiles through the gateway at 1,000 and 50,000 records/s.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import itertools
import json
import shutil
import sys
import tempfile
import time
import uuid

from loadgen import options, proc_cpu
from loadgen.perf import make_payloads, run

__all__ = ["main", "builder_records_per_sec", "matrix_rows", "format_table"]

# 256 KiB: with acks=all the producer is idempotent by default and, as Kafka's, keeps at most five
# batches in flight per partition, so throughput on one partition is bounded by batch size.
BATCH_SIZE = 262144
LINGER_MS = 5
MAX_IN_FLIGHT = 5
RECORDS = {100: 2_000_000, 1024: 300_000}  # per row: ~2-20 s each on 2 shared cores
# --quick's e2e row (issue 6: p99 <= 5 ms at 50,000 records/s). The throttle sends ~2 ms of
# records at a time (Kafka's perf tool); linger.ms 0.5 gathers such a burst into one request:
# p99 4.2-5.8 ms here against 5.2-7.4 ms with 0 and 5.0-7.4 ms with 1 (4 runs each).
E2E_RATE = 50_000
E2E_LINGER_MS = 0.5
E2E_SETTLE_S = 3.0
E2E_FETCH_MAX_WAIT_MS = 100


@dataclasses.dataclass(frozen=True)
class Row:
    record_size: int
    acks: str
    replication_factor: int
    compression: str


def matrix_rows(full: bool = False) -> list[Row]:
    rows = []
    for size, acks, rf, comp in itertools.product((100, 1024), ("1", "all"), (1, 3),
                                                  ("none", "lz4")):
        if acks == "all" and rf == 1 and not full:
            continue
        rows.append(Row(size, acks, rf, comp))
    return rows


def builder_records_per_sec(record_size: int, compression: str, num_records: int,
                             batch_size: int = BATCH_SIZE, repeat: int = 3) -> float:
    """Records/s of building and discarding the batches a producer would build for
    num_records values of record_size (best of `repeat`)."""
    from riverbed.records import BatchBuilder
    from riverbed.producer import compression_from_name
    codec = compression_from_name(compression)
    payloads = make_payloads(record_size)
    chunk = max(1, batch_size // (record_size + 8))
    cycle = [payloads[i % len(payloads)] for i in range(chunk)]
    best = float("inf")
    sink = 0
    for _ in range(repeat):
        start = time.perf_counter()
        left = num_records
        ts = int(time.time() * 1000)
        while left > 0:
            builder = BatchBuilder(compression=codec, batch_size=batch_size)
            n = builder.append_values(ts, cycle if left >= chunk else cycle[:left])
            sink += len(builder.build())    # the null sink
            left -= n
        best = min(best, time.perf_counter() - start)
    return num_records / best


def _perf(argv: list[str]):
    args = options.parse_args(argv)
    out = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        summary, rc = run(args, live=False, out=out)
    if rc != 0:
        raise RuntimeError(f"riverbed-perf {' '.join(argv)} failed (rc {rc}):\n{out.getvalue()}")
    return summary


def row_argv(bootstrap: str, row: Row, num_records: int, topic: str) -> list[str]:
    return ["produce", "--bootstrap-server", bootstrap, "--topic", topic,
            "--num-records", str(num_records), "--record-size", str(row.record_size),
            "--bulk", "--acks", row.acks, "--compression-type", row.compression,
            "--batch-size", str(BATCH_SIZE), "--linger-ms", str(LINGER_MS),
            "--max-in-flight", str(MAX_IN_FLIGHT), "--partition", "0",
            "--create-topic", "--partitions", "1",
            "--replication-factor", str(row.replication_factor),
            "--reporting-interval", "60000", "--no-progress"]


def null_sink_records_per_sec(argv: list[str]) -> float:
    """The same riverbed-perf produce command against the in-process null sink."""
    return _perf([*argv, "--null-sink"]).records_per_sec


def run_row(bootstrap: str, row: Row, num_records: int) -> dict:
    topic = f"bench-{row.record_size}-{row.acks}-rf{row.replication_factor}-{row.compression}-" \
            f"{uuid.uuid4().hex[:6]}"
    argv = row_argv(bootstrap, row, num_records, topic)
    try:
        s = _perf(argv)
    finally:
        _delete_topic(bootstrap, topic)
    baseline = null_sink_records_per_sec(argv)
    return {"record_size": row.record_size, "acks": row.acks,
            "replication_factor": row.replication_factor, "compression": row.compression,
            "records": s.records, "records_per_sec": s.records_per_sec,
            "mb_per_sec": s.mb_per_sec, "latency_p50_ms": s.latency_ms["p50"],
            "latency_p99_ms": s.latency_ms["p99"], "baseline_records_per_sec": baseline,
            "ratio": s.records_per_sec / baseline}


def _delete_topic(bootstrap: str, topic: str) -> None:
    """Free the row's disk (RF 3 x 200-300 MB) before the next row."""
    from riverbed import Admin
    try:
        with Admin(bootstrap=[bootstrap]) as admin:
            admin.delete_topics([topic])
    except Exception as e:  # noqa: BLE001 - the figures stand; only disk is at stake
        print(f"  (could not delete {topic}: {e})", file=sys.stderr)


def format_table(rows: list[dict]) -> str:
    head = (f"{'size':>5} {'acks':>4} {'rf':>2} {'comp':>4} {'records':>8} {'records/s':>10} "
            f"{'MB/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'baseline/s':>11} {'ratio':>6} "
            f"{'build/s':>11} {'÷build':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['record_size']:>5} {r['acks']:>4} {r['replication_factor']:>2} "
                     f"{r['compression']:>4} {r['records']:>8} {r['records_per_sec']:>10,.0f} "
                     f"{r['mb_per_sec']:>7.2f} {r['latency_p50_ms']:>7.1f} "
                     f"{r['latency_p99_ms']:>7.1f} {r['baseline_records_per_sec']:>11,.0f} "
                     f"{r['ratio']:>6.3f} {r['builder_records_per_sec']:>11,.0f} "
                     f"{r['ratio_to_builder']:>6.3f}")
    return "\n".join(lines)


@contextlib.contextmanager
def _fleet(bootstrap: str | None, security_protocol: str = "CURVE"):
    if bootstrap:
        yield bootstrap
        return
    from deploy.fleet import Fleet, free_base_port
    d = tempfile.mkdtemp(prefix="riverbed-bench-")
    base = free_base_port()
    print(f"starting a fleet (3 storage nodes, 1 controller, 1 gateway, security.protocol "
          f"{security_protocol}) under {d}, base port {base}", file=sys.stderr, flush=True)
    # up() exports the fleet's client settings (RIVERBED_*) to this process: the rows' clients
    # use its client key; down() puts the environment back
    with Fleet(d, base, storage_nodes=3, controllers=1, gateways=1,
               security_protocol=security_protocol) as fleet:
        fleet.up(detach=True)
        yield fleet.gateway_endpoint
    shutil.rmtree(d, ignore_errors=True)   # kept (with the services' logs) when a row failed


def run_matrix(bootstrap: str, full: bool, scale: float) -> list[dict]:
    rows = []
    builders: dict[tuple[int, str], float] = {}
    for row in matrix_rows(full):
        n = max(1000, int(RECORDS[row.record_size] * scale))
        key = (row.record_size, row.compression)
        if key not in builders:
            builders[key] = builder_records_per_sec(row.record_size, row.compression, n)
        result = run_row(bootstrap, row, n)
        result["builder_records_per_sec"] = builders[key]
        result["ratio_to_builder"] = result["records_per_sec"] / builders[key]
        rows.append(result)
        print(f"  {row}: {result['records_per_sec']:,.0f} records/s, ratio {result['ratio']:.2f}",
              file=sys.stderr, flush=True)
    return rows


def run_quick(bootstrap: str, num_records: int, replication_factor: int,
              e2e_records: int = 0) -> dict:
    """Issue 3's figure: one producer (send(), then send_many()), 100 B, acks=1, one partition,
    through the gateway; then one consumer reading the send() records back; then (e2e_records
    > 0) issue 6's end-to-end latency at E2E_RATE records/s (`riverbed-perf e2e`: producer
    here, consumer in another process, linger.ms E2E_LINGER_MS, fetch.min.bytes 1)."""
    topic = f"quick-{uuid.uuid4().hex[:8]}"
    common = ["--bootstrap-server", bootstrap, "--num-records", str(num_records),
              "--reporting-interval", "60000", "--no-progress"]
    produce = ["produce", *common, "--record-size", "100", "--acks", "1", "--partition", "0",
            "--create-topic", "--partitions", "1",
               "--replication-factor", str(replication_factor)]
    send_argv = [*produce, "--topic", topic]
    bulk_argv = [*produce, "--topic", topic + "-bulk", "--bulk"]
    sent, bulk = _perf(send_argv), _perf(bulk_argv)
    sent_base = null_sink_records_per_sec(send_argv)
    bulk_base = null_sink_records_per_sec(bulk_argv)
    read = _perf(["consume", *common, "--topic", topic])
    e2e = None
    if e2e_records > 0:
        # the throughput phases leave the storage node flushing ~100 MB of fresh segments and
        # the kernel writing them back: let that settle so the latency row measures latency
        time.sleep(E2E_SETTLE_S)
        e2e = _perf(["e2e", "--bootstrap-server", bootstrap, "--topic", topic + "-e2e",
                     "--num-records", str(e2e_records), "--throughput", str(E2E_RATE),
                     "--record-size", "100", "--acks", "1", "--partition", "0",
                     "--linger-ms", str(E2E_LINGER_MS), "--fetch-min-bytes", "1",
                     "--consumer-prop", f"fetch_max_wait_ms={E2E_FETCH_MAX_WAIT_MS}",
                     "--create-topic", "--partitions", "1",
                     "--replication-factor", str(replication_factor),
                     "--reporting-interval", "60000", "--no-progress"])
    return {"num_records": num_records, "replication_factor": replication_factor,
            "produce_send": _produce_figures(sent, sent_base),
            "produce_send_many": _produce_figures(bulk, bulk_base),
            "consume": {"records": read.records, "records_per_sec": read.records_per_sec,
                        "mb_per_sec": read.mb_per_sec},
            "e2e": None if e2e is None else {
                "records": e2e.records, "records_per_sec": e2e.records_per_sec,
                "target_records_per_sec": E2E_RATE, "linger_ms": E2E_LINGER_MS,
                "fetch_max_wait_ms": E2E_FETCH_MAX_WAIT_MS, "latency_ms": e2e.latency_ms}}


SECURITY_RECORDS = {100: 1_000_000, 1024: 200_000}


def _cpu_row(before: dict, pids: dict[str, list[int]], nbytes: int, seconds: float) -> dict:
    """CPU seconds per GB of records (per group: ZeroMQ I/O threads and the rest) and cores
    busy on average while the row ran."""
    used = proc_cpu.delta(before, proc_cpu.snapshot(pids))
    gb = nbytes / 1e9
    return {"cpu_s_per_gb": {g: {"io": c.io / gb, "other": c.other / gb,
                                 "io_busiest": c.io_busiest / gb} for g, c in used.items()},
            "cores": sum(c.total for c in used.values()) / seconds if seconds > 0 else 0.0}


def run_security_side(bootstrap: str, client_flags: list[str], protocol: str, scale: float,
                      e2e_records: int, pids: dict[str, list[int]] | None = None) -> dict:
    """One side of the CURVE on/off comparison, against a fleet running `protocol`. With
    `pids` (proc_cpu.fleet_pids), each produce and consume row also carries its CPU per GB by group."""
    out: dict = {"security_protocol": protocol, "produce": {}, "consume": {}}
    pids = pids or {"client": [__import__("os").getpid()]}
    for size, n in SECURITY_RECORDS.items():
        n = max(1000, int(n * scale))
        topic = f"sec-{protocol.lower()}-{size}-{uuid.uuid4().hex[:6]}"
        common = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(n),
                  "--reporting-interval", "60000", "--no-progress", *client_flags]
        before, t0 = proc_cpu.snapshot(pids), time.perf_counter()
        p = _perf(["produce", *common, "--record-size", str(size), "--bulk", "--acks", "1",
                   "--batch-size", str(BATCH_SIZE), "--linger-ms", str(LINGER_MS),
                   "--max-in-flight", str(MAX_IN_FLIGHT), "--partition", "0",
                   "--create-topic", "--partitions", "1", "--replication-factor", "1"])
        p_cpu = _cpu_row(before, pids, p.records * size, time.perf_counter() - t0)
        before, t0 = proc_cpu.snapshot(pids), time.perf_counter()
        c = _perf(["consume", *common])
        c_cpu = _cpu_row(before, pids, c.records * size, time.perf_counter() - t0)
        _delete_topic(bootstrap, topic)
        out["produce"][size] = {"records": p.records, "records_per_sec": p.records_per_sec,
                                "mb_per_sec": p.mb_per_sec, "latency_ms": p.latency_ms, **p_cpu}
        out["consume"][size] = {"records": c.records, "records_per_sec": c.records_per_sec,
                                "mb_per_sec": c.mb_per_sec, **c_cpu}
    if e2e_records > 0:
        time.sleep(E2E_SETTLE_S)
        e = _perf(["e2e", "--bootstrap-server", bootstrap,
                   "--topic", f"sec-e2e-{protocol.lower()}-{uuid.uuid4().hex[:6]}",
                   "--num-records", str(e2e_records), "--throughput", str(E2E_RATE),
                   "--record-size", "100", "--acks", "1", "--partition", "0",
                   "--linger-ms", str(E2E_LINGER_MS), "--fetch-min-bytes", "1",
                   "--consumer-prop", f"fetch_max_wait_ms={E2E_FETCH_MAX_WAIT_MS}",
                   "--create-topic", "--partitions", "1", "--replication-factor", "1",
                   "--reporting-interval", "60000", "--no-progress", *client_flags])
        out["e2e"] = {"records": e.records, "records_per_sec": e.records_per_sec,
                      "latency_ms": e.latency_ms}
    return out


def _best(a: dict | None, b: dict) -> dict:
    """Per row, the better of two rounds (more records/s; lower latency)."""
    if a is None:
        return b
    out = {"security_protocol": b["security_protocol"], "produce": {}, "consume": {}}
    for kind in ("produce", "consume"):
        for size in b[kind]:
            out[kind][size] = max(a[kind][size], b[kind][size],
                                  key=lambda r: r["records_per_sec"])
    if "e2e" in b:
        out["e2e"] = min(a["e2e"], b["e2e"], key=lambda r: r["latency_ms"]["p99"])
    return out


# the raw socket ceiling's payloads: a produce request's batch and a fetch response's partition
# (the consumer's max.partition.fetch.bytes default)
CEILING_SIZES = (BATCH_SIZE, 1 << 20)
# encrypted hops a record crosses: client -> gateway -> leader (produce), back for a fetch
HOPS = 2


def run_security(scale: float, e2e_records: int, rounds: int = 2,
                 ceiling_seconds: float = 1.0) -> dict:
    """CURVE on vs off in the same run: a NONE fleet and a CURVE fleet side by side (the same
    machine state for both), the same rows on each, alternating which goes first, `rounds`
    times; each row keeps its best round. Before the fleets start, the raw socket ceiling
    (loadgen.curve_ceiling: one PUSH -> PULL stream of CEILING_SIZES, NONE vs CURVE) unless
    `ceiling_seconds` is 0; it is returned under "ceiling"."""
    from loadgen import curve_ceiling
    sides: dict = {"NONE": None, "CURVE": None}
    if ceiling_seconds > 0:
        sides["ceiling"] = curve_ceiling.ceiling(list(CEILING_SIZES), ceiling_seconds)
    with contextlib.ExitStack() as stack:
        fleets = {}
        for protocol in ("NONE", "CURVE"):
            bootstrap, fleet = stack.enter_context(_fleet_obj(protocol))
            flags = (["--command-config", str(fleet.security.client_properties_file)]
                     if protocol == "CURVE" else ["--security-protocol", "NONE"])
            fleets[protocol] = (bootstrap, flags, proc_cpu.fleet_pids(fleet))
        for r in range(rounds):
            order = ("NONE", "CURVE") if r % 2 == 0 else ("CURVE", "NONE")
            for protocol in order:
                bootstrap, flags, pids = fleets[protocol]
                side = run_security_side(bootstrap, flags, protocol, scale, e2e_records, pids)
                sides[protocol] = _best(sides[protocol], side)
                print(f"  round {r + 1} {protocol}: produce 100 B "
                      f"{side['produce'][100]['records_per_sec']:,.0f}/s", file=sys.stderr,
                      flush=True)
    return sides


@contextlib.contextmanager
def _fleet_obj(security_protocol: str):
    from deploy.fleet import Fleet, free_base_port
    d = tempfile.mkdtemp(prefix="riverbed-bench-")
    base = free_base_port()
    print(f"starting a fleet (3 storage nodes, 1 controller, 1 gateway, security.protocol "
          f"{security_protocol}) under {d}, base port {base}", file=sys.stderr, flush=True)
    with Fleet(d, base, storage_nodes=3, controllers=1, gateways=1,
               security_protocol=security_protocol) as fleet:
        fleet.up(detach=True)
        yield fleet.gateway_endpoint, fleet
    shutil.rmtree(d, ignore_errors=True)


def format_security(sides: dict) -> str:
    off, on = sides["NONE"], sides["CURVE"]
    lines = [f"{'row':<28} {'NONE':>14} {'CURVE':>14} {'CURVE/NONE':>11}", "-" * 70]
    for size in off["produce"]:
        for kind, unit in (("produce", "records/s"), ("consume", "records/s")):
            a, b = off[kind][size]["records_per_sec"], on[kind][size]["records_per_sec"]
            lines.append(f"{f'{kind} {size} B ({unit})':<28} {a:>14,.0f} {b:>14,.0f} "
                         f"{b / a:>11.2f}")
        a, b = off["produce"][size]["mb_per_sec"], on["produce"][size]["mb_per_sec"]
        lines.append(f"{f'produce {size} B (MB/s)':<28} {a:>14.2f} {b:>14.2f} {b / a:>11.2f}")
    if "e2e" in off:
        for q in ("p50", "p99", "p99_9"):
            a, b = off["e2e"]["latency_ms"][q], on["e2e"]["latency_ms"][q]
            lines.append(f"{f'e2e {q} ms at {E2E_RATE:,}/s':<28} {a:>14.2f} {b:>14.2f} "
                         f"{(b / a if a else float('nan')):>11.2f}")
    return "\n".join(lines)


def cpu_total(row: dict) -> float:
    """A row's CPU seconds per GB of records, all groups."""
    return sum(c["io"] + c["other"] for c in row["cpu_s_per_gb"].values())


def format_bounds(sides: dict) -> str:
    """The raw socket ceiling and the bound CPU puts on each row's ratio, from this run."""
    from loadgen import curve_ceiling
    ceil = sides.get("ceiling")
    lines = []
    if ceil:
        lines.append("raw socket ceiling (this run): one PUSH->PULL stream over tcp loopback, "
                     "no Riverbed code")
        lines.append(curve_ceiling.format_ceiling(ceil))
    extra = {size: r["extra_io_cpu_s_per_gb"] for size, r in (ceil or {}).items()}
    head = (f"{'row':<16} {'NONE s/GB':>10} {'CURVE s/GB':>11} {'CPU ratio':>10} "
            f"{'model':>6} {'measured':>9}")
    lines += ["CPU ratio = NONE CPU s/GB ÷ CURVE CPU s/GB of the fleet rows (all processes): "
              "the ratio when the cores are the limit. model = NONE s/GB ÷ (NONE s/GB + "
              f"{HOPS} hops × the raw stream's extra s/GB per CURVE hop).", head, "-" * len(head)]
    for kind, size_key in (("produce", BATCH_SIZE), ("consume", 1 << 20)):
        for size in sides["NONE"][kind]:
            off, on = sides["NONE"][kind][size], sides["CURVE"][kind][size]
            if "cpu_s_per_gb" not in off or "cpu_s_per_gb" not in on:
                continue
            a, b = cpu_total(off), cpu_total(on)
            model = (curve_ceiling.cpu_bound_ratio(a, HOPS, extra[size_key])
                     if size_key in extra else float("nan"))
            lines.append(f"{f'{kind} {size} B':<16} {a:>10.2f} {b:>11.2f} "
                         f"{(a / b if b else float('nan')):>10.2f} {model:>6.2f} "
                         f"{on['records_per_sec'] / off['records_per_sec']:>9.2f}")
    return "\n".join(lines)


def format_security_cpu(sides: dict) -> str:
    """Where each row's CPU went: seconds per GB of records by process group, as ZeroMQ I/O
    threads (framing; with CURVE also encrypting and decrypting) + the rest (Python)."""
    head = (f"{'row':<16} {'side':<5} " + " ".join(f"{g:>13}" for g in proc_cpu.CPU_GROUPS)
            + f" {'total':>7} {'io':>6} {'gw io1':>6} {'cores':>5}")
    lines = ["CPU seconds per GB of records, ZeroMQ I/O threads + the rest, per process group "
             "(client: this process); gw io1: the gateway's busiest I/O thread; cores: busy on "
             "average during the row", head,
             "-" * len(head)]
    for kind in ("produce", "consume"):
        for size in sides["NONE"][kind]:
            for protocol in ("NONE", "CURVE"):
                r = sides[protocol][kind][size]
                per = r.get("cpu_s_per_gb")
                if not per:
                    continue
                cells = []
                for g in proc_cpu.CPU_GROUPS:
                    c = per.get(g, {"io": 0.0, "other": 0.0})
                    cells.append(f"{c['io']:>6.2f}+{c['other']:<6.2f}")
                io = sum(c["io"] for c in per.values())
                total = io + sum(c["other"] for c in per.values())
                gw1 = per.get("gateway", {}).get("io_busiest", 0.0)
                lines.append(f"{f'{kind} {size} B':<16} {protocol:<5} " + " ".join(cells)
                             + f" {total:>7.2f} {io:>6.2f} {gw1:>6.2f} {r['cores']:>5.2f}")
    return "\n".join(lines)


def _produce_figures(summary, baseline: float) -> dict:
    return {"records_per_sec": summary.records_per_sec, "mb_per_sec": summary.mb_per_sec,
            "latency_ms": summary.latency_ms, "baseline_records_per_sec": baseline,
            "ratio": summary.records_per_sec / baseline}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen.bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="only issue 3's figure (one producer, one consumer)")
    parser.add_argument("--bootstrap-server", help="a running fleet's gateway (default: start one)")
    parser.add_argument("--full", action="store_true", help="include acks=all x RF 1")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply records per row")
    parser.add_argument("--num-records", type=int, default=500_000, help="--quick's records")
    parser.add_argument("--replication-factor", type=int, default=1, help="--quick's topic")
    parser.add_argument("--e2e-records", type=int, default=300_000,
                        help=f"--quick's e2e row: records at {E2E_RATE}/s (0: no e2e row)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--security", action="store_true",
                        help="CURVE on vs off in the same run (two fleets of our own; bulk "
                             "produce, consume and e2e latency rows; ratio CURVE/NONE)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="--security: rounds, alternating NONE/CURVE first (best kept)")
    parser.add_argument("--ceiling-seconds", type=float, default=1.0,
                        help="--security: seconds per raw socket stream of the ceiling "
                             "(loadgen.curve_ceiling) measured first; 0 skips it")
    parser.add_argument("--security-protocol", type=str.upper, choices=("CURVE", "NONE"),
                        default="CURVE", help="the started fleet's (default CURVE)")
    parser.add_argument("--no-issue15", action="store_true",
                        help="skip issue 15's rows after the matrix (loadgen.repl_bench)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.security:
        sides = run_security(args.scale, args.e2e_records, args.rounds, args.ceiling_seconds)
        print("CURVE on vs off (same run, fleets of 3 storage nodes, 1 controller, 1 gateway; "
              "one process; send_many, acks=1, RF 1, 1 partition, batch.size "
              f"{BATCH_SIZE}, linger.ms {LINGER_MS})")
        print(format_security(sides))
        print(format_security_cpu(sides))
        print(format_bounds(sides))
        print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(sides, f, indent=2)
        return 0
    with _fleet(args.bootstrap_server, args.security_protocol) as bootstrap:
        if args.quick:
            q = run_quick(bootstrap, args.num_records, args.replication_factor,
                          args.e2e_records)
            ps, pm, c = q["produce_send"], q["produce_send_many"], q["consume"]
            print(f"issue-3 figure: {q['num_records']} x 100 B, acks=1, 1 partition "
                  f"(replication factor {q['replication_factor']}), one process, via the gateway")
            for label, f in (("send():     ", ps), ("send_many():", pm)):
                print(f"  produce {label} {f['records_per_sec']:>12,.0f} records/s "
                      f"{f['mb_per_sec']:7.2f} MB/s  p50 {f['latency_ms']['p50']:.1f} ms  "
                      f"p99 {f['latency_ms']['p99']:.1f} ms  "
                      f"baseline {f['baseline_records_per_sec']:,.0f}/s ratio {f['ratio']:.2f}")
            print(f"  consume poll():      {c['records_per_sec']:>12,.0f} records/s "
                  f"{c['mb_per_sec']:7.2f} MB/s  ({c['records']} records read back)")
            e = q["e2e"]
            if e is not None:
                lat = e["latency_ms"]
                print(f"  e2e at {e['target_records_per_sec']:,}/s: {e['records_per_sec']:>9,.0f} "
                      f"records/s  p50 {lat['p50']:.2f} ms  p99 {lat['p99']:.2f} ms  "
                      f"p99.9 {lat['p99_9']:.2f} ms  (linger.ms {e['linger_ms']}, "
                      f"fetch.max.wait.ms {e['fetch_max_wait_ms']}, {e['records']} records)")
            result: object = q
        else:
            rows = run_matrix(bootstrap, args.full, args.scale)
            print(f"produce matrix: one process, send_many, 1 partition, batch.size {BATCH_SIZE}, "
                  f"linger.ms {LINGER_MS}, max.in.flight {MAX_IN_FLIGHT}"
                  + ("" if args.full else "; acks=all x RF1 skipped (same path as acks=1)"))
            print(format_table(rows))
            print("baseline: the row's riverbed-perf command with --null-sink (same SDK producer "
                  "and settings, requests answered in-process, no network); ratio = records/s / "
                  "baseline. build/s: BatchBuilder alone, same size, batch size and compression.")
            result = rows
            if not args.no_issue15:
                from loadgen import repl_bench
                issue15 = repl_bench.one_round(bootstrap, {"acks", "large", "e2e"}, args.scale)
                print(repl_bench.format_report([issue15]))
                result = {"matrix": rows, "issue15": issue15}
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
