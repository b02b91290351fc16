"""The SDK is typed for its users (py.typed): tests/typing/user_program.py, a user's program,
passes `mypy --strict` against the SDK's annotations (the SDK's own modules are followed
silently: their internal errors are `make typecheck`'s second step)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_sdk_ships_py_typed():
    assert (ROOT / "sdk" / "riverbed" / "py.typed").is_file()


def test_a_user_program_passes_mypy_strict():
    env = dict(os.environ, MYPYPATH=str(ROOT / "sdk"))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11",
         "--follow-imports=silent", "--no-incremental", "tests/typing/user_program.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
