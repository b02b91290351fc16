"""loadgen.hops: its percentiles, pacing, report and echo rows (the other rows need a fleet)."""
from __future__ import annotations

import contextlib

import pytest

from loadgen import hops


def test_percentiles_are_nearest_rank_and_max_exact():
    p = hops.percentiles([float(i) for i in range(1, 1001)])
    assert (p["p50"], p["p95"], p["p99"], p["p99.9"], p["max"]) == (500.0, 950.0, 990.0, 999.0,
                                                                     1000.0)
    assert hops.percentiles([]) == {}
    assert hops.percentiles([3.0]) == {"p50": 3.0, "p95": 3.0, "p99": 3.0, "p99.9": 3.0,
                                       "max": 3.0}


def test_paced_calls_count_times_and_times_each():
    calls = []
    out = hops.paced(lambda: calls.append(1), rate=10_000, count=25)
    assert len(calls) == 25 and len(out) == 25 and all(x >= 0 for x in out)


def _lat(p50, p99):
    return {"p50": p50, "p95": p50, "p99": p99, "p99.9": p99, "max": p99}


def test_report_takes_medians_and_what_each_row_adds_to_its_base():
    rounds = [{"zmq echo": _lat(0.1, 1.0), "PRODUCE @leader": _lat(0.4, 2.0),
               "PRODUCE via gateway": _lat(0.9, 4.0)},
              {"zmq echo": _lat(0.3, 3.0), "PRODUCE @leader": _lat(0.6, 2.0),
               "PRODUCE via gateway": _lat(1.1, 6.0)}]
    text = hops.format_report(rounds, 1000, 100)
    assert "medians of 2 round(s)" in text
    via = next(line for line in text.splitlines() if line.startswith("PRODUCE via gateway"))
    assert "p50   1.000" in via and "+p50  0.500" in via and "+p99  3.000" in via
    assert "over PRODUCE @leader" in via
    rows = [line.split("  ")[0] for line in text.splitlines()[1:]]
    assert rows == ["zmq echo", "PRODUCE @leader", "PRODUCE via gateway"]   # rows not run: out


def test_main_refuses_nonpositive_arguments():
    with pytest.raises(SystemExit):
        hops.main(["--rate", "0"])


def test_report_gives_the_paced_rows_cpu_per_record_medians():
    cpu = lambda gw, cores: {"ms_per_record": {"client": 0.3, "gateway": gw},   # noqa: E731
                             "cores": cores}
    rounds = [{"e2e paced": _lat(2.0, 5.0), "cpu": cpu(0.5, 1.2)},
              {"e2e paced": _lat(3.0, 7.0), "cpu": cpu(0.7, 1.6)},
              {"e2e paced": _lat(2.5, 6.0), "cpu": cpu(0.6, 1.4)}]
    text = hops.format_report(rounds, 1000, 100)
    paced = next(line for line in text.splitlines() if line.startswith("e2e paced "))
    assert "p50   2.500" in paced and "p99   6.000" in paced
    line = next(line for line in text.splitlines() if "CPU ms per record" in line)
    assert "client 0.300, gateway 0.600; total 0.900 ms, 1.40 cores busy" in line
    # rounds without CPU (a fleet not started here): no CPU line
    assert "CPU ms" not in hops.format_report([{"e2e paced": _lat(2.0, 5.0), "cpu": {}}], 1, 1)


def test_echo_rows_round_trip_through_their_own_processes_and_pin_one():
    """The floor rows against their real echo and relay processes (no fleet): each call returns
    once the message came back; the one-CPU row is measured pinned, and pinning ends."""
    import os
    before = os.sched_getaffinity(0)
    with hops._echo_rows() as (calls, pinned):
        assert set(calls) == {"tcp echo", "zmq echo", "zmq echo, one CPU", "zmq relay, 4 hops"}
        assert pinned == {"zmq echo, one CPU": max(before)}
        for name, call in calls.items():
            with hops.on_cpu(pinned[name]) if name in pinned else contextlib.nullcontext():
                if name in pinned:
                    assert os.sched_getaffinity(0) == {pinned[name]}
                out = hops.paced(call, rate=5_000, count=20)
            assert len(out) == 20 and all(x > 0 for x in out), name
    assert os.sched_getaffinity(0) == before


def test_report_puts_the_zmq_echo_over_the_tcp_echo():
    rounds = [{"tcp echo": _lat(0.02, 0.2), "zmq echo": _lat(0.2, 0.5),
               "zmq echo, one CPU": _lat(0.04, 0.25)}]
    lines = hops.format_report(rounds, 1000, 100).splitlines()[1:]
    assert [line.split("  ")[0] for line in lines] == ["tcp echo", "zmq echo", "zmq echo, one CPU"]
    assert "+p50  0.180" in lines[1] and "over tcp echo" in lines[1]
    assert "over" not in lines[2]
