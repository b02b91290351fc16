"""What observability costs: `riverbed-perf produce` and `consume` against a fleet with metrics on
(the default) and one with metrics off (`metrics.port=-1` on every service); the SDK's own
metrics (riverbed.client_metrics, always recorded like Kafka's clients) against a baseline whose
recordings are replaced by no-ops in the benchmark's process; and produce and consume with the
SDK tracing at 0 % and 100 % sampling against no tracer provider — all in one run, rounds
interleaved so both sides see the same machine.

    .venv/bin/python -m loadgen.obs_bench [--records 1000000] [--rounds 3] [--json FILE]
    .venv/bin/python -m loadgen.obs_bench --sdk-ab [--records 300000] [--rounds 10]

--sdk-ab runs no fleet: in this one process, a Producer over the null sink (loadgen.nullsink: the
same SDK with requests answered in-process) sends with the SDK's metrics recorded and with their
recordings made no-ops, alternately; it reports CPU seconds per million records
(time.process_time, the sender thread included) and records/s, medians and the on ÷ off ratio of
throughput (CPU time moves less than wall time on a shared machine).

Each produce is 100 B records, acks=1, one partition, replication factor 1, Producer.send_many
(--bulk: the fast path, where a per-record cost would show most); each consume reads that topic
back. Figures are medians over the rounds; ratios are on ÷ off (aims: metrics ≥ 0.97 — services'
and SDK's —, tracing at 0 % ≥ 0.99). The services export their spans over OTLP/HTTP to a receiver in this process, the
SDK its own through a BatchSpanProcessor to the same receiver.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid

from loadgen.otlp_sink import OtlpReceiver

__all__ = ["main"]


def _perf(argv: list[str], *, trace_ratio: float | None = None, env: dict | None = None,
          sdk_metrics: bool = True) -> dict:
    """One riverbed-perf run in a fresh process; its summary as JSON. `trace_ratio`: the
    application sets a tracer provider sampling that share of traces (None: no provider);
    sdk_metrics=False: the SDK's metric recordings are no-ops in that process."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        cmd = [sys.executable, "-m", "loadgen.obs_bench", "--child"]
        if not sdk_metrics:
            cmd += ["--child-sdk-metrics-off"]
        if trace_ratio is not None:
            cmd += ["--child-trace-ratio", str(trace_ratio)]
        cmd += ["--", *argv, "--json", out, "--no-progress", "--reporting-interval", "60000"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"riverbed-perf {' '.join(argv)} failed:\n{r.stderr[-2000:]}")
        with open(out) as f:
            return json.load(f)
    finally:
        os.unlink(out)


_RECORDINGS = ("request_sent", "response", "retried", "failed", "polled", "consumed", "fetched",
               "lag", "committed", "joined", "synced", "rebalanced", "heartbeat")


def _sdk_metrics_off():
    """The baseline of the SDK-metrics rows: every recording method of riverbed.client_metrics
    becomes a no-op (the SDK has no switch for them: Kafka's clients always record). Returns a
    function that puts them back."""
    from riverbed import client_metrics

    def noop(*args, **kwargs) -> None:
        return None
    saved = []
    for cls in (client_metrics.ProducerMetrics, client_metrics.ConsumerMetrics):
        for name in _RECORDINGS:
            if name in vars(cls):
                saved.append((cls, name, vars(cls)[name]))
                setattr(cls, name, noop)

    def restore() -> None:
        for cls, name, fn in saved:
            setattr(cls, name, fn)
    return restore


