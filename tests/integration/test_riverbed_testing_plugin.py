"""riverbed.testing (issue 16, point 8): the pytest plugin's `riverbed_fleet` fixture.

The first test is written as a user would: it asks for the fixture and nothing else. The second
runs pytest on such a user test file in a subprocess (its own run, module scope) and checks
that every process the fixture started is gone when that run ends.
"""
from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import riverbed

pytestmark = pytest.mark.integration


def test_a_user_test_gets_a_fleet_in_one_line(riverbed_fleet):
    riverbed_fleet.create_topic("orders", partitions=2)
    with riverbed.Producer(bootstrap_servers=riverbed_fleet.bootstrap_servers, acks="all") as p:
        for i in range(10):
            p.send("orders", b"order-%d" % i, key=b"customer-%d" % (i % 3))
    with riverbed.Consumer("orders", bootstrap_servers=riverbed_fleet.bootstrap_servers,
                           group_id="billing", auto_offset_reset="earliest") as c:
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
    assert sorted(got) == sorted(b"order-%d" % i for i in range(10))


USER_TEST = '''
import json, os, riverbed

def test_uses_the_fleet(riverbed_fleet, riverbed_bootstrap):
    assert riverbed_bootstrap == riverbed_fleet.bootstrap_servers
    with riverbed.Admin(bootstrap_servers=riverbed_bootstrap) as admin:
        admin.list_topics()
    status = riverbed_fleet.status()
    with open(os.environ["FLEET_REPORT"], "w") as f:
        json.dump({"bootstrap": riverbed_bootstrap, "data_dir": riverbed_fleet.data_dir,
                   "pids": [p["pid"] for p in status["processes"] if p["pid"]]}, f)

def test_without_the_fixture_starts_nothing():
    pass
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie of a finished child counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_the_fixture_stops_every_process_it_started(tmp_path: pathlib.Path):
    (tmp_path / "test_user_code.py").write_text(textwrap.dedent(USER_TEST))
    report = tmp_path / "report.json"
    env = dict(os.environ, FLEET_REPORT=str(report))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--riverbed-fleet-scope=module", "--rootdir", str(tmp_path),
                        str(tmp_path / "test_user_code.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout
    info = json.loads(report.read_text())
    assert len(info["pids"]) >= 6          # ZooKeeper and the services
    still = [pid for pid in info["pids"] if _alive(pid)]
    assert still == [], f"left running: {still}"
    port = int(info["bootstrap"].rsplit(":", 1)[1])
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0      # the gateway's port is closed
