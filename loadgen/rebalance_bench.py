"""Consumption through a rebalance, eager against cooperative (KIP-429), on a local fleet.

    .venv/bin/python -m loadgen.rebalance_bench                   # eager and cooperative, table
    .venv/bin/python -m loadgen.rebalance_bench --rounds 2 --rate 1200 --json out.json
    .venv/bin/python -m loadgen.rebalance_bench member BOOTSTRAP TOPIC GROUP --strategy S

Starts its own fleet (ZooKeeper, a controller, 3 storage nodes, group coordinator, offset
manager, a gateway) on free ports in a temporary directory and stops it at the end (by PID).
Per strategy (`sticky`, eager, and `cooperative-sticky`: the same target assignment, the
protocol differs), in the same run, on the same fleet: a producer thread writes `--rate`
records/s spread over a 12-partition topic; three members (each its own process, `member` mode
below) share it, 4 partitions each; after `--baseline-s` seconds a fourth member joins. The
figure is the records/s consumed from the partitions that do not move (the same owner before and
after) during the rebalance -- from the first member that reacts (revokes, or starts a
cooperative join) to the last assignment change -- against the `--baseline-s` seconds before
the fourth member starts. Eager members revoke everything and stop while the group rejoins;
cooperative ones keep fetching what they keep.

`member` mode (also used by tests/integration/test_cooperative_rebalance.py) prints one line per
event, flushed at once, with time.monotonic() (CLOCK_MONOTONIC: one clock for all processes):

    ASSIGNED <t> p,p,..     the listener's on_partitions_assigned (cooperative: only the added)
    REVOKED <t> p,p,..      on_partitions_revoked
    LOST <t> p,p,..         on_partitions_lost
    JOINING <t>             a cooperative join of this member started (seen after a poll)
    R <t> <p> <count> <joining>   records of partition p returned by one poll; joining=1 while a
                            cooperative join of this member was in flight (it kept fetching)
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

PARTITIONS = 12
SESSION_TIMEOUT_MS = 6000        # the coordinator's group.min.session.timeout.ms
HEARTBEAT_MS = 1000


# ------------------------------------------------------------------------------- member mode

def member_main(argv: list[str]) -> int:
    from riverbed import Consumer
    from riverbed.consumer_groups import ConsumerRebalanceListener

    ap = argparse.ArgumentParser(prog="rebalance_bench member")
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("group")
    ap.add_argument("--strategy", default="cooperative-sticky")
    args = ap.parse_args(argv)
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))

    def emit(kind: str, tps) -> None:
        parts = ",".join(str(tp.partition) for tp in sorted(tps))
        print(f"{kind} {time.monotonic():.4f} {parts}", flush=True)

    class Printer(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            emit("ASSIGNED", assigned)

        def on_partitions_revoked(self, revoked):
            emit("REVOKED", revoked)

        def on_partitions_lost(self, lost):
            emit("LOST", lost)

    c = Consumer(bootstrap_servers=args.bootstrap, group_id=args.group,
                 client_id=f"rebalance-member-{os.getpid()}", auto_offset_reset="latest",
                 fetch_max_wait_ms=100, session_timeout_ms=SESSION_TIMEOUT_MS,
                 heartbeat_interval_ms=HEARTBEAT_MS, partition_assignment_strategy=args.strategy)
    c.subscribe([args.topic], listener=Printer())
    group = c._group
    assert group is not None
    was_joining = 0
    try:
        while not stop:
            batch = c.poll(timeout_ms=100)
            joining = int(group.join_in_flight)
            now = time.monotonic()
            if joining and not was_joining:
                print(f"JOINING {now:.4f}", flush=True)
            was_joining = joining
            if batch:
                print("\n".join(f"R {now:.4f} {tp.partition} {len(recs)} {joining}"
                                for tp, recs in batch.items()), flush=True)
    finally:
        c.close()
    return 0


class MemberProc:
    """A member process; its output parsed on a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, strategy: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loadgen.rebalance_bench", "member", bootstrap, topic, group,
             "--strategy", strategy], stdout=subprocess.PIPE, text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.lock = threading.Lock()
        self.events: list[tuple[str, float, frozenset[int]]] = []
        self.records: list[tuple[float, int, int, int]] = []     # (t, partition, count, joining)
        self.owned: set[int] = set()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if not parts:
                continue
            with self.lock:
                if parts[0] == "R":
                    self.records.append((float(parts[1]), int(parts[2]), int(parts[3]),
                                         int(parts[4])))
                elif parts[0] in ("ASSIGNED", "REVOKED", "LOST", "JOINING"):
                    tps = frozenset(int(p) for p in parts[2].split(",")) if len(parts) > 2 \
                        else frozenset()
                    self.events.append((parts[0], float(parts[1]), tps))
                    if parts[0] == "ASSIGNED":
                        self.owned |= tps
                    else:
                        self.owned -= tps

    def snapshot(self) -> tuple[set[int], list, list]:
        with self.lock:
            return set(self.owned), list(self.events), list(self.records)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=10)


