"""Clickstream aggregates, exactly once: JSON events from a Riverbed topic -> views and users per
page per minute, as Parquet partitioned by date; bad events -> a dead-letter topic.

    spark-submit jobs/clickstream.py --bootstrap-servers tcp://127.0.0.1:9092 --topic clicks \\
        --output /data/clicks-per-minute --checkpoint /data/checkpoints/clickstream \\
        [--dead-letter-topic clicks-dlq] [--watermark "2 minutes"] [--trigger "10 seconds"] \\
        [--max-offsets-per-trigger 100000] [--starting-offsets earliest]

Output rows: minute (the window's start, UTC), page, views, users (approximate distinct
users), date (yyyy-MM-dd, the partition column). A minute is written once the watermark (the
latest event time seen minus --watermark) has passed its end; events later than that are
dropped by Spark, so --watermark must cover the stream's disorder.

Exactly once, by Spark's checkpoint with the file sink (not by offsets committed with the
output): before a micro-batch runs, Spark writes its offset ranges to the checkpoint's offset
log; the source reads exactly those ranges ([from, until) per partition, the same records on
every attempt); the aggregation state is versioned per batch in the checkpoint; and the file
sink makes a batch's files part of the output only when it records them in
`<output>/_spark_metadata/<batch>`. A driver killed mid-batch leaves at most files that no
metadata entry names; on restart Spark re-runs that batch from its logged offsets and the
state of the last committed batch, so every input record is counted once. Read the output with
Spark (`spark.read.parquet(output)` follows `_spark_metadata`); a plain Parquet reader must read
only the files listed there. We use the checkpoint rather than committing offsets with the
output because Spark already keeps offsets, state and sink in step, and an aggregation's state
would have to be rebuilt from the output otherwise.

The dead-letter topic gets each bad event's key, value and headers plus `dlq.error` and
`riverbed.source` (topic/partition/offset) headers. That sink is at-least-once: a batch
re-run after a crash sends its bad events again; dedupe on `riverbed.source`.

Two streaming queries run in this driver, each with its own checkpoint under --checkpoint
(aggregates/, dead-letters/), started one after the other (see clickstream_events.start_queries
for the Spark race this avoids). Run with --trigger available-now to process what is in the topic
and stop (a backfill or a test), or a processing-time interval to run continuously.
"""
from __future__ import annotations

import argparse
import sys

from clickstream_events import (
    add_common_args,
    dead_letters,
    drop_torn_first_entry,
    extra_options,
    parse_events,
    session,
    start_queries,
    trigger_kwargs,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spark-submit jobs/clickstream.py",
                                description="Clickstream views per page per minute, exactly once.")
    add_common_args(p)
    p.add_argument("--output", required=True, help="Parquet output folder (partitioned by date)")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder (keep it with the output)")
    p.add_argument("--dead-letter-topic", default="clicks-dlq")
    p.add_argument("--watermark", default="2 minutes", help="allowed event-time disorder")
    p.add_argument("--trigger", default="10 seconds",
                   help="a processing-time interval, or available-now (default %(default)s)")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--starting-offsets", default="earliest",
                   help="where a new query starts (a restart goes on from the checkpoint)")
    p.add_argument("--timeout-s", type=float, default=None,
                   help="stop after this many seconds (default: run until stopped)")
    return p


def build(spark, args):
    """The two streaming queries' writers (not started): aggregates and dead letters."""
    from pyspark.sql import functions as F
    reader = (spark.readStream.format("riverbed")
              .option("bootstrap.servers", args.bootstrap_servers)
              .option("subscribe", args.topic)
              .option("startingOffsets", args.starting_offsets))
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    for k, v in extra_options(args.option).items():
        reader = reader.option(k, v)
    events = parse_events(reader.load())
    per_minute = (events.where("error IS NULL")
                  .withWatermark("event_time", args.watermark)
                  .groupBy(F.window("event_time", "1 minute"), "page")
                  .agg(F.count(F.lit(1)).alias("views"),
                       F.approx_count_distinct("user_id").alias("users"))
                  .select(F.col("window.start").alias("minute"), "page", "views", "users",
                          F.date_format("window.start", "yyyy-MM-dd").alias("date")))
    trigger = trigger_kwargs(args.trigger)
    aggregates = (per_minute.writeStream.queryName("clickstream-aggregates")
                  .format("parquet").outputMode("append").partitionBy("date")
                  .option("path", args.output)
                  .option("checkpointLocation", f"{args.checkpoint}/aggregates")
                  .trigger(**trigger))
    letters = (dead_letters(events).writeStream.queryName("clickstream-dead-letters")
               .format("riverbed")
               .option("bootstrap.servers", args.bootstrap_servers)
               .option("topic", args.dead_letter_topic)
               .option("checkpointLocation", f"{args.checkpoint}/dead-letters")
               .trigger(**trigger))
    return aggregates, letters


def main(argv: list[str] | None = None, spark=None) -> int:
    args = build_parser().parse_args(argv)
    spark = session("riverbed-clickstream", spark)
    aggregates, letters = build(spark, args)
    for name in ("aggregates", "dead-letters"):   # a kill during a query's first batch
        drop_torn_first_entry(f"{args.checkpoint}/{name}")
    queries = start_queries([aggregates, letters])
    try:
        if args.trigger == "available-now":
            for q in queries:
                q.awaitTermination(args.timeout_s)
        else:
            spark.streams.awaitAnyTermination(args.timeout_s)
        for q in queries:
            if q.exception() is not None:
                print(f"query {q.name} failed: {q.exception()}", file=sys.stderr)
                return 1
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
