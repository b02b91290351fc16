"""A read-process-write worker on librdkafka (confluent-kafka), unmodified, in its own process, for
SIGKILL tests of transactions through a gateway's Kafka listener (KIP-98/447).

    python tests/integration/kafka_txn_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID
        [--per-transaction N] [--sleep-ms N] [--abort-every N]

Consumes INPUT in GROUP (read_committed, no auto-commit, a 6 s session), writes each record to
OUTPUT as key = the input key, value = b"out:" + the input value, and commits the output and the
input offsets (send_offsets_to_transaction with consumer_group_metadata()) in one transaction
per at most N records; with --abort-every K every K-th transaction is aborted instead (and the
consumer rewound to the group's committed offsets), as an application that failed would.
Prints one line per event, flushed at once:

    READY                 after init_transactions (every older instance is fenced)
    COMMITTED n           after each committed transaction of n records
    ABORTED reason        after a transaction was aborted (on purpose or an abortable error)
    FENCED                a newer instance took the transactional id: exits 3

Runs until SIGTERM (clean close) or SIGKILL.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def rewind(consumer: Consumer) -> None:
    """Back to the offsets the group really committed (the aborted transaction's are gone)."""
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("group")
    ap.add_argument("transactional_id")
    ap.add_argument("--per-transaction", type=int, default=20)
    ap.add_argument("--sleep-ms", type=float, default=0)
    ap.add_argument("--abort-every", type=int, default=0)
    args = ap.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    producer = Producer({"bootstrap.servers": args.bootstrap,
                         "transactional.id": args.transactional_id,
                         "transaction.timeout.ms": 10000, "linger.ms": 5})
    try:
        producer.init_transactions(120)
    except KafkaException as e:
        print(f"FENCED {e}" if e.args[0].fatal() else f"FAILED {e}", flush=True)
        return 3
    print("READY", flush=True)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100})
    consumer.subscribe([args.input])
    transactions = 0
    try:
        while not stop:
            msgs = [m for m in consumer.consume(args.per_transaction, 0.2) if not m.error()]
            if not msgs:
                continue
            transactions += 1
            try:
                producer.begin_transaction()
                for m in msgs:
                    producer.produce(args.output, key=m.key(), value=b"out:" + m.value())
                if args.sleep_ms:
                    time.sleep(args.sleep_ms / 1000.0)
                nxt: dict[tuple[str, int], int] = {}
                for m in msgs:              # the next offset of each partition consumed
                    nxt[(m.topic(), m.partition())] = m.offset() + 1
                producer.send_offsets_to_transaction(
                    [TopicPartition(t, p, o) for (t, p), o in nxt.items()],
                    consumer.consumer_group_metadata(), 60)
                if args.abort_every and transactions % args.abort_every == 0:
                    producer.abort_transaction(60)
                    rewind(consumer)
                    print("ABORTED on purpose", flush=True)
                    continue
                producer.commit_transaction(60)
                print(f"COMMITTED {len(msgs)}", flush=True)
            except KafkaException as e:
                err = e.args[0]
                if err.fatal():
                    print(f"FENCED {err}", flush=True)
                    return 3
                if err.txn_requires_abort():
                    producer.abort_transaction(60)
                    rewind(consumer)
                    print(f"ABORTED {err}", flush=True)
                    continue
                raise
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
