"""tests/conftest.py's check of the shared ZeroMQ context after each test module, run on a
pytest of its own: a module that leaves zmq.Context.instance()'s I/O thread blocked (a socket
monitor whose reader is gone, retrying a closed port every millisecond) gets a teardown error
naming it, and the module after it runs."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

STUCK_MODULE = textwrap.dedent("""
    import socket, time, zmq

    def test_leaves_the_shared_context_blocked():
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.RECONNECT_IVL, 1)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1)
        sock.monitor("inproc://conftest-check-monitor", zmq.EVENT_ALL)
        mon = ctx.socket(zmq.PAIR)
        mon.connect("inproc://conftest-check-monitor")
        mon.close(linger=0)                   # the reader goes, the monitor stays on
        sock.connect(f"tcp://127.0.0.1:{port}")
        time.sleep(0.3)                       # refused and retried: events with no reader
""")
LATER_MODULE = "def test_runs_after_it():\n    assert True\n"
HEALTHY_MODULE = textwrap.dedent("""
    import zmq

    def test_uses_the_shared_context():
        zmq.Context.instance().socket(zmq.DEALER).close(linger=0)
""")


def _run(tmp_path: pathlib.Path, modules: dict[str, str]) -> str:
    shutil.copy(pathlib.Path(__file__).parents[1] / "conftest.py", tmp_path / "conftest.py")
    for name, text in modules.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:timeout", "-q",
         str(tmp_path)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env={**os.environ, "RIVERBED_TEST_ZMQ_CHECK_S": "2"})
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:   # the blocked context can hang the interpreter's exit
        proc.kill()
        out, _ = proc.communicate(timeout=30)
    return out


def test_a_module_that_blocks_the_shared_context_is_named(tmp_path):
    out = _run(tmp_path, {"test_a_stuck.py": STUCK_MODULE, "test_b_later.py": LATER_MODULE})
    assert "after test_a_stuck: zmq.Context.instance() no longer delivers" in out, out
    assert "2 passed, 1 error" in out, out


def test_healthy_modules_pass_the_check(tmp_path):
    out = _run(tmp_path, {"test_a_fine.py": HEALTHY_MODULE, "test_b_later.py": LATER_MODULE})
    assert "2 passed" in out and "error" not in out, out
