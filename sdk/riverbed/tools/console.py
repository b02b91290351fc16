"""`produce` and `consume` (Kafka's console producer and consumer, with kcat's output
formats), fit for shell pipes.

    riverbed produce --topic T [--key-separator :] [-H k=v ...] [--partition N] < lines
    riverbed consume --topic T [--group G] [--from-beginning | --offset N --partition P]
                     [--format '%k %s\\n' | --json] [--max-messages N] [--timeout-ms MS]

While a partition they use has no leader both say so on stderr (riverbed.tools.leader_watch).
"""
from __future__ import annotations

import argparse
import sys
import time

from riverbed.tools.common import add_bootstrap, bootstrap_of
from riverbed.tools.leader_watch import LeaderWatch
from riverbed.tools.record_format import FormatError, compile_format, parse_header, record_json

# How long a tool waits quietly before it asks whether its partitions have leaders.
QUIET_BEFORE_LEADER_CHECK_S = 1.0


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("produce", help="send lines from stdin as records",
                              description="Read lines from stdin and send each as a record "
                                          "(like kafka-console-producer.sh; keys with -K, "
                                          "headers with -H). Says on stderr while a partition "
                                          "has no leader.")
    add_bootstrap(p)
    p.add_argument("--topic", required=True, help="topic to write to")
    p.add_argument("--partition", type=int, default=None, help="write to this partition only")
    p.add_argument("--parse-key", action="store_true",
                   help="split each line at --key-separator (default TAB) into key and value "
                        "(Kafka's --property parse.key=true)")
    p.add_argument("--key-separator", "-K", default=None, metavar="SEP",
                   help="split each line at the first SEP into key and value (implies "
                        "--parse-key, like kcat -K)")
    p.add_argument("--header", "-H", action="append", default=[], metavar="KEY=VALUE",
                   help="add this header to every record; repeat for more")
    p.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"], help="acks (default 1)")
    p.add_argument("--compression", "--compression-codec", dest="compression", default=None,
                   choices=["none", "gzip", "snappy", "lz4", "zstd"], help="compression codec")
    p.add_argument("--batch-size", type=int, default=16384, help="batch.size in bytes")
    p.add_argument("--linger-ms", type=int, default=0, help="linger.ms")
    p.add_argument("--timeout-ms", type=int, default=60000,
                   help="how long to wait for the records to be acknowledged at the end")
    p.set_defaults(func=run_produce)

    c = subparsers.add_parser("consume", help="print records to stdout",
                              description="Print records' values one per line (like "
                                          "kafka-console-consumer.sh), or in kcat's --format "
                                          "or --json; as a group member with --group. Says on "
                                          "stderr while a partition has no leader.")
    add_bootstrap(c)
    c.add_argument("--topic", required=True, help="topic to read")
    c.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset instead of the end")
    c.add_argument("--partition", type=int, default=None, help="read only this partition")
    c.add_argument("--offset", default=None,
                   help="start offset: a number, 'earliest' or 'latest' (needs --partition)")
    c.add_argument("--group", default=None, metavar="GROUP",
                   help="consume as a member of this consumer group (offsets committed; "
                        "--from-beginning applies when the group has none)")
    c.add_argument("--max-messages", type=int, default=None, help="exit after this many records")
    c.add_argument("--print-key", action="store_true", help="print KEY<separator>VALUE")
    c.add_argument("--key-separator", default="\t", help="separator for --print-key (default: TAB)")
    c.add_argument("--print-offset", action="store_true", help="prefix partition:offset")
    out = c.add_mutually_exclusive_group()
    out.add_argument("--format", "-f", default=None, metavar="FMT",
                     help="kcat's output format: %%t topic, %%p partition, %%o offset, %%T "
                          "timestamp (ms), %%k key, %%s value, %%K/%%S key/value length, %%h "
                          "headers, %%%% percent; \\n \\t \\r \\\\ escapes (e.g. "
                          "'%%k=%%s\\n')")
    out.add_argument("--json", "-J", action="store_true",
                     help="one JSON object per record (kcat -J): topic, partition, offset, "
                          "tstype, ts, headers, key, payload")
    c.add_argument("--timeout-ms", type=int, default=None,
                   help="exit when no record arrives for this long")
    c.add_argument("--isolation-level", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed"],
                   help="read_committed: only records of committed transactions (and none "
                        "beyond the last stable offset); default read_uncommitted")
    c.set_defaults(func=run_consume)