class PacedProducer(threading.Thread):
    """`rate` records/s, round-robin over the partitions, until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float, partitions: int = PARTITIONS):
        super().__init__(daemon=True, name="rebalance-bench-producer")
        from riverbed import Producer
        self.producer = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
        self.topic, self.rate, self.partitions = topic, rate, partitions
        self.stopping = threading.Event()
        self.sent = 0

    def run(self) -> None:
        start = time.monotonic()
        while not self.stopping.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while self.sent < due:
                self.producer.send(self.topic, b"x" * 100, partition=self.sent % self.partitions)
                self.sent += 1
            time.sleep(0.005)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)
        self.producer.close(timeout=30)


def wait_until(pred, what: str, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def balanced(members: list[MemberProc], partitions: int = PARTITIONS) -> bool:
    owned = [m.snapshot()[0] for m in members]
    each = partitions // len(members)
    union: set[int] = set().union(*owned)
    return union == set(range(partitions)) and all(len(o) == each for o in owned) and \
        sum(map(len, owned)) == partitions


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from riverbed import Admin, NewTopic
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])

        def ready() -> bool:
            try:
                (d,) = admin.describe_topics([topic])
                return len(d.partitions) == partitions and all(p.leader >= 0 for p in d.partitions)
            except Exception:  # noqa: BLE001 - not there yet
                return False
        wait_until(ready, f"{topic} leaders", 60)


def measure(bootstrap: str, strategy: str, *, rate: float, baseline_s: float,
            tag: str) -> dict[str, Any]:
    """One rebalance: three members, then a fourth; the kept partitions' records/s."""
    topic, group = f"rb-{tag}", f"rb-group-{tag}"
    create_topic(bootstrap, topic)
    producer = PacedProducer(bootstrap, topic, rate)
    producer.start()
    members: list[MemberProc] = []
    try:
        members = [MemberProc(bootstrap, topic, group, strategy) for _ in range(3)]
        wait_until(lambda: balanced(members), "three members with 4 partitions each")
        # records flowing on every partition before the clock starts
        wait_until(lambda: {p for m in members for _, p, _, _ in m.snapshot()[2]}
                   == set(range(PARTITIONS)), "records on every partition")
        time.sleep(baseline_s)
        before_owner = {p: i for i, m in enumerate(members) for p in m.snapshot()[0]}
        t_join = time.monotonic()
        members.append(MemberProc(bootstrap, topic, group, strategy))
        wait_until(lambda: balanced(members), "four members with 3 partitions each")
        time.sleep(2 * HEARTBEAT_MS / 1000.0)   # any late event of the rebalance shows up
        snaps = [m.snapshot() for m in members]
        t_stable = max(t for _, events, _ in snaps for kind, t, _ in events
                       if t >= t_join and kind != "JOINING")
        t_start = min((t for _, events, _ in snaps[:3] for kind, t, _ in events
                       if t >= t_join and kind in ("REVOKED", "JOINING", "LOST")), default=t_join)
        after_owner = {p: i for i, (owned, _, _) in enumerate(snaps) for p in owned}
        kept = {p for p, i in before_owner.items() if after_owner.get(p) == i}

        def kept_records(a: float, b: float) -> int:
            return sum(n for i, (_, _, recs) in enumerate(snaps)
                       for t, p, n, _ in recs if a <= t < b and p in kept
                       and before_owner.get(p) == i)
        before = kept_records(t_join - baseline_s, t_join) / baseline_s
        during_s = max(t_stable - t_start, 1e-3)
        during = kept_records(t_start, t_stable) / during_s
        joining_recs = sum(n for _, _, recs in snaps for _, p, n, j in recs if j and p in kept)
        revoked = sorted(p for _, events, _ in snaps for kind, t, tps in events
                         if kind == "REVOKED" and t >= t_join for p in tps)
        return {"strategy": strategy, "kept_partitions": len(kept),
                "records_per_s_before": round(before, 1), "records_per_s_during": round(during, 1),
                "ratio": round(during / before, 3) if before else None,
                "rebalance_s": round(during_s, 3), "revocations": len(revoked),
                "kept_records_while_joining": joining_recs}
    finally:
        for m in members:
            m.stop()
        producer.stop()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["member"]:
        return member_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m loadgen.rebalance_bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=1200.0, help="records/s produced (all partitions)")
    ap.add_argument("--baseline-s", type=float, default=4.0,
                    help="seconds measured before the fourth member joins")
    ap.add_argument("--rounds", type=int, default=1, help="eager/cooperative pairs, interleaved")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    from deploy.fleet import Fleet, free_base_port
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rebalance-bench-") as tmp:
        fleet = Fleet(tmp, free_base_port(), storage_nodes=3, controllers=1, gateways=1)
        try:
            fleet.up()
            bootstrap = fleet.gateway_endpoint
            assert bootstrap is not None
            for r in range(args.rounds):
                for strategy in ("sticky", "cooperative-sticky"):
                    res = measure(bootstrap, strategy, rate=args.rate, baseline_s=args.baseline_s,
                                  tag=f"{r}-{strategy}")
                    results.append(res)
                    print(json.dumps(res), file=sys.stderr, flush=True)
        finally:
            fleet.down()
    print(f"{'strategy':<20} {'kept':>4} {'rec/s before':>12} {'rec/s during':>12} "
          f"{'ratio':>6} {'rebalance s':>11} {'revoked':>7}")
    for res in results:
        print(f"{res['strategy']:<20} {res['kept_partitions']:>4} "
              f"{res['records_per_s_before']:>12} {res['records_per_s_during']:>12} "
              f"{res['ratio']!s:>6} {res['rebalance_s']:>11} {res['revocations']:>7}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rate": args.rate, "baseline_s": args.baseline_s, "results": results},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
