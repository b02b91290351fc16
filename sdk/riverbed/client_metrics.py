"""Kafka's client metrics for the Producer and the Consumer: the pure core behind
`producer.metrics()` and `consumer.metrics()` (and, when the application configured an
OpenTelemetry MeterProvider, the `riverbed.producer.*` / `riverbed.consumer.*` instruments of
riverbed.client_otel).

Pure: no clock, no I/O, no threads; every call takes `now_ms` (the clients pass
time.monotonic() in ms), so rates are tested with a fake clock. The clients call these per
request, per batch or per poll — never per record.

Rates and averages are Kafka's sampled stats (`SampledStat`, `Rate`): values are recorded into
`METRICS_NUM_SAMPLES` windows of `METRICS_SAMPLE_WINDOW_MS` (Kafka's metrics.num.samples = 2 and
metrics.sample.window.ms = 30000); an average or maximum covers the live windows, a rate divides
their sum by the time they cover (at least `num_samples - 1` whole windows, as Kafka's Rate
does, so a burst right after start is not reported as a huge rate). With no sample in the
windows, averages and maxima are NaN — Kafka's value for "nothing measured" — and rates 0.

Names are the Kafka clients' (kafka-python's and Java's `producer-metrics`, `consumer-metrics`,
`consumer-fetch-manager-metrics`, `consumer-coordinator-metrics`), in one flat dict: the
`*-total` entries are cumulative counts since the client started, `*-rate` per second over the
windows, `*-avg` / `*-max` over the windows. Times are in milliseconds, sizes in bytes.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = ["METRICS_NUM_SAMPLES", "METRICS_SAMPLE_WINDOW_MS", "SampledStat", "ProducerMetrics",
           "ConsumerMetrics", "PRODUCER_METRICS", "CONSUMER_METRICS"]

METRICS_SAMPLE_WINDOW_MS = 30000.0   # Kafka's metrics.sample.window.ms
METRICS_NUM_SAMPLES = 2              # Kafka's metrics.num.samples

_NAN = float("nan")


class SampledStat:
    """Count, sum and maximum of the values recorded in the last `samples` windows of
    `window_ms` each, plus the count and sum since start. `record()` is a few slot operations
    (called per request, batch or poll); `record_many()` adds several values at once (a
    request's batches). The current window lives in slots, closed ones in a short list."""

    __slots__ = ("window_ms", "samples", "_start", "_n", "_sum", "_max", "_old", "_old_n",
                 "_old_sum")

    def __init__(self, window_ms: float = METRICS_SAMPLE_WINDOW_MS,
                 samples: int = METRICS_NUM_SAMPLES):
        if window_ms <= 0 or samples < 1:
            raise ValueError("window_ms must be > 0 and samples >= 1")
        self.window_ms = window_ms
        self.samples = samples
        self._start = -math.inf     # the current window's start (none yet)
        self._n = 0
        self._sum = 0.0
        self._max = -math.inf
        self._old: list[tuple[float, int, float, float]] = []   # closed: (start, n, sum, max)
        self._old_n = 0             # values and their sum in every window closed since start
        self._old_sum = 0.0

    def record(self, value: float, now_ms: float) -> None:
        if now_ms - self._start >= self.window_ms:
            self._roll(now_ms)
        self._n += 1
        self._sum += value
        if value > self._max:
            self._max = value

    def record_many(self, count: int, total: float, largest: float, now_ms: float) -> None:
        """`count` values summing to `total`, the largest `largest`."""
        if now_ms - self._start >= self.window_ms:
            self._roll(now_ms)
        self._n += count
        self._sum += total
        if largest > self._max:
            self._max = largest

    def _roll(self, now_ms: float) -> None:
        if self._n:
            old = self._old
            old.append((self._start, self._n, self._sum, self._max))
            self._old_n += self._n
            self._old_sum += self._sum
            if len(old) >= self.samples:
                del old[0]
        self._start = now_ms
        self._n = 0
        self._sum = 0.0
        self._max = -math.inf

    @property
    def count_total(self) -> int:
        return self._old_n + self._n

    @property
    def sum_total(self) -> float:
        return self._old_sum + self._sum

    def _live(self, now_ms: float) -> list[tuple[float, int, float, float]]:
        # reads only: the producer's sender thread records while the application reads
        horizon = now_ms - self.samples * self.window_ms
        live = [w for w in list(self._old) if w[0] > horizon]
        start, n = self._start, self._n
        if n and start > horizon:
            live.append((start, n, self._sum, self._max))
        return live

    def count(self, now_ms: float) -> int:
        return sum(w[1] for w in self._live(now_ms))

    def sum(self, now_ms: float) -> float:
        return sum(w[2] for w in self._live(now_ms))

    def avg(self, now_ms: float) -> float:
        live = self._live(now_ms)
        n = sum(w[1] for w in live)
        return sum(w[2] for w in live) / n if n else _NAN

    def max(self, now_ms: float) -> float:
        live = self._live(now_ms)
        return max(w[3] for w in live) if live else _NAN

    def _elapsed_s(self, live: list[tuple[float, int, float, float]], now_ms: float) -> float:
        # Kafka's Rate.windowSize: from the oldest live window's start, padded to at least
        # samples - 1 whole windows
        elapsed = now_ms - live[0][0]
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0) / 1000.0

    def rate(self, now_ms: float) -> float:
        """Sum of the recorded values per second (records/s when each value is a count)."""
        live = self._live(now_ms)
        return sum(w[2] for w in live) / self._elapsed_s(live, now_ms) if live else 0.0

    def count_rate(self, now_ms: float) -> float:
        """Recordings per second (requests/s when recorded once per request)."""
        live = self._live(now_ms)
        return sum(w[1] for w in live) / self._elapsed_s(live, now_ms) if live else 0.0


