"""Riverbed topics in PySpark: a Python data source (Spark 4's Python Data Source API) named
`riverbed` that reads and writes the way Spark's Kafka source does, running the SDK's Consumer
and Producer inside the executors.

    from riverbed.spark import register
    register(spark)                                   # spark.dataSource.register(...)

    df = (spark.read.format("riverbed")
          .option("bootstrap.servers", "tcp://127.0.0.1:9092")
          .option("subscribe", "clicks")              # or subscribePattern / assign
          .option("startingOffsets", "earliest")      # or '{"clicks":{"0":23,"1":-2}}'
          .load())                                    # key, value, topic, partition, offset,
                                                      # timestamp, timestampType, headers
    (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
       .write.format("riverbed").option("bootstrap.servers", "tcp://127.0.0.1:9092")
       .option("topic", "clicks-upper").mode("append").save())

Streaming: `spark.readStream.format("riverbed")` with `maxOffsetsPerTrigger`, restarts from
Spark's checkpoint, picks up new partitions and new topics matching `subscribePattern`, and
handles deleted or truncated records per `failOnDataLoss`; `writeStream.format("riverbed")`
writes at-least-once. Options: `riverbed.spark.options`. This package needs pyspark (4.2 or
later) and pyarrow; `import riverbed` does not.
"""
from __future__ import annotations

from typing import Any

__all__ = ["register", "RiverbedDataSource", "SCHEMA"]


def register(spark: Any) -> None:
    """Register the `riverbed` format with a SparkSession (spark.dataSource.register)."""
    from riverbed.spark.source import RiverbedDataSource
    spark.dataSource.register(RiverbedDataSource)


def __getattr__(name: str) -> Any:
    if name in ("RiverbedDataSource", "SCHEMA"):
        from riverbed.spark import source
        return getattr(source, name)
    raise AttributeError(f"module 'riverbed.spark' has no attribute {name!r}")
