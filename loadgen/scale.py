"""`make bench-scale`: how cost grows with partitions, producer processes, gateways and metadata
(issue 15, point 5). Every point is measured in the same run, on one local fleet.

    .venv/bin/python -m loadgen.scale                      # full curves (tens of minutes)
    .venv/bin/python -m loadgen.scale --quick              # small points: a smoke test (~2 min)
    .venv/bin/python -m loadgen.scale --json out.json --plot out.png
    .venv/bin/python -m loadgen.scale --skip-partitions --skip-metadata   # processes, gateways

Starts its own fleet in a temporary directory on free ports (ZooKeeper, 2 controllers, 3 storage
nodes, up to 4 gateways; no group roles), stops it at the end (by PID), and prints:

1. partitions: producer throughput (riverbed-perf produce --bulk, acks=all, the SDK defaults,
   100 B records) to one topic of 1, 10, 100, 1,000 partitions, replication factor 3; ratio to
   the 10-partition point (the issue's aim: 1,000 >= 0.7 of 10). Each point starts once every
   replica is open on its storage node (DESCRIBE_LOG_DIRS), not when the leaders appear in the
   metadata, which is earlier: the nodes may still be creating the logs; "create s" is the time
   from CREATE_TOPICS to that.
2. producer processes: 1, 4, 16 riverbed-perf processes on a 10-partition RF 3 topic.
3. gateways: 1, 2, 4 gateways behind one client pool: 4 producer processes, process i
   bootstrapped to gateway i mod g (a client uses the first gateway of its bootstrap list), all
   started together; throughput is the sum of their rates.
   Points 1-3 also print the cores each gateway process and the busiest storage node kept busy
   while the producers sent (/proc): a role's Python runs on one core at a time, so a process
   near 1.0 is the limit of one process of that role, whatever cores the host has.
4. metadata: with 1,000 and 10,000 partitions in the cluster (topics of at most 2,000 partitions
   added until the total is reached): topic creation (partitions/s, and topics/s for small
   topics), controller failover (SIGKILL the active controller -> the standby answers a
   CREATE_TOPICS through the gateway), a storage node's failover (SIGKILL -> no partition names
   it leader in the metadata) and its controlled shutdown (SIGTERM -> the process has exited,
   leadership moved first).
5. memory: resident set size (VmRSS) and open files of each storage node and the gateway before
   and after the partitions were created (bytes and files per partition replica) and before and
   after `--clients` producers connected to the gateway (bytes per connected client).

The metadata topics use replication factor `--metadata-rf` (default: 2, or 1 where the open-file
limit would not hold 2): a storage node keeps files open per replica (about 1 for an empty one,
6 for one written to: .log, .index, .timeindex, snapshots), so `ulimit -n` caps the replicas one
storage-node process can host; the memory table shows files per replica. With RF 1 a killed
node's partitions go offline (the "node kill" figure is then the controller's reaction) and a
controlled shutdown cannot move them (its figure is then the retries, controlled.shutdown.*).

Figures depend on the host: on a shared 2-core machine they are noisy, and the many-process
points compete with the fleet for the same cores (the report says how many CPUs there were).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from loadgen import failover_bench

RECORD_BYTES = 100

FULL = {"records": 300_000, "partitions": [1, 10, 100, 1000], "procs": [1, 4, 16],
        "gateways": [1, 2, 4], "small_topics": 100, "metadata": [1000, 10000], "clients": 100,
        "gateway_procs": 4}
QUICK = {"records": 20_000, "partitions": [1, 10], "procs": [1, 2], "gateways": [1, 2],
         "small_topics": 10, "metadata": [30, 60], "clients": 5, "gateway_procs": 2}
MAX_TOPIC_PARTITIONS = 2000


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _wait(pred, what: str, timeout_s: float = 300.0, interval_s: float = 0.05):
    """failover_bench's polling wait, with the longer bound big clusters need."""
    return failover_bench._wait(pred, what, timeout_s, interval_s)


def _proc_figures(pid: int) -> dict[str, int]:
    """VmRSS (bytes) and open files of a process, from /proc."""
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = -1
    return {"rss": rss, "fds": fds}