class _Metrics:
    def __init__(self, window_ms: float, samples: int):
        self._window_ms = window_ms
        self._samples = samples

    def _stat(self) -> SampledStat:
        return SampledStat(self._window_ms, self._samples)


class ProducerMetrics(_Metrics):
    """The producer's recordings (called by riverbed.sender on its thread) and the dict of
    Producer.metrics()."""

    def __init__(self, window_ms: float = METRICS_SAMPLE_WINDOW_MS,
                 samples: int = METRICS_NUM_SAMPLES):
        super().__init__(window_ms, samples)
        self.records_sent = self._stat()     # per request: records in it
        self.batch_size = self._stat()       # per batch: bytes on the wire
        self.compression = self._stat()      # per batch: compressed / uncompressed bytes
        self.queue_time = self._stat()       # per batch: created -> drained into a request (ms)
        self.request_latency = self._stat()  # per answered request (ms)
        self.request_bytes = self._stat()    # per request: bytes of its record batches
        self.record_errors = self._stat()    # per failed batch: its records
        self.record_retries = self._stat()   # per retried batch: its records
        self.errors_by_code: dict[str, int] = {}

    def request_sent(self, batches: Iterable, now_ms: float) -> None:
        """One PRODUCE request of these batches (objects with `payload` bytes,
        `uncompressed_size`, `record_count` and `created_ms`, like accumulator.ProducerBatch)."""
        # summed here, recorded once per stat per request
        n = nbytes = records = 0
        largest = 0
        ratios = 0.0
        queued = 0.0
        queued_max = -math.inf
        for b in batches:
            size = len(b.payload)
            n += 1
            nbytes += size
            records += b.record_count
            if size > largest:
                largest = size
            u = b.uncompressed_size
            ratios += size / u if u > 0 else 1.0
            q = now_ms - b.created_ms
            queued += q
            if q > queued_max:
                queued_max = q
        self.batch_size.record_many(n, nbytes, largest, now_ms)
        self.compression.record_many(n, ratios, 0.0, now_ms)
        self.queue_time.record_many(n, queued, queued_max, now_ms)
        self.records_sent.record(records, now_ms)
        self.request_bytes.record(nbytes, now_ms)

    def response(self, latency_ms: float, now_ms: float) -> None:
        self.request_latency.record(latency_ms, now_ms)

    def retried(self, records: int, error: str, now_ms: float) -> None:
        self.record_retries.record(records, now_ms)
        self._count_error(error)

    def failed(self, records: int, error: str, now_ms: float) -> None:
        self.record_errors.record(records, now_ms)
        self._count_error(error)

    def _count_error(self, error: str) -> None:
        self.errors_by_code[error] = self.errors_by_code.get(error, 0) + 1

    def snapshot(self, now_ms: float, *, in_flight: int, buffer_total_bytes: int,
                 buffer_used_bytes: int) -> dict[str, Any]:
        """Kafka's producer-metrics names (see PRODUCER_METRICS)."""
        rs, rl, rb = self.records_sent, self.request_latency, self.request_bytes
        return {
            "record-send-rate": rs.rate(now_ms),
            "record-send-total": int(rs.sum_total),
            "records-per-request-avg": rs.avg(now_ms),
            "request-rate": rs.count_rate(now_ms),
            "request-total": rs.count_total,
            "request-size-avg": rb.avg(now_ms),
            "request-size-max": rb.max(now_ms),
            "outgoing-byte-rate": rb.rate(now_ms),
            "outgoing-byte-total": int(rb.sum_total),
            "batch-size-avg": self.batch_size.avg(now_ms),
            "batch-size-max": self.batch_size.max(now_ms),
            "compression-rate-avg": self.compression.avg(now_ms),
            "record-queue-time-avg": self.queue_time.avg(now_ms),
            "record-queue-time-max": self.queue_time.max(now_ms),
            "request-latency-avg": rl.avg(now_ms),
            "request-latency-max": rl.max(now_ms),
            "response-total": rl.count_total,
            "requests-in-flight": in_flight,
            "buffer-total-bytes": buffer_total_bytes,
            "buffer-available-bytes": max(buffer_total_bytes - buffer_used_bytes, 0),
            "record-error-rate": self.record_errors.rate(now_ms),
            "record-error-total": int(self.record_errors.sum_total),
            "record-retry-rate": self.record_retries.rate(now_ms),
            "record-retry-total": int(self.record_retries.sum_total),
            "errors-by-code": dict(self.errors_by_code),
        }


