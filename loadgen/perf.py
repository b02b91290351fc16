"""`riverbed-perf`: Kafka's perf tools for Riverbed (produce, consume, end-to-end latency).

    riverbed-perf produce --bootstrap-server tcp://127.0.0.1:9092 --topic t --num-records 1000000 \\
        --record-size 100 --throughput -1 [--processes 2] [--bulk | --asyncio] [--acks all] \\
        [--producer-prop linger.ms=5 batch.size=65536] [--create-topic --partitions 3 \\
        --replication-factor 3 --topic-config min.insync.replicas=2] [--json out.json] [--plot out.png]
    riverbed-perf consume --bootstrap-server ... --topic t --num-records 1000000 [--consumer-prop k=v]
    riverbed-perf e2e --bootstrap-server ... --topic t --num-records 20000 --throughput 2000 --record-size 100

Output (stdout): a row every --reporting-interval ms, "N records sent, X records/sec (Y MB/sec),
Z ms avg latency, W ms max latency.", then a summary with the 50th, 95th, 99th and 99.9th
percentiles; on a TTY a live progress line on stderr. Exit code 0 when every record was sent
(or read) without error, 1 otherwise, 2 for bad arguments.

--asyncio runs riverbed.aio's producer on an asyncio loop in each process (`await send(...)`
per record, the sender a task of the same loop) instead of riverbed.Producer and its sender
thread: the same settings, batches and futures.

What the latencies mean:
- produce: from `send()` to the completion of the record's batch (the callback). One callback
  per batch: each record counts with its own send time (the batch's mean goes into the histogram
  with the batch's record count as weight; avg and max are exact).
- consume: the duration of the `poll()` that returned the record (how long the application
  waited for data).
- e2e: a consumer in another process subtracts the send time the producer wrote into the first
  8 bytes of the value (`time.time_ns()`, big-endian) from its arrival time.
Throughput counts completed records (acknowledged, or received), from the first send (or the
first poll) to the last completion.

--warmup-records N (produce and e2e; Kafka's, KIP-1052): the first N of the --num-records are a
warm-up. The summary still covers the whole run; a second line, "... (steady state after N
warm-up records)", and the JSON's "steady_state" cover the records completed after them, from
the completion that passed the mark. Default 0: no warm-up, output as before.

The clients are created and have the topic's metadata before the clock starts, in every process.
Then each process makes one full garbage collection and freezes what survived (gc.freeze), as
the services do after their start: a new process's first full collections walk everything it
imported and pause it for 10-20 ms, the largest stall of a short e2e run. `--no-gc-freeze`
leaves them in. An application that wants the same latency does the same once it is set up
(README: Latency and the garbage collector).

This module is the parent: progress rows, merging the workers' windows, the modes and the
command line. What runs in each worker process is `loadgen.perf_workers`.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import queue
import sys
import threading
import time
import traceback

from loadgen import options
from loadgen.perf_workers import (_process_main, _WORKERS, bulk_chunk_records,  # noqa: F401
                                  consume_worker, make_payloads, produce_worker, split_evenly)
from loadgen.stats import (MB, LatencyHistogram, Summary, TimelineMerger, Window,
                           format_interval_line, format_steady_state_line, format_summary_line,
                           window_row)

__all__ = ["main", "run", "make_payloads", "split_evenly"]

_LIVE_PERIOD_S = 0.25


# ---------------------------------------------------------------------------------------------
# The parent: progress, rows, merging

class Reporter:
    """Prints interval rows (stdout) and a live line (stderr, TTY only)."""

    def __init__(self, mode: str, total: int, workers: int, live: bool, out=None, err=None):
        self.mode, self.total = mode, total
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.live = live
        self.merger = TimelineMerger(workers)
        self.timeline: list[dict[str, float]] = []
        self._progress = [0] * workers
        self._started = time.monotonic()
        self._last_live = 0.0
        self._lock = threading.Lock()

    def _clear_live(self) -> None:
        if self.live:
            self.err.write("\r\x1b[K")

    def _emit(self, windows: list[Window]) -> None:
        for w in windows:
            row = window_row(w)
            self.timeline.append(row)
            self._clear_live()
            print(format_interval_line(self.mode, row, w.records), file=self.out, flush=True)

    def handle(self, msg: tuple) -> None:
        kind, wid, body = msg
        with self._lock:
            if kind == "window":
                self._emit(self.merger.feed(wid, Window.from_tuple(body)))
            elif kind == "progress":
                self._progress[wid] = body
                self._live_line()
            elif kind == "done":
                self._progress[wid] = body["records"]
                for t in body["windows"]:
                    self._emit(self.merger.feed(wid, Window.from_tuple(t)))
                self._emit(self.merger.done(wid))

    def _live_line(self) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if now - self._last_live < _LIVE_PERIOD_S:
            return
        self._last_live = now
        done = sum(self._progress)
        rate = done / max(now - self._started, 1e-9)
        pct = 100.0 * done / self.total if self.total else 0.0
        self.err.write(f"\r\x1b[K  {done:,}/{self.total:,} records ({pct:5.1f}%)  "
                       f"{rate:,.0f} records/s")
        self.err.flush()

    def close(self) -> None:
        self._clear_live()
        if self.live:
            self.err.flush()


def _run_workers(kind: str, specs: list[dict], reporter: Reporter, processes: bool) -> list[dict]:
    """Run one worker per spec (in this process when there is one and not `processes`)."""
    if not processes:
        assert len(specs) == 1
        box: dict[str, float] = {}

        def wait_for_start() -> float:
            box["start"] = time.time()
            return box["start"]

        def sink(msg: tuple) -> None:
            if msg[0] != "ready":
                reporter.handle(msg)
        result = _WORKERS[kind](specs[0], 0, sink, wait_for_start)
        reporter.handle(("done", 0, result))
        return [result]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    go = ctx.Event()
    start_value = ctx.Value("d", 0.0)
    procs = [ctx.Process(target=_process_main, args=(kind, spec, i, q, go, start_value),
                         name=f"riverbed-perf-{kind}-{i}", daemon=True)
             for i, spec in enumerate(specs)]
    for p in procs:
        p.start()
    results: dict[int, dict] = {}
    ready: set[int] = set()
    try:
        while len(results) < len(procs):
            try:
                msg = q.get(timeout=1.0)
            except queue.Empty:
                dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in results]
                if dead:
                    # A message may still be in the pipe: look once more before giving up.
                    try:
                        msg = q.get(timeout=2.0)
                    except queue.Empty:
                        raise RuntimeError(f"worker {dead[0]} died (exit code "
                                           f"{procs[dead[0]].exitcode})") from None
                else:
                    continue
            kind_, wid, body = msg
            if kind_ == "error":
                raise RuntimeError(f"worker {wid} failed:\n{body}")
            if kind_ == "ready":
                ready.add(wid)
                if len(ready) == len(procs):
                    start_value.value = time.time()
                    go.set()
                continue
            reporter.handle(msg)
            if kind_ == "done":
                results[wid] = body
    finally:
        for p in procs:
            p.join(timeout=10 if len(results) == len(procs) else 0.1)
            if p.is_alive():
                p.terminate()
                p.join(5)
    return [results[i] for i in range(len(procs))]


def _summarize(mode: str, results: list[dict], timeline: list[dict], config: dict) -> Summary:
    hist = LatencyHistogram()
    for r in results:
        hist.merge_encoded(r["hist"])
    start = min(r["start"] for r in results)
    end = max(r["end"] for r in results)
    return Summary(mode=mode, records=sum(r["records"] for r in results),
                   bytes=sum(r["bytes"] for r in results), elapsed_s=max(end - start, 1e-9),
                   latency_ms=hist.summary_ms(), timeline=timeline, config=config,
                   errors=sum(r.get("errors", 0) for r in results),
                   steady_state=_steady_state(results, end, config.get("warmup_records", 0)))


def _steady_state(results: list[dict], end: float, warmup: int) -> dict | None:
    """The records after the warm-up (--warmup-records) over every worker: from the first
    worker's crossing of its mark to the run's last completion. None without a warm-up."""
    steady = [r["steady"] for r in results if r.get("steady")]
    if not warmup or not steady:
        return None
    hist = LatencyHistogram()
    for st in steady:
        hist.merge_encoded(st["hist"])
    starts = [st["start"] for st in steady if st["start"] is not None]
    records = sum(st["records"] for st in steady)
    nbytes = sum(st["bytes"] for st in steady)
    elapsed = max(end - min(starts), 1e-9) if starts else 0.0
    return {"warmup_records": warmup, "records": records, "bytes": nbytes,
            "elapsed_s": elapsed, "records_per_sec": records / elapsed if elapsed else 0.0,
            "mb_per_sec": nbytes / MB / elapsed if elapsed else 0.0,
            "latency_ms": hist.summary_ms() if records else {}}


# ---------------------------------------------------------------------------------------------
# Modes

def _create_topic(args) -> None:
    from riverbed import Admin, NewTopic
    from riverbed.errors import TopicAlreadyExistsError
    configs = options.parse_props(args.topic_config)
    with Admin(bootstrap=args.bootstrap) as admin:
        try:
            admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor,
                                          configs)])
            print(f"created topic {args.topic}: {args.partitions} partitions, replication "
                  f"factor {args.replication_factor}" + (f", {configs}" if configs else ""),
                  file=sys.stderr)
        except TopicAlreadyExistsError:
            print(f"topic {args.topic} already exists", file=sys.stderr)


def _producer_spec(args, payloads: list[bytes], producer_kwargs: dict) -> dict:
    mean = sum(map(len, payloads)) / len(payloads)
    return {"bootstrap": args.bootstrap, "topic": args.topic, "partition": args.partition,
            "producer_kwargs": producer_kwargs, "payloads": payloads,
            "interval_s": args.reporting_interval / 1000.0, "bulk": getattr(args, "bulk", False),
            "bulk_chunk": bulk_chunk_records(mean),
            "asyncio": getattr(args, "asyncio", False),
            "gc_freeze": getattr(args, "gc_freeze", True),
            "null_sink": getattr(args, "null_sink", False),
            "null_sink_partitions": max(getattr(args, "partitions", 1) or 1,
                                        (args.partition or 0) + 1)}


def run_produce(args, reporter_factory) -> tuple[Summary, int]:
    from riverbed import Producer
    kwargs = options.producer_kwargs(args, Producer)
    payloads = make_payloads(args.record_size, args.payload_file, args.payload_delimiter)
    base = _producer_spec(args, payloads, kwargs)
    counts = split_evenly(args.num_records, args.processes)
    warmups = split_evenly(args.warmup_records, args.processes)
    rate = args.throughput
    specs = [dict(base, num_records=c, warmup_records=w,
                  throughput=(rate / args.processes if rate > 0 else -1.0))
             for c, w in zip(counts, warmups)]
    reporter = reporter_factory(args.processes)
    try:
        results = _run_workers("produce", specs, reporter, processes=args.processes > 1)
    finally:
        reporter.close()
    config = {"topic": args.topic, "num_records": args.num_records,
              "record_size": args.record_size, "payload_file": args.payload_file,
              "throughput": args.throughput, "processes": args.processes, "bulk": args.bulk,
              "asyncio": args.asyncio,
              "null_sink": args.null_sink, "warmup_records": args.warmup_records,
              "partition": args.partition, "producer": _jsonable(kwargs),
              "producer_metrics": [r.get("metrics", {}) for r in results]}
    summary = _summarize("produce", results, reporter.timeline, config)
    rc = 0 if summary.errors == 0 and summary.records == args.num_records else 1
    return summary, rc


def run_consume(args, reporter_factory) -> tuple[Summary, int]:
    from riverbed import Consumer
    kwargs = options.consumer_kwargs(args, Consumer)
    kwargs.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    spec = {"bootstrap": args.bootstrap, "topic": args.topic, "consumer_kwargs": kwargs,
            "num_records": args.num_records, "interval_s": args.reporting_interval / 1000.0,
            "from_beginning": args.from_beginning, "timeout_ms": args.timeout_ms,
            "gc_freeze": getattr(args, "gc_freeze", True)}
    reporter = reporter_factory(1)
    try:
        results = _run_workers("consume", [spec], reporter, processes=False)
    finally:
        reporter.close()
    config = {"topic": args.topic, "num_records": args.num_records,
              "from_beginning": args.from_beginning, "consumer": _jsonable(kwargs)}
    summary = _summarize("consume", results, reporter.timeline, config)
    if results[0].get("timed_out"):
        print(f"WARNING: exiting before consuming the expected number of records: timeout "
              f"({args.timeout_ms} ms) exceeded", file=sys.stderr)
    return summary, 0 if summary.records >= args.num_records else 1


def run_e2e(args, reporter_factory) -> tuple[Summary, int]:
    """A consumer process (its own GIL) at the end of the log, then a producer here at a
    fixed rate; the consumer's latencies and throughput are the result."""
    from riverbed import Consumer, Producer
    pkwargs = options.producer_kwargs(args, Producer)
    ckwargs = options.consumer_kwargs(args, Consumer)
    ckwargs.setdefault("auto_offset_reset", "latest")
    interval_s = args.reporting_interval / 1000.0
    cspec = {"bootstrap": args.bootstrap, "topic": args.topic, "consumer_kwargs": ckwargs,
             "num_records": args.num_records, "interval_s": interval_s, "from_beginning": False,
             "timeout_ms": args.timeout_ms, "e2e": True, "warmup_records": args.warmup_records,
             "gc_freeze": getattr(args, "gc_freeze", True)}
    args.payload_file = None
    pspec = dict(_producer_spec(args, make_payloads(args.record_size, pool=1), pkwargs),
                 num_records=args.num_records, throughput=args.throughput, e2e=True)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    go = ctx.Event()
    start_value = ctx.Value("d", 0.0)
    proc = ctx.Process(target=_process_main, args=("consume", cspec, 0, q, go, start_value),
                       name="riverbed-perf-e2e-consumer", daemon=True)
    proc.start()
    reporter = reporter_factory(1)
    producer_result: dict = {}
    producer_ready = threading.Event()

    def run_producer() -> None:
        def wait_for_start() -> float:
            producer_ready.set()
            go.wait()
            return start_value.value
        try:
            producer_result.update(produce_worker(pspec, 0, lambda m: None, wait_for_start))
        except BaseException:  # noqa: BLE001 - reported below
            producer_result["error"] = traceback.format_exc()
    t = threading.Thread(target=run_producer, name="riverbed-perf-e2e-producer", daemon=True)
    try:
        msg = _get(q, proc, 60)
        if msg[0] == "error":
            raise RuntimeError(f"e2e consumer failed:\n{msg[2]}")
        # the clock starts once both ends are set up, the producer too (its client, the
        # topic's metadata, its heap frozen): its set-up is not part of the run's elapsed time
        t.start()
        while not producer_ready.wait(0.5):
            if not t.is_alive():
                raise RuntimeError(f"e2e producer failed:\n{producer_result.get('error')}")
        start_value.value = time.time()
        go.set()
        result = None
        while result is None:
            msg = _get(q, proc, args.timeout_ms / 1000.0 + 30)
            if msg[0] == "error":
                raise RuntimeError(f"e2e consumer failed:\n{msg[2]}")
            reporter.handle(msg)
            if msg[0] == "done":
                result = msg[2]
        t.join()
        if "error" in producer_result:
            raise RuntimeError(f"e2e producer failed:\n{producer_result['error']}")
    finally:
        reporter.close()
        proc.join(10)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
    phist = LatencyHistogram()
    phist.merge_encoded(producer_result["hist"])
    config = {"topic": args.topic, "num_records": args.num_records,
              "record_size": args.record_size, "throughput": args.throughput,
              "warmup_records": args.warmup_records,
              "producer": _jsonable(pkwargs), "consumer": _jsonable(ckwargs),
              "producer_result": {"records": producer_result["records"],
                                  "errors": producer_result["errors"],
                                  "ack_latency_ms": phist.summary_ms()}}
    summary = _summarize("e2e", [result], reporter.timeline, config)
    summary.errors = producer_result["errors"]
    ok = summary.records >= args.num_records and summary.errors == 0
    return summary, 0 if ok else 1