def _leaders_ready(admin, topics: list[str]) -> bool:
    for d in admin.describe_topics(topics):
        if not d.partitions or any(p.leader < 0 for p in d.partitions):
            return False
    return True


# --- throughput points -------------------------------------------------------------------------

def _perf(bootstrap: str, topic: str, records: int, processes: int, out_json: str,
          extra: tuple[str, ...] = ()) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "loadgen.perf", "produce", "--bootstrap-server", bootstrap,
           "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_BYTES),
           "--throughput", "-1", "--processes", str(processes), "--bulk", "--acks", "all",
           "--json", out_json, *extra]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _process_cores(pids: dict[str, list[int]], before, seconds: float) -> dict[str, float]:
    """Cores each fleet process kept busy on average over `seconds` (the producers' sending
    window: the fleet is all but idle while they start and connect)."""
    from loadgen import proc_cpu
    used = proc_cpu.delta(before, proc_cpu.snapshot(pids))
    return {n: round(c.total / seconds, 2) for n, c in sorted(used.items())}


def _run_perfs(specs: list[tuple[str, str, int, int]], work: str,
               fleet=None) -> dict[str, Any]:
    """Run riverbed-perf processes together; (bootstrap, topic, records, processes) each.
    The rate is the sum of their rates (they run at the same time). With `fleet`, also the
    cores each fleet process kept busy meanwhile (_process_cores)."""
    from loadgen import proc_cpu
    pids = proc_cpu.process_pids(fleet) if fleet is not None else None
    cpu0 = proc_cpu.snapshot(pids) if pids else None
    procs = []
    for i, (bootstrap, topic, records, processes) in enumerate(specs):
        path = os.path.join(work, f"perf-{time.monotonic_ns()}-{i}.json")
        procs.append((path, _perf(bootstrap, topic, records, processes, path)))
    results = []
    for path, p in procs:
        try:
            _, err = p.communicate(timeout=1800)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise RuntimeError("riverbed-perf did not finish in 30 min") from None
        if p.returncode != 0:
            raise RuntimeError(f"riverbed-perf failed ({p.returncode}): {err[-2000:]}")
        with open(path) as f:
            results.append(json.load(f))
    out = {"records_per_s": round(sum(r["records_per_sec"] for r in results)),
           "mb_per_s": round(sum(r["mb_per_sec"] for r in results), 2),
           "errors": sum(r.get("errors", 0) for r in results),
           "p99_ms": max(r["latency_ms"].get("p99", 0) for r in results)}
    if pids:
        out["process_cores"] = _process_cores(pids, cpu0, max(r["elapsed_s"] for r in results))
    return out


def _replicas_serving(admin, topics: list[tuple[str, int, int]]) -> bool:
    """Every replica of the (name, partitions, rf) topics is open on its storage node with its
    role (DESCRIBE_LOG_DIRS): the nodes have handled the controller's LEADER_AND_ISR, which
    comes after the leaders appear in the metadata."""
    names = {name for name, _, _ in topics}
    want = sum(n * rf for _, n, rf in topics)
    got = 0
    for node in admin.describe_log_dirs(topics=sorted(names)):
        if node.error:
            return False
        got += sum(1 for d in node.log_dirs for r in d.replicas
                   if r.topic in names and not r.is_future and r.role in ("leader", "follower"))
    return got >= want


def _create(admin, topics: list[tuple[str, int, int]], serving: bool = False) -> float:
    """Create (name, partitions, rf) topics; seconds until every partition has a leader (and,
    with `serving`, every replica is open on its node: the throughput points start there, so
    they do not measure the tail of the topic's creation)."""
    from riverbed import NewTopic
    t0 = time.perf_counter()
    for name, n, rf in topics:
        admin.create_topics([NewTopic(name, num_partitions=n, replication_factor=rf,
                                      configs={"min.insync.replicas": str(min(2, rf))})])
    names = [t[0] for t in topics]
    _wait(lambda: _leaders_ready(admin, names), f"leaders of {len(names)} topic(s)",
          timeout_s=1200, interval_s=0.2)
    if serving:
        _wait(lambda: _replicas_serving(admin, topics),
              f"replicas of {len(names)} topic(s) open on their nodes", timeout_s=1200,
              interval_s=0.2)
    return time.perf_counter() - t0


