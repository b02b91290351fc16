"""Topic-to-topic enrichment: clickstream events -> the shopping events of people (no bots),
each joined with its page from a small static table (category, title, price) -> another topic.

    spark-submit jobs/enrich.py --bootstrap-servers tcp://127.0.0.1:9092 --topic clicks \\
        --output-topic clicks-enriched --checkpoint /data/checkpoints/enrich \\
        [--pages jobs/data/pages.csv] [--event-types add_to_cart,purchase] \\
        [--trigger "5 seconds"] [--max-offsets-per-trigger 100000]

Output records: key = user_id, value = JSON {event_id, ts, user_id, session_id, event_type,
page, category, title, price, country}, header `riverbed.source` = topic/partition/offset of
the input record. Pages missing from the table get category "unknown". Bad events (not JSON, a
required field missing) and bots (user agents naming a bot) are left out.

Delivery: at-least-once. Spark's checkpoint gives each micro-batch fixed offset ranges, and the
sink waits for every record's acknowledgement (acks=all, idempotent producer) before a batch
commits; but a batch re-run after a crash sends its records again (the idempotent producer
dedupes retries within one producer session, not across task attempts). Every output record
names its input record in `riverbed.source`, so a consumer that keeps the sources it has seen
(per partition, the highest offset is enough for a single-partition source order) gets each
event once.

The static table is read on the driver (a CSV of a few hundred rows) and travels with the plan
as a broadcast join: executors need no access to the file.
"""
from __future__ import annotations

import argparse
import csv
import pathlib
import sys

from clickstream_events import (
    add_common_args,
    drop_torn_first_entry,
    extra_options,
    parse_events,
    session,
    source_header,
    trigger_kwargs,
)

PAGES = pathlib.Path(__file__).resolve().parent / "data" / "pages.csv"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spark-submit jobs/enrich.py",
                                description="Enrich shopping events with their pages.")
    add_common_args(p)
    p.add_argument("--output-topic", default="clicks-enriched")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--pages", default=str(PAGES), help="CSV: page,category,title,price")
    p.add_argument("--event-types", default="add_to_cart,purchase",
                   help="comma-separated event types to keep (default %(default)s)")
    p.add_argument("--trigger", default="5 seconds",
                   help="a processing-time interval, or available-now")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--timeout-s", type=float, default=None)
    return p


def load_pages(spark, path: str):
    with open(path, newline="") as f:
        rows = [(r["page"], r["category"], r["title"], float(r["price"]) if r["price"] else None)
                for r in csv.DictReader(f)]
    return spark.createDataFrame(rows, "page STRING, category STRING, title STRING, price DOUBLE")


def build(spark, args):
    from pyspark.sql import functions as F
    reader = (spark.readStream.format("riverbed")
              .option("bootstrap.servers", args.bootstrap_servers)
              .option("subscribe", args.topic)
              .option("startingOffsets", args.starting_offsets))
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    for k, v in extra_options(args.option).items():
        reader = reader.option(k, v)
    kinds = [t.strip() for t in args.event_types.split(",") if t.strip()]
    events = (parse_events(reader.load())
              .where("error IS NULL")
              .where(~F.lower(F.coalesce("user_agent", F.lit(""))).rlike("bot|crawler|spider"))
              .where(F.col("event_type").isin(kinds)))
    enriched = events.join(F.broadcast(load_pages(spark, args.pages)), "page", "left")
    out = enriched.select(
        F.col("user_id").cast("binary").alias("key"),
        F.to_json(F.struct(
            "event_id", F.date_format("event_time", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("ts"),
            "user_id", "session_id", "event_type", "page",
            F.coalesce("category", F.lit("unknown")).alias("category"), "title", "price",
            "country")).alias("value"),
        F.array(source_header()).alias("headers"))
    return (out.writeStream.queryName("enrich").format("riverbed")
            .option("bootstrap.servers", args.bootstrap_servers)
            .option("topic", args.output_topic)
            .option("checkpointLocation", args.checkpoint)
            .trigger(**trigger_kwargs(args.trigger)))


def main(argv: list[str] | None = None, spark=None) -> int:
    args = build_parser().parse_args(argv)
    spark = session("riverbed-enrich", spark)
    drop_torn_first_entry(args.checkpoint)         # a kill during the query's first batch
    query = build(spark, args).start()
    try:
        query.awaitTermination(args.timeout_s)
    finally:
        if query.isActive:
            query.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
