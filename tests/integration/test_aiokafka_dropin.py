"""riverbed.aio as a drop-in for aiokafka (issue 16, item 3): aiokafka_program.py, written for
aiokafka, runs against a real fleet with only `aiokafka` replaced by `riverbed.aio` in its
import lines: produce (send + await, send_and_wait, a batch), consume with a group, commit,
committed, seek, end/beginning offsets, a second member from the committed offsets, admin."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from deploy.fleet import Fleet, free_base_port

pytestmark = pytest.mark.integration

PROGRAM = pathlib.Path(__file__).with_name("aiokafka_program.py")


def with_riverbed_imports(source: str) -> str:
    """Replace `aiokafka` by `riverbed.aio` in `from aiokafka... import` / `import aiokafka`
    lines only."""
    out = re.sub(r"^from aiokafka(\.| )", r"from riverbed.aio\1", source, flags=re.M)
    out = re.sub(r"^import aiokafka\b", "import riverbed.aio as aiokafka", out, flags=re.M)
    changed = [(a, b) for a, b in zip(source.splitlines(), out.splitlines()) if a != b]
    assert changed and all(a.startswith(("from aiokafka", "import aiokafka")) for a, _ in changed)
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("aiokafka-fleet"), free_base_port(), storage_nodes=1,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


def test_an_aiokafka_program_runs_with_only_its_imports_changed(fleet, tmp_path):
    program = tmp_path / "program.py"
    program.write_text(with_riverbed_imports(PROGRAM.read_text()))
    proc = subprocess.run([sys.executable, str(program), fleet.gateway_endpoint],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "aiokafka program: OK" in proc.stdout
