"""riverbed-bench (issue 27, item 3): result files, the latest result per suite, the tables the
Benchmarks page is generated from, and the command line around a stand-in suite."""
from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from loadgen import bench_cli, bench_results
from loadgen.bench_suites import ORDER, SUITES, Suite, suite


def record(suite_name="records", started="2026-12-01T10:15:30Z", **kw):
    rec = {"suite": suite_name, "module": "loadgen.records_bench", "command": ["python", "-m",
           "loadgen.records_bench"], "quick": False, "started": started, "duration_s": 4.2,
           "exit_code": 0, "commit": "ab12cd34ef", "dirty": False,
           "machine": {"cores": 2, "usable_cores": 2, "cpu_model": "Xeon",
                       "memory_bytes": 24 * 2**30, "kernel": "Linux 6.1", "os": "Debian",
                       "python": "CPython 3.11.7", "load_average": [1.5, 1.0, 0.5]},
           "load_average_end": [1.7, 1.1, 0.6],
           "figures": {"rows": [{"operation": "decode", "m_records_per_sec": 0.83}]},
           "report": "decode 0.83 M records/s\n", "log_tail": ""}
    rec.update(kw)
    return rec


def test_a_result_is_one_file_per_run_and_never_overwritten(tmp_path):
    first = bench_results.write_result(tmp_path, record())
    again = bench_results.write_result(tmp_path, record())
    assert first == tmp_path / "records" / "20261201T101530Z.json"
    assert again == tmp_path / "records" / "20261201T101530Z-2.json"
    data = json.loads(first.read_text())
    assert data["schema"] == bench_results.SCHEMA and data["figures"]["rows"][0]["operation"] \
        == "decode"


def test_load_results_reads_them_back_oldest_first_and_skips_what_is_not_a_result(tmp_path):
    bench_results.write_result(tmp_path, record(started="2026-12-02T00:00:00Z"))
    bench_results.write_result(tmp_path, record(suite_name="log", started="2026-12-01T00:00:00Z"))
    (tmp_path / "records" / "broken.json").write_text("{not json")
    (tmp_path / "records" / "other.json").write_text(json.dumps({"schema": 99, "suite": "x"}))
    got = bench_results.load_results(tmp_path)
    assert [(r["suite"], r["started"][:10]) for r in got] == [("log", "2026-12-01"),
                                                               ("records", "2026-12-02")]
    assert bench_results.load_results(tmp_path / "missing") == []


def test_latest_prefers_the_newest_full_run_and_ignores_failures():
    runs = [record(started="2026-12-01T00:00:00Z"),
            record(started="2026-12-02T00:00:00Z", quick=True),
            record(started="2026-12-03T00:00:00Z", exit_code=1),
            record(suite_name="log", started="2026-12-01T00:00:00Z", quick=True),
            record(suite_name="log", started="2026-12-02T00:00:00Z", quick=True)]
    best = bench_results.latest(runs)
    assert best["records"]["started"].startswith("2026-12-01")    # full beats a newer quick
    assert best["log"]["started"].startswith("2026-12-02")        # else the newest quick


@pytest.mark.parametrize("value,text", [(1234567, "1,234,567"), (1234567.8, "1,234,568"),
                                        (123.45, "123.5"), (12.345, "12.35"), (0.12345, "0.123"),
                                        (float("nan"), "—"), (None, "—"), (True, "true"),
                                        ("CURVE", "CURVE")])
def test_figures_read_as_people_read_them(value, text):
    assert bench_results.format_number(value) == text


def test_a_table_is_made_of_the_rows_a_suite_wrote():
    table = bench_results.figures_table({"rows": [
        {"engine": "plain | file", "write_mb_per_sec": 1500.0, "nested": {"x": 1}},
        {"engine": "PartitionLog", "write_mb_per_sec": 1010.2, "read_mb_per_sec": 3991.5}]})
    assert table.splitlines() == [
        "| engine | write MB/s | read MB/s |", "|---|---|---|",
        "| plain \\| file | 1,500 | — |", "| PartitionLog | 1,010 | 3,992 |"]
    assert bench_results.figures_table([{"a": 1}]) == "| a |\n|---|\n| 1 |"
    assert bench_results.column_header("none_io_cpu_s_per_gb") == "none I/O CPU s/GB"
    assert bench_results.column_header("curve_over_none") == "curve ÷ none"
    for shapeless in (None, {"matrix": [1, 2]}, {"rows": []}, [1, 2], {"rows": [{"x": [1]}]}):
        assert bench_results.figures_table(shapeless) is None


