"""One fleet deployed on the test bed (deploy_testbed.py) by the Ansible roles, shared by the
modules of tests/deploy (conftest.py's session fixture `deployment`) and by the figures scripts.

    d = Deployment(workdir, repo=REPO)   # nothing built yet
    d.build()                            # wheelhouse, five hosts, their disks, the inventory
    d.site()                             # site.yml from bare hosts (or d.ensure_deployed())
    d.bed, d.inventory, d.bootstrap, d.zk_connect, d.host("h3")
    d.close()                            # fetch the logs, tear the bed down (idempotent)

`repo` is the source tree the hosts install (a checkout of another revision, e.g. made with
`git archive <commit> | tar -x -C DIR`, measures that revision; the roles, the inventory and the
clients stay this checkout's).

Layout (LAYOUT, DISKS): h2 runs two storage-node processes, one per XFS data disk
(riverbed_storage_instances), and there are two gateways, so that a client keeps a gateway while
one host is restarted:

    h1: ZooKeeper 1, controller 1, gateway 1; ZooKeeper's txn log on its own (XFS) disk
    h2: ZooKeeper 2, controller 2, storage 1 (XFS data1) and storage 5 (XFS data2)
    h3: ZooKeeper 3, storage 2 (ext4), group coordinator, gateway 2
    h4: storage 3 (XFS), offset manager
    h5: storage 4 (ext4, data=writeback asked)
"""
from __future__ import annotations

import datetime
import json
import pathlib
import re
import shutil
import sys
import tempfile
import time

import yaml

from deploy_testbed import ANSIBLE_DIR, REPO, TestBed, run

LAYOUT = {
    "zookeeper": ["h1", "h2", "h3"],
    "controller": ["h1", "h2"],
    "storage_node": ["h2", "h3", "h4", "h5"],
    "gateway": ["h1", "h3"],
    "group_coordinator": ["h3"],
    "offset_manager": ["h4"],
}
DISKS = {"h2": ["xfs", "xfs"], "h3": ["ext4"], "h4": ["xfs"], "h5": ["ext4"]}
# storage node ids per host: h2 runs one process per data disk
STORAGE_IDS = {"h2": [1, 5], "h3": [2], "h4": [3], "h5": [4]}
# every process of the layout, per host (riverbedctl names)
PROCESSES = {"h1": ["zookeeper", "controller-1", "gateway-1"],
             "h2": ["zookeeper", "controller-2", "storage-1", "storage-5"],
             "h3": ["zookeeper", "storage-2", "group-coordinator-1", "gateway-2"],
             "h4": ["storage-3", "offset-manager-1"], "h5": ["storage-4"]}
# The layout before issue 24 (rolling_restart_gaps.py --classic-layout measures it): one
# gateway, and h2's two disks as two log dirs of one storage node.
CLASSIC_LAYOUT = {**LAYOUT, "gateway": ["h1"]}
CLASSIC_STORAGE_IDS = {"h2": [1], "h3": [2], "h4": [3], "h5": [4]}
FAST_OVERRIDES = {
    # Quick failure detection and controlled-shutdown retries (as the fault ring's fleet).
    "storage_node": {"replica.lag.time.max.ms": "4000", "replica.fetch.wait.max.ms": "200",
                     "controlled.shutdown.retry.backoff.ms": "500"},
}


def host_vars_of(bed: TestBed, name: str, layout: dict[str, list[str]],
                 storage_ids: dict[str, list[int]] = STORAGE_IDS) -> dict:
    h = {x.name: x for x in bed.hosts}[name]
    # remote tmp private to each host (a bind mount), unlike root's home on this shared file
    # system; set per host so that the control machine's own (localhost) tasks keep theirs.
    hv: dict = {"ansible_host": h.address, "ansible_remote_tmp": "/var/lib/riverbed/.ansible-tmp"}
    if name in layout["zookeeper"]:
        hv["zookeeper_myid"] = int(name[1:])
    disks = [d for d in h.disks if d.mount.startswith("/srv/riverbed/")]
    hv["riverbed_data_disks"] = [{"device": d.device, "fstype": d.fstype, "mount": d.mount} for d in disks]
    ids = storage_ids.get(name, [])
    if len(ids) == 1:
        hv["riverbed_node_id"] = ids[0]
    elif ids:   # one storage-node process per data disk
        hv["riverbed_storage_instances"] = [{"node_id": i, "data_disks": [d.mount]}
                                            for i, d in zip(ids, disks)]
    txn = [d for d in h.disks if d.mount.startswith("/srv/zookeeper")]
    if txn:
        hv["zookeeper_txn_log_disk"] = {"device": txn[0].device, "fstype": txn[0].fstype, "mount": txn[0].mount}
    if name == "h5":
        hv["riverbed_ext4_data_writeback"] = True
    return hv


