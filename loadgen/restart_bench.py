"""How fast a restarted storage node serves again (issue 24, point 1), on a local fleet.

    .venv/bin/python -m loadgen.restart_bench                  # 5 rounds, table
    .venv/bin/python -m loadgen.restart_bench --rounds 10 --json out.json

Starts its own fleet in a temporary directory on free ports (ZooKeeper, 2 controllers, 3 storage
nodes, 1 gateway, CURVE as `riverbed fleet up` runs it; no group roles) and stops it at the end
(by PID). Each round, as an operator would:

1. creates a topic of `--partitions` partitions, replication factor 3, and writes one record to
   each partition (acks=all), so the node has a little to catch up;
2. `fleet stop storage-3` (SIGTERM: a controlled shutdown moves its leaderships away first);
3. `fleet start storage-3`; from the moment the process is spawned it measures
   - "registered": the node's /brokers/ids znode is back (the node's own start: the baseline);
   - "full ISR": every partition of the topics made so far names every replica in its ISR
     again (in ZooKeeper, what the controller wrote);
   - "new topic acks=all": a topic created right after the start (`--partitions` partitions,
     RF 3, min.insync.replicas 3, so every write needs storage-3) has acknowledged one acks=all
     record on every partition (one producer, the SDK's defaults otherwise).
The ratio column is full ISR / registered: how much longer than its own start the node takes
to be useful again (1.0 would be "serves as soon as it is up").

Figures depend on the host; on a shared 2-core machine they are noisy.
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

from loadgen.failover_bench import _wait

NODE = "storage-3"


def _isr_full(zk, topics=None) -> bool:
    """Every partition of `topics` (default: every topic) has a leader and all its replicas in
    the ISR."""
    from services.common import znodes as zn
    for topic in zk.get_children(zn.BROKER_TOPICS) if topics is None else topics:
        assignment = zn.decode_topic_assignment(zk.get(zn.topic_path(topic))[0])
        for p, replicas in assignment.items():
            st = zn.decode_partition_state(zk.get(zn.partition_state_path(topic, p))[0])
            if st.leader < 0 or set(st.isr) != set(replicas):
                return False
    return True


def _registered(zk, node_id: int) -> bool:
    from services.common import znodes as zn
    return zk.exists(zn.broker_path(node_id)) is not None


def _acks_all_everywhere(bootstrap, topic: str, partitions: int, timeout_s: float) -> float:
    """Send one acks=all record to each partition until each has been acknowledged; the
    monotonic time of the last acknowledgement."""
    from riverbed import Producer
    pending = set(range(partitions))
    last = time.monotonic()
    deadline = last + timeout_s
    with Producer(bootstrap, acks="all", linger_ms=0, retry_backoff_ms=50,
                  delivery_timeout_ms=int(timeout_s * 1000)) as p:
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: partitions {sorted(pending)} never acknowledged")
            futs = {q: p.send(topic, b"x", partition=q) for q in pending}
            for q, f in futs.items():
                try:
                    f.result(timeout=max(0.1, deadline - time.monotonic()))
                except Exception:  # noqa: BLE001 - UNKNOWN_TOPIC / NOT_ENOUGH_REPLICAS: again
                    continue
                pending.discard(q)
                last = time.monotonic()
            if pending:
                time.sleep(0.05)
    return last


def run_round(fleet, admin, zk, args, i: int, log) -> dict[str, Any]:
    from riverbed import NewTopic, Producer, errors
    from services.common import znodes as zn
    topic = f"restart-{i}"
    admin.create_topics([NewTopic(topic, num_partitions=args.partitions, replication_factor=3)])
    _wait(lambda: _isr_full(zk), f"{topic}: a full ISR")
    with Producer([fleet.gateway_endpoint], acks="all") as p:
        for f in [p.send(topic, b"before", partition=q) for q in range(args.partitions)]:
            f.result(timeout=60)
    t_stop = time.monotonic()
    fleet.stop(NODE)
    stopped_s = time.monotonic() - t_stop
    time.sleep(args.down_s)
    t0 = time.monotonic()
    fleet.start(NODE, wait=False)
    registered = _wait(lambda: _registered(zk, 3) and time.monotonic(), "storage-3 registered",
                       interval_s=0.005)
    full: list[float] = []
    existing = zk.get_children(zn.BROKER_TOPICS)
    watcher = threading.Thread(target=lambda: full.append(_wait(
        lambda: _isr_full(zk, existing) and time.monotonic(), "every ISR full",
        timeout_s=args.timeout_s)), daemon=True)
    watcher.start()
    fresh = f"fresh-{i}"
    # as soon as the controller counts the node live again (until then: "replication factor 3
    # must be in [1, live storage nodes = 2]")
    def create() -> bool:
        try:
            admin.create_topics([NewTopic(fresh, num_partitions=args.partitions,
                                          replication_factor=3,
                                          configs={"min.insync.replicas": "3"})])
        except errors.TopicAlreadyExistsError:     # an earlier attempt's answer was lost
            pass
        return True
    _wait(create, f"{fresh} created", timeout_s=args.timeout_s)
    acked = _acks_all_everywhere([fleet.gateway_endpoint], fresh, args.partitions,
                                 args.timeout_s)
    watcher.join()
    if not full:
        raise RuntimeError("the ISRs did not fill up")
    row = {"round": i, "stop_s": round(stopped_s, 2),
           "registered_s": round(registered - t0, 2), "full_isr_s": round(full[0] - t0, 2),
           "new_topic_acks_all_s": round(acked - t0, 2)}
    row["ratio"] = round(row["full_isr_s"] / max(row["registered_s"], 0.01), 1)
    log(f"round {i}: {row}")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.restart_bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=30)
    ap.add_argument("--down-s", type=float, default=1.0,
                    help="seconds between the stop and the start (default: %(default)s)")
    ap.add_argument("--timeout-s", type=float, default=120.0,
                    help="give up on a round after this long (default: %(default)s)")
    ap.add_argument("--data-dir", help="keep the fleet here (default: a temporary directory)")
    ap.add_argument("--json", help="write the results to this file ('-': stdout)")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    # the producers' retries while storage-3 is away are expected: not a line each
    logging.getLogger("riverbed").setLevel(logging.ERROR)

    from deploy.fleet import Fleet, free_base_port
    from riverbed import Admin
    from services.common import zk as zkmod
    root = args.data_dir or tempfile.mkdtemp(prefix="restart-bench-")
    rows: list[dict[str, Any]] = []
    try:
        with Fleet(root, free_base_port(), storage_nodes=3, controllers=2, gateways=1,
                   counts={"group_coordinator": 0, "offset_manager": 0}) as fleet:
            fleet.up()
            log(f"fleet up in {root} (gateway {fleet.gateway_endpoint})")
            zk = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False)
            try:
                with Admin([fleet.gateway_endpoint], request_timeout_ms=30000) as admin:
                    for i in range(1, args.rounds + 1):
                        rows.append(run_round(fleet, admin, zk, args, i, log))
            finally:
                zkmod.close(zk)
    finally:
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)
    out = {"conditions": {"fleet": "ZooKeeper, 2 controllers, 3 storage nodes, 1 gateway, CURVE",
                          "partitions": args.partitions, "down_s": args.down_s,
                          "rounds": args.rounds},
           "rounds": rows}
    if rows:
        for key in ("registered_s", "full_isr_s", "new_topic_acks_all_s"):
            vals = [r[key] for r in rows]
            out[key] = {"median": statistics.median(vals), "worst": max(vals)}
    print(f"{args.partitions}-partition RF 3 topics; `fleet stop {NODE}` (controlled shutdown), "
          f"{args.down_s} s down, `fleet start {NODE}`; seconds from the start:")
    print(f"{'round':>5} {'registered':>10} {'full ISR':>9} {'new topic acks=all':>19} "
          f"{'full ISR / registered':>22}")
    for r in rows:
        print(f"{r['round']:>5} {r['registered_s']:>10} {r['full_isr_s']:>9} "
              f"{r['new_topic_acks_all_s']:>19} {r['ratio']:>22}")
    if rows:
        print(f"median: registered {out['registered_s']['median']} s, full ISR "
              f"{out['full_isr_s']['median']} s (worst {out['full_isr_s']['worst']} s), new "
              f"topic acks=all {out['new_topic_acks_all_s']['median']} s (worst "
              f"{out['new_topic_acks_all_s']['worst']} s)")
    if args.json:
        text = json.dumps(out, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
