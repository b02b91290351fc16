"""Failover and replication-cost figures for issue 4, measured on a local fleet (run by hand).

    .venv/bin/python -m loadgen.failover_bench                 # table
    .venv/bin/python -m loadgen.failover_bench --kills 10 --records 200000 --json out.json

Starts its own fleet (ZooKeeper, 2 controllers, 3 storage nodes, 1 gateway; no group roles)
in a temporary directory on free ports, stops it at the end (by PID), and measures:

1. Failover time, per kill: a producer thread sends small acks=all batches (`--batch` records
   of 100 bytes, send_many, waiting for each) to partition 0 of a topic with replication
   factor 3 and min.insync.replicas 2, retrying quickly (`--retry-backoff-ms`, short
   `--request-timeout-ms`). The partition's leader is SIGKILLed; the failover time is from
   just before the SIGKILL to the acknowledgement of the first batch *sent after the old
   leader was gone* (so it can only have been acknowledged by its successor; this adds at
   most one produce round trip). Also: the gap between the last ack before the kill and the
   first ack after. The killed node is restarted and back in the ISR before the next kill.
   The successor is only chosen once ZooKeeper expires the dead node's session, so the
   figure is about `zookeeper.session.timeout.ms` (`--session-timeout-ms`, 6000 like the
   fleet's default) plus election, metadata propagation and the client's retry.
2. Throughput, same fleet, same record count (`--records` of 100 bytes, send_many in chunks
   of about one batch), `--partitions` partitions: acks=all with replication factor 3 and
   min.insync.replicas 2, against acks=1 with replication factor 1. Both producers run
   without idempotence and with 5 requests in flight (idempotence falls back to one request
   per partition when the cluster does not serve INIT_PRODUCER_ID, which would not compare
   like with like). The ratio is records/s(acks=all, RF 3) / records/s(acks=1, RF 1).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

RECORD_BYTES = 100


def _overrides(args) -> dict[str, dict[str, str]]:
    zk = {"zookeeper.session.timeout.ms": str(args.session_timeout_ms)}
    return {
        "storage_node": {**zk, "replica.lag.time.max.ms": str(args.replica_lag_ms),
                         "controlled.shutdown.retry.backoff.ms": "200"},
        "controller": {**zk, "auto.leader.rebalance.enable": "false"},
        "gateway": dict(zk),
    }


def _wait(pred, what: str, timeout_s: float = 120.0, interval_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            v = pred()
        except Exception:  # noqa: BLE001 - the cluster is moving: try again
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


def _partitions(admin, topic: str) -> dict:
    (desc,) = admin.describe_topics([topic])
    return {p.partition: p for p in desc.partitions}


def _zk_leader(zk, topic: str, partition: int = 0) -> int | None:
    """The leader in the partition's state znode (what the controller decided)."""
    from services.common import znodes
    data, _ = zk.get(znodes.partition_state_path(topic, partition))
    return znodes.decode_partition_state(data).leader


def _full_isr(admin, topic: str):
    ps = _partitions(admin, topic)
    return ps if ps and all(p.leader >= 0 and set(p.isr) == set(p.replicas)
                            for p in ps.values()) else None


# --- 1. failover time ---------------------------------------------------------------------