def run_produce(args: argparse.Namespace) -> int:
    from riverbed import errors
    from riverbed.producer import Producer

    acks = -1 if args.acks == "all" else int(args.acks)
    parse_key = args.parse_key or args.key_separator is not None
    sep_text = "\t" if args.key_separator is None else args.key_separator
    if parse_key and not sep_text:
        print("Error: --key-separator must not be empty", file=sys.stderr)
        return 2
    sep = sep_text.encode()
    try:
        headers = [parse_header(h) for h in args.header] or None
    except FormatError as e:
        print(f"Error: -H: {e}", file=sys.stderr)
        return 2
    stdin = sys.stdin.buffer
    futures: list = []
    count = 0
    bootstrap = bootstrap_of(args)
    watch = LeaderWatch(bootstrap, args.topic,
                        None if args.partition is None else {args.partition})
    try:
        with Producer(bootstrap, acks=acks, client_id="riverbed-console-producer",
                      compression_type=None if args.compression == "none" else args.compression,
                      batch_size=args.batch_size, linger_ms=args.linger_ms) as producer:
            for line in stdin:
                line = line.rstrip(b"\r\n") if line.endswith(b"\n") else line
                key = None
                value = line
                if parse_key:
                    if sep not in line:
                        print(f"Error: no key separator {sep_text!r} in line {count + 1}",
                              file=sys.stderr)
                        return 1
                    key, value = line.split(sep, 1)
                fut = producer.send(args.topic, value, key=key, partition=args.partition,
                                    headers=headers)
                count += 1
                # Keep one handle per batch, not per record, to check errors at the end.
                if not futures or futures[-1]._batch is not fut._batch:
                    futures.append(fut)
            # Flush in short steps: while records wait, say which partitions have no leader.
            deadline = time.monotonic() + args.timeout_ms / 1000.0
            while True:
                step = min(QUIET_BEFORE_LEADER_CHECK_S, max(deadline - time.monotonic(), 0))
                try:
                    producer.flush(timeout=step)
                    break
                except errors.KafkaTimeoutError:
                    if time.monotonic() >= deadline:
                        producer.close(timeout=0)       # give up on what is left (it is reported)
                        raise errors.KafkaTimeoutError(
                            f"records to {args.topic} not acknowledged within --timeout-ms="
                            f"{args.timeout_ms}") from None
                    watch.check()
            for fut in futures:
                fut.result(timeout=0)
    finally:
        watch.close()
    return 0


def _render(args: argparse.Namespace):
    """The function record -> bytes written for it (kcat's -f / -J, or the classic flags)."""
    if args.json:
        return lambda rec: record_json(rec).encode() + b"\n"
    if args.format is not None:
        return compile_format(args.format)
    sep = args.key_separator.encode()

    def classic(rec) -> bytes:
        line = rec.value or b""
        if args.print_key:
            line = (rec.key or b"null") + sep + line
        if args.print_offset:
            line = f"{rec.partition}:{rec.offset}\t".encode() + line
        return line + b"\n"
    return classic


def run_consume(args: argparse.Namespace) -> int:
    from riverbed import errors
    from riverbed.consumer import Consumer
    from riverbed.structs import TopicPartition

    if args.offset is not None and args.partition is None:
        print("Error: --offset needs --partition", file=sys.stderr)
        return 2
    if args.group is not None and (args.partition is not None or args.offset is not None):
        print("Error: --group assigns partitions itself: drop --partition/--offset "
              "(or reset the group's offsets with `riverbed groups reset-offsets`)",
              file=sys.stderr)
        return 2
    try:
        render = _render(args)
    except FormatError as e:
        print(f"Error: --format: {e}", file=sys.stderr)
        return 2
    idle_limit_s = None if args.timeout_ms is None else args.timeout_ms / 1000.0
    out = sys.stdout.buffer
    seen = 0
    bootstrap = bootstrap_of(args)
    watch = LeaderWatch(bootstrap, args.topic,
                        None if args.partition is None else {args.partition})
    reset = "earliest" if args.from_beginning else "latest"
    try:
        # With --group, commit exactly what was printed (not what poll returned beyond
        # --max-messages): auto-commit off, a commit after each printed poll and at the end.
        printed: dict = {}
        with Consumer(bootstrap_servers=bootstrap, client_id="riverbed-console-consumer",
                      group_id=args.group, auto_offset_reset=reset,
                      enable_auto_commit=False,
                      isolation_level=args.isolation_level) as consumer:
            if args.group is not None:
                consumer.subscribe([args.topic])
            else:
                if args.partition is not None:
                    tps = [TopicPartition(args.topic, args.partition)]
                else:
                    parts = consumer.partitions_for_topic(args.topic)
                    if not parts:
                        raise errors.UnknownTopicOrPartitionError("not in metadata",
                                                                  topic=args.topic)
                    tps = [TopicPartition(args.topic, p) for p in sorted(parts)]
                consumer.assign(tps)
                if args.offset in (None, "latest") and not args.from_beginning \
                        or args.offset == "latest":
                    consumer.seek_to_end(*tps)
                elif args.offset in (None, "earliest"):
                    consumer.seek_to_beginning(*tps)
                else:
                    consumer.seek(tps[0], int(args.offset))
            last_record = time.monotonic()
            done = False
            while not done:
                try:
                    batches = consumer.poll(timeout_ms=200)
                except errors.KafkaError as e:
                    if not e.retriable:      # e.g. no leader to ask for offsets: wait, say so
                        raise
                    batches = {}
                    watch.check()
                    time.sleep(0.2)
                now = time.monotonic()
                if not batches:
                    if idle_limit_s is not None and now - last_record >= idle_limit_s:
                        break
                    if now - last_record >= QUIET_BEFORE_LEADER_CHECK_S:
                        watch.check()
                    continue
                last_record = now
                for recs in batches.values():
                    for rec in recs:
                        out.write(render(rec))
                        printed[TopicPartition(rec.topic, rec.partition)] = rec.offset + 1
                        seen += 1
                        if args.max_messages is not None and seen >= args.max_messages:
                            done = True
                            break
                    if done:
                        break
                out.flush()
                if args.group is not None and printed:
                    consumer.commit(dict(printed))
                    printed.clear()
            out.flush()
    finally:
        watch.close()
    if args.max_messages is not None and seen < args.max_messages:
        print(f"Processed a total of {seen} messages (timed out before {args.max_messages})",
              file=sys.stderr)
    return 0
