"""A group member in its own process, for SIGKILL tests of consumer groups.

    python tests/integration/group_consumer_proc.py BOOTSTRAP TOPIC GROUP [--sleep-ms N]
        [--max-poll-records N] [--session-timeout-ms N] [--heartbeat-interval-ms N]

Consumes with enable_auto_commit=False and commits synchronously after "processing" each poll's
records (at-least-once). Prints one line per event, flushed at once, so a parent can follow it:

    ASSIGNED p,p,...      after each rebalance (topic partitions, comma-separated)
    REC p offset          every record processed (before the commit that covers it)
    COMMITTED n           after each successful commit of n partitions

Runs until SIGTERM (clean close: leaves the group) or SIGKILL.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

from riverbed import errors
from riverbed.consumer import Consumer
from riverbed.group_membership import ConsumerRebalanceListener


class Printer(ConsumerRebalanceListener):
    def on_partitions_assigned(self, assigned):
        print("ASSIGNED " + ",".join(str(p) for _, p in sorted(assigned)), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("group")
    ap.add_argument("--sleep-ms", type=float, default=0)
    ap.add_argument("--max-poll-records", type=int, default=500)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    args = ap.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    c = Consumer(bootstrap=args.bootstrap, group_id=args.group, client_id="proc-consumer",
                 auto_offset_reset="earliest", enable_auto_commit=False,
                 max_poll_records=args.max_poll_records, fetch_max_wait_ms=100,
                 session_timeout_ms=args.session_timeout_ms,
                 heartbeat_interval_ms=args.heartbeat_interval_ms)
    c.subscribe([args.topic], listener=Printer())
    try:
        while not stop:
            batch = c.poll(timeout_ms=200)
            if not batch:
                continue
            lines = [f"REC {tp.partition} {r.offset}" for tp, recs in batch.items() for r in recs]
            print("\n".join(lines), flush=True)
            if args.sleep_ms:
                time.sleep(args.sleep_ms / 1000.0)
            try:
                c.commit()
                print(f"COMMITTED {len(c.assignment())}", flush=True)
            except errors.RiverbedError as e:
                print(f"COMMIT-FAILED {type(e).__name__}", flush=True)
    finally:
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