def _get(q, proc, timeout_s: float) -> tuple:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return q.get(timeout=0.5)
        except queue.Empty:
            if not proc.is_alive():
                try:
                    return q.get(timeout=2.0)
                except queue.Empty:
                    raise RuntimeError(f"{proc.name} died (exit code {proc.exitcode})") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"no word from {proc.name} in {timeout_s:.0f} s") from None


def _jsonable(d: dict) -> dict:
    return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
            for k, v in d.items()}


_MODES = {"produce": run_produce, "consume": run_consume, "e2e": run_e2e}


def run(args, *, live: bool | None = None, out=None) -> tuple[Summary, int]:
    """Run one mode from parsed arguments; print rows and the summary; write --json/--plot."""
    out = out or sys.stdout
    if live is None:
        live = sys.stderr.isatty() and not args.no_progress
    if getattr(args, "create_topic", False) and not getattr(args, "null_sink", False):
        _create_topic(args)

    def reporter_factory(workers: int) -> Reporter:
        return Reporter(args.mode, args.num_records, workers, live, out=out)
    summary, rc = _MODES[args.mode](args, reporter_factory)
    print(format_summary_line(summary), file=out, flush=True)
    if summary.steady_state:
        print(format_steady_state_line(summary), file=out, flush=True)
    if summary.errors:
        print(f"{summary.errors} records failed", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary.to_json(), f, indent=2)
            f.write("\n")
    if args.plot:
        from loadgen.plot import write_plot
        label = {"produce": "send→ack latency", "consume": "poll latency",
                 "e2e": "end-to-end latency"}[args.mode]
        write_plot(args.plot, summary.timeline, latency_label=label,
                   title=f"riverbed-perf {args.mode} {args.topic} ({summary.records} records)")
    return summary, rc


def main(argv: list[str] | None = None) -> int:
    args = options.parse_args(argv)
    try:
        _, rc = run(args)
    except options.PropertyError as e:
        print(f"riverbed-perf: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return rc


if __name__ == "__main__":
    sys.exit(main())
