"""Fixtures for integration tests: a real ZooKeeper, per-test chroots, free ports.

    pytestmark = pytest.mark.integration

    def test_something(zk_chroot, free_ports):
        client = services.common.zk.connect(zk_chroot, timeout_s=10)   # creates the chroot
        gw_port, node_port = free_ports(2)

- `zookeeper`: one real ZooKeeper (deploy.zookeeper.ZooKeeperServer) for the whole session, on a
  free port under a temp dir; stopped at the end. `.connect_string` is `127.0.0.1:PORT`.
- `zk_chroot`: a fresh `127.0.0.1:PORT/t-<uuid>` per test, to pass as `zookeeper.connect`;
  tests never see each other's znodes. The chroot is deleted afterwards.
- `free_port`: one free TCP port on 127.0.0.1; `free_ports(n)`: a function returning n of them.
- `fake_service_path`: the stand-in service script for launcher tests (not for product tests).
- `zk`: a kazoo client on `zk_chroot` (closed afterwards).
- `processes`: the node_helpers.ServiceProcess list a test started; all are SIGKILLed at the end,
  even on failure. `storage_nodes(broker_id, **extra)`: a (not yet started)
  node_helpers.StorageNodeProcess on a free port in `zk_chroot`, added to `processes`.
"""
from __future__ import annotations

import pathlib
import uuid

import pytest

from deploy.process import free_port as _free_port
from deploy.process import free_ports as _free_ports
from deploy.zookeeper import ZooKeeperServer
from node_helpers import StorageNodeProcess, stop_processes

FAKE_SERVICE = pathlib.Path(__file__).with_name("fake_service.py")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    zk = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), _free_port())
    zk.start()
    try:
        zk.wait_ready(30)
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def zk_chroot(zookeeper):
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    yield f"{zookeeper.connect_string}{chroot}"
    from services.common import zk as zkmod
    try:
        client = zkmod.connect(zookeeper.connect_string, timeout_s=10)
    except zkmod.ZkConnectError:
        return  # the test stopped ZooKeeper itself; nothing to clean
    try:
        client.delete(chroot, recursive=True)
    except Exception:  # noqa: BLE001 - cleanup only; ephemerals may be vanishing
        pass
    finally:
        zkmod.close(client)


@pytest.fixture
def free_port() -> int:
    return _free_port()


@pytest.fixture
def free_ports():
    return _free_ports


@pytest.fixture
def fake_service_path() -> str:
    return str(FAKE_SERVICE)


@pytest.fixture
def zk(zk_chroot):
    from services.common import zk as zkmod
    client = zkmod.connect(zk_chroot, timeout_s=10)
    yield client
    zkmod.close(client)


@pytest.fixture
def processes():
    started: list = []
    yield started
    stop_processes(started)


@pytest.fixture
def storage_nodes(tmp_path, free_ports, zk_chroot, processes):
    def make(broker_id: int, **extra) -> StorageNodeProcess:
        node = StorageNodeProcess(tmp_path, broker_id, free_ports(1)[0], zk_chroot, **extra)
        processes.append(node)
        return node
    return make
