"""Figures and evidence (issue 24, point 5): the longest gap between acknowledgements per host
during `rolling-restart.yml` on the deployment test bed, with an acks=all producer on the SDK's
defaults, and what every service logged inside each gap.

    sudo .venv/bin/python tests/deploy/rolling_restart_gaps.py [--repo DIR] [--rounds 2] [--hold]

`--repo` is the source tree the hosts install (default: this checkout). Each round runs the
verifying producer (deploy_client.py verify --sdk-defaults, its SDK lines logged) while
rolling-restart.yml restarts every host in turn; per host it prints the longest gap and writes
`gap-r<round>-<host>.txt` in the work dir: every log line of every service (and of the producer)
from a second before the gap to a second after it. `--hold` keeps the deployment after the
rounds and waits for commands written to <work dir>/cmd: `rr` (another round), `upgrade`
(rebuild the wheelhouse from --repo and run upgrade.yml), `quit`. Everything it made is torn
down at the end, pass or fail.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import re
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TOPIC = "rolling"
PARTITIONS = 3       # as the deploy test's topic
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d+)")


def _lines_between(path: pathlib.Path, t0: float, t1: float, label: str) -> list[tuple[float, str]]:
    out = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        m = _STAMP.match(line.lstrip("= "))
        if not m:
            continue
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + \
            float("0." + m.group(2))
        if t0 <= t <= t1:
            out.append((t, f"{label}: {line}"))
    return out


def one_round(dep, n: int, rate: float, partitions: int = 12, producer: str = "defaults") -> dict:
    from deployment import gaps_per_host, restart_windows
    bed, work = dep.bed, dep.workdir
    client = [sys.executable, str(HERE / "deploy_client.py")]
    stop, ready, result = work / f"r{n}.stop", work / f"r{n}.ready", work / f"r{n}.json"
    plog = work / f"r{n}-producer.log"
    since = time.time()
    proc = bed.client_popen(client + [
        "verify", "--bootstrap", dep.bootstrap, "--topic", TOPIC, "--partitions", str(partitions),
        "--out", str(result), "--stop-file", str(stop), "--ready-file", str(ready),
        "--rate", str(rate), "--log-level", "INFO"]
        + (["--sdk-defaults"] if producer == "defaults" else []), plog)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the producer did not start: {plog.read_text()[-2000:]}")
            time.sleep(0.2)
        rr = bed.ansible("rolling-restart.yml", dep.inventory, timeout=1800)
    finally:
        stop.write_text("stop\n")
        proc.wait(timeout=600)
    report = json.loads(result.read_text())
    acks = report.pop("ack_times")
    windows = restart_windows(bed, since)
    gaps = gaps_per_host(windows, acks, report.pop("ack_times_by_partition"))
    for host, g in gaps.items():
        t0, t1 = g["partition_from"] - 1, g["partition_to"] + 1
        lines = _lines_between(plog, t0, t1, "producer")
        for h in bed.hosts:
            for log in sorted(h.private("var-log-riverbed").glob("*.log")):
                lines += _lines_between(log, t0, t1, f"{h.name}/{log.stem}")
        (work / f"gap-r{n}-{host}.txt").write_text(
            f"round {n}, {host}: longest gap {g['gap_s']} s from {g['from']:.3f} to {g['to']:.3f}; "
            f"in one partition {g['partition_gap_s']} s (partition {g['partition']}) from "
            f"{g['partition_from']:.3f} to {g['partition_to']:.3f}\n"
            + "\n".join(line for _, line in sorted(lines)) + "\n")
    out = {"round": n, "producer": producer, "partitions": partitions,
           "rolling_restart_s": round(rr.elapsed_s, 1),
           "gap_s_per_host": {h: g["gap_s"] for h, g in gaps.items()},
           "partition_gap_s_per_host": {h: g["partition_gap_s"] for h, g in gaps.items()},
           **{k: report[k] for k in ("acked", "lost", "duplicates", "out_of_order", "failed")}}
    print(json.dumps(out), flush=True)
    return out


def main() -> int:
    from deploy_testbed import ANSIBLE_DIR, REPO, run
    from deployment import Deployment
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=pathlib.Path, default=REPO)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--partitions", type=int, default=PARTITIONS)
    ap.add_argument("--producers", default="defaults",
                    help="comma-separated, a round each: 'defaults' (acks=all, the SDK's defaults) "
                         "or 'verifier' (one request in flight, 10 s request timeout: the deploy "
                         "test's before issue 24)")
    ap.add_argument("--classic-layout", action="store_true",
                    help="the test bed's layout before issue 24: one gateway, one storage node per host")
    ap.add_argument("--config-omit", default="",
                    help="JSON riverbed_config_omit for an older --repo (e.g. "
                         "'{\"gateway\": [\"listeners\"], \"storage_node\": [\"broker.rack\"]}')")
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    dep = Deployment(repo=args.repo, extra_vars={"riverbed_config_omit": json.loads(args.config_omit)}
                     if args.config_omit else None, classic=args.classic_layout)
    print(f"work dir {dep.workdir}", file=sys.stderr, flush=True)
    rounds = []
    dep.build()
    try:
        dep.site()
        dep.bed.client_run([sys.executable, str(HERE / "deploy_client.py"), "topic", "--bootstrap",
                            dep.bootstrap, "--topic", TOPIC, "--partitions", str(args.partitions),
                            "--replication-factor", "3"], timeout=300)
        dep.wait_healthy()
        for n in range(1, args.rounds + 1):
            for producer in args.producers.split(","):
                rounds.append(one_round(dep, len(rounds) + 1, args.rate, args.partitions, producer))
        cmd = dep.workdir / "cmd"
        while args.hold:
            print(f"holding: write rr, upgrade or quit to {cmd}", file=sys.stderr, flush=True)
            while not cmd.exists():
                time.sleep(1)
            what = cmd.read_text().strip()
            cmd.unlink()
            if what == "quit":
                break
            if what == "upgrade":
                run([str(ANSIBLE_DIR / "files" / "build-wheelhouse.sh"), sys.executable,
                     str(args.repo), str(dep.wheelhouse)], timeout=900)
                dep.bed.ansible("upgrade.yml", dep.inventory, timeout=2400)
                dep.wait_healthy()
                print("upgraded", file=sys.stderr, flush=True)
            elif what == "rr":
                for producer in args.producers.split(","):
                    rounds.append(one_round(dep, len(rounds) + 1, args.rate, args.partitions, producer))
    finally:
        dep.failed = True      # keep the evidence
        dep.close()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"repo": str(args.repo), "rounds": rounds},
                                                      indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
