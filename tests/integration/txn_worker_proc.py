"""A read-process-write worker in its own process, for SIGKILL tests of transactions (KIP-98/447).

    python tests/integration/txn_worker_proc.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID
        [--per-transaction N] [--session-timeout-ms N] [--sleep-ms N] [--abort-every N]
        [--transaction-timeout-ms N]

Consumes INPUT in GROUP (read_committed, no auto-commit), writes each record to OUTPUT as
key = the input key, value = b"out:" + the input value, and commits the output and the input
offsets (send_offsets_to_transaction with the consumer's group metadata) in one transaction per
at most N records; with --abort-every N, every Nth transaction is aborted on purpose after its
records and offsets were sent (then it starts again from the committed offsets), so aborted
data surely sits in the output's log. Prints one line per event, flushed at once:

    READY                 after init_transactions (every older instance is fenced)
    COMMITTING n          just before commit_transaction() of n records (a test's cue to
                          kill a coordinator during the commit)
    COMMITTED n           after each committed transaction of n records
    ABORTED reason        after an abortable error was aborted (reason "deliberate": on
                          purpose, --abort-every)
    FENCED                a newer instance took the transactional id: exits 3

Runs until SIGTERM (clean close) or SIGKILL.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

from riverbed import errors
from riverbed.consumer import Consumer
from riverbed.producer import Producer
from riverbed.structs import OffsetAndMetadata


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("group")
    ap.add_argument("transactional_id")
    ap.add_argument("--per-transaction", type=int, default=20)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--sleep-ms", type=float, default=0)
    ap.add_argument("--abort-every", type=int, default=0)
    ap.add_argument("--transaction-timeout-ms", type=int, default=10000)
    args = ap.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    producer = Producer(bootstrap=args.bootstrap, transactional_id=args.transactional_id,
                        transaction_timeout_ms=args.transaction_timeout_ms,
                        client_id=f"worker-{args.transactional_id}")
    try:
        producer.init_transactions(timeout=120)
    except errors.ProducerFencedError:
        print("FENCED", flush=True)
        return 3
    print("READY", flush=True)
    consumer = Consumer(bootstrap=args.bootstrap, group_id=args.group, client_id="worker-consumer",
                        auto_offset_reset="earliest", enable_auto_commit=False,
                        isolation_level="read_committed", max_poll_records=args.per_transaction,
                        fetch_max_wait_ms=100, session_timeout_ms=args.session_timeout_ms,
                        heartbeat_interval_ms=1000)
    consumer.subscribe([args.input])

    def rewind():
        """Start again from the committed offsets (the group may have moved on)."""
        for tp in consumer.assignment():
            committed = consumer.committed(tp)
            if committed is not None:
                consumer.seek(tp, committed)
            else:
                consumer.seek_to_beginning(tp)

    transactions = 0
    try:
        while not stop:
            batch = consumer.poll(timeout_ms=200)
            if not batch:
                continue
            producer.begin_transaction()
            transactions += 1
            n = 0
            try:
                for tp, recs in batch.items():
                    for r in recs:
                        producer.send(args.output, b"out:" + r.value, key=r.key)
                        n += 1
                if args.sleep_ms:
                    time.sleep(args.sleep_ms / 1000.0)
                offsets = {tp: OffsetAndMetadata(consumer.position(tp)) for tp in batch}
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata(),
                                                     timeout=60)
                if args.abort_every and transactions % args.abort_every == 0:
                    producer.abort_transaction(timeout=60)
                    print("ABORTED deliberate", flush=True)
                    rewind()
                    continue
                print(f"COMMITTING {n}", flush=True)
                while True:             # a coordinator may be moving: keep waiting
                    try:
                        producer.commit_transaction(timeout=60)
                        break
                    except errors.KafkaTimeoutError:
                        continue
                print(f"COMMITTED {n}", flush=True)
            except errors.ProducerFencedError:
                print("FENCED", flush=True)
                return 3
            except errors.RiverbedError as e:
                if getattr(e, "fatal", False):
                    print(f"FATAL {e!r}", flush=True)
                    return 4
                while True:             # a leader or the coordinator may be moving: retry
                    try:
                        producer.abort_transaction(timeout=60)
                        break
                    except errors.KafkaTimeoutError:
                        continue
                    except errors.ProducerFencedError:
                        print("FENCED", flush=True)
                        return 3
                print(f"ABORTED {type(e).__name__}", flush=True)
                rewind()      # the group may have moved on
    finally:
        try:
            consumer.close(autocommit=False)
        finally:
            producer.close(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
