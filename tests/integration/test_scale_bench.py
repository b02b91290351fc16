"""`python -m loadgen.scale --quick` on a tiny scale, in-process (its fleet is stopped by its own
context manager, pass or fail): every section of the report is produced, the JSON holds a figure
for every point and the plot is a PNG. No thresholds: the figures are for people."""
from __future__ import annotations

import json

import pytest

from loadgen import scale
from loadgen.plot import PNG_MAGIC

pytestmark = pytest.mark.integration


def test_scale_quick_runs_every_section(tmp_path, capsys):
    args = scale.parse_args(["--quick", "--records", "2000", "--data-dir", str(tmp_path / "d"),
                             "--json", str(tmp_path / "scale.json"),
                             "--plot", str(tmp_path / "scale.png")])
    assert scale.main_with(args) == 0
    text = capsys.readouterr().out
    for heading in ("1. throughput by partition count", "2. throughput by producer processes",
                    "3. throughput by gateways", "4. metadata", "5. memory"):
        assert heading in text, text
    doc = json.loads((tmp_path / "scale.json").read_text())
    assert [r["partitions"] for r in doc["partitions"]] == scale.QUICK["partitions"]
    assert [r["producer_processes"] for r in doc["producer_processes"]] == scale.QUICK["procs"]
    assert [r["gateways"] for r in doc["gateways"]] == scale.QUICK["gateways"]
    for row in doc["partitions"] + doc["producer_processes"] + doc["gateways"]:
        assert row["records_per_s"] > 0 and row["errors"] == 0, row
        # every fleet process's cores busy meanwhile (ZooKeeper left out)
        assert {"gateway-1", "storage-1", "storage-2", "storage-3"} <= set(row["process_cores"])
        assert not any(n.startswith("zookeeper") for n in row["process_cores"]), row
    assert sum(r["process_cores"]["gateway-1"]
               for r in doc["partitions"] + doc["producer_processes"]) > 0
    assert "gw cores" in text
    points = doc["metadata"]["points"]
    assert [p["partitions_in_cluster"] >= t for p, t in zip(points, scale.QUICK["metadata"])] \
        == [True] * len(scale.QUICK["metadata"])
    for p in points:
        assert p["controller_failover_s"] > 0 and p["controlled_shutdown_s"] > 0, p
    assert doc["clients"]["clients"] == scale.QUICK["clients"]
    assert (tmp_path / "scale.png").read_bytes().startswith(PNG_MAGIC)
