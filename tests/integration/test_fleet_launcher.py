"""The launcher's machinery against a real ZooKeeper.

The service slots run tests/integration/fake_service.py (binds its ports, registers in
ZooKeeper like the real role, exits on SIGTERM) until the real services exist; the real-fleet
test is added next to this one when they do.
"""
from __future__ import annotations

import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import time

import pytest

from deploy.fleet import Fleet, free_base_port
from deploy.process import LaunchError, cmdline, is_alive
from deploy.zookeeper import ZooKeeperServer, find_free_port, ruok
from services.common import zk as zkmod
from services.common import znodes as zn

pytestmark = pytest.mark.integration

FAKE = str(pathlib.Path(__file__).with_name("fake_service.py"))
FAKES = {"storage_node": FAKE, "controller": FAKE, "gateway": FAKE,
         "group_coordinator": FAKE, "offset_manager": FAKE, "transaction_coordinator": FAKE}
RIVERBED = str(pathlib.Path(sys.executable).with_name("riverbed"))
WAIT_S = 30.0  # generous bound for polls; never a performance threshold


def poll(fn, what, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def processes_mentioning(text: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and is_alive(int(entry)):
            argv = cmdline(int(entry)) or []
            if any(text in a for a in argv):
                out.append(int(entry))
    return out


# --- ZooKeeper and kazoo plumbing -----------------------------------------------------------------

def test_zookeeper_imok_chroot_session_states_and_stop(tmp_path):
    zk = ZooKeeperServer(tmp_path / "zk", find_free_port())
    zk.start()
    client = None
    try:
        zk.wait_ready(30)
        assert ruok("127.0.0.1", zk.port)
        assert (tmp_path / "zk" / "zoo.cfg").exists()

        client = zkmod.connect(f"{zk.connect_string}/riverbed/a", timeout_s=10)
        client.create("/hello", b"x")
        root = zkmod.connect(zk.connect_string, timeout_s=10)
        try:
            assert root.get("/riverbed/a/hello")[0] == b"x"  # the chroot was created first
        finally:
            zkmod.close(root)

        changes: queue.Queue = queue.Queue()
        watcher = zkmod.SessionWatcher(client, on_change=changes.put).start()
        first = changes.get(timeout=WAIT_S)
        assert first.state is zkmod.SessionState.CONNECTED and first.new_session

        first_pid = zk.pid
        zk.stop()                                        # connection drops: SUSPENDED
        assert not is_alive(first_pid)
        assert changes.get(timeout=WAIT_S).state is zkmod.SessionState.SUSPENDED
        zk.start()                                       # same data: the session survives
        zk.wait_ready(30)
        resumed = changes.get(timeout=WAIT_S)
        assert resumed.state is zkmod.SessionState.CONNECTED
        assert resumed.resumed and not resumed.new_session
        assert resumed.session_id == first.session_id

        client.stop()                                    # closing the session: LOST
        assert changes.get(timeout=WAIT_S).state is zkmod.SessionState.LOST
        watcher.stop()
    finally:
        if client is not None:
            zkmod.close(client)
        pid = zk.pid
        zk.stop()
    assert zk.pid is None and not is_alive(pid)
    assert not ruok("127.0.0.1", zk.port)


def test_connect_to_nothing_is_a_typed_error(free_port):
    with pytest.raises(zkmod.ZkConnectError):
        zkmod.connect(f"127.0.0.1:{free_port}/x", timeout_s=0.5)


def test_zk_chroot_fixture_is_isolated(zk_chroot, zookeeper):
    client = zkmod.connect(zk_chroot, timeout_s=10)
    try:
        client.create(zn.broker_path(1), b"{}", makepath=True)
        assert client.get_children(zn.BROKER_IDS) == ["1"]
    finally:
        zkmod.close(client)
    chroot = zk_chroot[len(zookeeper.connect_string):]
    root = zkmod.connect(zookeeper.connect_string, timeout_s=10)
    try:
        assert root.exists(f"{chroot}/brokers/ids/1")
        assert not root.exists("/brokers")
    finally:
        zkmod.close(root)


# --- the fleet, through the Python API ------------------------------------------------------------

def test_fleet_lifecycle(tmp_path):
    seen_pids: set[int] = set()
    with Fleet(tmp_path / "fleet", free_base_port(), role_modules=FAKES) as fleet:
        fleet.up(detach=True)
        st = fleet.status()
        assert [p["name"] for p in st["processes"]] == [
            "zookeeper", "controller-1", "controller-2", "storage-1", "storage-2", "storage-3",
            "group-coordinator-1", "offset-manager-1", "transaction-coordinator-1", "gateway-1"]
        assert all(p["up"] for p in st["processes"]), st
        seen_pids |= {p["pid"] for p in st["processes"]}
        assert fleet.gateway_endpoint == f"tcp://127.0.0.1:{fleet.base_port}"
        state = json.loads((tmp_path / "fleet" / "fleet.json").read_text())
        assert {p["name"]: p["pid"] for p in state["processes"]} == {
            p["name"]: p["pid"] for p in st["processes"]}
        assert (tmp_path / "fleet" / "logs" / "storage-2.log").exists()

        # The active controller and partition leaders come from ZooKeeper.
        active = poll(lambda: fleet.status()["controller"], "a controller")
        client = zkmod.connect(fleet.zk_connect, timeout_s=10, auth=fleet.zk_auth)
        try:
            client.create(zn.topic_path("orders"), zn.encode_topic_assignment({0: [1, 2], 1: [2, 3]}),
                          makepath=True)
            client.create(zn.partition_state_path("orders", 0),
                          zn.encode_partition_state(zn.PartitionState(2, 1, (2, 1), 1)), makepath=True)
            assert sorted(client.get_children(zn.BROKER_IDS)) == ["1", "2", "3"]
        finally:
            zkmod.close(client)
        parts = fleet.status()["partitions"]
        assert [(p["topic"], p["partition"], p["leader"], p["isr"]) for p in parts] == [
            ("orders", 0, 2, [2, 1]), ("orders", 1, None, [])]

        # kill -9 one storage node, then start it again.
        old_pid = fleet.process("storage-2").pid
        assert fleet.stop("storage-2", kill=True)
        assert not is_alive(old_pid)
        down = {p["name"]: p for p in fleet.status()["processes"]}
        assert not down["storage-2"]["up"] and down["storage-2"]["pid"] is None
        assert all(p["up"] for n, p in down.items() if n != "storage-2")
        new_pid = fleet.start("storage-2")
        seen_pids.add(new_pid)
        assert new_pid != old_pid and fleet.is_up("storage-2")
        assert json.loads((tmp_path / "fleet" / "fleet.json").read_text())["processes"][4]["pid"] == new_pid

        # A clean stop of the active controller hands over to the other.
        assert fleet.stop(f"controller-{active}")
        other = 3 - active
        assert poll(lambda: fleet.status()["controller"] == other, "the standby controller")
    # leaving the block stopped everything, ZooKeeper included
    assert seen_pids and not [pid for pid in seen_pids if is_alive(pid)]
    assert not processes_mentioning(str(tmp_path))

    # `up` on the same directory is a restart on the same data (here, a smaller fleet).
    with Fleet(tmp_path / "fleet", free_base_port(), storage_nodes=1, controllers=1,
               role_modules=FAKES) as again:
        again.up()
        assert [p["topic"] for p in again.status()["partitions"]] == ["orders", "orders"]
        assert len(again.status()["processes"]) == 7
    assert not processes_mentioning(str(tmp_path))


def test_failed_start_shows_the_log_and_stops_what_started(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nprint('boom: cannot open log.dirs', file=sys.stderr)\nsys.exit(3)\n")
    fleet = Fleet(tmp_path / "fleet", free_base_port(), storage_nodes=1, controllers=1,
                  role_modules={**FAKES, "storage_node": str(broken)})
    with pytest.raises(LaunchError, match="boom: cannot open log.dirs") as info:
        fleet.up()
    assert "storage-1" in str(info.value)
    assert not fleet.running()
    assert not processes_mentioning(str(tmp_path))


def test_a_service_dying_after_it_was_ready_fails_up(tmp_path):
    """A storage node answers on its port once and exits (as one whose second port was taken
    by then would): up() notices once the later roles are up, and stops the rest."""
    short_lived = tmp_path / "short_lived.py"
    short_lived.write_text(
        "import socket, sys\n"
        "props = dict(l.split('=', 1) for l in open(sys.argv[sys.argv.index('--config') + 1])"
        ".read().splitlines() if '=' in l and not l.startswith('#'))\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind((props['host.name'].strip(), int(props['port']))); s.listen(1)\n"
        "s.accept()[0].close()\n"
        "print('bye: my other port was taken', file=sys.stderr)\n"
        "sys.exit(4)\n")
    fleet = Fleet(tmp_path / "fleet", free_base_port(), storage_nodes=1, controllers=1,
                  role_modules={**FAKES, "storage_node": str(short_lived)})
    try:
        with pytest.raises(LaunchError, match="exited after it was ready") as info:
            fleet.up()
    finally:
        fleet.down()          # (up() stops what it started when it raises; this is for when not)
    assert "storage-1" in str(info.value) and "bye: my other port was taken" in str(info.value)
    assert not fleet.running()
    assert not processes_mentioning(str(tmp_path))


def test_port_in_use_is_refused_before_starting(tmp_path):
    import socket
    base = free_base_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", base + 101))
        s.listen()
        with pytest.raises(LaunchError, match=f"port {base + 101} \\(storage-1"):
            Fleet(tmp_path, base, role_modules=FAKES).up()
    assert not processes_mentioning(str(tmp_path))


# --- the same through the CLI, in separate processes ----------------------------------------------

def riverbed(*args, check=True):
    proc = subprocess.run([RIVERBED, "fleet", *args], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_cli_detached_lifecycle(tmp_path):
    d = str(tmp_path / "fleet")
    base = free_base_port()
    roles = [a for role in FAKES for a in ("--role-module", f"{role}={FAKE}")]
    try:
        up = riverbed("up", "--detach", "--data-dir", d, "--base-port", str(base),
                      "--storage-nodes", "2", "--controllers", "1", *roles,
                      "--config-override", "storage_node:extra.key=7")
        assert up.stdout.strip() == f"tcp://127.0.0.1:{base}"
        assert "extra.key=7" in (tmp_path / "fleet" / "storage-1" / "storage-1.properties").read_text()

        st = json.loads(riverbed("status", "--data-dir", d, "--json").stdout)
        assert [(p["name"], p["up"]) for p in st["processes"]] == [
            ("zookeeper", True), ("controller-1", True), ("storage-1", True),
            ("storage-2", True), ("group-coordinator-1", True), ("offset-manager-1", True),
            ("transaction-coordinator-1", True), ("gateway-1", True)]
        pids = {p["name"]: p["pid"] for p in st["processes"]}

        assert riverbed("up", "--detach", "--data-dir", d, "--base-port", str(base), *roles,
                        check=False).returncode == 1  # already running

        riverbed("stop", "storage-1", "--kill", "--data-dir", d)
        assert not is_alive(pids["storage-1"])
        st = json.loads(riverbed("status", "--data-dir", d, "--json").stdout)
        assert {p["name"]: p["up"] for p in st["processes"]}["storage-1"] is False

        riverbed("start", "storage-1", "--data-dir", d)
        st = json.loads(riverbed("status", "--data-dir", d, "--json").stdout)
        assert all(p["up"] for p in st["processes"])
        pids["storage-1b"] = {p["name"]: p["pid"] for p in st["processes"]}["storage-1"]
        assert "active controller" in riverbed("status", "--data-dir", d).stdout

        riverbed("down", "--data-dir", d)
        assert not [pid for pid in pids.values() if is_alive(pid)]
        st = json.loads(riverbed("status", "--data-dir", d, "--json").stdout)
        assert not any(p["up"] for p in st["processes"])
    finally:
        riverbed("down", "--data-dir", d, check=False)
    assert not processes_mentioning(str(tmp_path))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_foreground_stops_everything_on_a_signal(tmp_path, sig):
    d = str(tmp_path / "fleet")
    roles = [a for role in FAKES for a in ("--role-module", f"{role}={FAKE}")]
    launcher = subprocess.Popen(
        [RIVERBED, "fleet", "up", "--data-dir", d, "--base-port", str(free_base_port()),
         "--storage-nodes", "1", "--controllers", "1", *roles],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        up: dict[str, int] = {}
        while len(up) < 7:  # plain lines (stdout is not a TTY): "<time> <name> <role> pid=N ... up"
            line = launcher.stdout.readline()
            assert line, launcher.stderr.read()
            words = line.split()
            if words[-1] == "up" and words[3].startswith("pid="):
                up[words[1]] = int(words[3][4:])
        assert set(up) == {"zookeeper", "controller-1", "storage-1", "group-coordinator-1",
                           "offset-manager-1", "transaction-coordinator-1", "gateway-1"}
        launcher.send_signal(sig)
        assert launcher.wait(timeout=60) == 0
        assert not [pid for pid in up.values() if is_alive(pid)]
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        if (tmp_path / "fleet" / "fleet.json").exists():
            Fleet.from_state(d).down()
    assert not processes_mentioning(str(tmp_path))


def test_cli_foreground_returns_after_fleet_down_from_another_shell(tmp_path):
    d = str(tmp_path / "fleet")
    roles = [a for role in FAKES for a in ("--role-module", f"{role}={FAKE}")]
    launcher = subprocess.Popen(
        [RIVERBED, "fleet", "up", "--data-dir", d, "--base-port", str(free_base_port()),
         "--storage-nodes", "1", "--controllers", "1", *roles],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        up = 0
        while up < 6:
            line = launcher.stdout.readline()
            assert line, launcher.stderr.read()
            parts = line.split()          # other lines (a warning under load) are skipped
            up += len(parts) > 3 and parts[-1] == "up" and parts[3].startswith("pid=")
        riverbed("down", "--data-dir", d)
        assert launcher.wait(timeout=60) == 0
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        if (tmp_path / "fleet" / "fleet.json").exists():
            Fleet.from_state(d).down()
    assert not processes_mentioning(str(tmp_path))