class ConsumerMetrics(_Metrics):
    """The consumer's recordings (per poll, per FETCH answer, per partition of an answer, per
    commit, per join) and the dict of Consumer.metrics()."""

    def __init__(self, window_ms: float = METRICS_SAMPLE_WINDOW_MS,
                 samples: int = METRICS_NUM_SAMPLES):
        super().__init__(window_ms, samples)
        self.records_consumed = self._stat()   # per poll that returned records: their count
        self.fetch_latency = self._stat()      # per FETCH answer (ms)
        self.fetch_size = self._stat()         # per FETCH answer: bytes
        self.fetch_records = self._stat()      # per FETCH answer: records in its whole batches
        self.records_lag = self._stat()        # per partition of a FETCH answer: hw - next fetch
        self.records_lag_by_partition: dict[Any, SampledStat] = {}   # (topic, partition) -> stat
        self.poll_interval = self._stat()      # per poll: ms since the previous poll
        self.commit_latency = self._stat()     # per successful OFFSET_COMMIT (ms)
        self.rebalance_latency = self._stat()  # per completed join + sync (ms)
        self.join_time = self._stat()          # per JOIN_GROUP answer (ms)
        self.sync_time = self._stat()          # per SYNC_GROUP answer (ms)
        self.heartbeats = self._stat()         # per HEARTBEAT answer: latency (ms)
        self.failed_rebalances = 0
        self.fetch_errors = 0
        self.last_poll_ms: float | None = None
        self.last_rebalance_ms: float | None = None

    def polled(self, now_ms: float) -> None:
        last = self.last_poll_ms
        if last is not None:
            self.poll_interval.record(now_ms - last, now_ms)
        self.last_poll_ms = now_ms

    def consumed(self, records: int, now_ms: float) -> None:
        self.records_consumed.record(records, now_ms)

    def fetched(self, latency_ms: float, nbytes: int, records: int, now_ms: float) -> None:
        self.fetch_latency.record(latency_ms, now_ms)
        self.fetch_size.record(nbytes, now_ms)
        self.fetch_records.record(records, now_ms)

    def lag(self, tp: tuple[str, int], lag: int, now_ms: float) -> None:
        """One partition's lag in a FETCH answer (high watermark - next fetch offset)."""
        self.records_lag.record(lag, now_ms)
        st = self.records_lag_by_partition.get(tp)
        if st is None:
            st = self.records_lag_by_partition[tp] = self._stat()
        st.record(lag, now_ms)

    def _lag_max_by_partition(self, now_ms: float) -> dict[str, float]:
        out = {}
        by_tp = self.records_lag_by_partition
        for tp, st in list(by_tp.items()):
            m = st.max(now_ms)
            if math.isnan(m):
                by_tp.pop(tp, None)            # nothing in the windows: forget the partition
            else:
                out[f"{tp[0]}-{tp[1]}"] = m
        return out

    def committed(self, latency_ms: float, now_ms: float) -> None:
        self.commit_latency.record(latency_ms, now_ms)

    def joined(self, join_ms: float, now_ms: float) -> None:
        self.join_time.record(join_ms, now_ms)

    def synced(self, sync_ms: float, now_ms: float) -> None:
        self.sync_time.record(sync_ms, now_ms)

    def rebalanced(self, latency_ms: float, now_ms: float) -> None:
        self.rebalance_latency.record(latency_ms, now_ms)
        self.last_rebalance_ms = now_ms

    def heartbeat(self, latency_ms: float, now_ms: float) -> None:
        self.heartbeats.record(latency_ms, now_ms)

    def snapshot(self, now_ms: float, *, assigned_partitions: int,
                 lag_by_partition: dict[str, int]) -> dict[str, Any]:
        """Kafka's consumer metric names (see CONSUMER_METRICS). lag_by_partition:
        "topic-partition" -> high watermark - position, now."""
        rc, fl, fs, fr = self.records_consumed, self.fetch_latency, self.fetch_size, self.fetch_records
        pi, cl, rl = self.poll_interval, self.commit_latency, self.rebalance_latency
        last_poll, last_rebalance = self.last_poll_ms, self.last_rebalance_ms
        lag_max = self.records_lag.max(now_ms)
        return {
            "records-consumed-rate": rc.rate(now_ms),
            "records-consumed-total": int(rc.sum_total),
            "records-lag-max": lag_max if not math.isnan(lag_max) else
            float(max(lag_by_partition.values(), default=_NAN)),
            "records-lag": dict(lag_by_partition),
            "records-lag-max-by-partition": self._lag_max_by_partition(now_ms),
            "bytes-consumed-rate": fs.rate(now_ms),
            "bytes-consumed-total": int(fs.sum_total),
            "fetch-rate": fl.count_rate(now_ms),
            "fetch-total": fl.count_total,
            "fetch-latency-avg": fl.avg(now_ms),
            "fetch-latency-max": fl.max(now_ms),
            "fetch-size-avg": fs.avg(now_ms),
            "fetch-size-max": fs.max(now_ms),
            "records-per-request-avg": fr.avg(now_ms),
            "fetch-error-total": self.fetch_errors,
            "time-between-poll-avg": pi.avg(now_ms),
            "time-between-poll-max": pi.max(now_ms),
            "last-poll-seconds-ago": (now_ms - last_poll) / 1000.0 if last_poll is not None
            else -1.0,
            "commit-latency-avg": cl.avg(now_ms),
            "commit-latency-max": cl.max(now_ms),
            "commit-rate": cl.count_rate(now_ms),
            "commit-total": cl.count_total,
            "rebalance-total": rl.count_total,
            "rebalance-rate-per-hour": rl.count_rate(now_ms) * 3600.0,
            "rebalance-latency-avg": rl.avg(now_ms),
            "rebalance-latency-max": rl.max(now_ms),
            "rebalance-latency-total": rl.sum_total,
            "failed-rebalance-total": self.failed_rebalances,
            "last-rebalance-seconds-ago": (now_ms - last_rebalance) / 1000.0
            if last_rebalance is not None else -1.0,
            "join-time-avg": self.join_time.avg(now_ms),
            "join-time-max": self.join_time.max(now_ms),
            "sync-time-avg": self.sync_time.avg(now_ms),
            "sync-time-max": self.sync_time.max(now_ms),
            "heartbeat-rate": self.heartbeats.count_rate(now_ms),
            "heartbeat-total": self.heartbeats.count_total,
            "heartbeat-response-time-max": self.heartbeats.max(now_ms),
            "assigned-partitions": assigned_partitions,
        }


