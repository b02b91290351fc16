"""Accounting for the perf tools: interval windows, latency histograms, the summary and its JSON.

Pure: every function takes the time it needs (`now`, seconds on one clock shared by the
workers of one run: `time.time()`), nothing reads a clock or does I/O.

- `IntervalAccounting` cuts a run into windows of `interval_s` counted from `start`: records,
  bytes, sum and max of latency. A window is closed (returned) once time has passed its end;
  empty windows are returned too, so a timeline has no holes.
- `TimelineMerger` merges the windows of several workers (processes) by window index and hands
  out a merged window once every worker still running has reported it.
- `LatencyHistogram` is an HDR histogram in microseconds (1 µs .. 60 s, 3 significant digits)
  that can be recorded with a weight (one value for a whole batch), encoded and merged.
- `Summary` holds the final figures; `to_json()` is the `--json` document.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

from hdrh.histogram import HdrHistogram

__all__ = ["Window", "IntervalAccounting", "TimelineMerger", "LatencyHistogram", "Summary",
           "MB", "LOWEST_US", "HIGHEST_US", "window_row", "format_interval_line",
           "format_summary_line", "merge_windows"]

MB = 1024 * 1024          # Kafka's perf tools divide by 1024*1024 for "MB/sec"
LOWEST_US = 1
HIGHEST_US = 60_000_000   # 60 s
SIGNIFICANT_DIGITS = 3


# ---------------------------------------------------------------------------------------------
# Windows

@dataclasses.dataclass
class Window:
    """One interval: [start_s, start_s + duration_s) relative to the run's start."""
    index: int
    start_s: float
    duration_s: float
    records: int = 0
    bytes: int = 0
    latency_sum_us: float = 0.0    # sum over records (a batch's mean counts once per record)
    latency_max_us: float = 0.0

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def to_tuple(self) -> tuple:
        return (self.index, self.start_s, self.duration_s, self.records, self.bytes,
                self.latency_sum_us, self.latency_max_us)

    @classmethod
    def from_tuple(cls, t: Sequence) -> "Window":
        return cls(int(t[0]), float(t[1]), float(t[2]), int(t[3]), int(t[4]), float(t[5]),
                   float(t[6]))


def merge_windows(windows: Iterable[Window]) -> Window:
    """Several workers' windows of the same index as one (counts add, max of max)."""
    ws = list(windows)
    if not ws:
        raise ValueError("nothing to merge")
    index = ws[0].index
    if any(w.index != index for w in ws):
        raise ValueError(f"windows of different indexes: {[w.index for w in ws]}")
    return Window(index, min(w.start_s for w in ws), max(w.duration_s for w in ws),
                  sum(w.records for w in ws), sum(w.bytes for w in ws),
                  sum(w.latency_sum_us for w in ws), max(w.latency_max_us for w in ws))


def window_row(w: Window) -> dict[str, float]:
    """A `timeline` entry of the JSON document."""
    d = w.duration_s if w.duration_s > 0 else float("inf")
    return {"t_s": round(w.end_s, 3),
            "records_per_sec": w.records / d,
            "mb_per_sec": w.bytes / MB / d,
            "latency_avg_ms": (w.latency_sum_us / w.records / 1000.0) if w.records else 0.0,
            "latency_max_ms": w.latency_max_us / 1000.0}


