"""riverbed-perf against a real fleet: produce 20,000 records, read them back, check the JSON
and the plot. The console script runs as a subprocess, as a user would run it."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from deploy.fleet import Fleet, free_base_port
from loadgen.plot import PNG_MAGIC

pytestmark = pytest.mark.integration

N = 20_000


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with Fleet(tmp_path_factory.mktemp("perf-fleet"), free_base_port(), storage_nodes=1,
               controllers=1, gateways=1) as f:
        f.up(detach=True)
        yield f


def _perf_cmd() -> list[str]:
    script = pathlib.Path(sys.executable).with_name("riverbed-perf")
    return [str(script)] if script.exists() else [sys.executable, "-m", "loadgen.perf"]


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run(_perf_cmd() + args, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def _check_result(doc: dict, mode: str) -> None:
    assert doc["mode"] == mode
    assert doc["records"] == N
    assert doc["bytes"] == N * 100
    for key in ("elapsed_s", "records_per_sec", "mb_per_sec"):
        assert doc[key] > 0, key
    lat = doc["latency_ms"]
    assert set(lat) == {"avg", "max", "p50", "p95", "p99", "p99_9"}
    assert lat["max"] > 0 and lat["avg"] > 0
    assert lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p99_9"]
    assert doc["timeline"] and all(r["records_per_sec"] >= 0 for r in doc["timeline"])


def _check_png(path: pathlib.Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000


def test_produce_then_consume_20000(fleet, tmp_path):
    endpoint = fleet.gateway_endpoint
    common = ["--bootstrap-server", endpoint, "--topic", "perf-it", "--num-records", str(N),
              "--reporting-interval", "500"]
    p = _run(["produce", *common, "--record-size", "100", "--create-topic", "--partitions", "1",
              "--replication-factor", "1", "--json", str(tmp_path / "out.json"),
              "--plot", str(tmp_path / "out.png")])
    assert f"{N} records sent" in p.stdout.splitlines()[-1]
    produced = json.loads((tmp_path / "out.json").read_text())
    _check_result(produced, "produce")
    assert produced["errors"] == 0
    _check_png(tmp_path / "out.png")

    c = _run(["consume", *common, "--json", str(tmp_path / "in.json"),
              "--plot", str(tmp_path / "in.png")])
    assert f"{N} records received" in c.stdout.splitlines()[-1]
    consumed = json.loads((tmp_path / "in.json").read_text())
    _check_result(consumed, "consume")
    _check_png(tmp_path / "in.png")


def test_e2e_with_warmup_reports_the_whole_run_and_the_steady_state(fleet, tmp_path):
    """`riverbed-perf e2e --warmup-records`: the consumer process counts every record in the
    summary and the ones after the first 500 again in the steady-state line and JSON."""
    e = _run(["e2e", "--bootstrap-server", fleet.gateway_endpoint, "--topic", "perf-e2e",
              "--num-records", "3000", "--throughput", "3000", "--warmup-records", "500",
              "--create-topic", "--partitions", "1", "--replication-factor", "1",
              "--reporting-interval", "60000", "--json", str(tmp_path / "e2e.json")])
    last, steady_line = e.stdout.splitlines()[-2:]
    assert last.startswith("3000 records received, ")
    assert steady_line.startswith("2500 records received, ")
    assert steady_line.endswith("(steady state after 500 warm-up records).")
    doc = json.loads((tmp_path / "e2e.json").read_text())
    assert doc["records"] == 3000 and doc["errors"] == 0
    st = doc["steady_state"]
    assert st["records"] == 2500 and st["warmup_records"] == 500
    assert 0 < st["elapsed_s"] < doc["elapsed_s"]
    assert 0 < st["latency_ms"]["p50"] <= st["latency_ms"]["p99"] <= st["latency_ms"]["max"]
    assert st["latency_ms"]["max"] <= doc["latency_ms"]["max"]
