"""Interval accounting, merging workers' windows, the HDR summary and the JSON shape."""
import json

import pytest

from loadgen.stats import (MB, IntervalAccounting, LatencyHistogram, Summary, TimelineMerger,
                           Window, format_interval_line, format_summary_line, merge_windows,
                           window_row)


def test_windows_close_on_time_and_gaps_are_empty_windows():
    acct = IntervalAccounting(1.0, start=100.0)
    assert acct.add(100.2, 10, 1000, latency_sum_us=10 * 500.0, latency_max_us=900.0) == []
    assert acct.add(100.9, 5, 500, 5 * 100.0, 200.0) == []
    closed = acct.add(103.5, 1, 100, 50.0, 50.0)    # skips windows 1 and 2
    assert [w.index for w in closed] == [0, 1, 2]
    w0 = closed[0]
    assert (w0.records, w0.bytes, w0.latency_max_us) == (15, 1500, 900.0)
    assert w0.latency_sum_us == pytest.approx(5500.0)
    assert closed[1].records == 0 and closed[2].records == 0
    last = acct.finish(103.75)
    assert len(last) == 1
    assert last[0].index == 3 and last[0].records == 1
    assert last[0].duration_s == pytest.approx(0.75)   # the real, partial duration
    assert acct.finish(200.0) == []                     # idempotent


def test_advance_reports_windows_without_records():
    acct = IntervalAccounting(0.5, start=0.0)
    assert [w.index for w in acct.advance(1.2)] == [0, 1]
    assert acct.advance(1.2) == []


def test_window_row_rates_and_averages():
    w = Window(2, 10.0, 5.0, records=50_000, bytes=5 * MB, latency_sum_us=50_000 * 2000.0,
               latency_max_us=9000.0)
    row = window_row(w)
    assert row == {"t_s": 15.0, "records_per_sec": 10_000.0, "mb_per_sec": 1.0,
                   "latency_avg_ms": 2.0, "latency_max_ms": 9.0}
    assert window_row(Window(0, 0.0, 1.0))["latency_avg_ms"] == 0.0


def test_window_tuple_round_trip():
    w = Window(3, 1.5, 0.5, 7, 700, 12.5, 9.0)
    assert Window.from_tuple(w.to_tuple()) == w


def test_merge_windows_sums_counts_and_takes_max():
    a = Window(1, 1.0, 1.0, 10, 100, 1000.0, 50.0)
    b = Window(1, 1.0, 0.4, 20, 300, 2000.0, 80.0)
    m = merge_windows([a, b])
    assert (m.records, m.bytes, m.latency_sum_us, m.latency_max_us, m.duration_s) == \
        (30, 400, 3000.0, 80.0, 1.0)
    with pytest.raises(ValueError):
        merge_windows([a, Window(2, 2.0, 1.0)])


def test_timeline_merger_waits_for_every_running_worker():
    m = TimelineMerger(2)
    assert m.feed(0, Window(0, 0, 1, 5)) == []
    assert m.feed(0, Window(1, 1, 1, 6)) == []
    out = m.feed(1, Window(0, 0, 1, 7))
    assert [(w.index, w.records) for w in out] == [(0, 12)]
    # Worker 1 finishes early: its done() releases worker 0's windows.
    out = m.done(1)
    assert [(w.index, w.records) for w in out] == [(1, 6)]
    out = m.feed(0, Window(2, 2, 0.5, 1))
    assert [(w.index, w.records) for w in out] == [(2, 1)]
    assert m.done(0) == []


def test_timeline_merger_rejects_out_of_order_windows():
    m = TimelineMerger(1)
    m.feed(0, Window(1, 1, 1))
    with pytest.raises(ValueError):
        m.feed(0, Window(1, 1, 1))


def test_histogram_percentiles_weights_and_exact_max():
    h = LatencyHistogram()
    h.record(1000.0, count=98)               # 1 ms, a batch of 98 records
    h.record(50_000.0, count=2, max_us=60_000.0)
    s = h.summary_ms()
    assert h.count == 100
    assert s["p50"] == pytest.approx(1.0, rel=1e-3)
    assert s["p95"] == pytest.approx(1.0, rel=1e-3)
    assert s["p99"] == pytest.approx(50.0, rel=1e-3)
    assert s["p99_9"] == pytest.approx(50.0, rel=1e-3)
    assert s["max"] == 60.0                  # the batch's worst record, not the mean
    assert s["avg"] == pytest.approx((98 * 1.0 + 2 * 50.0) / 100)


def test_histogram_clamps_out_of_range_values():
    h = LatencyHistogram()
    h.record(0.2)                # below 1 µs
    h.record(10**9)              # above 60 s
    assert h.count == 2
    assert h.percentile_ms(100) == pytest.approx(60_000.0, rel=1e-3)


def test_histogram_merge_through_encoding_equals_one_histogram():
    a, b, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for i, v in enumerate(range(100, 20_000, 37)):
        (a if i % 2 else b).record(float(v))
        both.record(float(v))
    merged = LatencyHistogram()
    merged.merge_encoded(json.loads(json.dumps(a.encode())))   # crosses a process as JSON
    merged.merge_encoded(b.encode())
    merged.merge_encoded(LatencyHistogram().encode())          # an empty worker
    assert merged.count == both.count
    assert merged.summary_ms() == pytest.approx(both.summary_ms())


def test_summary_json_shape():
    timeline = [window_row(Window(0, 0.0, 1.0, 1000, 100_000, 1000 * 500.0, 2000.0))]
    h = LatencyHistogram()
    h.record(500.0, 1000, 2000.0)
    s = Summary("produce", 1000, 100_000, 2.0, h.summary_ms(), timeline, {"acks": 1})
    doc = json.loads(json.dumps(s.to_json()))
    assert set(doc) >= {"mode", "records", "bytes", "elapsed_s", "records_per_sec", "mb_per_sec",
                        "latency_ms", "timeline", "config"}
    assert set(doc["latency_ms"]) == {"avg", "max", "p50", "p95", "p99", "p99_9"}
    assert set(doc["timeline"][0]) == {"t_s", "records_per_sec", "mb_per_sec", "latency_avg_ms",
                                       "latency_max_ms"}
    assert doc["records_per_sec"] == 500.0
    assert doc["mb_per_sec"] == pytest.approx(100_000 / MB / 2.0)
    assert doc["config"] == {"acks": 1}


def test_lines_have_kafkas_shape():
    row = {"records_per_sec": 1234.56, "mb_per_sec": 0.118, "latency_avg_ms": 3.21,
           "latency_max_ms": 45.0}
    assert format_interval_line("produce", row, 6173) == (
        "6173 records sent, 1234.6 records/sec (0.12 MB/sec), 3.2 ms avg latency, "
        "45.0 ms max latency.")
    s = Summary("consume", 10, 1000, 1.0, {"avg": 1, "max": 2, "p50": 1, "p95": 1.5, "p99": 2,
                                          "p99_9": 2}, [], {})
    line = format_summary_line(s)
    assert line.startswith("10 records received, 10.0 records/sec")
    assert line.endswith("1.00 ms 50th, 1.50 ms 95th, 2.00 ms 99th, 2.00 ms 99.9th.")
