"""riverbed as a drop-in for kafka-python (issue 16, item 2): kafka_python_program.py, written
for kafka-python, runs against a real fleet with only `kafka` replaced by `riverbed` in its
import lines."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from deploy.fleet import Fleet, free_base_port

pytestmark = pytest.mark.integration

PROGRAM = pathlib.Path(__file__).with_name("kafka_python_program.py")


def with_riverbed_imports(source: str) -> str:
    """Replace `kafka` by `riverbed` in `from kafka... import` / `import kafka` lines only."""
    out = re.sub(r"^from kafka(\.| )", r"from riverbed\1", source, flags=re.M)
    out = re.sub(r"^import kafka\b", "import riverbed", out, flags=re.M)
    changed = [(a, b) for a, b in zip(source.splitlines(), out.splitlines()) if a != b]
    assert changed and all(a.startswith(("from kafka", "import kafka")) for a, _ in changed)
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("kafka-python-fleet"), free_base_port(), storage_nodes=1,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


def test_a_kafka_python_program_runs_with_only_its_imports_changed(fleet, tmp_path):
    program = tmp_path / "program.py"
    program.write_text(with_riverbed_imports(PROGRAM.read_text()))
    proc = subprocess.run([sys.executable, str(program), fleet.gateway_endpoint],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kafka-python program: OK" in proc.stdout
