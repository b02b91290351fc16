"""The soak (`make soak`; not part of `make test`): a fleet under a verifying acks=all idempotent
producer and a group consumer for a given time (default 10 minutes), with one fault at a time
every 10-20 s from a seeded random schedule (soak_schedule.py), then the full check
(soak_check.py) and a report: a JSON file and a plot of throughput over time with the faults
marked.

    python tests/soak/soak.py [--duration 600] [--seed N] [--rate 300] [--out DIR] [--testbed]

Targets:
- default, a local fleet (deploy.fleet.Fleet: ZooKeeper, 2 controllers, 3 storage nodes, 2
  gateways, a group coordinator, an offset manager) with these faults: SIGKILL of a controller,
  storage node, group coordinator or offset manager (started again after the fault's
  duration), SIGSTOP/SIGCONT of any of them or of a gateway, a gateway killed, and, as root with
  loop devices, a storage node's data disk (its own loop-device XFS) filled past
  log.dir.free.bytes.min. Its single ZooKeeper is left alone (killing the only member is an
  outage by design), and network cuts and slow links need hosts with their own network: the
  report lists them as excluded, with the reason.
- `--testbed`: the deployment test bed (tests/deploy: five SSH hosts in network namespaces, the
  fleet deployed by site.yml, about 6 minutes before the soak starts; root): the same process
  faults (its three ZooKeeper members included), plus a host cut off from the network
  (blackhole routes) and a host's link slowed to 256 kbit/s (tc tbf).

The check: nothing acknowledged lost, no duplicates, order kept; every offset the consumer
committed readable and the group's committed offsets not behind its last acknowledged commit;
every record the consumer was given is the log's record at that offset; the consumer caught up
with the log's end once the producer stopped; no process died that the schedule did not kill,
and every process runs at the end. Exit status 0 when all hold, 1 otherwise; the report names
what failed. Everything started is stopped on exit, pass or fail.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
for extra in (HERE, REPO / "tests" / "fault", REPO / "tests" / "deploy", REPO):
    sys.path.insert(0, str(extra))

from json_lines import LineClient  # noqa: E402
from soak_check import check_processes, verdict  # noqa: E402
from soak_schedule import KINDS, Fault, describe, generate  # noqa: E402

TOPIC = "soak"
GROUP = "soak-group"
FULL_DISK_LEAVE_BYTES = 4 << 20      # below log.dir.free.bytes.min (16 MB by default)


# --- the clients ---------------------------------------------------------------------------------

# --- targets -------------------------------------------------------------------------------------

class LocalTarget:
    """A local fleet on 127.0.0.1 (free ports), its storage nodes on loop-device XFS disks when
    this process may make them."""

    kind = "local"
    OVERRIDES = {
        "storage_node": {"replica.lag.time.max.ms": "4000", "replica.fetch.wait.max.ms": "200",
                         "controlled.shutdown.retry.backoff.ms": "500"},
    }

    def __init__(self, workdir: pathlib.Path):
        self.workdir = workdir
        self.stack = contextlib.ExitStack()
        self.fleet = None
        self.disks: dict[str, object] = {}
        self.excluded: dict[str, str] = {
            "network_cut": "needs hosts with their own network (network namespaces): --testbed",
            "slow_link": "needs hosts with their own network (network namespaces): --testbed"}
        self.down_windows: list[tuple[str, float, float]] = []
        self._down_since: dict[str, float] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stack.close()

    def up(self) -> None:
        from deploy.fleet import Fleet, free_base_port
        from disks import loop_disk, unavailable_reason
        overrides = {k: dict(v) for k, v in self.OVERRIDES.items()}
        why = unavailable_reason()
        if why is None:
            for i in (1, 2, 3):
                disk = self.stack.enter_context(loop_disk(self.workdir / f"disk-{i}", size_mb=400))
                self.disks[f"storage-{i}"] = disk
                overrides[f"storage-{i}"] = {"log.dirs": str(disk.path / "logs")}
        else:
            self.excluded["full_disk"] = f"no loop-device file systems here: {why}"
        self.fleet = Fleet(self.workdir / "fleet", free_base_port(), storage_nodes=3,
                           controllers=2, gateways=2,
                           counts={"group_coordinator": 1, "offset_manager": 1},
                           config_overrides=overrides)
        self.stack.callback(self.fleet.down)
        self.fleet.up()

    def names(self) -> list[str]:
        return [n for n in self.fleet.names() if n != "zookeeper"]

    def fault_targets(self) -> dict[str, list[str]]:
        names = self.names()
        gateways = [n for n in names if n.startswith("gateway-")]
        return {"sigkill": [n for n in names if n not in gateways], "sigstop": names,
                "gateway_kill": gateways, "full_disk": sorted(self.disks)}

    def bootstrap(self) -> list[str]:
        return [self.fleet.process(n).endpoint for n in self.fleet.names() if n.startswith("gateway-")]

    def workload(self, log: pathlib.Path) -> LineClient:
        f = open(log, "ab")
        try:
            proc = subprocess.Popen([sys.executable, str(HERE / "soak_workload.py"), "--bootstrap",
                                     ",".join(self.bootstrap())], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=f, text=True,
                                    start_new_session=True)
        finally:
            f.close()
        return LineClient(proc, log)

    def alive(self, name: str) -> bool:
        return name in self.fleet.running()

    def apply(self, fault: Fault) -> None:
        if fault.kind in ("sigkill", "gateway_kill"):
            self._down_since[fault.target] = time.time()
            self.fleet.stop(fault.target, kill=True)
        elif fault.kind == "sigstop":
            self.fleet.signal(fault.target, signal.SIGSTOP)
        elif fault.kind == "full_disk":
            self.disks[fault.target].fill(leave_bytes=FULL_DISK_LEAVE_BYTES)
        else:
            raise ValueError(f"{fault.kind}: not available on a local fleet")

    def undo(self, fault: Fault) -> None:
        if fault.kind in ("sigkill", "gateway_kill"):
            try:
                self.fleet.start(fault.target)
            finally:
                self.down_windows.append((fault.target, self._down_since.pop(fault.target), time.time()))
        elif fault.kind == "sigstop":
            self.fleet.signal(fault.target, signal.SIGCONT)
        elif fault.kind == "full_disk":
            self.disks[fault.target].drain()

    def describe(self) -> dict:
        return {"kind": self.kind, "data_dir": str(self.workdir / "fleet"),
                "processes": self.fleet.names(), "disks": {k: str(d.path) for k, d in self.disks.items()}}


class TestbedTarget:
    """The deployment test bed (tests/deploy/deployment.py) with the fleet site.yml deploys."""

    kind = "testbed"
    __test__ = False

    def __init__(self, workdir: pathlib.Path):
        self.workdir = workdir
        self.deployment = None
        self.stack = contextlib.ExitStack()
        self.excluded: dict[str, str] = {}
        self.down_windows: list[tuple[str, float, float]] = []
        self._down_since: dict[str, float] = {}
        self._faults: dict[int, contextlib.ExitStack] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            for st in list(self._faults.values()):
                st.close()
        finally:
            self.stack.close()

    def up(self) -> None:
        from deploy_testbed import unavailable_reason
        from deployment import Deployment
        why = unavailable_reason()
        if why:
            raise SystemExit(f"--testbed: the deployment test bed is unavailable here: {why}")
        self.deployment = Deployment(self.workdir / "testbed")
        self.stack.callback(self.deployment.close)
        self.deployment.failed = True          # keep the hosts' logs beside the report
        self.deployment.build()
        self.deployment.site()
        self.deployment.wait_healthy()

    # process names: riverbedctl's, and zookeeper@hN for the three ZooKeeper members
    def _procs(self) -> dict[str, tuple[str, str]]:
        from deployment import PROCESSES
        out = {}
        for host, procs in PROCESSES.items():
            for p in procs:
                out[f"zookeeper@{host}" if p == "zookeeper" else p] = (host, p)
        return out

    def names(self) -> list[str]:
        return list(self._procs())

    def fault_targets(self) -> dict[str, list[str]]:
        from deployment import LAYOUT
        names = self.names()
        gateways = [n for n in names if n.startswith("gateway-")]
        storage = [n for n in names if n.startswith("storage-")]
        return {"sigkill": [n for n in names if n not in gateways], "sigstop": names,
                "gateway_kill": gateways, "full_disk": storage,
                "network_cut": sorted({h for hs in LAYOUT.values() for h in hs}),
                "slow_link": sorted({h for hs in LAYOUT.values() for h in hs})}

    def bootstrap(self) -> list[str]:
        d = self.deployment
        return [f"tcp://{d.host(h).address}:9092" for h in ("h1", "h3")]

    def workload(self, log: pathlib.Path) -> LineClient:
        proc = self.deployment.bed.client_popen_pipes(
            [sys.executable, str(HERE / "soak_workload.py"), "--bootstrap", ",".join(self.bootstrap())], log)
        return LineClient(proc, log)

    def _pid(self, name: str) -> int | None:
        host, proc = self._procs()[name]
        path = self.deployment.host(host).private("var-lib-riverbed") / "run" / f"{proc}.pid"
        try:
            pid = int(path.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid in self.deployment.bed.host_pids(self.deployment.host(host)) else None

    def alive(self, name: str) -> bool:
        pid = self._pid(name)
        if pid is None:
            return False
        try:
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    def _ctl(self, name: str, verb: str) -> None:
        host, proc = self._procs()[name]
        self.deployment.bed.ssh(self.deployment.host(host), f"/opt/riverbed/bin/riverbedctl {verb} {proc}",
                                timeout=180)

    def _mount_of(self, name: str) -> str:
        from deployment import STORAGE_IDS
        node = int(name.split("-")[1])
        for host, ids in STORAGE_IDS.items():
            if node in ids:
                return host, f"/srv/riverbed/data{ids.index(node) + 1}"
        raise ValueError(name)

    def apply(self, fault: Fault) -> None:
        import netfaults
        d = self.deployment
        if fault.kind in ("sigkill", "gateway_kill", "sigstop"):
            pid = self._pid(fault.target)
            if pid is None:
                raise RuntimeError(f"{fault.target} is not running")
            if fault.kind == "sigstop":
                os.kill(pid, signal.SIGSTOP)
            else:
                self._down_since[fault.target] = time.time()
                os.kill(pid, signal.SIGKILL)
        elif fault.kind == "full_disk":
            host, mount = self._mount_of(fault.target)
            d.bed.ssh(d.host(host), f"avail=$(df --output=avail -B1 {mount} | tail -1); "
                      f"fallocate -l $((avail - {FULL_DISK_LEAVE_BYTES})) {mount}/soak-ballast")
        elif fault.kind in ("network_cut", "slow_link"):
            st = contextlib.ExitStack()
            cm = (netfaults.isolate(d.bed, d.host(fault.target)) if fault.kind == "network_cut"
                  else netfaults.slow_link(d.bed, d.host(fault.target), "256kbit"))
            st.enter_context(cm)
            self._faults[fault.index] = st
        else:
            raise ValueError(fault.kind)

    def undo(self, fault: Fault) -> None:
        d = self.deployment
        if fault.kind in ("sigkill", "gateway_kill"):
            try:
                self._ctl(fault.target, "start")
            finally:
                self.down_windows.append((fault.target, self._down_since.pop(fault.target), time.time()))
        elif fault.kind == "sigstop":
            pid = self._pid(fault.target)
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
        elif fault.kind == "full_disk":
            host, mount = self._mount_of(fault.target)
            d.bed.ssh(d.host(host), f"rm -f {mount}/soak-ballast")
        elif fault.kind in ("network_cut", "slow_link"):
            self._faults.pop(fault.index).close()

    def describe(self) -> dict:
        return {"kind": self.kind, "workdir": str(self.deployment.workdir), "processes": self.names()}


# --- watching ------------------------------------------------------------------------------------

class DeathMonitor:
    """Every half second: which process is gone (one entry per death, while it stays gone)."""

    def __init__(self, target):
        self.target = target
        self.deaths: list[tuple[float, str]] = []
        self._gone: set[str] = set()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="death-monitor", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for name in self.target.names():
                try:
                    alive = self.target.alive(name)
                except Exception:  # noqa: BLE001 - a state file being rewritten: next round
                    continue
                if not alive and name not in self._gone:
                    self._gone.add(name)
                    self.deaths.append((time.time(), name))
                elif alive:
                    self._gone.discard(name)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join(10)


def _loadavg() -> list[float]:
    try:
        return [float(x) for x in pathlib.Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def longest_gap(times: Sequence[float], start: float, end: float) -> float:
    series = [start] + [t for t in times if start <= t <= end] + [end]
    return max(b - a for a, b in zip(series, series[1:]))


def dense(counts: Sequence[Sequence[int]], t0: float, t1: float) -> list[list[int]]:
    """[(second, count)] with every second from t0's to t1's, 0 where nothing was counted."""
    got = {int(t): int(n) for t, n in counts}
    return [[t, got.get(t, 0)] for t in range(int(t0), int(t1) + 1)]


# --- the report ------------------------------------------------------------------------------------

KIND_COLORS = {"sigkill": "tab:red", "sigstop": "tab:orange", "gateway_kill": "tab:purple",
               "full_disk": "tab:brown", "network_cut": "tab:gray", "slow_link": "tab:olive"}


def write_plot(path: pathlib.Path, report: dict) -> None:
    """Throughput over time (acknowledged and consumed records per second) with each fault's
    span shaded in its kind's colour and its target written above it."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    t0 = report["started_at"]
    acks = report["series"]["acks_per_s"]
    cons = report["series"]["consumed_per_s"]
    fig = Figure(figsize=(14, 5.5), dpi=100)
    ax = fig.subplots()
    ax.plot([t - t0 for t, _ in acks], [n for _, n in acks], lw=0.8, color="tab:blue",
            label="acknowledged records/s")
    ax.plot([t - t0 for t, _ in cons], [n for _, n in cons], lw=0.8, color="tab:green", alpha=0.7,
            label="consumed records/s")
    top = max([n for _, n in acks] + [n for _, n in cons] + [1])
    for f in report["faults"]:
        if f.get("applied_s") is None:
            continue
        end = f.get("undone_s") or f["applied_s"]
        ax.axvspan(f["applied_s"], end, color=KIND_COLORS.get(f["kind"], "k"), alpha=0.25, lw=0)
        ax.text(f["applied_s"], top * 1.02, f["target"], rotation=90, fontsize=6, va="bottom")
    ax.set_xlabel("seconds since the workload started")
    ax.set_ylabel("records/s")
    ax.set_ylim(0, top * 1.25)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    kinds = sorted({f["kind"] for f in report["faults"]})
    handles = ax.get_legend_handles_labels()[0] + [
        Patch(color=KIND_COLORS.get(k, "k"), alpha=0.25, label=k) for k in kinds]
    ax.legend(handles=handles, loc="lower left", fontsize=8, ncol=4)
    v = report["verdict"]
    ax.set_title(f"soak, seed {report['seed']}, {report['duration_s']:.0f} s on the "
                 f"{report['target']['kind']} target: {len(report['faults'])} faults; "
                 f"{'OK' if v['ok'] else 'FAILED'} (lost {v['records']['lost']}, "
                 f"duplicates {v['records']['duplicates']}, out of order "
                 f"{v['records']['out_of_order']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(str(path))


# --- the run -------------------------------------------------------------------------------------

def run(args) -> int:
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = pathlib.Path(args.out or REPO / "build" / "soak" / f"{stamp}-seed{seed}")
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    print(f"soak: seed {seed}, {args.duration:.0f} s, report in {out}", flush=True)
    target_cls = TestbedTarget if args.testbed else LocalTarget
    report: dict = {"seed": seed, "duration_s": args.duration, "rate_per_s": args.rate,
                    "partitions": args.partitions, "gap_s": list(args.gap), "command": sys.argv,
                    "machine": {"cores": os.cpu_count(), "load_at_start": _loadavg()}}
    with target_cls(work) as target:
        t_setup = time.monotonic()
        target.up()
        report["setup_s"] = round(time.monotonic() - t_setup, 1)
        targets = target.fault_targets()
        if args.kinds:
            wanted = set(args.kinds.split(","))
            unknown = wanted - set(KINDS)
            if unknown:
                raise SystemExit(f"--kinds: unknown {', '.join(sorted(unknown))}; known: {', '.join(KINDS)}")
            for k in set(targets) - wanted:
                target.excluded.setdefault(k, "not asked for (--kinds)")
            targets = {k: v for k, v in targets.items() if k in wanted}
        for k in target.excluded:
            targets.pop(k, None)
        schedule = generate(seed, args.duration, targets, gap_s=tuple(args.gap))
        report.update(target=target.describe(),
                      kinds={k: {"what": KINDS[k].what, "targets": targets.get(k, []),
                                 "excluded": target.excluded.get(k)} for k in KINDS},
                      planned=describe(schedule))
        print(f"soak: {len(schedule)} faults planned: {describe(schedule)}; excluded: "
              f"{target.excluded}", flush=True)
        workload = target.workload(out / "workload.log")
        faults: list[dict] = []
        load_samples: list[tuple[float, list[float]]] = []
        try:
            workload.call("start", topic=TOPIC, partitions=args.partitions, rate=args.rate,
                          group=GROUP, timeout_s=300)
            t0 = time.time()
            report["started_at"] = t0
            with DeathMonitor(target) as monitor:
                for fault in schedule:
                    delay = t0 + fault.at_s - time.time()
                    if delay > 0:
                        time.sleep(delay)
                    row = {**fault.to_json(), "applied_s": None, "undone_s": None, "error": None}
                    faults.append(row)
                    try:
                        target.apply(fault)
                        row["applied_s"] = round(time.time() - t0, 3)
                        time.sleep(fault.duration_s)
                    except Exception as e:  # noqa: BLE001 - reported; the soak goes on
                        row["error"] = f"apply: {type(e).__name__}: {e}"
                    finally:
                        try:
                            if row["applied_s"] is not None:
                                target.undo(fault)
                                row["undone_s"] = round(time.time() - t0, 3)
                        except Exception as e:  # noqa: BLE001 - reported (a process left down shows)
                            row["error"] = f"undo: {type(e).__name__}: {e}"
                    sample = workload.call("sample")
                    load_samples.append((round(time.time() - t0, 1), _loadavg()))
                    print(f"soak {time.time() - t0:6.0f} s: #{fault.index} {fault.kind} "
                          f"{fault.target} {fault.duration_s:.1f} s{' ' + row['error'] if row['error'] else ''}; "
                          f"acked {sample['acked']}, consumed {sample['consumed']}", flush=True)
                rest = t0 + args.duration - time.time()
                if rest > 0:
                    time.sleep(rest)
                t_stop = time.time()
                result = workload.call("stop", timeout_s=600)
            dead_at_end = [n for n in target.names() if not target.alive(n)]
            processes = check_processes(monitor.deaths, target.down_windows, dead_at_end)
        finally:
            workload.close()
        report["machine"]["load_at_end"] = _loadavg()
        report["machine"]["load_samples"] = load_samples
        acks = result.pop("ack_times")
        for row in faults:
            if row["applied_s"] is None:
                continue
            nxt = next((f["at_s"] for f in faults if f["index"] == row["index"] + 1), t_stop - t0)
            row["longest_ack_gap_s"] = round(longest_gap(acks, t0 + row["applied_s"], t0 + nxt), 2)
        report["faults"] = faults
        report["verdict"] = verdict(result["records"], result["commits"], processes,
                                    result["consumer_caught_up"])
        report["verdict"]["fault_errors"] = [f"#{f['index']} {f['kind']} {f['target']}: {f['error']}"
                                             for f in faults if f["error"]]
        report["totals"] = {k: result[k] for k in ("sent", "produce_failures", "commit_failures",
                                                   "poll_errors", "final_committed", "log_end",
                                                   "consumer_error")}
        report["totals"]["longest_ack_gap_s"] = round(longest_gap(acks, t0, t_stop), 2)
        report["totals"]["acked_per_s_mean"] = round(result["records"]["acked"] / max(1.0, t_stop - t0), 1)
        report["series"] = {k: dense(result[k], t0, t_stop) for k in ("acks_per_s", "consumed_per_s")}
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    write_plot(out / "throughput.png", report)
    v = report["verdict"]
    if v["ok"]:    # keep the services' logs, drop their data
        for d in (work / "fleet").glob("*"):
            if d.is_dir() and d.name != "logs":
                shutil.rmtree(d, ignore_errors=True)
    print(json.dumps({"ok": v["ok"], "records": v["records"], "commits": v["commits"],
                      "processes": v["processes"], "consumer_caught_up": v["consumer_caught_up"],
                      "faults": len(faults), "fault_errors": v["fault_errors"],
                      "longest_ack_gap_s": report["totals"]["longest_ack_gap_s"]}, indent=1))
    print(f"soak: report {out / 'report.json'}, plot {out / 'throughput.png'}", flush=True)
    return 0 if v["ok"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="soak", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--duration", type=float, default=600.0,
                    help="seconds of load and faults (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=None,
                    help="the schedule's seed (default: a random one, printed and in the report)")
    ap.add_argument("--rate", type=float, default=300.0,
                    help="records/s the verifying producer sends (default: %(default)s)")
    ap.add_argument("--partitions", type=int, default=6, help="of the soak topic (RF 3, min ISR 2)")
    ap.add_argument("--gap", type=lambda s: tuple(float(x) for x in s.split(",")), default=(10.0, 20.0),
                    help="LOW,HIGH seconds between two faults' starts (default: 10,20)")
    ap.add_argument("--kinds", default="", help="only these fault kinds (comma-separated): "
                    + ", ".join(KINDS))
    ap.add_argument("--out", help="report directory (default: build/soak/<UTC time>-seed<N>)")
    ap.add_argument("--testbed", action="store_true",
                    help="against the deployment test bed (root; network cuts and slow links)")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
