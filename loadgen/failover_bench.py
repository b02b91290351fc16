"""Failover and replication-cost figures (issues 4 and 15), measured on a local fleet.

    .venv/bin/python -m loadgen.failover_bench                 # table
    .venv/bin/python -m loadgen.failover_bench --kills 10 --records 200000 --json out.json
    # issue 15: before/after in one run, SDK defaults, spurious leader changes under load
    .venv/bin/python -m loadgen.failover_bench --skip-throughput --modes zk,heartbeat \\
        --client-defaults --kills 5 --sustain-s 120

Starts its own fleet (ZooKeeper, 2 controllers, 3 storage nodes, 1 gateway; no group roles)
per failure-detection mode (`--modes`: "heartbeat", the default configuration, and/or "zk",
ZooKeeper's session alone with broker.session.timeout.ms=0) in a temporary directory on free
ports, stops it at the end (by PID), and measures:

1. Failover time, per kill: one producer thread per partition (`--failover-partitions`, RF 3,
   min.insync.replicas 2) sends small acks=all batches (`--batch` records of 100 bytes,
   send_many, waiting for each), with the SDK's defaults (`--client-defaults`) or retrying
   quickly (`--retry-backoff-ms`, short `--request-timeout-ms`). The leader of partition 0 is
   SIGKILLed; for every partition it led, the failover time is from just before the SIGKILL
   to the acknowledgement of the first batch *sent after the old leader was gone* (so it can
   only have been acknowledged by a successor; this adds at most one produce round trip).
   The killed node is restarted and back in the ISR before the next kill. With heartbeats the
   successor is chosen once the controller has not heard from the node for
   broker.session.timeout.ms (2000); with "zk" once ZooKeeper expires its session
   (`--session-timeout-ms`, 6000 like the fleet's default).
1b. `--sustain-s S` (heartbeat mode): S seconds of full acks=all load with no fault; every
   leader change seen in ZooKeeper is spurious and counted.
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
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

RECORD_BYTES = 100


# Failure detection per mode: "heartbeat" is the default (BROKER_HEARTBEAT every
# broker.heartbeat.interval.ms, fenced after broker.session.timeout.ms, beside the ZooKeeper
# session); "zk" is ZooKeeper's session alone (the state before heartbeats), the baseline.
MODES = ("zk", "heartbeat")


def _overrides(args, mode: str = "heartbeat") -> dict[str, dict[str, str]]:
    zk = {"zookeeper.session.timeout.ms": str(args.session_timeout_ms)}
    node = {**zk, "replica.lag.time.max.ms": str(args.replica_lag_ms),
            "controlled.shutdown.retry.backoff.ms": "200"}
    controller = {**zk, "auto.leader.rebalance.enable": "false"}
    if mode == "zk":
        node["broker.heartbeat.interval.ms"] = "0"
        controller["broker.session.timeout.ms"] = "0"
    return {"storage_node": node, "controller": controller, "gateway": dict(zk)}


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

    def __init__(self, bootstrap, topic: str, args, partition: int = 0):
        super().__init__(daemon=True, name=f"failover-pinger-{partition}")
        from riverbed import Producer
        if args.client_defaults:
            # The SDK's defaults (idempotent, request.timeout.ms 30000, retry.backoff.ms 100...)
            self.producer = Producer(bootstrap, acks="all")
        else:
            self.producer = Producer(bootstrap, acks="all", linger_ms=0, retries=1_000_000,
                                     retry_backoff_ms=args.retry_backoff_ms,
                                     request_timeout_ms=args.request_timeout_ms,
                                     delivery_timeout_ms=max(120000, args.request_timeout_ms),
                                     max_in_flight_requests_per_connection=1,
                                     enable_idempotence=False)
        self.topic = topic
        self.partition = partition
        self.values = [b"f" * RECORD_BYTES] * args.batch
        self.lock = threading.Lock()
        self.acks: list[tuple[float, float]] = []     # (send start, ack time), monotonic
        self.errors: list[tuple[float, str]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            t0 = time.monotonic()
            futs = self.producer.send_many(self.topic, self.values, partition=self.partition)
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


def _zk_states(zk, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """partition -> (leader, leader_epoch) from the state znodes."""
    from services.common import znodes
    out = {}
    for p in range(partitions):
        data, _ = zk.get(znodes.partition_state_path(topic, p))
        st = znodes.decode_partition_state(data)
        out[p] = (st.leader, st.leader_epoch)
    return out


def measure_failover(fleet, admin, args, log) -> list[dict[str, Any]]:
    """SIGKILL the leader of partition 0, `--kills` times; for every partition the killed node
    led, the time from the kill to the first acks=all ack of a batch sent after the kill."""
    from riverbed import NewTopic
    topic = "failover-bench"
    n = args.failover_partitions
    admin.create_topics([NewTopic(topic, num_partitions=n, replication_factor=3,
                                  configs={"min.insync.replicas": "2"})])
    _wait(lambda: _full_isr(admin, topic), "a full ISR")
    from services.common import zk as zkmod
    zk = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False)
    pingers = [_Pinger([fleet.gateway_endpoint], topic, args, p) for p in range(n)]
    for pinger in pingers:
        pinger.start()
    kills: list[dict[str, Any]] = []
    try:
        for i in range(args.kills):
            _wait(lambda: all(pg.acks_after(time.monotonic() - 1.0) >= 2 for pg in pingers),
                  "steady acks on every partition")
            states = _zk_states(zk, topic, n)
            leader = states[0][0]
            led = sorted(p for p, (ld, _) in states.items() if ld == leader)
            name = f"storage-{leader}"
            t_kill = time.monotonic()
            fleet.stop(name, kill=True)
            t_dead = time.monotonic()
            elected = _wait(lambda: all(_zk_states(zk, topic, n)[p][0] not in (-1, leader)
                                        for p in led) and time.monotonic(),
                            "new leaders in ZooKeeper",
                            timeout_s=args.session_timeout_ms / 1000 + 120, interval_s=0.01)
            per_partition = {}
            for p in led:
                acked = _wait(lambda: pingers[p].first_ack_sent_after(t_dead),
                              f"an ack from partition {p}'s successor",
                              timeout_s=args.session_timeout_ms / 1000 + 180)
                per_partition[p] = round((acked - t_kill) * 1000, 1)
            successor = _wait(lambda: (lambda q: q.leader if q.leader not in (-1, leader) else None)(
                _partitions(admin, topic)[0]), "the successor in metadata")
            last = pingers[0].last_ack_before(t_kill)
            acked0 = pingers[0].first_ack_sent_after(t_dead)
            row = {"kill": i + 1, "killed": leader, "successor": successor,
                   "partitions_led": led, "per_partition_ms": per_partition,
                   "failover_ms": max(per_partition.values()),
                   "elected_ms": round((elected - t_kill) * 1000, 1),
                   "ack_gap_ms": round((acked0 - last) * 1000, 1) if last else None}
            kills.append(row)
            log(f"kill {i + 1}: node {leader} (led {led}) -> {successor}: first acks=all ack per "
                f"partition {per_partition} ms (all new leaders written {row['elected_ms']} ms "
                f"after the kill)")
            fleet.start(name)
            _wait(lambda: _full_isr(admin, topic), f"{name} back in the ISR")
    finally:
        for pinger in pingers:
            pinger.stopping.set()
        for pinger in pingers:
            pinger.stop()
        zkmod.close(zk)
    errs = [e for pg in pingers for _, e in pg.errors]
    log(f"failover producers: {sum(len(pg.acks) for pg in pingers)} batches acked, errors: "
        f"{sorted(set(errs))} x{len(errs)}")
    return kills


def measure_leader_changes(fleet, admin, args, log) -> dict[str, Any]:
    """Full load (acks=all, RF 3, `--partitions` partitions, as fast as it goes) for
    `--sustain-s` seconds without any fault; every leader change seen in ZooKeeper (polled
    every 100 ms, all partitions of the topic) is spurious."""
    from riverbed import NewTopic, Producer
    from services.common import zk as zkmod
    topic = "sustain-bench"
    n = args.partitions
    admin.create_topics([NewTopic(topic, num_partitions=n, replication_factor=3,
                                  configs={"min.insync.replicas": "2",
                                           "retention.bytes": str(256 * 1024 * 1024)})])
    _wait(lambda: _full_isr(admin, topic), "a full ISR")
    zk = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False)
    stop = threading.Event()
    sent = [0]

    def load():
        values = [b"s" * RECORD_BYTES] * 1000
        with Producer([fleet.gateway_endpoint], acks="all") as p:
            while not stop.is_set():
                futs = p.send_many(topic, values)
                sent[0] += len(values)
                if len(futs) and sent[0] % 20000 == 0:
                    futs[-1].result(timeout=120)      # bound what is buffered
            p.flush(timeout=120)

    loaders = [threading.Thread(target=load, daemon=True) for _ in range(args.sustain_producers)]
    first = _zk_states(zk, topic, n)
    prev = dict(first)
    changes = 0
    t0 = time.monotonic()
    for th in loaders:
        th.start()
    try:
        while time.monotonic() - t0 < args.sustain_s:
            time.sleep(0.1)
            cur = _zk_states(zk, topic, n)
            for p, (ld, ep) in cur.items():
                if ld != prev[p][0]:
                    changes += 1
                    log(f"spurious leader change: {topic}-{p} {prev[p]} -> {(ld, ep)}")
            prev = cur
    finally:
        stop.set()
        for th in loaders:
            th.join(180)
        zkmod.close(zk)
    elapsed = time.monotonic() - t0
    epochs = sum(prev[p][1] - first[p][1] for p in prev)
    res = {"seconds": round(elapsed, 1), "partitions": n, "producers": args.sustain_producers,
           "records_sent": sent[0], "records_per_s": round(sent[0] / elapsed),
           "leader_changes": changes, "leader_epoch_bumps": epochs}
    log(f"sustained load: {res}")
    return res


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
    ap.add_argument("--failover-partitions", type=int, default=6,
                    help="partitions (RF 3) of the failover topic, one acks=all pinger each (6)")
    ap.add_argument("--client-defaults", action="store_true",
                    help="failover pingers use the SDK's producer defaults (idempotent, "
                         "request.timeout.ms 30000, retry.backoff.ms 100) instead of the tuned "
                         "--retry-backoff-ms/--request-timeout-ms")
    ap.add_argument("--modes", default="heartbeat",
                    help="comma-separated failure-detection modes, each on its own fleet: "
                         "'heartbeat' (the default config) and/or 'zk' (ZooKeeper's session "
                         "only: broker.session.timeout.ms=0, the baseline) (heartbeat)")
    ap.add_argument("--sustain-s", type=float, default=0,
                    help="also run full acks=all load this long without faults and count leader "
                         "changes (spurious ones), in the heartbeat mode (0: skip)")
    ap.add_argument("--sustain-producers", type=int, default=2,
                    help="producer threads of the sustained load (2)")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--data-dir", help="fleet directory, kept after the run (default: a "
                    "temporary one, removed at the end)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON ('-': stdout)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise SystemExit(f"unknown --modes {bad}; choose from {MODES}")
    root = args.data_dir or tempfile.mkdtemp(prefix="failover-bench-")
    out: dict[str, Any] = {"conditions": {
        "fleet": "ZooKeeper, 2 controllers, 3 storage nodes, 1 gateway on 127.0.0.1",
        "session_timeout_ms": args.session_timeout_ms, "replica_lag_ms": args.replica_lag_ms,
        "record_bytes": RECORD_BYTES, "failover_batch": args.batch,
        "failover_partitions": args.failover_partitions,
        "client": "SDK defaults" if args.client_defaults else
                  f"retry backoff {args.retry_backoff_ms} ms, request timeout "
                  f"{args.request_timeout_ms} ms, no idempotence, 1 in flight",
        "retry_backoff_ms": args.retry_backoff_ms, "request_timeout_ms": args.request_timeout_ms,
        "throughput_records": args.records, "throughput_partitions": args.partitions,
        "batch_size": args.batch_size, "linger_ms": args.linger_ms, "cpus": _cpus(),
        "data_dir": root if args.data_dir else f"{root} (removed after the run)"},
        "modes": {}}
    try:
        _run_modes(args, modes, root, out, log)
    finally:
        if not args.data_dir:
            # 600 s of full load leaves gigabytes of logs: a temporary fleet goes with its run,
            # or a few runs fill the disk under everything else (as loadgen.scale's once did)
            shutil.rmtree(root, ignore_errors=True)
    print_table(out)
    if args.json:
        text = json.dumps(out, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0


def _run_modes(args, modes: list[str], root: str, out: dict[str, Any], log) -> None:
    from deploy.fleet import Fleet, free_base_port
    from riverbed import Admin
    for mode in modes:
        data_dir = f"{root}/{mode}"
        res: dict[str, Any] = {}
        out["modes"][mode] = res
        with Fleet(data_dir, free_base_port(), storage_nodes=3, controllers=2, gateways=1,
                   counts={"group_coordinator": 0, "offset_manager": 0},
                   config_overrides=_overrides(args, mode)) as fleet:
            fleet.up()
            log(f"[{mode}] fleet up in {data_dir} (gateway {fleet.gateway_endpoint})")
            with Admin([fleet.gateway_endpoint], request_timeout_ms=30000) as admin:
                if not args.skip_throughput:
                    res["throughput"] = measure_throughput(fleet, admin, args, log)
                if args.sustain_s > 0 and mode == "heartbeat":   # only heartbeats can fence
                    res["sustain"] = measure_leader_changes(fleet, admin, args, log)
                if not args.skip_failover:
                    kills = measure_failover(fleet, admin, args, log)
                    times = [t for k in kills for t in k["per_partition_ms"].values()]
                    el = [k["elected_ms"] for k in kills]
                    res["failover"] = {"kills": kills, "partition_failovers": len(times),
                                       "median_ms": statistics.median(times),
                                       "worst_ms": max(times), "best_ms": min(times),
                                       "elected_median_ms": statistics.median(el),
                                       "elected_worst_ms": max(el)}
        if not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)     # the next mode's fleet has room


def _cpus() -> int:
    import os
    return len(os.sched_getaffinity(0))


def print_table(out: dict[str, Any]) -> None:
    c = out["conditions"]
    print(f"conditions: {c['fleet']}, {c['cpus']} CPUs; zookeeper.session.timeout.ms "
          f"{c['session_timeout_ms']}, replica.lag.time.max.ms {c['replica_lag_ms']}")
    for mode, res in out["modes"].items():
        detection = ("ZooKeeper session only (broker.session.timeout.ms=0)" if mode == "zk" else
                     "heartbeats to the controller (defaults) beside the ZooKeeper session")
        print(f"\n=== mode {mode}: {detection}")
        if "failover" in res:
            fo = res["failover"]
            print(f"failover (SIGKILL of a leader -> first acks=all batch acknowledged by the "
                  f"successor, per partition it led; {c['failover_partitions']} partitions RF 3, "
                  f"{c['failover_batch']} x {c['record_bytes']} B batches; client: {c['client']})")
            print(f"{'kill':>4}  {'killed':>6}  {'successor':>9}  {'elected ms':>10}  "
                  f"per partition ms")
            for k in fo["kills"]:
                print(f"{k['kill']:>4}  {k['killed']:>6}  {k['successor']:>9}  "
                      f"{k['elected_ms']:>10}  {k['per_partition_ms']}")
            print(f"failover: median {fo['median_ms']} ms, worst {fo['worst_ms']} ms, best "
                  f"{fo['best_ms']} ms over {fo['partition_failovers']} partition failovers "
                  f"({len(fo['kills'])} kills); all new leaders in ZooKeeper: median "
                  f"{fo['elected_median_ms']} ms, worst {fo['elected_worst_ms']} ms")
        if "sustain" in res:
            su = res["sustain"]
            print(f"sustained full load without faults: {su['seconds']} s, {su['partitions']} "
                  f"partitions RF 3 acks=all, {su['producers']} producers, "
                  f"{su['records_per_s']} records/s: leader changes {su['leader_changes']}, "
                  f"leader epoch bumps {su['leader_epoch_bumps']}")
        if "throughput" in res:
            tp = res["throughput"]
            print(f"throughput ({c['throughput_records']} records of {c['record_bytes']} B, "
                  f"{c['throughput_partitions']} partitions, send_many, batch.size "
                  f"{c['batch_size']}, linger.ms {c['linger_ms']}, 5 in flight, no idempotence)")
            print(f"{'mode':<34} {'records/s':>10} {'MB/s':>7} {'seconds':>8}")
            labels = {"all_rf3": "acks=all, RF 3, min.insync 2", "one_rf1": "acks=1, RF 1"}
            for key, runs in tp["runs"].items():
                for r in runs:
                    print(f"{labels[key]:<34} {r['records_per_s']:>10} {r['mb_per_s']:>7} "
                          f"{r['seconds']:>8}")
            print(f"ratio acks=all RF 3 / acks=1 RF 1 (median records/s): "
                  f"{tp['ratio_all_rf3_over_one_rf1']}")
    fos = {m: r["failover"] for m, r in out["modes"].items() if "failover" in r}
    if "zk" in fos and "heartbeat" in fos:
        print(f"\nfailover median heartbeat/zk: "
              f"{fos['heartbeat']['median_ms'] / fos['zk']['median_ms']:.2f}, worst "
              f"{fos['heartbeat']['worst_ms'] / fos['zk']['worst_ms']:.2f} (same run)")


if __name__ == "__main__":
    sys.exit(main())