# name -> (OpenTelemetry kind, unit, description); the instruments of riverbed.client_otel are
# riverbed.producer.<name with - as _> / riverbed.consumer.<...>. Entries whose value is a dict
# are not instruments (errors-by-code becomes riverbed.producer.errors with an error attribute).
PRODUCER_METRICS: dict[str, tuple[str, str, str]] = {
    "record-send-rate": ("gauge", "{record}/s", "records sent per second"),
    "record-send-total": ("counter", "{record}", "records sent"),
    "records-per-request-avg": ("gauge", "{record}", "average records per PRODUCE request"),
    "request-rate": ("gauge", "{request}/s", "PRODUCE requests per second"),
    "request-total": ("counter", "{request}", "PRODUCE requests sent"),
    "request-size-avg": ("gauge", "By", "average bytes of record batches per request"),
    "request-size-max": ("gauge", "By", "largest request (record batch bytes)"),
    "outgoing-byte-rate": ("gauge", "By/s", "record batch bytes sent per second"),
    "outgoing-byte-total": ("counter", "By", "record batch bytes sent"),
    "batch-size-avg": ("gauge", "By", "average record batch size"),
    "batch-size-max": ("gauge", "By", "largest record batch"),
    "compression-rate-avg": ("gauge", "1", "average compressed / uncompressed batch size"),
    "record-queue-time-avg": ("gauge", "ms", "average time a batch waited in the accumulator"),
    "record-queue-time-max": ("gauge", "ms", "longest time a batch waited in the accumulator"),
    "request-latency-avg": ("gauge", "ms", "average PRODUCE request latency"),
    "request-latency-max": ("gauge", "ms", "longest PRODUCE request latency"),
    "response-total": ("counter", "{response}", "PRODUCE answers received"),
    "requests-in-flight": ("gauge", "{request}", "PRODUCE requests awaiting an answer"),
    "buffer-total-bytes": ("gauge", "By", "buffer_memory"),
    "buffer-available-bytes": ("gauge", "By", "buffer_memory not reserved by batches"),
    "record-error-rate": ("gauge", "{record}/s", "records failed per second"),
    "record-error-total": ("counter", "{record}", "records failed"),
    "record-retry-rate": ("gauge", "{record}/s", "records retried per second"),
    "record-retry-total": ("counter", "{record}", "records retried"),
}

