"""`riverbed.testing`: a pytest plugin that gives your tests a real Riverbed fleet in one line.

    def test_orders_round_trip(riverbed_fleet):
        riverbed_fleet.create_topic("orders", partitions=3)
        with riverbed.Producer(bootstrap_servers=riverbed_fleet.bootstrap_servers) as p:
            p.send("orders", b"hello").get(timeout=10)

The plugin is registered through the `pytest11` entry point, so installing Riverbed is enough.
It is inert until a test asks for one of its fixtures: nothing starts, and its only hook adds
the options below (`-p no:riverbed` turns it off entirely).

Fixtures
- `riverbed_fleet` -> RiverbedFleet: ZooKeeper, a controller, storage node(s), a group
  coordinator, an offset manager and a gateway as subprocesses on free ports of 127.0.0.1, their
  state in a temporary directory. Started by `riverbed fleet up --detach` and stopped (every
  process it started, by PID) by `riverbed fleet down` when its scope ends, also when a test
  failed. Needs the `riverbed fleet` command (a Riverbed checkout installed with `pip install
  -e .`), ZooKeeper's jar and a JRE, as `make install` sets up.
- `riverbed_bootstrap` -> str: the fleet's bootstrap servers, for code that only needs that.

The fleet runs CurveZMQ, as every local fleet does: while it is up the plugin points
`RIVERBED_CLIENT_PROPERTIES` at the fleet's client key (`security/client.properties`, the
operator's key, which may do everything but ClusterAction), so clients your code creates
connect with no settings of their own; `riverbed_fleet.client_config` holds the same settings as
keyword arguments, for code that passes them explicitly.

Options (command line or ini file)
- `--riverbed-fleet-scope` / `riverbed_fleet_scope`: `session` (default: one fleet for the
  whole run), `package`, `module` or `function` (a fresh fleet per test).
- `--riverbed-storage-nodes` / `riverbed_storage_nodes`: storage nodes (default 1; 3 to test
  replication).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from typing import Any, Iterator

import pytest

__all__ = ["RiverbedFleet", "start_fleet", "free_base_port"]

PORT_SPAN = 400          # the launcher's port plan uses P .. P+399
SCOPES = ("session", "package", "module", "function")
START_TIMEOUT_S = 180.0


def free_base_port(host: str = "127.0.0.1", *, span: int = PORT_SPAN, attempts: int = 100) -> int:
    """A base port P whose whole plan (P .. P+span-1) can be bound now (as
    deploy.process.free_port_block, which the SDK may not import)."""
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(20000, 60000 - span)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + span):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no block of {span} free ports found on {host}")


def _riverbed_cmd() -> list[str]:
    return [sys.executable, "-m", "riverbed.cli"]


_CLIENT_PROPERTIES_ENV = "RIVERBED_CLIENT_PROPERTIES"


class RiverbedFleet:
    """A running fleet started by this plugin (see the module's docstring)."""

    def __init__(self, data_dir: str, base_port: int, bootstrap_servers: str):
        self.data_dir = data_dir
        self.base_port = base_port
        self.bootstrap_servers = bootstrap_servers
        self.client_properties = os.path.join(data_dir, "security", "client.properties")
        self.client_config: dict[str, str] = {}
        if os.path.exists(self.client_properties):
            with open(self.client_properties, encoding="utf-8") as f:
                for line in f:
                    key, sep, value = line.strip().partition("=")
                    if sep and not key.startswith("#"):
                        self.client_config[key.strip().replace(".", "_")] = value.strip()
        self._saved_env: str | None = None

    def export_client_settings(self) -> None:
        """Point RIVERBED_CLIENT_PROPERTIES at this fleet's client key (until restore)."""
        if self.client_config:
            self._saved_env = os.environ.get(_CLIENT_PROPERTIES_ENV)
            os.environ[_CLIENT_PROPERTIES_ENV] = self.client_properties

    def restore_client_settings(self) -> None:
        if not self.client_config:
            return
        if self._saved_env is None:
            os.environ.pop(_CLIENT_PROPERTIES_ENV, None)
        else:
            os.environ[_CLIENT_PROPERTIES_ENV] = self._saved_env

    def cli(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """Run `riverbed ARGS` against this fleet (RIVERBED_BOOTSTRAP set); output captured."""
        env = dict(os.environ, RIVERBED_BOOTSTRAP=self.bootstrap_servers)
        return subprocess.run(_riverbed_cmd() + list(args), capture_output=True, text=True,
                              env=env, timeout=timeout)

    def status(self) -> dict[str, Any]:
        """`riverbed fleet status --json`: processes (name, role, pid, endpoint, up), leaders."""
        r = subprocess.run(_riverbed_cmd() + ["fleet", "status", "--json", "--data-dir",
                                              self.data_dir],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"riverbed fleet status failed: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict[str, str] | None = None, timeout_s: float = 60.0) -> None:
        """Create a topic and wait until every partition has a leader."""
        from riverbed import errors
        from riverbed.admin import Admin
        from riverbed.structs import NewTopic

        with Admin(bootstrap_servers=self.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(name, partitions, replication_factor, configs or {})])
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    (desc,) = admin.describe_topics([name])
                    if len(desc.partitions) == partitions and \
                            all(p.leader >= 0 for p in desc.partitions):
                        return
                except errors.RiverbedError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"topic {name}: no leader for every partition after "
                                       f"{timeout_s} s")
                time.sleep(0.1)


def _down(data_dir: str) -> None:
    subprocess.run(_riverbed_cmd() + ["fleet", "down", "--data-dir", data_dir],
                   capture_output=True, timeout=120)


def start_fleet(data_dir: str, *, storage_nodes: int = 1) -> RiverbedFleet:
    """`riverbed fleet up --detach` on free ports; everything it started is stopped again if it
    fails. Stop the returned fleet with stop_fleet()."""
    base = free_base_port()
    cmd = _riverbed_cmd() + ["fleet", "up", "--detach", "--data-dir", data_dir,
                             "--base-port", str(base), "--storage-nodes", str(storage_nodes),
                             "--controllers", "1", "--gateways", "1"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=START_TIMEOUT_S)
    except BaseException:
        _down(data_dir)
        raise
    if r.returncode != 0:
        _down(data_dir)
        raise RuntimeError(f"`{' '.join(cmd[2:])}` failed (exit {r.returncode}): "
                           f"{r.stderr.strip()[-2000:]}")
    endpoint = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else f"tcp://127.0.0.1:{base}"
    fleet = RiverbedFleet(data_dir, base, endpoint)
    fleet.export_client_settings()
    return fleet


def stop_fleet(fleet: RiverbedFleet) -> None:
    try:
        _down(fleet.data_dir)
    finally:
        fleet.restore_client_settings()


# -- the pytest plugin -------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("riverbed", "Riverbed test fleet (riverbed.testing)")
    group.addoption("--riverbed-fleet-scope", choices=SCOPES, default=None,
                    help="scope of the riverbed_fleet fixture (default: session)")
    group.addoption("--riverbed-storage-nodes", type=int, default=None,
                    help="storage nodes in the riverbed_fleet fixture (default: 1)")
    parser.addini("riverbed_fleet_scope", "scope of the riverbed_fleet fixture", default="session")
    parser.addini("riverbed_storage_nodes", "storage nodes in the riverbed_fleet fixture",
                  default="1")


def _fleet_scope(fixture_name: str, config: pytest.Config) -> str:
    scope = config.getoption("--riverbed-fleet-scope") or config.getini("riverbed_fleet_scope")
    if scope not in SCOPES:
        raise pytest.UsageError(f"riverbed_fleet_scope must be one of {', '.join(SCOPES)}, "
                                f"got {scope!r}")
    return str(scope)


@pytest.fixture(scope=_fleet_scope)  # type: ignore[arg-type]
def riverbed_fleet(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[RiverbedFleet]:
    """A real Riverbed fleet on free ports, stopped when the fixture's scope ends."""
    if shutil.which("java") is None:
        pytest.fail("riverbed_fleet needs a JRE (java) for ZooKeeper; `make install` sets it up")
    config = request.config
    nodes = config.getoption("--riverbed-storage-nodes") or \
        int(config.getini("riverbed_storage_nodes"))
    data_dir = str(tmp_path_factory.mktemp("riverbed-fleet"))
    fleet = start_fleet(data_dir, storage_nodes=nodes)
    try:
        yield fleet
    finally:
        stop_fleet(fleet)


@pytest.fixture
def riverbed_bootstrap(riverbed_fleet: RiverbedFleet) -> str:
    """The riverbed_fleet's bootstrap servers."""
    return riverbed_fleet.bootstrap_servers
