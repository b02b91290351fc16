"""The fault ring (STYLE.md §8): a real fleet per test, faults from faults.py, checks from
verifiers.py.

- `fleet`: ZooKeeper, 2 controllers, 3 storage nodes, 1 gateway (no group roles: not needed
  here), with short timeouts so a fault is noticed quickly: ZooKeeper sessions 4 s (the
  server's minimum with tickTime 2000), `replica.lag.time.max.ms` 2000, quick replica fetch
  and controlled-shutdown retries, no automatic leader rebalance (tests move leaders
  themselves). Stopped (by PID) when the test ends, pass or fail.
- `zk`: a kazoo client on the fleet's chroot, for reading partition states and ephemerals.
- `admin`: an Admin client on the fleet's gateway.

Every test here is marked `fault` (and `integration`: it starts real processes).
"""
from __future__ import annotations

import pathlib
import time
import warnings

import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin

SESSION_TIMEOUT_MS = 4000
REPLICA_LAG_MS = 2000

FAULT_OVERRIDES = {
    "storage_node": {
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "replica.lag.time.max.ms": str(REPLICA_LAG_MS),
        "replica.fetch.wait.max.ms": "200",
        "replica.fetch.backoff.ms": "100",
        "alter.partition.retry.backoff.ms": "100",
        "controlled.shutdown.retry.backoff.ms": "200",
    },
    "controller": {
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "auto.leader.rebalance.enable": "false",
    },
    "gateway": {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)},
}


def pytest_collection_modifyitems(config, items):
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.fault)
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def fleet(tmp_path):
    f = Fleet(tmp_path / "fleet", free_base_port(), storage_nodes=3, controllers=2, gateways=1,
              counts={"group_coordinator": 0, "offset_manager": 0, "transaction_coordinator": 0},
              config_overrides=FAULT_OVERRIDES)
    with f:
        f.up()
        yield f
        t0 = time.monotonic()
        killed = f.down()
        if killed:   # a service that ignores SIGTERM for stop_grace_s: worth knowing, not a fault
            warnings.warn(f"fleet teardown: {killed} needed SIGKILL after "
                          f"{time.monotonic() - t0:.1f} s (logs in {f.data_dir / 'logs'})")


@pytest.fixture
def bootstrap(fleet):
    return [fleet.gateway_endpoint]


@pytest.fixture
def zk(fleet):
    from services.common import zk as zkmod
    client = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False, auth=fleet.zk_auth)
    try:
        yield client
    finally:
        zkmod.close(client)


@pytest.fixture
def admin(bootstrap):
    with Admin(bootstrap, request_timeout_ms=10000) as a:
        yield a