def write_inventory(bed: TestBed, path: pathlib.Path, wheelhouse: pathlib.Path,
                    layout: dict[str, list[str]], extra_vars: dict | None = None,
                    storage_ids: dict[str, list[int]] = STORAGE_IDS) -> None:
    host_vars = {h.name: host_vars_of(bed, h.name, layout, storage_ids) for h in bed.hosts}
    inv = {"all": {
        "vars": {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(bed.key),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={bed.known_hosts} -o StrictHostKeyChecking=yes",
            "ansible_python_interpreter": "/usr/bin/python3",
            "riverbed_service_manager": "pidfile",
            # vm.* and limits are global to the machine: written and checked, never applied here.
            "riverbed_apply_kernel_settings": False,
            "riverbed_install_os_packages": False,   # the JRE and ZooKeeper are the machine's
            "riverbed_wheelhouse_dir": str(wheelhouse),
            "riverbed_build_wheelhouse": False,
            "riverbed_prometheus_config": str(path.parent / "prometheus.yml"),
            # The control machine's keys: the test's own directory, never the checkout's dist/.
            "riverbed_keys_dir": str(path.parent.parent / "keys"),
            "zookeeper_heap_mb": 256,
            "riverbed_config_overrides": FAST_OVERRIDES,
            "riverbed_health_retries": 90,
            # The bed's clock is the machine's (no NTP daemon here; skew is still checked), and
            # its hard open-files limit is the machine's (limits are global, not per namespace).
            "riverbed_require_clock_sync": False,
            "riverbed_min_open_files": 4096,
            **(extra_vars or {}),
        },
        "hosts": host_vars,
        "children": {group: {"hosts": {h: None for h in members}} for group, members in layout.items()},
    }}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(inv, sort_keys=False))


