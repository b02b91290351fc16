"""How long clients stall when their gateway dies (issue 16, point 5), run by hand.

    .venv/bin/python -m loadgen.gateway_failover_bench              # 2 kills per mode
    .venv/bin/python -m loadgen.gateway_failover_bench --kills 3 --json out.json

Starts its own fleet (ZooKeeper, 1 controller, 3 storage nodes, 2 gateways) in a temporary
directory on free ports and stops it at the end (by PID). An idempotent producer sends a
steady stream (`--rate` records/s, acks=all) to a 3-partition topic while an assigned consumer
reads it. Each round SIGKILLs the gateway the consumer is using, then restarts it once the
stream flows again. Figures per round:

- consumer gap: from the SIGKILL to the consumer's first record after it;
- producer gap: from the SIGKILL to the first acknowledgement of a record sent after it.

Two modes, interleaved round by round in the same run: the SDK as shipped (fail fast: socket
monitor + ZMTP heartbeats, riverbed.wire.liveness) and the baseline with `fail_fast=False` on
its channels (the connection loss is only noticed when the request in flight times out,
`--request-timeout-ms`). Prints medians and the ratio baseline / fail-fast.
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import threading
import time
from typing import Any

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors
from riverbed.wire.client import Channel

TOPIC = "gw-failover"
PARTITIONS = 3


class Stream:
    """A producer thread and a consumer thread; timestamps of acks and receipts."""

    def __init__(self, gateways: list[str], rate: int, request_timeout_ms: int, fail_fast: bool):
        factory = functools.partial(Channel, fail_fast=fail_fast)
        self.producer = Producer(bootstrap_servers=gateways, acks="all", enable_idempotence=True,
                                 linger_ms=2, request_timeout_ms=request_timeout_ms,
                                 _channel_factory=factory)
        self.consumer = Consumer(bootstrap_servers=gateways, auto_offset_reset="latest",
                                 fetch_max_wait_ms=100, request_timeout_ms=request_timeout_ms,
                                 _channel_factory=factory)
        self.consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        self.rate = rate
        self.stop = threading.Event()
        self.acked: list[tuple[float, float]] = []      # (sent at, acked at)
        self.received: list[float] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        interval = 1.0 / self.rate
        i = 0
        while not self.stop.is_set():
            sent_at = time.monotonic()
            fut = self.producer.send(TOPIC, b"r%d" % i)
            i += 1

            def done(_md, sent_at=sent_at):
                with self.lock:
                    self.acked.append((sent_at, time.monotonic()))
            fut.add_callback(done)
            time.sleep(interval)

    def _consume(self) -> None:
        while not self.stop.is_set():
            try:
                got = self.consumer.poll(timeout_ms=100)
            except errors.RiverbedError:
                continue
            if got:
                now = time.monotonic()
                with self.lock:
                    self.received.append(now)

    def gateway(self) -> str:
        return str(self.consumer.metrics()["gateway"])

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)
        self.producer.close(timeout=30)
        self.consumer.close()

    def gaps_after(self, kill_at: float, timeout_s: float) -> tuple[float, float]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                c = [t for t in self.received if t > kill_at]
                p = [acked for sent, acked in self.acked if sent > kill_at]
            if c and p:
                return c[0] - kill_at, min(p) - kill_at
            time.sleep(0.02)
        return float("nan"), float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=2, help="rounds per mode (default 2)")
    ap.add_argument("--rate", type=int, default=200, help="records/s sent (default 200)")
    ap.add_argument("--request-timeout-ms", type=int, default=30000,
                    help="the clients' request.timeout.ms (default 30000, the SDK's)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)

    results: dict[str, list[dict[str, float]]] = {"fail_fast": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="gw-failover-") as tmp:
        with Fleet(tmp, free_base_port(), storage_nodes=3, controllers=1, gateways=2) as fleet:
            fleet.up()
            names = {fleet.process(n).endpoint: n for n in fleet.names()
                     if fleet.process(n).role == "gateway"}
            gateways = list(names)
            with Admin(bootstrap_servers=gateways) as admin:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
                deadline = time.monotonic() + 60
                while True:
                    try:
                        (d,) = admin.describe_topics([TOPIC])
                        if all(p.leader >= 0 for p in d.partitions):
                            break
                    except errors.RiverbedError:
                        pass
                    if time.monotonic() > deadline:
                        raise SystemExit("no leaders")
                    time.sleep(0.1)
            for round_no in range(args.kills):
                for mode in ("fail_fast", "baseline"):
                    s = Stream(gateways, args.rate, args.request_timeout_ms, mode == "fail_fast")
                    try:
                        time.sleep(2.0)                 # steady state
                        victim = names[s.gateway()]
                        kill_at = time.monotonic()
                        fleet.stop(victim, kill=True)
                        c_gap, p_gap = s.gaps_after(kill_at, args.request_timeout_ms / 1000 * 3)
                    finally:
                        s.close()
                        fleet.start(victim)
                    results[mode].append({"consumer_gap_s": c_gap, "producer_gap_s": p_gap})
                    print(f"round {round_no + 1} {mode:9s}: killed {victim}; consumer gap "
                          f"{c_gap:.3f} s, producer gap {p_gap:.3f} s", flush=True)

    summary: dict[str, Any] = {"rounds": results}
    for key in ("consumer_gap_s", "producer_gap_s"):
        ff = statistics.median(r[key] for r in results["fail_fast"])
        base = statistics.median(r[key] for r in results["baseline"])
        summary[key] = {"fail_fast": ff, "baseline": base, "ratio_baseline_over_fail_fast":
                        base / ff if ff else float("nan")}
        print(f"{key}: median fail-fast {ff:.3f} s, baseline {base:.3f} s "
              f"(baseline / fail-fast = {base / ff if ff else float('nan'):.1f})")
    print("(the machine may be shared by other workloads: compare the ratio, not the seconds)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
