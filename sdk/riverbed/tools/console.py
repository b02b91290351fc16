"""`produce` and `consume` (Kafka's console producer and consumer), fit for shell pipes."""
from __future__ import annotations

import argparse
import sys

from riverbed.tools.common import add_bootstrap, bootstrap_of


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("produce", help="send lines from stdin as records",
                              description="Read lines from stdin and send each as a record "
                                          "(like kafka-console-producer.sh).")
    add_bootstrap(p)
    p.add_argument("--topic", required=True, help="topic to write to")
    p.add_argument("--partition", type=int, default=None, help="write to this partition only")
    p.add_argument("--parse-key", action="store_true",
                   help="split each line at --key-separator into key and value "
                        "(Kafka's --property parse.key=true)")
    p.add_argument("--key-separator", default="\t", help="key/value separator (default: TAB)")
    p.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"], help="acks (default 1)")
    p.add_argument("--compression", "--compression-codec", dest="compression", default=None,
                   choices=["none", "gzip", "snappy", "lz4", "zstd"], help="compression codec")
    p.add_argument("--batch-size", type=int, default=16384, help="batch.size in bytes")
    p.add_argument("--linger-ms", type=int, default=0, help="linger.ms")
    p.add_argument("--timeout-ms", type=int, default=60000,
                   help="how long to wait for the records to be acknowledged at the end")
    p.set_defaults(func=run_produce)

    c = subparsers.add_parser("consume", help="print records to stdout",
                              description="Print records' values one per line "
                                          "(like kafka-console-consumer.sh).")
    add_bootstrap(c)
    c.add_argument("--topic", required=True, help="topic to read")
    c.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset instead of the end")
    c.add_argument("--partition", type=int, default=None, help="read only this partition")
    c.add_argument("--offset", default=None,
                   help="start offset: a number, 'earliest' or 'latest' (needs --partition)")
    c.add_argument("--max-messages", type=int, default=None, help="exit after this many records")
    c.add_argument("--print-key", action="store_true", help="print KEY<separator>VALUE")
    c.add_argument("--key-separator", default="\t", help="separator for --print-key (default: TAB)")
    c.add_argument("--print-offset", action="store_true", help="prefix partition:offset")
    c.add_argument("--timeout-ms", type=int, default=None,
                   help="exit when no record arrives for this long")
    c.set_defaults(func=run_consume)


def run_produce(args: argparse.Namespace) -> int:
    from riverbed.producer import Producer

    acks = -1 if args.acks == "all" else int(args.acks)
    sep = args.key_separator.encode()
    stdin = sys.stdin.buffer
    futures = []
    count = 0
    with Producer(bootstrap_of(args), acks=acks, client_id="riverbed-console-producer",
                  compression_type=None if args.compression == "none" else args.compression,
                  batch_size=args.batch_size, linger_ms=args.linger_ms) as producer:
        for line in stdin:
            line = line.rstrip(b"\r\n") if line.endswith(b"\n") else line
            key = None
            value = line
            if args.parse_key:
                if sep not in line:
                    print(f"Error: no key separator {args.key_separator!r} in line {count + 1}",
                          file=sys.stderr)
                    return 1
                key, value = line.split(sep, 1)
            fut = producer.send(args.topic, value, key=key, partition=args.partition)
            count += 1
            # Keep one handle per batch, not per record, to check errors at the end.
            if not futures or futures[-1]._batch is not fut._batch:
                futures.append(fut)
        producer.flush(timeout=args.timeout_ms / 1000.0)
        for fut in futures:
            fut.result(timeout=0)
    return 0


def run_consume(args: argparse.Namespace) -> int:
    from riverbed.consumer import Consumer
    from riverbed.structs import TopicPartition

    if args.offset is not None and args.partition is None:
        print("Error: --offset needs --partition", file=sys.stderr)
        return 2
    timeout = float("inf") if args.timeout_ms is None else args.timeout_ms
    out = sys.stdout.buffer
    sep = args.key_separator.encode()
    seen = 0
    with Consumer(bootstrap=bootstrap_of(args), client_id="riverbed-console-consumer",
                  auto_offset_reset="earliest" if args.from_beginning else "latest",
                  consumer_timeout_ms=timeout) as consumer:
        if args.partition is not None:
            tps = [TopicPartition(args.topic, args.partition)]
        else:
            parts = consumer.partitions_for_topic(args.topic)
            if not parts:
                from riverbed import errors
                raise errors.UnknownTopicOrPartitionError("not in metadata", topic=args.topic)
            tps = [TopicPartition(args.topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        if args.offset in (None, "latest") and not args.from_beginning or args.offset == "latest":
            consumer.seek_to_end(*tps)
        elif args.offset in (None, "earliest"):
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek(tps[0], int(args.offset))
        for rec in consumer:
            line = rec.value or b""
            if args.print_key:
                line = (rec.key or b"null") + sep + line
            if args.print_offset:
                line = f"{rec.partition}:{rec.offset}\t".encode() + line
            out.write(line + b"\n")
            seen += 1
            if args.max_messages is not None and seen >= args.max_messages:
                break
        out.flush()
    if args.max_messages is not None and seen < args.max_messages:
        print(f"Processed a total of {seen} messages (timed out before {args.max_messages})",
              file=sys.stderr)
    return 0
