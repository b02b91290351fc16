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
"""
from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import queue
import random
import struct
import sys
import threading
import time
import traceback
from typing import Any, Callable

from loadgen import options
from loadgen.ratelimit import make_limiter
from loadgen.stats import (MB, IntervalAccounting, LatencyHistogram, Summary, TimelineMerger,
                           Window, format_interval_line, format_steady_state_line,
                           format_summary_line, window_row)

__all__ = ["main", "run", "make_payloads", "split_evenly"]

PAYLOAD_POOL = 128           # distinct values cycled through (random A-Z, like Kafka's tool)
_TICK_S = 0.25               # how often a worker closes windows and reports progress
_LIVE_PERIOD_S = 0.25
_SEND_TS = struct.Struct(">q")


# ---------------------------------------------------------------------------------------------
# Pure helpers

def split_evenly(total: int, parts: int) -> list[int]:
    """[total // parts, ...] with the remainder spread over the first ones."""
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


def make_payloads(record_size: int | None = None, payload_file: str | None = None,
                  delimiter: str = "\n", seed: int = 0, pool: int = PAYLOAD_POOL) -> list[bytes]:
    """Values to cycle through: `pool` random upper-case payloads of record_size bytes, or the
    records of payload_file split by delimiter (empty ones dropped)."""
    if payload_file is not None:
        with open(payload_file, "rb") as f:
            data = f.read()
        delim = delimiter.encode().decode("unicode_escape").encode("latin-1")
        values = [v for v in data.split(delim) if v]
        if not values:
            raise ValueError(f"{payload_file}: no records (delimiter {delimiter!r})")
        return values
    if not record_size or record_size <= 0:
        raise ValueError("need a positive record_size or a payload_file")
    rng = random.Random(seed)
    return [bytes(rng.choices(range(65, 91), k=record_size)) for _ in range(pool)]


# ---------------------------------------------------------------------------------------------
# Per-worker accounting (thread-safe; the producer's callbacks run on its sender thread)

class WorkerStats:
    """A worker's counts, histogram and windows. With `warmup` > 0 (--warmup-records, Kafka's
    KIP-1052) the records completed after the first `warmup` are also counted apart, in
    `steady` (the steady state): from the completion that crosses the mark to the last one.
    Each latency is recorded once: `hist` holds the warm-up's and `steady` the rest's, and
    whole_hist() adds them up at the end."""

    def __init__(self, interval_s: float, start: float, clock: Callable[[], float] = time.time,
                 warmup: int = 0):
        self._lock = threading.Lock()
        self._clock = clock
        self.acct = IntervalAccounting(interval_s, start)
        self.hist = LatencyHistogram()
        self.records = 0
        self.bytes = 0
        self.errors = 0
        self.last_completion = start
        self._closed: list[Window] = []
        self.warmup = warmup
        self.steady = LatencyHistogram() if warmup else None
        self.steady_records = 0
        self.steady_bytes = 0
        self.steady_start: float | None = None

    def whole_hist(self) -> LatencyHistogram:
        """Every record's latency (warm-up and steady state)."""
        if self.steady is None:
            return self.hist
        whole = LatencyHistogram()
        whole.merge_encoded(self.hist.encode())
        whole.merge_encoded(self.steady.encode())
        return whole

    def _steady_part(self, records: int) -> int:
        """How many of `records` about to be counted fall after the warm-up (0 without one)."""
        if not self.warmup:
            return 0
        after = self.records + records
        return max(0, after - max(self.records, self.warmup))

    def _count_steady(self, now: float, n: int, nbytes: int, records: int) -> None:
        if self.steady_start is None:
            self.steady_start = now
        self.steady_records += n
        self.steady_bytes += nbytes * n // records

    def record(self, records: int, nbytes: int, latency_us: float, max_us: float,
               failed: bool = False) -> None:
        """`records` completed, each with mean latency latency_us (the worst max_us)."""
        now = self._clock()
        with self._lock:
            if failed:
                self.errors += records
                self._closed += self.acct.advance(now)
                return
            steady = self._steady_part(records)
            self.hist.record(latency_us, records - steady, max_us)
            if steady:
                self.steady.record(latency_us, steady, max_us)
                self._count_steady(now, steady, nbytes, records)
            self.records += records
            self.bytes += nbytes
            self.last_completion = now
            self._closed += self.acct.add(now, records, nbytes, latency_us * records, max_us)

    def record_each(self, latencies_us: list[float], nbytes: int) -> None:
        """Records with their own latencies (e2e): exact percentiles."""
        if not latencies_us:
            return
        now = self._clock()
        with self._lock:
            steady = self._steady_part(len(latencies_us))
            mark = len(latencies_us) - steady
            record = self.hist.record
            for lat in latencies_us[:mark] if steady else latencies_us:
                record(lat)
            if steady:
                record = self.steady.record
                for lat in latencies_us[mark:]:
                    record(lat)
                self._count_steady(now, steady, nbytes, len(latencies_us))
            self.records += len(latencies_us)
            self.bytes += nbytes
            self.last_completion = now
            self._closed += self.acct.add(now, len(latencies_us), nbytes, sum(latencies_us),
                                          max(latencies_us))

    def tick(self) -> tuple[list[Window], int]:
        with self._lock:
            closed = self._closed + self.acct.advance(self._clock())
            self._closed = []
            return closed, self.records

    def finish(self, end: float) -> list[Window]:
        with self._lock:
            closed = self._closed + self.acct.finish(end)
            self._closed = []
            return closed


class _Ticker(threading.Thread):
    """Reports closed windows and progress to the sink every _TICK_S."""

    def __init__(self, stats: WorkerStats, wid: int, sink: Callable[[tuple], None]):
        super().__init__(name=f"perf-ticker-{wid}", daemon=True)
        self.stats, self.wid, self.sink = stats, wid, sink
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(_TICK_S):
            closed, records = self.stats.tick()
            for w in closed:
                self.sink(("window", self.wid, w.to_tuple()))
            self.sink(("progress", self.wid, records))

    def stop(self) -> None:
        self.stopping.set()
        self.join()


class _BatchGroup:
    """The records of one producer batch, completed by one callback."""

    __slots__ = ("stats", "count", "bytes", "sum_ns", "first_ns", "done", "failed", "lock")

    def __init__(self, stats: WorkerStats, count=0, nbytes=0, sum_ns=0, first_ns=0):
        self.stats = stats
        self.count, self.bytes, self.sum_ns, self.first_ns = count, nbytes, sum_ns, first_ns
        self.done = False
        self.failed = False
        self.lock = threading.Lock()

    def add(self, t_ns: int, nbytes: int) -> None:
        with self.lock:
            if not self.done:
                if not self.count:
                    self.first_ns = t_ns
                self.count += 1
                self.bytes += nbytes
                self.sum_ns += t_ns
                return
        # The batch completed before send() returned here (a race): count it as done now.
        lat = (time.perf_counter_ns() - t_ns) / 1000.0
        self.stats.record(1, nbytes, lat, lat, self.failed)

    def on_done(self, fut) -> None:
        now = time.perf_counter_ns()
        failed = fut.failed()
        with self.lock:
            self.done = True
            self.failed = failed
            count, nbytes, sum_ns, first_ns = self.count, self.bytes, self.sum_ns, self.first_ns
        if count:
            mean_us = (now * count - sum_ns) / count / 1000.0
            self.stats.record(count, nbytes, mean_us, (now - first_ns) / 1000.0, failed)


# ---------------------------------------------------------------------------------------------
# Workers (run in this process or in spawned ones)

def freeze_setup_heap() -> None:
    """One full collection, then gc.freeze(): the heap the process has set up (modules,
    protobuf descriptors, clients) is never walked again, so the run does not pay the
    10-20 ms full collections a new process's heap costs (services.common.service_main does
    the same in every service)."""
    gc.collect()
    gc.freeze()


def _start_worker(spec: dict, wid: int, sink: Callable[[tuple], None],
                  wait_for_start: Callable[[], float]) -> tuple[float, WorkerStats, "_Ticker"]:
    """Say ready, wait for the common start, then count from it: (start, stats, ticker)."""
    if spec.get("gc_freeze", True):
        freeze_setup_heap()
    sink(("ready", wid, None))
    start = wait_for_start()
    stats = WorkerStats(spec["interval_s"], start, warmup=spec.get("warmup_records", 0))
    ticker = _Ticker(stats, wid, sink)
    ticker.start()
    return start, stats, ticker


def _worker_result(stats: WorkerStats, start: float, *, errors: int, metrics: dict) -> dict:
    """What a worker hands back (picklable): its windows, totals and histogram."""
    windows = stats.finish(stats.last_completion)
    steady = None
    if stats.steady is not None:
        steady = {"records": stats.steady_records, "bytes": stats.steady_bytes,
                  "start": stats.steady_start, "hist": stats.steady.encode()}
    return {"windows": [w.to_tuple() for w in windows], "records": stats.records,
            "bytes": stats.bytes, "errors": errors, "start": start,
            "end": stats.last_completion, "hist": stats.whole_hist().encode(), "metrics": metrics,
            "steady": steady}


def _producer(spec: dict):
    from riverbed import Producer
    kwargs = dict(spec["producer_kwargs"])
    if spec.get("null_sink"):
        from loadgen.nullsink import null_sink_factory
        kwargs["_channel_factory"] = null_sink_factory(spec.get("null_sink_partitions", 1))
    p = Producer(bootstrap=spec["bootstrap"], **kwargs)
    p.partitions_for(spec["topic"])      # metadata before the clock starts
    return p


def produce_worker(spec: dict, wid: int, sink: Callable[[tuple], None],
                   wait_for_start: Callable[[], float]) -> dict:
    """Send spec["num_records"] records; report windows to sink; return the totals."""
    if spec.get("asyncio"):
        import asyncio
        return asyncio.run(_produce_worker_async(spec, wid, sink, wait_for_start))
    producer = _producer(spec)
    start, stats, ticker = _start_worker(spec, wid, sink, wait_for_start)
    try:
        if spec.get("e2e"):
            _send_stamped(producer, spec, stats)
        elif spec.get("bulk"):
            _send_bulk(producer, spec, stats)
        else:
            _send_each(producer, spec, stats)
        producer.flush()
    finally:
        producer.close(timeout=30)
        ticker.stop()
    return _worker_result(stats, start, errors=stats.errors, metrics=_safe_metrics(producer))


async def _produce_worker_async(spec: dict, wid: int, sink: Callable[[tuple], None],
                                wait_for_start: Callable[[], float]) -> dict:
    """produce_worker with riverbed.aio's producer on an asyncio loop (--asyncio)."""
    from riverbed.aio import Producer as AioProducer
    producer = AioProducer(bootstrap_servers=spec["bootstrap"], **spec["producer_kwargs"])
    await producer.start()
    await producer.partitions_for(spec["topic"])      # metadata before the clock starts
    start, stats, ticker = _start_worker(spec, wid, sink, wait_for_start)
    try:
        await _send_each_async(producer, spec, stats)
        await producer.flush()
    finally:
        await producer.stop(timeout=30)
        ticker.stop()
    return _worker_result(stats, start, errors=stats.errors, metrics=_safe_metrics(producer))


def _safe_metrics(producer) -> dict:
    try:
        return {k: v for k, v in producer.metrics().items() if isinstance(v, (int, float, str))}
    except Exception:  # noqa: BLE001 - metrics are informative only
        return {}


# Kafka's ThroughputThrottler sleeps only once the deficit reaches MIN_SLEEP_NS (2 ms): one
# sleep per ~2 ms of records instead of a sleep (a syscall and two context switches) per record.
MIN_SLEEP_S = 0.002


def _throttle(limiter, n: int) -> None:
    delay = limiter.take(n, time.perf_counter())
    if delay >= MIN_SLEEP_S:
        time.sleep(delay)


class _BatchGrouper:
    """Counts each sent record in its batch's _BatchGroup: one callback per batch (futures of
    one batch share it; private, but optional: without it every record gets its own callback,
    which is exact but dearer)."""

    __slots__ = ("stats", "key", "group")

    def __init__(self, stats: WorkerStats):
        self.stats = stats
        self.key: object = None
        self.group: _BatchGroup | None = None

    def add(self, fut, t_ns: int, nbytes: int) -> None:
        key = getattr(fut, "_batch", fut)
        if key is not self.key:
            self.key = key
            self.group = _BatchGroup(self.stats)
            fut.add_done_callback(self.group.on_done)
        self.group.add(t_ns, nbytes)  # type: ignore[union-attr]


def _send_each(producer, spec: dict, stats: WorkerStats) -> None:
    topic, partition, n = spec["topic"], spec.get("partition"), spec["num_records"]
    values = spec["payloads"]
    nv = len(values)
    limiter = make_limiter(spec["throughput"], time.perf_counter())
    limited = spec["throughput"] > 0
    send = producer.send
    clock = time.perf_counter_ns
    add = _BatchGrouper(stats).add
    for i in range(n):
        if limited:
            _throttle(limiter, 1)
        value = values[i % nv]
        t = clock()
        add(send(topic, value, partition=partition), t, len(value))


async def _send_each_async(producer, spec: dict, stats: WorkerStats) -> None:
    """_send_each with riverbed.aio's producer: `await send(...)` per record."""
    import asyncio
    topic, partition, n = spec["topic"], spec.get("partition"), spec["num_records"]
    values = spec["payloads"]
    nv = len(values)
    limiter = make_limiter(spec["throughput"], time.perf_counter())
    limited = spec["throughput"] > 0
    send = producer.send
    clock = time.perf_counter_ns
    add = _BatchGrouper(stats).add
    for i in range(n):
        if limited:
            delay = limiter.take(1, time.perf_counter())
            if delay >= MIN_SLEEP_S:
                await asyncio.sleep(delay)
        value = values[i % nv]
        t = clock()
        add(await send(topic, value, partition=partition), t, len(value))


# --bulk hands send_many this many bytes of records per call, whatever batch.size is: the
# SDK sizes its batches itself (adaptive up to batch_size_max), so tying the loop's call size to
# batch.size (one batch's worth, as before) made a batch.size flag also tune this loop's own
# per-call cost (15 calls per 16 KiB of 1 KiB records instead of one per 256 KiB).
BULK_CALL_BYTES = 262144


def bulk_chunk_records(mean_value_bytes: float, call_bytes: int = BULK_CALL_BYTES) -> int:
    """Records per send_many call: about call_bytes of them."""
    return max(1, int(call_bytes // (mean_value_bytes + 8)))


def _send_bulk(producer, spec: dict, stats: WorkerStats) -> None:
    topic, partition, n = spec["topic"], spec.get("partition"), spec["num_records"]
    values = spec["payloads"]
    chunk = spec["bulk_chunk"]
    cycle = [values[j % len(values)] for j in range(chunk)]
    limiter = make_limiter(spec["throughput"], time.perf_counter(), burst=max(chunk, 1))
    limited = spec["throughput"] > 0
    i = 0
    while i < n:
        k = min(chunk, n - i)
        if limited:
            _throttle(limiter, k)
        vals = cycle if k == chunk else cycle[:k]
        nbytes = sum(map(len, vals))
        t = time.perf_counter_ns()
        futs = producer.send_many(topic, vals, partition=partition)
        counts = split_evenly(k, len(futs)) if futs else []
        for fut, c in zip(futs, counts):
            g = _BatchGroup(stats, c, nbytes * c // k, t * c, t)
            fut.add_done_callback(g.on_done)
        i += k


def _send_stamped(producer, spec: dict, stats: WorkerStats) -> None:
    """e2e: each value starts with time.time_ns() at send."""
    topic, partition, n = spec["topic"], spec.get("partition"), spec["num_records"]
    pad = spec["payloads"][0][_SEND_TS.size:]
    limiter = make_limiter(spec["throughput"], time.perf_counter())
    clock = time.perf_counter_ns
    add = _BatchGrouper(stats).add
    for _ in range(n):
        _throttle(limiter, 1)
        t = clock()
        value = _SEND_TS.pack(time.time_ns()) + pad
        add(producer.send(topic, value, partition=partition), t, len(value))


def _consumer(spec: dict):
    from riverbed import Consumer, TopicPartition
    c = Consumer(bootstrap=spec["bootstrap"], **spec["consumer_kwargs"])
    topic = spec["topic"]
    deadline = time.monotonic() + 30
    parts = None
    while not parts:
        parts = c.partitions_for_topic(topic)
        if not parts:
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} has no partitions in metadata")
            time.sleep(0.2)
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    c.assign(tps)
    if spec.get("from_beginning", True):
        c.seek_to_beginning()
    else:
        c.seek_to_end()
    for tp in tps:
        c.position(tp)                   # resolve the start offsets before the clock starts
    return c


def consume_worker(spec: dict, wid: int, sink: Callable[[tuple], None],
                   wait_for_start: Callable[[], float]) -> dict:
    consumer = _consumer(spec)
    start, stats, ticker = _start_worker(spec, wid, sink, wait_for_start)
    n = spec["num_records"]
    timeout_s = spec["timeout_ms"] / 1000.0
    e2e = spec.get("e2e", False)
    received = 0
    last_record = time.monotonic()
    timed_out = False
    try:
        while received < n:
            t = time.perf_counter_ns()
            batch = consumer.poll(timeout_ms=min(500, spec["timeout_ms"]))
            arrival_ns = time.time_ns()
            poll_us = (time.perf_counter_ns() - t) / 1000.0
            if not batch:
                if time.monotonic() - last_record > timeout_s:
                    timed_out = True
                    break
                continue
            last_record = time.monotonic()
            count = nbytes = 0
            lats: list[float] = []
            for recs in batch.values():
                count += len(recs)
                for r in recs:
                    nbytes += len(r.value or b"") + len(r.key or b"")
                    if e2e and r.value is not None and len(r.value) >= _SEND_TS.size:
                        lats.append((arrival_ns - _SEND_TS.unpack_from(r.value)[0]) / 1000.0)
            received += count
            if e2e:
                stats.record_each(lats, nbytes)
            else:
                stats.record(count, nbytes, poll_us, poll_us)
    finally:
        consumer.close()
        ticker.stop()
    return dict(_worker_result(stats, start, errors=0, metrics={}), timed_out=timed_out)


_WORKERS = {"produce": produce_worker, "consume": consume_worker}


def _process_main(kind: str, spec: dict, wid: int, q, go, start_value) -> None:
    """Entry point of a spawned worker: reports ("ready"|"window"|"progress"|"done"|"error")."""
    def wait_for_start() -> float:
        go.wait()
        return start_value.value
    try:
        result = _WORKERS[kind](spec, wid, q.put, wait_for_start)
        q.put(("done", wid, result))
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the run
        q.put(("error", wid, traceback.format_exc()))


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