def _sdk_ab(records: int, rounds: int) -> dict:
    """--sdk-ab (module doc): null-sink produce, SDK metrics on and off, alternating."""
    import time

    from loadgen.nullsink import null_sink_factory
    from riverbed import Producer
    value = b"v" * 100
    chunk = [value] * 10000

    def run(on: bool) -> tuple[float, float]:
        restore = None if on else _sdk_metrics_off()
        try:
            p = Producer("tcp://127.0.0.1:1", acks=1, _channel_factory=null_sink_factory(1))
            p.partitions_for("null")
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(records // len(chunk)):
                p.send_many("null", chunk, partition=0)
            p.flush()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            p.close()
        finally:
            if restore is not None:
                restore()
        n = records // len(chunk) * len(chunk)
        return cpu / n * 1e6, n / wall

    out: dict[str, list[float]] = {}
    run(True)                                   # warm up
    for rnd in range(rounds):
        for on in ((True, False) if rnd % 2 == 0 else (False, True)):
            cpu, rate = run(on)
            key = "on" if on else "off"
            out.setdefault(f"cpu_s_per_million_{key}", []).append(cpu)
            out.setdefault(f"records_per_sec_{key}", []).append(rate)
        print(f"  round {rnd + 1}: " + ", ".join(f"{k} {v[-1]:,.2f}" for k, v in out.items()),
              file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in out.items()}
    ratios = {"sdk_metrics_on_vs_off_records_per_sec":
              med["records_per_sec_on"] / med["records_per_sec_off"],
              "sdk_metrics_on_vs_off_cpu": med["cpu_s_per_million_off"] / med["cpu_s_per_million_on"]}
    for k, v in {**med, **ratios}.items():
        print(f"{k:<40} {v:>12,.3f}")
    return {"runs": out, "medians": med, "ratios": ratios}


def _child(ratio: float | None, argv: list[str]) -> int:
    if ratio is not None:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    from loadgen.perf import main as perf_main
    try:
        return perf_main(argv)
    finally:
        if ratio is not None:
            provider.shutdown()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        rest = argv[1:]
        ratio = None
        if rest[:1] == ["--child-sdk-metrics-off"]:
            _sdk_metrics_off()
            rest = rest[1:]
        if rest[:1] == ["--child-trace-ratio"]:
            ratio, rest = float(rest[1]), rest[2:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        return _child(ratio, rest)
    p = argparse.ArgumentParser(prog="python -m loadgen.obs_bench", description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--sdk-ab", action="store_true",
                   help="no fleet: the SDK's metrics on vs off over the null sink, in-process")
    args = p.parse_args(argv)
    if args.sdk_ab:
        res = _sdk_ab(args.records, args.rounds)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"records": args.records, "rounds": args.rounds, **res}, f, indent=2)
        return 0

    from deploy.fleet import Fleet, free_base_port
    receiver = OtlpReceiver()
    receiver.keep_spans = False
    env = dict(os.environ, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.url}/v1/traces")
    old_env = dict(os.environ)
    os.environ.update(env)                      # the fleets' processes inherit it
    dirs = [tempfile.mkdtemp(prefix="riverbed-obs-on-"), tempfile.mkdtemp(prefix="riverbed-obs-off-")]
    fleets = {}
    results: dict[str, list[float]] = {}
    try:
        fleets["on"] = Fleet(dirs[0], free_base_port(), storage_nodes=1, controllers=1)
        fleets["on"].up(detach=True)
        base_off = free_base_port()
        fleets["off"] = Fleet(dirs[1], base_off, storage_nodes=1, controllers=1,
                              config_overrides=[f"{r}:metrics.port=-1" for r in (
                                  "controller", "storage_node", "gateway", "group_coordinator",
                                  "offset_manager")])
        fleets["off"].up(detach=True)
        print(f"two fleets up (1 storage node each; metrics on and off); {args.rounds} rounds of "
              f"{args.records:,} records", file=sys.stderr, flush=True)

        def produce(which: str, topic: str, ratio: float | None = None,
                    sdk_metrics: bool = True) -> float:
            s = _perf(["produce", "--bootstrap-server", fleets[which].gateway_endpoint,
                       "--topic", topic, "--num-records", str(args.records), "--record-size", "100",
                       "--acks", "1", "--partition", "0", "--bulk", "--create-topic",
                       "--partitions", "1", "--replication-factor", "1"], trace_ratio=ratio, env=env,
                      sdk_metrics=sdk_metrics)
            return s["records_per_sec"]

        def consume(which: str, topic: str, ratio: float | None = None,
                    sdk_metrics: bool = True) -> float:
            s = _perf(["consume", "--bootstrap-server", fleets[which].gateway_endpoint,
                       "--topic", topic, "--num-records", str(args.records)], env=env,
                      trace_ratio=ratio, sdk_metrics=sdk_metrics)
            return s["records_per_sec"]

        def null_sink_produce(sdk_metrics: bool) -> float:
            s = _perf(["produce", "--bootstrap-server", "tcp://127.0.0.1:1", "--topic", "null",
                       "--num-records", str(args.records), "--record-size", "100", "--acks", "1",
                       "--partition", "0", "--bulk", "--null-sink"], env=env,
                      sdk_metrics=sdk_metrics)
            return s["records_per_sec"]

        def add(key: str, value: float) -> None:
            results.setdefault(key, []).append(value)

        for rnd in range(args.rounds):
            for which in ("on", "off"):
                topic = f"obs-{which}-{uuid.uuid4().hex[:6]}"
                add(f"produce_metrics_{which}", produce(which, topic))
                add(f"consume_metrics_{which}", consume(which, topic))
            topic = f"obs-sdk-{uuid.uuid4().hex[:6]}"
            add("produce_sdk_metrics_off", produce("on", topic, sdk_metrics=False))
            add("consume_sdk_metrics_off", consume("on", topic, sdk_metrics=False))
            for on in (True, False):      # the SDK alone: requests answered in-process
                add(f"null_sink_produce_sdk_metrics_{'on' if on else 'off'}",
                    null_sink_produce(on))
            for label, ratio in (("none", None), ("0", 0.0), ("100", 1.0)):
                topic = f"obs-trace-{uuid.uuid4().hex[:6]}"
                add(f"produce_trace_{label}", produce("on", topic, ratio))
                add(f"consume_trace_{label}", consume("on", topic, ratio))
            print(f"  round {rnd + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in results.items()),
                  file=sys.stderr, flush=True)
    finally:
        for f in fleets.values():
            f.down()
        receiver.close()
        os.environ.clear()
        os.environ.update(old_env)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in results.items()}
    ratios = {
        "produce_metrics_on_vs_off": med["produce_metrics_on"] / med["produce_metrics_off"],
        "consume_metrics_on_vs_off": med["consume_metrics_on"] / med["consume_metrics_off"],
        "produce_sdk_metrics_on_vs_off": med["produce_metrics_on"] / med["produce_sdk_metrics_off"],
        "consume_sdk_metrics_on_vs_off": med["consume_metrics_on"] / med["consume_sdk_metrics_off"],
        "null_sink_produce_sdk_metrics_on_vs_off": med["null_sink_produce_sdk_metrics_on"]
        / med["null_sink_produce_sdk_metrics_off"],
        "produce_tracing_0pct_vs_none": med["produce_trace_0"] / med["produce_trace_none"],
        "produce_tracing_100pct_vs_none": med["produce_trace_100"] / med["produce_trace_none"],
        "consume_tracing_0pct_vs_none": med["consume_trace_0"] / med["consume_trace_none"],
        "consume_tracing_100pct_vs_none": med["consume_trace_100"] / med["consume_trace_none"],
    }
    print(f"\n{'figure (median records/s)':<40} {'value':>12}")
    for k, v in med.items():
        print(f"{k:<40} {v:>12,.0f}")
    print(f"\n{'ratio':<40} {'value':>12}")
    for k, v in ratios.items():
        print(f"{k:<40} {v:>12.3f}")
    print(f"\nspans received from the services: {receiver.span_count}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"records": args.records, "rounds": args.rounds, "runs": results,
                       "medians": med, "ratios": ratios, "service_spans": receiver.span_count},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