class IntervalAccounting:
    """Counts per window of `interval_s` from `start` (same clock as the `now`s given)."""

    def __init__(self, interval_s: float, start: float):
        if not interval_s > 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = float(interval_s)
        self.start = start
        self._current = Window(0, 0.0, self.interval_s)
        self.finished = False

    def _index_at(self, now: float) -> int:
        return max(int((now - self.start) // self.interval_s), 0)

    def advance(self, now: float) -> list[Window]:
        """Close every window that ended at or before `now` (empty ones included)."""
        if self.finished:
            return []
        out = []
        target = self._index_at(now)
        while self._current.index < target:
            out.append(self._current)
            i = self._current.index + 1
            self._current = Window(i, i * self.interval_s, self.interval_s)
        return out

    def add(self, now: float, records: int, nbytes: int, latency_sum_us: float = 0.0,
            latency_max_us: float = 0.0) -> list[Window]:
        """Count records completed at `now`; returns the windows this closed."""
        closed = self.advance(now)
        w = self._current
        w.records += records
        w.bytes += nbytes
        w.latency_sum_us += latency_sum_us
        if latency_max_us > w.latency_max_us:
            w.latency_max_us = latency_max_us
        return closed

    def finish(self, now: float) -> list[Window]:
        """Close everything; the last window is cut at `now` (its real duration)."""
        if self.finished:
            return []
        closed = self.advance(now)
        w = self._current
        w.duration_s = max(now - self.start - w.start_s, 0.0)
        self.finished = True
        if w.duration_s > 0 or w.records:
            closed.append(w)
        return closed


class TimelineMerger:
    """Merges the windows of `workers` workers. Feed each worker's windows in order; a merged
    window comes out once every worker not yet done has reported that index."""

    def __init__(self, workers: int):
        self.workers = workers
        self._pending: dict[int, list[Window]] = {}
        self._last: dict[int, int] = {w: -1 for w in range(workers)}
        self._done: set[int] = set()
        self._next = 0

    def feed(self, worker: int, window: Window) -> list[Window]:
        if window.index <= self._last[worker]:
            raise ValueError(f"worker {worker}: window {window.index} after {self._last[worker]}")
        self._last[worker] = window.index
        self._pending.setdefault(window.index, []).append(window)
        return self._ready()

    def done(self, worker: int) -> list[Window]:
        self._done.add(worker)
        return self._ready()

    def _ready(self) -> list[Window]:
        out = []
        while True:
            running = [w for w in range(self.workers) if w not in self._done]
            if running:
                complete_to = min(self._last[w] for w in running)
            else:
                complete_to = max(self._pending, default=-1)
            if self._next > complete_to:
                return out
            ws = self._pending.pop(self._next, [])
            if ws:
                out.append(merge_windows(ws))
            self._next += 1


# ---------------------------------------------------------------------------------------------
# Latency

class LatencyHistogram:
    """HDR histogram of latencies in µs; values are clamped into [1 µs, 60 s]."""

    def __init__(self) -> None:
        self.hist = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self.count = 0
        self.sum_us = 0.0
        self.max_us = 0.0

    def record(self, latency_us: float, count: int = 1, max_us: float | None = None) -> None:
        """Record `count` records of latency `latency_us` (a batch's mean); `max_us` is the
        batch's worst record when known (the exact max is kept beside the histogram)."""
        if count <= 0:
            return
        v = min(max(int(round(latency_us)), LOWEST_US), HIGHEST_US)
        self.hist.record_value(v, count)
        self.count += count
        self.sum_us += latency_us * count
        m = latency_us if max_us is None else max(max_us, latency_us)
        if m > self.max_us:
            self.max_us = m

    def encode(self) -> dict[str, Any]:
        return {"hdr": self.hist.encode().decode("ascii") if self.count else "",
                "count": self.count, "sum_us": self.sum_us, "max_us": self.max_us}

    def merge_encoded(self, enc: Mapping[str, Any]) -> None:
        if enc.get("count"):
            self.hist.decode_and_add(enc["hdr"].encode("ascii"))
            self.count += int(enc["count"])
            self.sum_us += float(enc["sum_us"])
            self.max_us = max(self.max_us, float(enc["max_us"]))

    def percentile_ms(self, p: float) -> float:
        return self.hist.get_value_at_percentile(p) / 1000.0 if self.count else 0.0

    def summary_ms(self) -> dict[str, float]:
        """avg, max, p50, p95, p99, p99_9 in ms (max is the exact one, not HDR-rounded)."""
        return {"avg": (self.sum_us / self.count / 1000.0) if self.count else 0.0,
                "max": self.max_us / 1000.0,
                "p50": self.percentile_ms(50), "p95": self.percentile_ms(95),
                "p99": self.percentile_ms(99), "p99_9": self.percentile_ms(99.9)}


# ---------------------------------------------------------------------------------------------
# Summary and output

@dataclasses.dataclass
class Summary:
    mode: str
    records: int
    bytes: int
    elapsed_s: float
    latency_ms: dict[str, float]
    timeline: list[dict[str, float]]
    config: dict[str, Any]
    errors: int = 0
    # after --warmup-records: warmup_records, records, bytes, elapsed_s, records_per_sec,
    # mb_per_sec, latency_ms (see loadgen.perf._steady_state); None without a warm-up
    steady_state: dict[str, Any] | None = None

    @property
    def records_per_sec(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_sec(self) -> float:
        return self.bytes / MB / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        out = {"mode": self.mode, "records": self.records, "bytes": self.bytes,
                "elapsed_s": self.elapsed_s, "records_per_sec": self.records_per_sec,
                "mb_per_sec": self.mb_per_sec, "latency_ms": dict(self.latency_ms),
                "timeline": list(self.timeline), "config": dict(self.config),
                "errors": self.errors}
        if self.steady_state is not None:
            out["steady_state"] = dict(self.steady_state)
        return out


_VERB = {"produce": "sent", "consume": "received", "e2e": "received"}


def format_interval_line(mode: str, row: Mapping[str, float], records: int) -> str:
    """Kafka's periodic line: 'N records sent, X records/sec (Y MB/sec), Z ms avg latency,
    W ms max latency.'"""
    return (f"{records} records {_VERB.get(mode, 'done')}, {row['records_per_sec']:.1f} "
            f"records/sec ({row['mb_per_sec']:.2f} MB/sec), {row['latency_avg_ms']:.1f} ms avg "
            f"latency, {row['latency_max_ms']:.1f} ms max latency.")


def format_summary_line(s: Summary) -> str:
    return _summary_text(s.mode, s.records, s.records_per_sec, s.mb_per_sec, s.latency_ms) + "."


def format_steady_state_line(s: Summary) -> str:
    """The summary of the records after --warmup-records (Kafka's second summary line)."""
    st = s.steady_state or {}
    if not st.get("records"):
        return f"0 records {_VERB.get(s.mode, 'done')} after {st.get('warmup_records', 0)} " \
               f"warm-up records (steady state)."
    return (_summary_text(s.mode, st["records"], st["records_per_sec"], st["mb_per_sec"],
                          st["latency_ms"])
            + f" (steady state after {st['warmup_records']} warm-up records).")


def _summary_text(mode: str, records: int, rps: float, mbps: float,
                  lat: Mapping[str, float]) -> str:
    return (f"{records} records {_VERB.get(mode, 'done')}, {rps:.1f} records/sec "
            f"({mbps:.2f} MB/sec), {lat['avg']:.2f} ms avg latency, {lat['max']:.2f} ms "
            f"max latency, {lat['p50']:.2f} ms 50th, {lat['p95']:.2f} ms 95th, "
            f"{lat['p99']:.2f} ms 99th, {lat['p99_9']:.2f} ms 99.9th")
