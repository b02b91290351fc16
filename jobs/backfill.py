"""Backfill: the clickstream events of a time range of a topic -> Parquet partitioned by date.

    spark-submit jobs/backfill.py --bootstrap-servers tcp://127.0.0.1:9092 --topic clicks \\
        --from 2026-11-24T00:00:00Z --to 2026-11-25T00:00:00Z --output /data/clicks-events \\
        [--max-disorder 10m] [--min-partitions 8]

A batch job: `spark.read.format("riverbed")` with startingTimestamp (the first offset of each
partition whose record timestamp is at or after --from) and endingTimestamp (the first at or
after --to plus --max-disorder), then only the records whose timestamp is in [from, to).
Record timestamps need not grow with offsets (producers' clocks, retries): --max-disorder is
how far past --to the search for the end goes, so that late-stamped records just before --to
are not missed; the start needs no margin (every earlier offset has an earlier timestamp
according to the time index, as Kafka's offsetsForTimes).

Output rows: the event's fields plus topic, partition, offset of its record; good events only
(the bad ones are counted and printed). Dates the range touches are replaced (dynamic partition
overwrite): running the same range again gives the same output, other dates are kept.
"""
from __future__ import annotations

import argparse
import re
import sys

from clickstream_events import add_common_args, extra_options, parse_events, session


def duration_ms(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: expected e.g. 500ms, 30s, 10m, 2h, 1d")
    n, unit = int(m.group(1)), m.group(2)
    return n * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[unit]


def time_ms(text: str) -> int:
    from datetime import datetime, timezone
    text = text.strip()
    if text.isdigit():
        return int(text)
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return int(t.timestamp() * 1000)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spark-submit jobs/backfill.py",
                                description="A time range of a clickstream topic into Parquet.")
    add_common_args(p)
    p.add_argument("--from", dest="start", type=time_ms, required=True,
                   help="start of the range (ISO 8601 or ms), inclusive")
    p.add_argument("--to", dest="end", type=time_ms, required=True,
                   help="end of the range (ISO 8601 or ms), exclusive")
    p.add_argument("--output", required=True)
    p.add_argument("--max-disorder", type=duration_ms, default=duration_ms("10m"))
    p.add_argument("--min-partitions", type=int, default=None)
    return p


def build(spark, args):
    """The range's records parsed into events (the `error` column says which are bad)."""
    from pyspark.sql import functions as F
    if args.end <= args.start:
        raise SystemExit(f"--to ({args.end}) must be after --from ({args.start})")
    reader = (spark.read.format("riverbed")
              .option("bootstrap.servers", args.bootstrap_servers)
              .option("subscribe", args.topic)
              .option("startingTimestamp", str(args.start))
              .option("startingOffsetsByTimestampStrategy", "latest")
              .option("endingTimestamp", str(args.end + args.max_disorder)))
    if args.min_partitions:
        reader = reader.option("minPartitions", str(args.min_partitions))
    for k, v in extra_options(args.option).items():
        reader = reader.option(k, v)
    records = reader.load().where(
        (F.col("timestamp") >= F.timestamp_millis(F.lit(args.start)))
        & (F.col("timestamp") < F.timestamp_millis(F.lit(args.end))))
    return parse_events(records)


def good_events(events):
    from pyspark.sql import functions as F
    return events.where("error IS NULL").select(
        "event_id", "event_time", "user_id", "session_id", "event_type", "page", "referrer",
        "user_agent", "country", "duration_ms", "topic", "partition", "offset",
        F.date_format("event_time", "yyyy-MM-dd").alias("date"))


def main(argv: list[str] | None = None, spark=None) -> int:
    args = build_parser().parse_args(argv)
    spark = session("riverbed-backfill", spark)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    events = build(spark, args).cache()        # the topic is read once
    try:
        good_events(events).write.mode("overwrite").partitionBy("date").parquet(args.output)
        n_bad = events.where("error IS NOT NULL").count()
        n_good = events.count() - n_bad
    finally:
        events.unpersist()
    print(f"backfill {args.topic} [{args.start}, {args.end}): {n_good} events written to "
          f"{args.output}, {n_bad} bad records skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