CONSUMER_METRICS: dict[str, tuple[str, str, str]] = {
    "records-consumed-rate": ("gauge", "{record}/s", "records returned by poll per second"),
    "records-consumed-total": ("counter", "{record}", "records returned by poll"),
    "records-lag-max": ("gauge", "{record}", "largest partition lag (messages) in the windows"),
    "bytes-consumed-rate": ("gauge", "By/s", "bytes fetched per second"),
    "bytes-consumed-total": ("counter", "By", "bytes fetched"),
    "fetch-rate": ("gauge", "{request}/s", "FETCH answers per second"),
    "fetch-total": ("counter", "{request}", "FETCH answers"),
    "fetch-latency-avg": ("gauge", "ms", "average FETCH latency"),
    "fetch-latency-max": ("gauge", "ms", "longest FETCH latency"),
    "fetch-size-avg": ("gauge", "By", "average bytes per FETCH answer"),
    "fetch-size-max": ("gauge", "By", "largest FETCH answer"),
    "records-per-request-avg": ("gauge", "{record}", "average records per FETCH answer"),
    "fetch-error-total": ("counter", "{request}", "FETCH answers or partitions with an error"),
    "time-between-poll-avg": ("gauge", "ms", "average time between poll() calls"),
    "time-between-poll-max": ("gauge", "ms", "longest time between poll() calls"),
    "commit-latency-avg": ("gauge", "ms", "average latency of successful commits"),
    "commit-latency-max": ("gauge", "ms", "longest latency of a successful commit"),
    "commit-rate": ("gauge", "{commit}/s", "successful commits per second"),
    "commit-total": ("counter", "{commit}", "successful commits"),
    "rebalance-total": ("counter", "{rebalance}", "rebalances completed (join + sync)"),
    "rebalance-latency-avg": ("gauge", "ms", "average rebalance (join + sync) time"),
    "rebalance-latency-max": ("gauge", "ms", "longest rebalance (join + sync) time"),
    "failed-rebalance-total": ("counter", "{rebalance}", "join or sync attempts that failed"),
    "heartbeat-total": ("counter", "{heartbeat}", "heartbeats answered"),
    "assigned-partitions": ("gauge", "{partition}", "partitions assigned to this consumer"),
}