class Deployment:
    """The test bed with the fleet of LAYOUT on it; see the module's docstring."""

    def __init__(self, workdir: pathlib.Path | None = None, *, repo: pathlib.Path = REPO,
                 extra_vars: dict | None = None, classic: bool = False):
        # Not under pytest's basetemp: other pytest runs on this shared machine prune old ones.
        self.workdir = pathlib.Path(workdir or tempfile.mkdtemp(prefix="riverbed-deploy-"))
        self.repo = pathlib.Path(repo)
        # inventory variables on top of the test bed's (e.g. riverbed_config_omit for an older
        # build that refuses keys it does not know)
        self.extra_vars = dict(extra_vars or {})
        self.classic = classic       # CLASSIC_LAYOUT: figures of the layout before issue 24
        self.bed: TestBed | None = None
        self.inventory = self.workdir / "inventory" / "hosts.yml"
        self.wheelhouse = self.workdir / "wheelhouse"
        self.deployed = False
        self.failed = False          # a test on it failed: keep the logs
        self.closed = False
        self.figures: dict = {}
        self.events: list[str] = []  # what was done to it, for a failure's report

    # --- names -------------------------------------------------------------------------------
    def host(self, name: str):
        return {h.name: h for h in self.bed.hosts}[name]

    @property
    def bootstrap(self) -> str:
        return f"tcp://{self.host('h1').address}:9092"

    @property
    def zk_connect(self) -> str:
        return ",".join(f"{self.host(h).address}:2181" for h in LAYOUT["zookeeper"]) + "/riverbed"

    @property
    def keys_dir(self) -> pathlib.Path:
        return self.workdir / "keys"

    # --- building ----------------------------------------------------------------------------
    def build(self) -> "Deployment":
        """The wheelhouse of `repo`, five bare hosts with their disks, and the inventory."""
        t0 = time.monotonic()
        run([str(ANSIBLE_DIR / "files" / "build-wheelhouse.sh"), sys.executable, str(self.repo),
             str(self.wheelhouse)], timeout=900)
        self.figures["wheelhouse_build_s"] = round(time.monotonic() - t0, 1)
        bed = TestBed(self.workdir, hosts=5)
        bed.__enter__()
        self.bed = bed
        try:
            hosts = {h.name: h for h in bed.hosts}
            bed.add_disk(hosts["h1"], "xfs", "/srv/zookeeper/txnlog")
            for name, types in DISKS.items():
                for i, fstype in enumerate(types, start=1):
                    bed.add_disk(hosts[name], fstype, f"/srv/riverbed/data{i}")
            if self.classic:
                write_inventory(bed, self.inventory, self.wheelhouse, CLASSIC_LAYOUT, self.extra_vars,
                                CLASSIC_STORAGE_IDS)
            else:
                write_inventory(bed, self.inventory, self.wheelhouse, LAYOUT, self.extra_vars)
            # site.yml writes it (the `client` key); every SDK client of the tests uses it
            bed.client_properties = self.keys_dir / "client.properties"
        except BaseException:
            self.close()
            raise
        return self

    def site(self, timeout: float = 2400):
        """site.yml (from bare hosts the first time); the fleet is deployed afterwards."""
        run_ = self.bed.ansible("site.yml", self.inventory, timeout=timeout)
        self.deployed = True
        self.events.append(f"site.yml ({run_.elapsed_s:.0f} s)")
        return run_

    def health(self, *node_ids: int, timeout_s: float = 5) -> tuple[bool, str]:
        """`riverbed cluster health` from the client namespace: (healthy, its JSON or error)."""
        argv = [str(pathlib.Path(sys.executable).parent / "riverbed"), "cluster", "health", "--json",
                "--bootstrap-server", self.bootstrap] + [f"--node-id={n}" for n in node_ids]
        try:
            r = self.bed.client_run(argv, check=False, timeout=60)
        except Exception as e:  # noqa: BLE001 - a hung tool: not healthy
            return False, repr(e)
        return r.returncode == 0, (r.stdout or r.stderr).strip()[-2000:]

    def wait_healthy(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            ok, text = self.health()
            if ok:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the deployed fleet is not healthy after {timeout_s:.0f} s: {text}")
            time.sleep(2)

    def ensure_deployed(self) -> None:
        """Deployed and healthy: site.yml when nothing was deployed yet; when an earlier module
        left the fleet unhealthy, site.yml again (it starts what is not running)."""
        if not self.deployed:
            self.site()
        try:
            self.wait_healthy(120)
        except AssertionError:
            self.site()
            self.wait_healthy(180)

    # --- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        bed = self.bed
        if bed is not None:
            try:
                if self.deployed:
                    bed.ansible("fetch-logs.yml", self.inventory, "-e",
                                f"riverbed_fetch_logs_dir={self.workdir / 'fetched-logs'}",
                                check=False, timeout=300)
            except Exception as e:  # noqa: BLE001 - logs are a courtesy; teardown must go on
                print(f"fetch-logs failed: {e}", file=sys.stderr)
            finally:
                bed.teardown()
        if self.figures:
            print("deployment figures: " + json.dumps(self.figures), file=sys.stderr)
        # Keep the logs (ansible-logs/, fetched-logs/, the clients') of a failed run; drop the
        # bulk and the key material (the hosts' copies live under hosts/) either way.
        for bulky in ("disks", "wheelhouse", "hosts", "keys"):
            shutil.rmtree(self.workdir / bulky, ignore_errors=True)
        if not self.failed:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            print(f"deployment test logs kept in {self.workdir}", file=sys.stderr)


# --- rolling restarts: the longest gap between acknowledgements per restarted host -----------------

def restart_windows(bed: TestBed, since: float) -> list[tuple[float, str]]:
    """(time, host) of each host's first 'stopping' line written by riverbedctl after `since`."""
    out = []
    for h in bed.hosts:
        first = None
        for log in h.private("var-log-riverbed").glob("*.log"):
            for m in re.finditer(r"^===== (\S+ \S+) stopping", log.read_text(errors="replace"), re.M):
                t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
                if t >= since:
                    first = t if first is None else min(first, t)
        if first is not None:
            out.append((first, h.name))
    return sorted(out)


def _longest_gap(acks: list[float], t0: float, t1: float) -> tuple[float, float]:
    """(gap, its start) of the longest gap between two acks in [t0, t1], counting the last ack
    before t0 and the first after t1 (a window without any ack is one long gap)."""
    inside = [t for t in acks if t0 <= t <= t1]
    before = [t for t in acks if t < t0][-1:]
    after = [t for t in acks if t > t1][:1]
    series = before + inside + after
    return max(((b - a, a) for a, b in zip(series, series[1:])), default=(0.0, t0))


def gaps_per_host(windows: list[tuple[float, str]], acks: list[float],
                  by_partition: dict[str, list[float]] | None = None) -> dict[str, dict]:
    """Per restarted host: the longest gap between two acknowledgements while it was the one
    being restarted (from its first 'stopping' until the next host's), with where it was; with
    `by_partition`, also the longest gap within one partition (what a keyed writer waits: the
    first figure hides a stalled partition behind the others' acks)."""
    acks = sorted(acks)
    out = {}
    for i, (t0, h) in enumerate(windows):
        t1 = windows[i + 1][0] if i + 1 < len(windows) else acks[-1]
        gap, at = _longest_gap(acks, t0, t1)
        out[h] = {"gap_s": round(gap, 2), "from": at, "to": at + gap}
        if by_partition:
            per = {p: _longest_gap(sorted(ts), t0, t1) for p, ts in by_partition.items()}
            worst = max(per, key=lambda p: per[p][0])
            out[h].update(partition_gap_s=round(per[worst][0], 2), partition=int(worst),
                          partition_from=per[worst][1], partition_to=per[worst][1] + per[worst][0])
    return out
