"""loadgen.repl_bench's report: medians over rounds, ratios against the same run's baselines."""
from __future__ import annotations

from loadgen.repl_bench import format_report


def _round(acks1, acksall, default_mb, tuned_mb, p99):
    lat = {"p50": 1.0, "p95": 2.0, "p99": p99, "p99_9": 9.0, "max": 10.0}
    return {"acks1_rf1": {"records_per_sec": acks1, "latency_ms": lat},
            "acksall_rf3": {"records_per_sec": acksall, "latency_ms": lat},
            "acks_ratio": acksall / acks1,
            "large_default": {"mb_per_sec": default_mb}, "large_tuned": {"mb_per_sec": tuned_mb},
            "large_ratio": default_mb / tuned_mb,
            "e2e_1000": {"latency_ms": lat}, "e2e_50000": {"latency_ms": lat}}


def test_report_prints_the_medians_and_ratios():
    text = format_report([_round(100, 50, 10, 20, 3.0), _round(200, 40, 30, 20, 5.0),
                          _round(300, 240, 20, 20, 4.0)])
    assert "medians of 3 round(s)" in text
    assert "200 records/s (baseline)" in text            # median of 100, 200, 300
    assert "ratio 0.50" in text                          # median of 0.5, 0.2, 0.8
    assert "ratio 1.00" in text                          # median of 0.5, 1.5, 1.0
    assert "e2e at  1,000/s" in text and "p99 4.00" in text


def test_report_leaves_out_rows_not_run():
    r = _round(100, 50, 10, 20, 3.0)
    only_acks = {k: v for k, v in r.items() if k.startswith("acks")}
    text = format_report([only_acks])
    assert "acks=all" in text and "1 KiB" not in text and "e2e" not in text
