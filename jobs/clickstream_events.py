"""What the jobs share: the clickstream event's schema (loadgen/clickstream.py writes it), parsing
records into events with an `error` column for bad ones, the dead-letter rows, a SparkSession
with the `riverbed` format, and the common command-line options.

Imported by the job scripts beside it (spark-submit puts a script's folder on the driver's
path); executors never import it: everything here is Spark SQL expressions.
"""
from __future__ import annotations

import argparse
import os
import sys

EVENT_DDL = ("event_id STRING, ts TIMESTAMP, user_id STRING, session_id STRING, "
             "event_type STRING, page STRING, referrer STRING, user_agent STRING, "
             "country STRING, duration_ms BIGINT")
REQUIRED = ("event_id", "ts", "user_id", "page")


def session(app: str, spark=None):
    """The active SparkSession (or a new one) in UTC, with `riverbed` registered."""
    from pyspark.sql import SparkSession

    from riverbed.spark import register
    if spark is None:
        spark = SparkSession.builder.appName(app).getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    register(spark)
    return spark


def parse_events(df):
    """Records (the riverbed schema) -> their columns plus the event's fields and `error`: NULL
    for a good event, else why it is bad (not JSON, a required field missing or malformed)."""
    from pyspark.sql import functions as F
    text = F.col("value").cast("string")
    parsed = F.from_json(text, EVENT_DDL + ", _corrupt STRING",
                         {"columnNameOfCorruptRecord": "_corrupt", "mode": "PERMISSIVE"})
    out = df.withColumn("e", parsed)
    # from_json gives NULL for an empty value, and puts anything it cannot parse (not JSON, a
    # field of the wrong type) in _corrupt, keeping the fields it could read.
    not_json = F.col("e").isNull() | (F.col("e._corrupt").isNotNull() & F.coalesce(
        *[F.col(f"e.{f}") for f in ("event_id", "user_id", "page")]).isNull())
    error = F.when(not_json, F.lit("not a JSON event"))
    for field in REQUIRED:
        error = error.when(F.col(f"e.{field}").isNull(), F.lit(f"missing or malformed {field}"))
    return out.withColumn("error", error).select(
        "key", "value", "topic", "partition", "offset", "timestamp", "headers",
        *[F.col(f"e.{f}").alias(f) for f in ("event_id", "user_id", "session_id", "event_type",
                                             "page", "referrer", "user_agent", "country",
                                             "duration_ms")],
        F.col("e.ts").alias("event_time"), "error")


def source_header():
    """A header naming the record an output row came from (topic/partition/offset): consumers
    of an at-least-once output dedupe on it."""
    from pyspark.sql import functions as F
    return F.named_struct(F.lit("key"), F.lit("riverbed.source"),
                          F.lit("value"), F.concat_ws("/", "topic", F.col("partition").cast("string"),
                                                      F.col("offset").cast("string")).cast("binary"))


def dead_letters(events):
    """Bad events as records for a dead-letter topic: the original key, value and headers, plus
    headers `dlq.error` (why) and `riverbed.source` (topic/partition/offset)."""
    from pyspark.sql import functions as F
    extra = F.array(
        F.named_struct(F.lit("key"), F.lit("dlq.error"), F.lit("value"),
                       F.col("error").cast("binary")),
        source_header())
    return events.where("error IS NOT NULL").select(
        "key", "value", F.concat(F.coalesce("headers", F.array().cast(
            "array<struct<key:string,value:binary>>")), extra).alias("headers"))


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_servers",
                   default=os.environ.get("RIVERBED_BOOTSTRAP") or "tcp://127.0.0.1:9092",
                   help="the gateways, e.g. tcp://127.0.0.1:9092 (default: $RIVERBED_BOOTSTRAP "
                        "or tcp://127.0.0.1:9092)")
    p.add_argument("--topic", default="clicks", help="the clickstream topic (default %(default)s)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="another option for the riverbed source (repeatable), e.g. "
                        "riverbed.fetch.max.wait.ms=100")


def extra_options(items) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"--option {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def trigger_kwargs(trigger: str) -> dict:
    """'available-now' -> availableNow; '10 seconds' -> processingTime."""
    if trigger == "available-now":
        return {"availableNow": True}
    return {"processingTime": trigger}


def drop_torn_first_entry(checkpoint: str) -> list[str]:
    """Let a query that was killed while writing its first batch start again.

    Spark writes each entry of a checkpoint's offset and commit logs to a hidden temporary
    file (`.<batch>.<uuid>.tmp`, and Hadoop's `..<batch>.<uuid>.tmp.crc`), then renames it into
    place. A driver killed between the two leaves only the temporary file. Spark 4 refuses to
    start a query whose offset log has no entry while that directory holds any file
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY), so the job could never run again.

    A temporary file is a write that never happened. This removes them from a local checkpoint
    whose offset log has no entry yet, and returns the paths removed. A checkpoint with a
    logged batch is left to Spark, which resumes it. A remote one (hdfs:, s3a:) is left alone.
    """
    path = checkpoint[len("file:"):] if checkpoint.startswith("file:") else checkpoint
    offsets = os.path.join(path, "offsets")
    if "://" in path or not os.path.isdir(offsets):
        return []
    if any(not name.startswith(".") for name in os.listdir(offsets)):
        return []                                   # a logged batch: Spark resumes from it
    removed = []
    for log_dir in (offsets, os.path.join(path, "commits")):
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else ():
            if name.startswith(".") and name.endswith((".tmp", ".tmp.crc")):
                os.remove(os.path.join(log_dir, name))
                removed.append(os.path.join(log_dir, name))
    return removed


def start_queries(writers, timeout_s: float = 600):
    """Start streaming queries one after another, each once the one before has set its source up
    (made progress, or ended). A Spark 4 race makes starting them together unsafe: a Python data
    source's stream reader, starting, adds entries to a map that tasks of other queries reading
    the same data source carry, and a task serialized at that moment fails to deserialize
    (java.io.OptionalDataException). Once the first reader has started the map no longer grows."""
    import time
    queries = []
    for w in writers:
        q = w.start()
        queries.append(q)
        if len(queries) == len(writers):
            break
        deadline = time.monotonic() + timeout_s
        while q.isActive and q.lastProgress is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"query {q.name} made no progress in {timeout_s} s")
            q.awaitTermination(0.2)
    return queries