def test_the_page_section_names_conditions_table_and_report():
    text = bench_results.suite_markdown(record(), "records")
    first = text.splitlines()[0]
    for part in ("2026-12-01T10:15:30Z", "commit ab12cd34ef", "4 s", "2 cores (Xeon)",
                 "24.0 GiB", "Linux 6.1", "CPython 3.11.7", "load average 1.50 at the start",
                 "1.70 at the end", "`python -m loadgen.records_bench`"):
        assert part in first, part
    assert "| operation | M records/s |" in text
    assert "```text\ndecode 0.83 M records/s\n```" in text
    quick = bench_results.suite_markdown(record(quick=True, dirty=True), "records")
    assert "(quick run)" in quick and "(with local changes)" in quick
    assert "riverbed-bench run hops" in bench_results.suite_markdown(None, "hops")


def test_the_summary_has_a_row_per_suite():
    text = bench_results.summary_markdown({"records": record()}, SUITES)
    assert len(text.splitlines()) == 2 + len(SUITES)
    assert "| `records` |" in text and "2026-12-01, ab12cd3, 2 cores, load 1.5" in text
    assert "| `hops` | " in text and "none yet" in text


def test_the_machine_is_described():
    m = bench_results.describe_machine()
    assert m["cores"] >= 1 and m["usable_cores"] >= 1 and len(m["load_average"]) == 3
    for key in ("cpu_model", "memory_bytes", "kernel", "os", "python"):
        assert m[key], key


def test_every_benchmark_module_is_a_suite_and_names_are_unique():
    import pathlib
    loadgen = pathlib.Path(bench_results.__file__).parent
    benchmarks = {f"loadgen.{p.stem}" for p in loadgen.glob("*.py")
                  if "__main__" in p.read_text() and p.stem not in ("perf", "clickstream",
                                                                    "bench_cli")}
    assert benchmarks == {s.module for s in SUITES}
    assert len(set(ORDER)) == len(SUITES)
    with pytest.raises(KeyError, match="unknown suite 'nope'"):
        suite("nope")


# -- the command line -------------------------------------------------------------------------

FAKE_SUITE = '''
import argparse, json, sys
p = argparse.ArgumentParser()
p.add_argument("--fail", action="store_true")
p.add_argument("--json")
a = p.parse_args()
print("fake report: 42 records/s")
print("progress", file=sys.stderr)
if a.json:
    json.dump({"rows": [{"row": "only", "records_per_sec": 42}]}, open(a.json, "w"))
sys.exit(3 if a.fail else 0)
'''


@pytest.fixture
def fake_suite(tmp_path, monkeypatch):
    (tmp_path / "fake_suite.py").write_text(FAKE_SUITE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return Suite("fake", "fake_suite", "A stand-in", "nothing", quick_args=("--fail",))


def test_run_suite_keeps_report_figures_machine_and_exit_code(tmp_path, fake_suite):
    code, path = bench_cli.run_suite(fake_suite, quick=False, extra=(),
                                     results_dir=tmp_path / "results")
    rec = json.loads(path.read_text())
    assert code == 0 and rec["exit_code"] == 0 and rec["quick"] is False
    assert rec["command"] == ["python", "-m", "fake_suite"]
    assert rec["report"] == "fake report: 42 records/s\n" and "progress" in rec["log_tail"]
    assert rec["figures"] == {"rows": [{"row": "only", "records_per_sec": 42}]}
    assert rec["machine"]["cores"] >= 1 and len(rec["load_average_end"]) == 3
    code, path = bench_cli.run_suite(fake_suite, quick=True, extra=(),
                                     results_dir=tmp_path / "results")
    assert code == 3 and json.loads(path.read_text())["exit_code"] == 3


def test_cli_run_show_and_list(tmp_path, fake_suite, monkeypatch):
    monkeypatch.setattr(bench_cli, "suite", lambda name: fake_suite if name == "fake"
                        else suite(name))
    runner = CliRunner()
    results_dir = str(tmp_path / "results")
    ok = runner.invoke(bench_cli.cli, ["run", "fake", "--results-dir", results_dir])
    assert ok.exit_code == 0, ok.output
    failed = runner.invoke(bench_cli.cli, ["run", "fake", "--args", "--fail",
                                           "--results-dir", results_dir])
    assert failed.exit_code == 1
    assert len(list((tmp_path / "results" / "fake").glob("*.json"))) == 2
    monkeypatch.setattr(bench_cli, "SUITES", (fake_suite,))
    shown = runner.invoke(bench_cli.cli, ["show", "--results-dir", results_dir])
    assert "| only | 42 |" in shown.output and "fake report: 42 records/s" in shown.output
    listed = runner.invoke(bench_cli.cli, ["list"])
    assert "fake" in listed.output
    for bad in (["run"], ["run", "fake", "--all"], ["run", "nope"],
                ["run", "records", "log", "--args", "-x"]):
        assert runner.invoke(bench_cli.cli, bad).exit_code == 2, bad


def test_main_returns_exit_codes():
    assert bench_cli.main(["list", "--json"]) == 0
    assert bench_cli.main(["run"]) == 2
    assert bench_cli.main(["--help"]) == 0
    assert sys.executable
