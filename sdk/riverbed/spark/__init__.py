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

import logging
import os
from typing import Any

__all__ = ["register", "ensure_worker_python", "RiverbedDataSource", "SCHEMA",
           "WorkerPythonError"]

log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register the `riverbed` format with a SparkSession (spark.dataSource.register), after
    making sure Spark's Python workers run an interpreter that can import riverbed
    (riverbed.spark.worker_python): on a local master a driver started as `.venv/bin/python
    job.py` without the venv on the PATH gets its workers moved to that interpreter; a setting
    that cannot work, or a cluster master with no `spark.pyspark.python`/`PYSPARK_PYTHON` at
    all, raises WorkerPythonError saying what to set."""
    ensure_worker_python(spark)
    from riverbed.spark.source import RiverbedDataSource
    spark.dataSource.register(RiverbedDataSource)


def ensure_worker_python(spark: Any) -> None:
    """Check, and where needed set, the interpreter of `spark`'s Python workers
    (`sc.pythonExec`, which the data source's workers are started with). A Spark Connect
    session has no SparkContext here (its workers are the server's business): nothing done."""
    import sys

    from riverbed.spark.worker_python import decide_worker_python
    try:
        sc = spark.sparkContext
    except Exception:      # noqa: BLE001 - Spark Connect: no SparkContext on the client
        return
    decision = decide_worker_python(
        python_exec=sc.pythonExec, conf_python=sc.getConf().get("spark.pyspark.python"),
        env_python=os.environ.get("PYSPARK_PYTHON"), master=sc.master,
        driver_python=sys.executable, imports_riverbed=_imports_riverbed)
    if decision.changed:
        log.info("Spark's Python workers run %s: %s", decision.python, decision.why)
        sc.pythonExec = decision.python


def _imports_riverbed(python: str) -> bool:
    """Can this interpreter (a path, or a name looked up on the PATH as Spark's workers do)
    find the riverbed package? Runs it once (about 20 ms)."""
    import shutil
    import subprocess
    exe = python if os.sep in python else shutil.which(python)
    if exe is None:
        return False
    try:
        probe = subprocess.run(
            [exe, "-c", "import importlib.util, sys; "
                        "sys.exit(importlib.util.find_spec('riverbed') is None)"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def __getattr__(name: str) -> Any:
    if name in ("RiverbedDataSource", "SCHEMA"):
        from riverbed.spark import source
        return getattr(source, name)
    if name == "WorkerPythonError":
        from riverbed.spark.worker_python import WorkerPythonError
        return WorkerPythonError
    raise AttributeError(f"module 'riverbed.spark' has no attribute {name!r}")
