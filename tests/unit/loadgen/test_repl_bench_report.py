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


def test_report_prints_the_wait_ratio_and_the_cpu_bound():
    r = _round(1000, 400, 10, 20, 3.0)
    cpu = lambda client, nodes: {"client": client, "gateway": 1.0, "storage-node": nodes,  # noqa: E731
                                 "other": 0.0}
    r["acks1_rf1"].update(cpu_s_per_m=cpu(1.0, 1.0), cores=2.0)
    r["acks1_rf3"] = {"records_per_sec": 500, "cpu_s_per_m": cpu(1.0, 3.0), "cores": 2.0}
    r["acksall_rf3"].update(cpu_s_per_m=cpu(1.0, 3.0), cores=1.9)
    r["wait_ratio"] = 400 / 500
    r["cpu_ratio"] = 3.0 / 5.0
    text = format_report([r])
    assert "acks=all ÷ this 0.80" in text
    assert "acks=1 RF3" in text and "storage-node 3.00" in text and "1.90 cores busy" in text
    assert "acks=1 RF1 ÷ acks=all RF3:  0.60" in text


def test_report_without_cpu_figures_leaves_them_out():
    r = _round(1000, 400, 10, 20, 3.0)
    r["acks1_rf3"] = {"records_per_sec": 500}
    r["wait_ratio"] = 0.8
    text = format_report([r])
    assert "acks=all ÷ this 0.80" in text and "CPU" not in text


def test_report_prints_the_steady_state_beside_each_e2e_row():
    rounds = []
    for p99, steady_p99 in ((6.0, 4.0), (5.0, 3.0), (7.0, 2.0)):
        r = _round(100, 50, 10, 20, p99)
        for rate in (1000, 50000):
            r[f"e2e_{rate}"] = dict(r[f"e2e_{rate}"], steady_latency_ms={
                "p50": 1.0, "p95": 2.0, "p99": steady_p99, "p99_9": 5.0, "max": 6.0})
        rounds.append(r)
    lines = format_report(rounds).splitlines()
    i = next(i for i, line in enumerate(lines) if "e2e at  1,000/s" in line)
    assert "p99 6.00" in lines[i]                        # every record: median of 6, 5, 7
    assert "after its first second (steady state)" in lines[i + 1]
    assert "p99 3.00" in lines[i + 1]                    # median of 4, 3, 2
    # a round without the steady state (an older JSON) prints the row alone
    assert "steady state" not in format_report([_round(100, 50, 10, 20, 3.0)])
