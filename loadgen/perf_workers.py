"""`riverbed-perf`'s workers: what runs in each process (or in the parent with --processes 1).

The per-worker accounting (`WorkerStats`: windows, histograms, the steady state after the
warm-up; `_BatchGroup`: one callback per batch), the produce loops (one `send()` per record,
`send_many` chunks with --bulk, asyncio with --asyncio, time-stamped values for e2e), the
consume loop, and `_process_main`, the entry point of a spawned worker that reports to the
parent through a queue. The parent (progress rows, merging, the modes and the command line)
is `loadgen.perf`, which re-exports `make_payloads`, `split_evenly` and the workers.
"""
from __future__ import annotations

import gc
import random
import struct
import threading
import time
import traceback
from typing import Callable

from loadgen.ratelimit import make_limiter
from loadgen.stats import IntervalAccounting, LatencyHistogram, Window

PAYLOAD_POOL = 128           # distinct values cycled through (random A-Z, like Kafka's tool)
_TICK_S = 0.25               # how often a worker closes windows and reports progress
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