class _Pinger(threading.Thread):
    """Sends `batch` records to one partition, waits for the ack, again; logs (sent, acked)."""

    def __init__(self, bootstrap, topic: str, args):
        super().__init__(daemon=True, name="failover-pinger")
        from riverbed import Producer
        self.producer = Producer(bootstrap, acks="all", linger_ms=0, retries=1_000_000,
                                 retry_backoff_ms=args.retry_backoff_ms,
                                 request_timeout_ms=args.request_timeout_ms,
                                 delivery_timeout_ms=max(120000, args.request_timeout_ms),
                                 max_in_flight_requests_per_connection=1,
                                 enable_idempotence=False)
        self.topic = topic
        self.values = [b"f" * RECORD_BYTES] * args.batch
        self.lock = threading.Lock()
        self.acks: list[tuple[float, float]] = []     # (send start, ack time), monotonic
        self.errors: list[tuple[float, str]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            t0 = time.monotonic()
            futs = self.producer.send_many(self.topic, self.values, partition=0)
            try:
                for f in futs:
                    f.result(timeout=300)
            except Exception as e:  # noqa: BLE001 - counted; the loop goes on
                with self.lock:
                    self.errors.append((time.monotonic(), type(e).__name__))
                continue
            with self.lock:
                self.acks.append((t0, time.monotonic()))

    def first_ack_sent_after(self, t: float) -> float | None:
        with self.lock:
            for sent, acked in self.acks:
                if sent >= t:
                    return acked
        return None

    def last_ack_before(self, t: float) -> float | None:
        with self.lock:
            before = [a for _, a in self.acks if a < t]
        return before[-1] if before else None

    def acks_after(self, t: float) -> int:
        with self.lock:
            return sum(1 for _, a in self.acks if a >= t)

    def stop(self) -> None:
        self.stopping.set()
        self.join(330)
        self.producer.close(timeout=10)


def measure_failover(fleet, admin, args, log) -> list[dict[str, Any]]:
    from riverbed import NewTopic
    topic = "failover-bench"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                  configs={"min.insync.replicas": "2"})])
    _wait(lambda: _full_isr(admin, topic), "a full ISR")
    from services.common import zk as zkmod
    zk = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False)
    pinger = _Pinger([fleet.gateway_endpoint], topic, args)
    pinger.start()
    kills: list[dict[str, Any]] = []
    try:
        for i in range(args.kills):
            _wait(lambda: pinger.acks_after(time.monotonic() - 0.5) >= 3, "steady acks")
            leader = _partitions(admin, topic)[0].leader
            name = f"storage-{leader}"
            t_kill = time.monotonic()
            fleet.stop(name, kill=True)
            t_dead = time.monotonic()
            elected = _wait(lambda: _zk_leader(zk, topic) not in (None, -1, leader) and
                            time.monotonic(), "a new leader in ZooKeeper",
                            timeout_s=args.session_timeout_ms / 1000 + 120, interval_s=0.01)
            acked = _wait(lambda: pinger.first_ack_sent_after(t_dead), "an ack from the successor",
                          timeout_s=args.session_timeout_ms / 1000 + 120)
            successor = _wait(lambda: (lambda p: p.leader if p.leader not in (-1, leader) else None)(
                _partitions(admin, topic)[0]), "the successor in metadata")
            last = pinger.last_ack_before(t_kill)
            row = {"kill": i + 1, "killed": leader, "successor": successor,
                   "failover_ms": round((acked - t_kill) * 1000, 1),
                   "elected_ms": round((elected - t_kill) * 1000, 1),
                   "ack_gap_ms": round((acked - last) * 1000, 1) if last else None}
            kills.append(row)
            log(f"kill {i + 1}: node {leader} -> {successor}: failover {row['failover_ms']} ms "
                f"(leader state written {row['elected_ms']} ms after the kill), "
                f"ack gap {row['ack_gap_ms']} ms")
            fleet.start(name)
            _wait(lambda: _full_isr(admin, topic), f"{name} back in the ISR")
    finally:
        pinger.stop()
        zkmod.close(zk)
    log(f"failover producer: {len(pinger.acks)} batches acked, errors: "
        f"{sorted(set(e for _, e in pinger.errors))} x{len(pinger.errors)}")
    return kills


# --- 2. throughput ------------------------------------------------------------------------