def measure_partitions(fleet, admin, cfg, work) -> list[dict]:
    rows = []
    for n in cfg["partitions"]:
        topic = f"scale-p{n}"
        created_s = _create(admin, [(topic, n, 3)], serving=True)
        r = _run_perfs([(fleet.gateway_endpoint, topic, cfg["records"], 1)], work, fleet)
        row = {"partitions": n, **r, "create_s": round(created_s, 2)}
        _log(f"partitions {n}: {row}")
        rows.append(row)
    return rows


def measure_procs(fleet, admin, cfg, work) -> list[dict]:
    topic = "scale-procs"
    _create(admin, [(topic, 10, 3)], serving=True)
    rows = []
    for k in cfg["procs"]:
        r = _run_perfs([(fleet.gateway_endpoint, topic, cfg["records"], k)], work, fleet)
        row = {"producer_processes": k, **r}
        _log(f"producer processes {k}: {row}")
        rows.append(row)
    return rows


def measure_gateways(fleet, admin, cfg, work, gateways: list) -> list[dict]:
    topic = "scale-gateways"
    _create(admin, [(topic, 10, 3)], serving=True)
    rows = []
    procs = cfg["gateway_procs"]
    for g in cfg["gateways"]:
        specs = [(gateways[i % g], topic, cfg["records"] // procs, 1) for i in range(procs)]
        r = _run_perfs(specs, work, fleet)
        row = {"gateways": g, "producer_processes": procs, **r}
        _log(f"gateways {g}: {row}")
        rows.append(row)
    return rows


# --- metadata and memory -----------------------------------------------------------------------

def _memory(fleet, names: list[str]) -> dict[str, dict[str, int]]:
    return {n: _proc_figures(fleet.process(n).pid) for n in names}


def _active_controller(zk) -> int | None:
    from services.common import znodes
    try:
        data, _ = zk.get(znodes.CONTROLLER)
    except Exception:  # noqa: BLE001 - NoNodeError: none active
        return None
    return znodes.decode_controller(data).controller_id


def _controller_failover(fleet, zk, tag: str) -> dict[str, float]:
    """SIGKILL the active controller; seconds until /controller names the standby, and until
    the standby answers a CREATE_TOPICS through the gateway (it has read every partition)."""
    from riverbed import Admin, NewTopic
    old = _active_controller(zk)
    name = f"controller-{old}"
    attempt = [0]
    with Admin([fleet.gateway_endpoint], request_timeout_ms=5000) as probe:
        t0 = time.monotonic()
        fleet.stop(name, kill=True)

        def created() -> bool:
            attempt[0] += 1
            probe.create_topics([NewTopic(f"cf-{tag}-{attempt[0]}", num_partitions=1,
                                          replication_factor=1)])
            return True
        elected = _wait(lambda: _active_controller(zk) not in (None, old) and time.monotonic(),
                        "a new active controller", timeout_s=600, interval_s=0.02)
        _wait(created, "a CREATE_TOPICS answered by the standby", timeout_s=600,
              interval_s=0.05)
        took = time.monotonic() - t0
        # The probe topics have one replica: gone, so a controlled shutdown has no partition
        # it cannot hand over (which would make it wait out its retries).
        try:
            probe.delete_topics([f"cf-{tag}-{i}" for i in range(1, attempt[0] + 1)])
        except Exception as e:  # noqa: BLE001 - some attempts created nothing: fine
            _log(f"deleting the probe topics: {e!r}")
    _restart(fleet, name)
    return {"controller_elected_s": round(elected - t0, 2), "controller_failover_s": round(took, 2)}


def _full_isr(admin, topics: list[str]) -> bool:
    return all(p.leader >= 0 and set(p.isr) == set(p.replicas)
               for d in admin.describe_topics(topics) for p in d.partitions)


def _leads(admin, topics: list[str], node: int) -> int:
    return sum(1 for d in admin.describe_topics(topics) for p in d.partitions if p.leader == node)


RESTART_TIMEOUT_S = 900


def _restart(fleet, name: str) -> float:
    """Start `name` again; seconds until it is up (a storage node opening thousands of partition
    logs takes a while: this is itself a figure)."""
    t0 = time.monotonic()
    fleet.start(name, wait=False)
    fleet.wait_up(name, timeout_s=RESTART_TIMEOUT_S)
    return time.monotonic() - t0


def _preferred(admin, topics: list[str], node: int) -> list[tuple[str, int]]:
    """The partitions that name `node` first among their replicas (its share as leader)."""
    return [(d.name, p.partition) for d in admin.describe_topics(topics) for p in d.partitions
            if p.replicas and p.replicas[0] == node]


def _give_back(admin, topics: list[str], node: int) -> None:
    """Preferred-replica election, so `node` leads its share before it is stopped."""
    try:
        share = _preferred(admin, topics, node)
        if not share:
            # a few small topics, each placed from a random start, may not put `node` first
            # anywhere ((2/3)^10 for --quick's ten): no election gives it a partition to lead
            _log(f"node {node} is the preferred replica of no partition: nothing to give back")
            return

        def elected() -> bool:
            # asked again each second: a preferred replica not (yet) in the ISR, or a controller
            # that has just taken over, refuses a partition with a per-partition error
            admin.elect_leaders(share)
            return _leads(admin, topics, node) > 0
        _wait(elected, f"leadership back on node {node}", timeout_s=120, interval_s=1.0)
    except Exception as e:  # noqa: BLE001 - measured anyway: the table shows how many it led
        _log(f"preferred election: {e!r}")


def _node_failover(fleet, admin, topics: list[str]) -> dict[str, float]:
    """SIGKILL storage-3: until no partition names it leader; restart; then SIGTERM (controlled
    shutdown) and time the stop; restart."""
    name, node = "storage-3", 3
    _give_back(admin, topics, node)
    led = _leads(admin, topics, node)
    t0 = time.monotonic()
    fleet.stop(name, kill=True)
    _wait(lambda: _leads(admin, topics, node) == 0, "no partition led by the killed node",
          timeout_s=600, interval_s=0.1)
    kill_s = time.monotonic() - t0
    restart_s = _restart(fleet, name)
    _wait(lambda: _full_isr(admin, topics), "the restarted node back in every ISR",
          timeout_s=1200, interval_s=0.5)
    _give_back(admin, topics, node)
    led_before_stop = _leads(admin, topics, node)
    t0 = time.monotonic()
    fleet.stop(name)
    stop_s = time.monotonic() - t0
    _restart(fleet, name)
    _wait(lambda: _leaders_ready(admin, topics), "leaders after the second restart",
          timeout_s=600, interval_s=0.5)
    return {"led_at_kill": led, "kill_failover_s": round(kill_s, 2),
            "restart_ready_s": round(restart_s, 2),
            "led_at_controlled_shutdown": led_before_stop,
            "controlled_shutdown_s": round(stop_s, 2)}


def measure_metadata(fleet, admin, zk, cfg, existing: int, rf: int,
                     skip_node: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"points": []}
    # small topics: creation rate in topics/s
    small = [(f"scale-small-{i}", 1, rf) for i in range(cfg["small_topics"])]
    s = _create(admin, small)
    out["small_topics"] = {"topics": len(small), "seconds": round(s, 2),
                           "topics_per_s": round(len(small) / s, 1)}
    _log(f"topic creation: {out['small_topics']}")
    total = existing + len(small)
    all_topics = [t[0] for t in small]
    mem_names = ["storage-1", "storage-2", "storage-3", "gateway-1"]
    for target in cfg["metadata"]:
        add = max(0, target - total)
        topics = []
        i = 0
        while add > 0:
            n = min(add, MAX_TOPIC_PARTITIONS)
            topics.append((f"scale-m{target}-{i}", n, rf))
            add -= n
            i += 1
        before = _memory(fleet, mem_names)
        s = _create(admin, topics) if topics else 0.0
        after = _memory(fleet, mem_names)
        created = sum(t[1] for t in topics)
        total += created
        all_topics += [t[0] for t in topics]
        point: dict[str, Any] = {
            "partitions_in_cluster": total, "replication_factor": rf,
            "created_partitions": created, "create_s": round(s, 2),
            "partitions_per_s": round(created / s, 1) if s else None,
            "memory_before": before, "memory_after": after}
        _log(f"{total} partitions: created {created} in {s:.1f} s")
        out["points"].append(point)
        try:
            point.update(_controller_failover(fleet, zk, str(target)))
            _log(f"{total} partitions: controller failover {point['controller_failover_s']} s")
            if not skip_node:
                point.update(_node_failover(fleet, admin, all_topics))
                _log(f"{total} partitions: storage node {point}")
        except Exception as e:  # noqa: BLE001 - keep what was measured, say what broke
            point["error"] = f"{type(e).__name__}: {e}"[:2000]
            _log(f"{total} partitions: {point['error']}")
            break
    return out


def measure_clients(fleet, cfg, topic: str) -> dict[str, Any]:
    from riverbed import Producer
    names = ["storage-1", "storage-2", "storage-3", "gateway-1"]
    before = _memory(fleet, names)
    producers = []
    try:
        for _ in range(cfg["clients"]):
            p = Producer([fleet.gateway_endpoint], acks=1)
            p.send(topic, b"x" * RECORD_BYTES).result(timeout=60)   # connected and known
            producers.append(p)
        time.sleep(0.5)
        after = _memory(fleet, names)
    finally:
        for p in producers:
            p.close(timeout=10)
    per = {n: round((after[n]["rss"] - before[n]["rss"]) / max(1, cfg["clients"]))
           for n in names}
    return {"clients": cfg["clients"], "before": before, "after": after,
            "rss_bytes_per_client": per}


# --- main ----------------------------------------------------------------------------------------

def run(args, out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure into `out` (filled section by section, so a failure keeps what was measured)."""
    cfg = dict(QUICK if args.quick else FULL)
    if args.records:
        cfg["records"] = args.records
    root = args.data_dir or tempfile.mkdtemp(prefix="scale-bench-")
    try:
        return _run_in(args, cfg, root, out)
    finally:
        if not args.data_dir:
            # A 1,000-partition fleet leaves gigabytes (logs, indexes, ZooKeeper's logs): a
            # temporary one goes with the run, or a few runs fill the disk under everything else.
            shutil.rmtree(root, ignore_errors=True)


def _run_in(args, cfg: dict, root: str, out: dict[str, Any] | None) -> dict[str, Any]:
    from deploy.fleet import Fleet, free_base_port
    from riverbed import Admin
    from services.common import zk as zkmod
    gateways_n = 1 if args.partitions_only else max(cfg["gateways"])
    work = os.path.join(root, "work")
    os.makedirs(work, exist_ok=True)
    out = {} if out is None else out
    out["conditions"] = {
        "fleet": f"ZooKeeper, 2 controllers, 3 storage nodes, {gateways_n} gateways on 127.0.0.1",
        "cpus": len(os.sched_getaffinity(0)), "quick": args.quick, "record_bytes": RECORD_BYTES,
        "records_per_point": cfg["records"], "producer": "riverbed-perf produce --bulk --acks all "
        "(SDK defaults otherwise)", "open_files_limit": _nofile(),
        "data_dir": root if args.data_dir else f"{root} (removed after the run)",
        "controller_config": list(args.controller_config)}
    overrides = {"controller": {"auto.leader.rebalance.enable": "false",
                                **dict(kv.split("=", 1) for kv in args.controller_config)}}
    with Fleet(root + "/fleet", free_base_port(), storage_nodes=3, controllers=2,
               gateways=gateways_n, counts={"group_coordinator": 0, "offset_manager": 0},
               config_overrides=overrides) as fleet:
        fleet.up()
        gateways = [fleet.process(f"gateway-{i}").endpoint for i in range(1, gateways_n + 1)]
        _log(f"fleet up in {root} (gateways {gateways})")
        mem_names = ["storage-1", "storage-2", "storage-3", "gateway-1"]
        out["memory_empty"] = _memory(fleet, mem_names)
        zk = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False)
        try:
            with Admin([fleet.gateway_endpoint], request_timeout_ms=120000) as admin:
                if not args.skip_throughput and not args.skip_partitions:
                    out["partitions"] = measure_partitions(fleet, admin, cfg, work)
                    out["memory_after_partitions"] = _memory(fleet, mem_names)
                if not args.skip_throughput and not args.partitions_only:
                    out["producer_processes"] = measure_procs(fleet, admin, cfg, work)
                    out["gateways"] = measure_gateways(fleet, admin, cfg, work, gateways)
                    out["clients"] = measure_clients(fleet, cfg, "scale-procs")
                existing = 0 if args.skip_throughput else 20 + (
                    0 if args.skip_partitions else sum(cfg["partitions"]))
                if not args.skip_metadata and not args.partitions_only:
                    rf = args.metadata_rf or _metadata_rf(max(cfg["metadata"]))
                    out["metadata"] = measure_metadata(fleet, admin, zk, cfg, existing, rf,
                                                       args.skip_node_failover)
        finally:
            zkmod.close(zk)
    return out


def _metadata_rf(partitions: int) -> int:
    """2 if three open files per replica of `partitions` x 2 over 3 nodes fit in ulimit -n
    (with room to spare), else 1. Measured: about 1.2 files per empty replica, 6 per written
    one, and a follower whose leader moves opens its files: with ulimit -n 20000, 10,000
    partitions at RF 2 (6,667 replicas per node) failed with EMFILE after a node failover."""
    return 2 if partitions * 2 / 3 * 3 + 2000 < _nofile() else 1


def _nofile() -> int:
    import resource
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _per_replica(before: dict, after: dict, replicas_added: float, key: str) -> dict[str, float]:
    return {n: round((after[n][key] - before[n][key]) / replicas_added, 1)
            for n in before if n.startswith("storage") and replicas_added > 0}


def _gateway_cores(row: dict) -> str:
    """The gateways' cores in a row, busiest first ("0.97" or "0.55+0.51"), or "-"."""
    cores = sorted((v for n, v in row.get("process_cores", {}).items()
                    if n.startswith("gateway")), reverse=True)
    return "+".join(f"{c:.2f}" for c in cores if c >= 0.01) or "-"


def _storage_cores(row: dict) -> str:
    """The busiest storage node's cores in a row, or "-"."""
    cores = [v for n, v in row.get("process_cores", {}).items() if n.startswith("storage")]
    return f"{max(cores):.2f}" if cores else "-"


CORES_NOTE = ("(gw cores: each gateway process's cores busy while the producers sent, busiest "
              "first; sn cores: the busiest storage node's. One process runs its Python on one "
              "core at a time: a gateway near 1.0 is the limit of one gateway process)")


def print_report(out: dict[str, Any]) -> None:
    c = out["conditions"]
    print(f"conditions: {c['fleet']}, {c['cpus']} CPUs (shared with other work), "
          f"{'QUICK (smoke-test points)' if c['quick'] else 'full'}; {c['producer']}, "
          f"{c['record_bytes']} B records, {c['records_per_point']} records per point; "
          f"ulimit -n {c['open_files_limit']}")
    if c.get("controller_config"):
        print(f"controller settings: {', '.join(c['controller_config'])}")
    if any(k in out for k in ("partitions", "producer_processes", "gateways")):
        print(CORES_NOTE)
    if "partitions" in out:
        rows = out["partitions"]
        base = next((r for r in rows if r["partitions"] == 10), rows[0])
        print("\n1. throughput by partition count (one topic, RF 3, acks=all, 1 producer process)")
        print(f"{'partitions':>10} {'records/s':>10} {'MB/s':>7} {'p99 ms':>8} {'÷ 10 parts':>10} "
              f"{'create s':>8} {'gw cores':>9} {'sn cores':>8}")
        for r in rows:
            print(f"{r['partitions']:>10} {r['records_per_s']:>10} {r['mb_per_s']:>7} "
                  f"{r['p99_ms']:>8.1f} {r['records_per_s'] / base['records_per_s']:>10.2f} "
                  f"{r.get('create_s', 0):>8.2f} {_gateway_cores(r):>9} {_storage_cores(r):>8}")
    if "producer_processes" in out:
        rows = out["producer_processes"]
        print("\n2. throughput by producer processes (10 partitions, RF 3, acks=all, 1 gateway)")
        print(f"{'processes':>10} {'records/s':>10} {'MB/s':>7} {'p99 ms':>8} {'÷ 1 proc':>9} "
              f"{'gw cores':>9} {'sn cores':>8}")
        for r in rows:
            print(f"{r['producer_processes']:>10} {r['records_per_s']:>10} {r['mb_per_s']:>7} "
                  f"{r['p99_ms']:>8.1f} {r['records_per_s'] / rows[0]['records_per_s']:>9.2f} "
                  f"{_gateway_cores(r):>9} {_storage_cores(r):>8}")
    if "gateways" in out:
        rows = out["gateways"]
        print(f"\n3. throughput by gateways ({rows[0]['producer_processes']} producer processes "
              "spread over the gateways, 10 partitions RF 3, acks=all)")
        print(f"{'gateways':>10} {'records/s':>10} {'MB/s':>7} {'p99 ms':>8} {'÷ 1 gw':>7} "
              f"{'gw cores':>19} {'sn cores':>8}")
        for r in rows:
            print(f"{r['gateways']:>10} {r['records_per_s']:>10} {r['mb_per_s']:>7} "
                  f"{r['p99_ms']:>8.1f} {r['records_per_s'] / rows[0]['records_per_s']:>7.2f} "
                  f"{_gateway_cores(r):>19} {_storage_cores(r):>8}")
    if "metadata" in out:
        md = out["metadata"]
        st = md["small_topics"]
        print(f"\n4. metadata: {st['topics']} topics of 1 partition created one request each: "
              f"{st['topics_per_s']} topics/s")
        print("(restart s: a storage node's start until it serves, with its share of the "
              "partitions; node kill s: SIGKILL -> no partition names it leader)")
        print("(ctrl elected: SIGKILL of the active controller -> /controller names the standby; "
              "ctrl failover: -> the standby answers CREATE_TOPICS through the gateway)")
        print(f"{'partitions':>10} {'RF':>3} {'created/s':>9} {'ctrl elected s':>14} "
              f"{'ctrl failover s':>15} "
              f"{'node kill s':>11} {'(led)':>6} {'ctrl shutdown s':>15} {'(led)':>6} "
              f"{'restart s':>9}")
        for p in md["points"]:
            g = lambda k: p.get(k, "-")      # noqa: E731 - a point cut short has no figure
            print(f"{p['partitions_in_cluster']:>10} {p['replication_factor']:>3} "
                  f"{p['partitions_per_s'] or '-':>9} {g('controller_elected_s'):>14} "
                  f"{g('controller_failover_s'):>15} "
                  f"{g('kill_failover_s'):>11} {g('led_at_kill'):>6} "
                  f"{g('controlled_shutdown_s'):>15} {g('led_at_controlled_shutdown'):>6} "
                  f"{g('restart_ready_s'):>9}")
            if "error" in p:
                print(f"    cut short: {p['error'][:300]}")
    print("\n5. memory")
    if "memory_after_partitions" in out and "partitions" in out:
        replicas = sum(r["partitions"] for r in out["partitions"])   # per node: RF 3 on 3 nodes
        rss = _per_replica(out["memory_empty"], out["memory_after_partitions"], replicas, "rss")
        fds = _per_replica(out["memory_empty"], out["memory_after_partitions"], replicas, "fds")
        print(f"storage node per partition replica (after the throughput topics, "
              f"{int(replicas)} replicas per node, written to): RSS bytes {rss}, open files {fds}")
    if "metadata" in out:
        for p in out["metadata"]["points"]:
            if not p["created_partitions"]:
                continue
            per_node = p["created_partitions"] * p["replication_factor"] / 3
            rss = _per_replica(p["memory_before"], p["memory_after"], per_node, "rss")
            fds = _per_replica(p["memory_before"], p["memory_after"], per_node, "fds")
            gw = p["memory_after"]["gateway-1"]["rss"] - p["memory_before"]["gateway-1"]["rss"]
            print(f"  +{p['created_partitions']} partitions (empty, {int(per_node)} replicas per "
                  f"node): storage node RSS bytes/replica {rss}, open files/replica {fds}; "
                  f"gateway RSS bytes/partition {round(gw / p['created_partitions'])}")
    if "clients" in out:
        cl = out["clients"]
        print(f"per connected client ({cl['clients']} producers on gateway-1): RSS bytes "
              f"{cl['rss_bytes_per_client']}")
    if "memory_empty" in out:
        print("RSS of the empty fleet (MB): " + ", ".join(
            f"{n} {v['rss'] / 1e6:.0f}" for n, v in out["memory_empty"].items()))


def write_plot(path: str, out: dict[str, Any]) -> None:
    import matplotlib
    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure
    fig = Figure(figsize=(11, 8), dpi=100)
    axes = fig.subplots(2, 2)
    curves = [("partitions", "partitions", "partitions (RF 3)", axes[0][0]),
              ("producer_processes", "producer_processes", "producer processes", axes[0][1]),
              ("gateways", "gateways", "gateways", axes[1][0])]
    for key, x, label, ax in curves:
        rows = out.get(key) or []
        ax.plot([r[x] for r in rows], [r["records_per_s"] for r in rows], marker="o")
        if key == "partitions":
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("records/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    ax = axes[1][1]
    pts = (out.get("metadata") or {}).get("points") or []
    xs = [p["partitions_in_cluster"] for p in pts]
    for k, lab in (("controller_failover_s", "controller failover"),
                   ("kill_failover_s", "storage node SIGKILL failover"),
                   ("controlled_shutdown_s", "controlled shutdown")):
        ax.plot([x for x, p in zip(xs, pts) if k in p], [p[k] for p in pts if k in p],
                 marker="o", label=lab)
    ax.set_xlabel("partitions in the cluster")
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.suptitle(f"riverbed scale ({out['conditions']['cpus']} CPUs, "
                 f"{'quick' if out['conditions']['quick'] else 'full'})")
    fig.tight_layout()
    fig.savefig(path)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m loadgen.scale",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small points (a smoke test of the whole benchmark, about 2 minutes)")
    ap.add_argument("--records", type=int, default=0,
                    help="records per throughput point (default: 300000, --quick 20000)")
    ap.add_argument("--metadata-rf", type=int, default=0,
                    help="replication factor of the metadata-scale topics; 0 (default): 2 when "
                         "the open-file limit allows 3 files per replica at the largest point, "
                         "else 1")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--partitions-only", action="store_true",
                    help="the partition curve alone (1, 10, 100, 1,000 partitions): no producer "
                         "process, gateway, client or metadata points")
    ap.add_argument("--skip-partitions", action="store_true",
                    help="no partition curve (its 1,000-partition topic is the slow part): the "
                         "producer-process, gateway and client points, then the metadata points")
    ap.add_argument("--skip-metadata", action="store_true")
    ap.add_argument("--skip-node-failover", action="store_true",
                    help="metadata points: controller failover only (no storage-node kill, "
                         "controlled shutdown and restarts, the slow part at 10,000 partitions)")
    ap.add_argument("--controller-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a controller setting for the whole run (repeatable), e.g. "
                         "controller.fast.takeover.enable=false: the controller failover then "
                         "waits for ZooKeeper to expire the killed controller's session, as it "
                         "must for a paused or unreachable one")
    ap.add_argument("--data-dir", help="fleet directory, kept after the run (default: a "
                    "temporary one, removed at the end)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--plot", metavar="FILE.png", help="also draw the curves (matplotlib)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return main_with(parse_args(argv))


def main_with(args) -> int:
    out: dict[str, Any] = {}
    rc = 0
    try:
        run(args, out)
    except Exception as e:  # noqa: BLE001 - report what was measured, then fail
        out["error"] = f"{type(e).__name__}: {e}"[:4000]
        _log(f"cut short: {out['error']}")
        rc = 1
    if "conditions" not in out:
        return 1
    print_report(out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    if args.plot:
        write_plot(args.plot, out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
