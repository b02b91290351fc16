"""Clickstream aggregates, exactly once: JSON events from a Riverbed topic -> views and users per
page per minute, as Parquet partitioned by date or as records of an output topic; bad events ->
a dead-letter topic.

    spark-submit jobs/clickstream.py --bootstrap-servers tcp://127.0.0.1:9092 --topic clicks \\
        (--output /data/clicks-per-minute | --output-topic clicks-per-minute) \\
        --checkpoint /data/checkpoints/clickstream [--transactional-id-prefix clickstream] \\
        [--dead-letter-topic clicks-dlq] [--watermark "2 minutes"] [--trigger "10 seconds"] \\
        [--max-offsets-per-trigger 100000] [--starting-offsets earliest]

Output rows: minute (the window's start, UTC), page, views, users (approximate distinct
users), date (yyyy-MM-dd, the partition column). A minute is written once the watermark (the
latest event time seen minus --watermark) has passed its end; events later than that are
dropped by Spark, so --watermark must cover the stream's disorder.

With --output-topic the same rows are records: key = page, value = JSON {"minute":
"2026-11-25T00:03:00Z", "page", "views", "users"}, written by the riverbed sink's exactly-once
mode (exactlyOnce=true; riverbed.spark.exactly_once): each micro-batch's records in
transactions committed with the batch, so a read_committed consumer reads each (page, minute)
once through killed executors, killed drivers and restarts from the checkpoint. The
transactional ids are <prefix>.aggregates-<partition> (and <prefix>.dead-letters-<partition>);
the prefix (--transactional-id-prefix, default clickstream.<output topic>) must stay the same
across restarts of the job and differ between jobs.

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
`riverbed.source` (topic/partition/offset) headers. With a transactional id prefix (always with
--output-topic) it is written exactly once too; otherwise at-least-once: a batch re-run after a
crash sends its bad events again; dedupe on `riverbed.source`.

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
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--output", help="Parquet output folder (partitioned by date)")
    out.add_argument("--output-topic",
                     help="write the aggregates to this topic instead, exactly once (records "
                          "keyed by page, JSON values)")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder (keep it with the output)")
    p.add_argument("--transactional-id-prefix", default=None,
                   help="write the topics exactly once with transactional ids "
                        "<prefix>.aggregates-<n> and <prefix>.dead-letters-<n>; keep it across "
                        "restarts (default with --output-topic: clickstream.<output topic>; "
                        "with --output: none, dead letters at-least-once)")
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
    prefix = transactional_id_prefix(args)
    if args.output_topic:
        records = per_minute.select(
            F.col("page").alias("key"),
            F.to_json(F.struct(F.date_format("minute", "yyyy-MM-dd'T'HH:mm:ss'Z'")
                               .alias("minute"), "page", "views", "users")).alias("value"))
        aggregates = exactly_once(
            records.writeStream.queryName("clickstream-aggregates").format("riverbed")
            .outputMode("append").option("bootstrap.servers", args.bootstrap_servers)
            .option("topic", args.output_topic), f"{prefix}.aggregates")
    else:
        aggregates = (per_minute.writeStream.queryName("clickstream-aggregates")
                      .format("parquet").outputMode("append").partitionBy("date")
                      .option("path", args.output))
    aggregates = (aggregates.option("checkpointLocation", f"{args.checkpoint}/aggregates")
                  .trigger(**trigger))
    letters = (dead_letters(events).writeStream.queryName("clickstream-dead-letters")
               .format("riverbed")
               .option("bootstrap.servers", args.bootstrap_servers)
               .option("topic", args.dead_letter_topic)
               .option("checkpointLocation", f"{args.checkpoint}/dead-letters")
               .trigger(**trigger))
    if prefix:
        letters = exactly_once(letters, f"{prefix}.dead-letters")
    return aggregates, letters


def transactional_id_prefix(args) -> str | None:
    if args.transactional_id_prefix:
        return args.transactional_id_prefix
    return f"clickstream.{args.output_topic}" if args.output_topic else None


def exactly_once(writer, prefix: str):
    """A riverbed stream writer in the sink's exactly-once mode."""
    return writer.option("exactlyOnce", "true").option("transactional.id.prefix", prefix)


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