def _throughput(bootstrap, topic: str, acks, args) -> dict[str, Any]:
    from riverbed import Producer
    n, chunk = args.records, max(1, args.batch_size // (RECORD_BYTES + 8))
    values = [(b"%08d" % i).ljust(RECORD_BYTES, b"v") for i in range(chunk)]
    with Producer(bootstrap, acks=acks, linger_ms=args.linger_ms, batch_size=args.batch_size,
                  enable_idempotence=False, max_in_flight_requests_per_connection=5,
                  retries=10) as p:
        p.partitions_for(topic)
        # warm up (connections, metadata, first segment) outside the clock
        for f in p.send_many(topic, values):
            f.result(timeout=60)
        t0 = time.perf_counter()
        futs = []
        sent = 0
        while sent < n:
            k = min(chunk, n - sent)
            futs += p.send_many(topic, values[:k])
            sent += k
        p.flush(timeout=600)
        elapsed = time.perf_counter() - t0
        not_done = sum(1 for f in futs if not f.done())
        failed = sum(1 for f in futs if f.done() and f.failed())
    if not_done or failed:
        raise RuntimeError(f"{topic}: {failed} batches failed, {not_done} not done after flush")
    stored = _stored_records(bootstrap, topic)
    if stored != n + len(values):          # the warm-up chunk too
        raise RuntimeError(f"{topic}: {stored} records stored, {n + len(values)} acknowledged")
    return {"records": n, "seconds": round(elapsed, 3), "records_per_s": round(n / elapsed),
            "mb_per_s": round(n * RECORD_BYTES / elapsed / 1e6, 2)}


def _stored_records(bootstrap, topic: str) -> int:
    """Sum of the high watermarks of the topic's partitions (fresh topic: its record count)."""
    from riverbed import Consumer, TopicPartition
    with Consumer(bootstrap=bootstrap) as c:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        return sum(c.end_offsets(tps).values())


def measure_throughput(fleet, admin, args, log) -> dict[str, Any]:
    from riverbed import NewTopic
    bootstrap = [fleet.gateway_endpoint]
    runs: dict[str, list[dict]] = {"all_rf3": [], "one_rf1": []}
    for r in range(args.repeats):
        t_all, t_one = f"tput-all-rf3-{r}", f"tput-one-rf1-{r}"
        admin.create_topics([
            NewTopic(t_all, num_partitions=args.partitions, replication_factor=3,
                     configs={"min.insync.replicas": "2"}),
            NewTopic(t_one, num_partitions=args.partitions, replication_factor=1)])
        _wait(lambda: _full_isr(admin, t_all) and _full_isr(admin, t_one), "leaders")
        order = [("one_rf1", t_one, 1), ("all_rf3", t_all, "all")]
        if r % 2:
            order.reverse()
        for key, topic, acks in order:
            res = _throughput(bootstrap, topic, acks, args)
            runs[key].append(res)
            log(f"throughput {key} (repeat {r + 1}): {res}")
    med = {k: statistics.median(x["records_per_s"] for x in v) for k, v in runs.items()}
    return {"runs": runs, "median_records_per_s": med,
            "ratio_all_rf3_over_one_rf1": round(med["all_rf3"] / med["one_rf1"], 3)}


# --- main ---------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(prog="failover_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=10, help="leader kills (default 10)")
    ap.add_argument("--batch", type=int, default=10, help="records per failover batch (10)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000,
                    help="zookeeper.session.timeout.ms of every service (6000, the fleet default;"
                         " the ZooKeeper server allows 4000..40000)")
    ap.add_argument("--replica-lag-ms", type=int, default=2000, help="replica.lag.time.max.ms")
    ap.add_argument("--retry-backoff-ms", type=int, default=20)
    ap.add_argument("--request-timeout-ms", type=int, default=1500)
    ap.add_argument("--records", type=int, default=500_000, help="records per throughput run")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of the throughput topics")
    ap.add_argument("--batch-size", type=int, default=16384)
    ap.add_argument("--linger-ms", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=3, help="throughput pairs (median reported)")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--data-dir", help="fleet directory (default: a temporary one)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON ('-': stdout)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from deploy.fleet import Fleet, free_base_port
    from riverbed import Admin

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    data_dir = args.data_dir or tempfile.mkdtemp(prefix="failover-bench-")
    out: dict[str, Any] = {"conditions": {
        "fleet": "ZooKeeper, 2 controllers, 3 storage nodes, 1 gateway on 127.0.0.1",
        "session_timeout_ms": args.session_timeout_ms, "replica_lag_ms": args.replica_lag_ms,
        "record_bytes": RECORD_BYTES, "failover_batch": args.batch,
        "retry_backoff_ms": args.retry_backoff_ms, "request_timeout_ms": args.request_timeout_ms,
        "throughput_records": args.records, "throughput_partitions": args.partitions,
        "batch_size": args.batch_size, "linger_ms": args.linger_ms, "cpus": _cpus(),
        "data_dir": data_dir}}
    with Fleet(data_dir, free_base_port(), storage_nodes=3, controllers=2, gateways=1,
               counts={"group_coordinator": 0, "offset_manager": 0},
               config_overrides=_overrides(args)) as fleet:
        fleet.up()
        log(f"fleet up in {data_dir} (gateway {fleet.gateway_endpoint})")
        with Admin([fleet.gateway_endpoint], request_timeout_ms=30000) as admin:
            if not args.skip_throughput:
                out["throughput"] = measure_throughput(fleet, admin, args, log)
            if not args.skip_failover:
                kills = measure_failover(fleet, admin, args, log)
                times = [k["failover_ms"] for k in kills]
                el = [k["elected_ms"] for k in kills]
                out["failover"] = {"kills": kills, "median_ms": statistics.median(times),
                                   "worst_ms": max(times), "best_ms": min(times),
                                   "elected_median_ms": statistics.median(el),
                                   "elected_worst_ms": max(el)}
    print_table(out)
    if args.json:
        text = json.dumps(out, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0


def _cpus() -> int:
    import os
    return len(os.sched_getaffinity(0))


def print_table(out: dict[str, Any]) -> None:
    c = out["conditions"]
    print(f"conditions: {c['fleet']}, {c['cpus']} CPUs; zookeeper.session.timeout.ms "
          f"{c['session_timeout_ms']}, replica.lag.time.max.ms {c['replica_lag_ms']}")
    if "failover" in out:
        fo = out["failover"]
        print(f"\nfailover (SIGKILL of the leader -> first acks=all batch acknowledged by its "
              f"successor; {c['failover_batch']} x {c['record_bytes']} B batches, retry backoff "
              f"{c['retry_backoff_ms']} ms, request timeout {c['request_timeout_ms']} ms)")
        print(f"{'kill':>4}  {'killed':>6}  {'successor':>9}  {'failover ms':>11}  "
              f"{'elected ms':>10}  {'ack gap ms':>10}")
        for k in fo["kills"]:
            print(f"{k['kill']:>4}  {k['killed']:>6}  {k['successor']:>9}  {k['failover_ms']:>11}  "
                  f"{k['elected_ms']:>10}  "
                  f"{k['ack_gap_ms'] if k['ack_gap_ms'] is not None else '-':>10}")
        print(f"failover: median {fo['median_ms']} ms, worst {fo['worst_ms']} ms, best "
              f"{fo['best_ms']} ms over {len(fo['kills'])} kills; new leader state in ZooKeeper: "
              f"median {fo['elected_median_ms']} ms, worst {fo['elected_worst_ms']} ms")
        print("(elected ms: the partition state znode names the successor; failover ms - "
              "elected ms is LEADER_AND_ISR + metadata to the gateway + the client's retry)")
    if "throughput" in out:
        tp = out["throughput"]
        print(f"\nthroughput ({c['throughput_records']} records of {c['record_bytes']} B, "
              f"{c['throughput_partitions']} partitions, send_many, batch.size {c['batch_size']}, "
              f"linger.ms {c['linger_ms']}, 5 in flight, no idempotence)")
        print(f"{'mode':<34} {'records/s':>10} {'MB/s':>7} {'seconds':>8}")
        labels = {"all_rf3": "acks=all, RF 3, min.insync 2", "one_rf1": "acks=1, RF 1"}
        for key, runs in tp["runs"].items():
            for r in runs:
                print(f"{labels[key]:<34} {r['records_per_s']:>10} {r['mb_per_s']:>7} "
                      f"{r['seconds']:>8}")
        print(f"ratio acks=all RF 3 / acks=1 RF 1 (median records/s): "
              f"{tp['ratio_all_rf3_over_one_rf1']}")


if __name__ == "__main__":
    sys.exit(main())
