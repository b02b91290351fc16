"""Figures only (issue 24, point 2): how long a storage node cut off from the network takes to be
back in every ISR once the network returns, on the deployment test bed (five SSH hosts in
network namespaces, the fleet deployed by site.yml as tests/deploy/test_deploy_hosts.py does).

    sudo .venv/bin/python tests/deploy/netfault_rejoin.py [--repo DIR] [--cuts 60,40] [--json F]

`--repo` is the source tree the hosts install (default: this checkout), so one run measures
another revision (e.g. `git archive <commit> | tar -x -C DIR`). An acks=all idempotent
verifying producer (deploy_client.py verify) writes throughout. For each cut, storage-4's host
(h5) is cut off from every other address with blackhole routes both ways (inside h5's namespace
to each peer, inside each peer's namespace to h5) for that many seconds, then healed; a watcher
in the client namespace polls the partition states in ZooKeeper every 50 ms. Printed per cut:
the ISR size it fell to, and the seconds from the heal until every partition's ISR was full
again. At the end the producer's verdict (lost, duplicated, out of order: all must be 0) and its
longest gap between acknowledgements. Everything it creates is torn down, pass or fail.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TOPIC = "netfault"
CUT_HOST = "h5"          # storage-4 only


def watch(args) -> int:
    """In the client namespace: print a JSON line {t, full, total, min_isr} each time the
    number of partitions with a full ISR (or the smallest ISR) changes."""
    from services.common import zk as zkmod
    from services.common import znodes as zn
    zk = zkmod.connect(args.zk, timeout_s=30, create_chroot=False)
    last = None
    while True:
        try:
            assignment = zn.decode_topic_assignment(zk.get(zn.topic_path(args.topic))[0])
            full, smallest = 0, 99
            for p, replicas in assignment.items():
                st = zn.decode_partition_state(zk.get(zn.partition_state_path(args.topic, p))[0])
                smallest = min(smallest, len(st.isr))
                if st.leader >= 0 and set(st.isr) == set(replicas):
                    full += 1
            now = (full, len(assignment), smallest)
        except Exception as e:  # noqa: BLE001 - ZooKeeper moving: report and go on
            print(json.dumps({"t": time.time(), "error": repr(e)}), flush=True)
            time.sleep(0.5)
            continue
        if now != last:
            last = now
            print(json.dumps({"t": time.time(), "full": now[0], "total": now[1],
                              "min_isr": now[2]}), flush=True)
        time.sleep(0.05)


def _lines(path: pathlib.Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return [x for x in out if "full" in x]


def _wait(pred, what: str, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)


def _cut(bed, host, on: bool) -> None:
    from deploy_testbed import CLIENT_ADDRESS, run
    verb = "add" if on else "del"
    peers = [h for h in bed.hosts if h is not host]
    for addr in [h.address for h in peers] + [CLIENT_ADDRESS]:
        run(["ip", "-n", host.netns, "route", verb, "blackhole", f"{addr}/32"])
    for ns in [h.netns for h in peers] + [bed.client_ns]:
        run(["ip", "-n", ns, "route", verb, "blackhole", f"{host.address}/32"])


def measure(args) -> int:
    from deployment import Deployment
    dep = Deployment(repo=args.repo)
    print(f"work dir {dep.workdir}", file=sys.stderr)
    workdir = dep.workdir
    results: dict = {"repo": str(args.repo), "cuts": []}
    cuts = [float(c) for c in args.cuts.split(",")]
    dep.build()
    try:
        bed = dep.bed
        hosts = {h.name: h for h in bed.hosts}
        bootstrap, zk = dep.bootstrap, dep.zk_connect
        t0 = time.monotonic()
        dep.site()
        print(f"site.yml: {time.monotonic() - t0:.0f} s", file=sys.stderr)
        client = [sys.executable, str(HERE / "deploy_client.py")]
        bed.client_run(client + ["topic", "--bootstrap", bootstrap, "--topic", TOPIC,
                                 "--partitions", str(args.partitions),
                                 "--replication-factor", "3"], timeout=300)
        watch_out = workdir / "watch.jsonl"
        watcher = bed.client_popen([sys.executable, __file__, "watch", "--zk", zk,
                                    "--topic", TOPIC], watch_out)
        stop, ready, verdict = workdir / "stop", workdir / "ready", workdir / "verify.json"
        producer = bed.client_popen(client + [
            "verify", "--bootstrap", bootstrap, "--topic", TOPIC,
            "--partitions", str(args.partitions), "--out", str(verdict), "--stop-file", str(stop),
            "--ready-file", str(ready), "--rate", "200"], workdir / "verify.log")
        try:
            _wait(ready.exists, "the verifying producer", 120)
            host = hosts[CUT_HOST]
            for cut_s in cuts:
                _wait(lambda: (ls := _lines(watch_out)) and ls[-1]["full"] == ls[-1]["total"],
                      "every ISR full before the cut", 300)
                t_cut = time.time()
                _cut(bed, host, True)
                try:
                    time.sleep(cut_s)
                finally:
                    t_heal = time.time()
                    _cut(bed, host, False)
                full = _wait(lambda: next((x for x in _lines(watch_out) if x["t"] > t_heal
                                           and x["full"] == x["total"]), None),
                             "every ISR full after the heal", 600)
                during = [x for x in _lines(watch_out) if t_cut <= x["t"] <= t_heal]
                row = {"cut_s": cut_s, "min_isr_during_cut": min(
                           (x["min_isr"] for x in during), default=None),
                       "shrunk_after_s": round(min((x["t"] for x in during
                                                    if x["full"] < x["total"]),
                                                   default=t_heal) - t_cut, 1),
                       "full_isr_after_heal_s": round(full["t"] - t_heal, 2)}
                results["cuts"].append(row)
                print(f"cut {cut_s:.0f} s: {row}", file=sys.stderr)
                time.sleep(5)
        finally:
            stop.write_text("stop\n")
            try:
                producer.wait(timeout=600)
            finally:
                watcher.kill()
                watcher.wait()
            try:
                log = bed.ssh(hosts[CUT_HOST], "cat /var/log/riverbed/storage-4.log", check=False,
                              timeout=60).stdout
                (workdir / "storage-4.log").write_text(log)
                log = bed.ssh(hosts["h1"], "cat /var/log/riverbed/controller-1.log", check=False,
                              timeout=60).stdout
                (workdir / "controller-1.log").write_text(log)
            except Exception as e:  # noqa: BLE001 - logs are a courtesy
                print(f"fetching logs failed: {e}", file=sys.stderr)
    finally:
        dep.failed = True      # keep the logs (the figures' evidence)
        dep.close()
    if verdict.exists():
        v = json.loads(verdict.read_text())
        acks = v.pop("ack_times")
        gaps = [b - a for a, b in zip(acks, acks[1:])]
        v["longest_ack_gap_s"] = round(max(gaps), 2) if gaps else None
        results["producer"] = v
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n")
    print(f"logs kept in {workdir}", file=sys.stderr)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    w = sub.add_parser("watch")
    w.add_argument("--zk", required=True)
    w.add_argument("--topic", required=True)
    ap.add_argument("--repo", type=pathlib.Path, default=HERE.parents[1])
    ap.add_argument("--cuts", default="60,40", help="seconds of each cut (default: %(default)s)")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.cmd == "watch":
        return watch(args)
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
