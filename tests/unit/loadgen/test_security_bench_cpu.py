"""loadgen.bench --security's CPU accounting and bounds: /proc stat parsing, per-thread deltas,
the CPU-bound ratio model, and the report (pure: no processes, no timing)."""
from __future__ import annotations

import math

from loadgen import bench, curve_ceiling
from loadgen import proc_cpu
from loadgen.proc_cpu import Cpu, Sample, cpu_of, delta, is_io_thread, parse_stat


def _stat(comm: str, utime: int, stime: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    return f"4242 ({comm}) S 1 1 1 0 -1 4194560 10 0 0 0 {utime} {stime} 0 0 20 0 3 0\n"


def test_parse_stat_reads_user_plus_system_and_odd_comms():
    assert parse_stat(_stat("python", 150, 50), tick=100) == ("python", 2.0)
    # a comm may hold spaces and parentheses: the last ')' ends it
    assert parse_stat(_stat("a (b) c", 10, 0), tick=100) == ("a (b) c", 0.1)
    assert parse_stat(_stat("ZMQbg/IO/0", 1, 1), tick=100)[0] == "ZMQbg/IO/0"


def test_io_threads_are_libzmqs():
    assert is_io_thread("ZMQbg/IO/0") and is_io_thread("ZMQbg/IO/1")
    assert not is_io_thread("ZMQbg/Reaper") and not is_io_thread("python")


def test_cpu_of_splits_io_threads_from_the_rest_since_a_sample():
    before = Sample(10.0, {(1, 1): ("python", 6.0), (1, 2): ("ZMQbg/IO/0", 3.0),
                           (1, 3): ("ZMQbg/IO/1", 1.0)})
    after = Sample(16.0, {(1, 1): ("python", 8.0), (1, 2): ("ZMQbg/IO/0", 6.0),
                          (1, 3): ("ZMQbg/IO/1", 1.5), (1, 4): ("ZMQbg/IO/2", 0.5)})
    c = cpu_of(after, before)
    assert math.isclose(c.io, 3.0 + 0.5 + 0.5)        # a new thread counts from zero
    assert math.isclose(c.io_busiest, 3.0)
    assert math.isclose(c.other, 6.0 - 4.0)
    assert math.isclose(c.total, 6.0)
    assert delta({"g": before}, {"g": after, "new": after}) == {"g": c}


def test_cpu_of_never_reports_negative_other():
    # the process total is read before its threads: a thread may have run a tick more
    c = cpu_of(Sample(1.0, {(1, 2): ("ZMQbg/IO/0", 1.01)}))
    assert c.other == 0.0 and c == Cpu(io=1.01, other=0.0, io_busiest=1.01)


def test_cpu_bound_ratio_adds_the_hops_cost_to_none():
    assert math.isclose(curve_ceiling.cpu_bound_ratio(6.0, 2, 1.5), 6.0 / 9.0)
    assert math.isnan(curve_ceiling.cpu_bound_ratio(0.0, 2, 1.5))
    none = {"io_cpu_s_per_gb": 0.4}
    assert math.isclose(curve_ceiling.extra_cpu_per_gb(none, {"io_cpu_s_per_gb": 2.1}), 1.7)
    assert curve_ceiling.extra_cpu_per_gb(none, {"io_cpu_s_per_gb": 0.3}) == 0.0


def _row(rps: float, io: float, other: float) -> dict:
    per = {g: {"io": io / 4, "other": other / 4, "io_busiest": io / 4}
           for g in proc_cpu.CPU_GROUPS}
    return {"records_per_sec": rps, "mb_per_sec": rps / 1e4, "records": 1000,
            "latency_ms": {}, "cpu_s_per_gb": per, "cores": 1.0}


def test_security_report_shows_cpu_groups_and_bounds():
    side = lambda rps, io, other: {  # noqa: E731
        "produce": {100: _row(rps, io, other)}, "consume": {100: _row(rps, io, other)}}
    stream = {"mb_per_sec": 100.0, "messages_per_sec": 1.0, "other_cpu_s_per_gb": 0.1}
    ceiling = {size: {"NONE": {**stream, "mb_per_sec": 1000.0, "io_cpu_s_per_gb": 0.5},
                      "CURVE": {**stream, "io_cpu_s_per_gb": 2.0}, "ratio": 0.1,
                      "extra_io_cpu_s_per_gb": 1.5} for size in bench.CEILING_SIZES}
    sides = {"NONE": side(1000.0, 1.0, 5.0), "CURVE": side(600.0, 4.0, 5.0), "ceiling": ceiling}
    cpu = bench.format_security_cpu(sides)
    assert "client" in cpu and "gateway" in cpu and "storage-node" in cpu
    assert "0.25+1.25" in cpu and "1.00+1.25" in cpu           # io + rest per group
    bounds = bench.format_bounds(sides)
    assert "256 KiB" in bounds and "1 MiB" in bounds
    # NONE 6 s/GB, CURVE 9 s/GB: CPU ratio 0.67; model 6 / (6 + 2 x 1.5) = 0.67; measured 0.60
    line = next(l for l in bounds.splitlines() if l.startswith("produce 100 B"))
    assert line.split()[-4:] == ["9.00", "0.67", "0.67", "0.60"]
