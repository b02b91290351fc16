"""loadgen.hops: its percentiles, pacing and report (the rows themselves need a fleet)."""
from __future__ import annotations

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
