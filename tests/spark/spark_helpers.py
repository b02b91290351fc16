"""Helpers for the Spark tests: a local SparkSession that cleans up after itself, the SDK's
view of a topic to compare Spark's against, and Spark processes started by PID.

- `spark_env()`: the environment Spark's Python workers need here (this venv's python, loopback).
- `start_session(tmp)` / `stop_session(spark)`: local[2], small shuffles, UTC, state under tmp;
  stopping also ends the JVM Spark started (by its PID).
- `sdk_records(bootstrap, tps)`: every record of these partitions from offset 0 to the high
  watermark, read by one SDK Consumer.
- `wait_for(cond, timeout_s, what)`: a bounded wait.
"""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Callable, Iterable

from riverbed import Admin, Consumer, TopicPartition, errors

REPO = pathlib.Path(__file__).resolve().parents[2]


def spark_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC"})
    env.update(extra or {})
    return env


def start_session(tmp: pathlib.Path, app: str = "riverbed-tests"):
    os.environ.update(spark_env())
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.local.dir", str(tmp / "local"))
             .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
             .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={tmp / 'derby'}")
             .config("spark.sql.streaming.stopTimeout", "30s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    from riverbed.spark import register
    register(spark)
    return spark


def stop_session(spark) -> None:
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        for q in spark.streams.active:
            q.stop()
        spark.stop()
    finally:
        if gateway is not None:
            gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            stop_process(proc)


def stop_process(proc: subprocess.Popen, timeout_s: float = 30) -> None:
    """SIGTERM then SIGKILL one process we started (and its process group if it leads one)."""
    if proc.poll() is not None:
        return
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        return
    group = pgid == proc.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig) if group else proc.send_signal(sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout_s)
            if group:
                try:
                    os.killpg(pgid, signal.SIGKILL)   # children left in the group
                except ProcessLookupError:
                    pass
            return
        except subprocess.TimeoutExpired:
            continue


def wait_for(cond: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def wait_for_leaders(bootstrap, topic: str, partitions: int, timeout_s: float = 60) -> None:
    with Admin(bootstrap) as admin:
        def ready():
            try:
                (desc,) = admin.describe_topics([topic])
            except errors.RiverbedError:
                return False
            return len(desc.partitions) == partitions and all(p.leader >= 0
                                                              for p in desc.partitions)
        wait_for(ready, timeout_s, f"leaders of {topic}")


def sdk_records(bootstrap, tps: Iterable[TopicPartition], timeout_s: float = 120) -> list:
    """Every record of `tps` from the log start to the high watermark, in (topic, partition,
    offset) order, as the SDK's Consumer returns them."""
    tps = sorted(tps)
    out = []
    with Consumer(bootstrap=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100) as c:
        ends = c.end_offsets(tps)
        c.assign(tps)
        c.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError("SDK consumer did not reach the high watermarks")
            for recs in c.poll(timeout_ms=500, max_records=50_000).values():
                out += recs
    out = [r for r in out if r.offset < ends[TopicPartition(r.topic, r.partition)]]
    return sorted(out, key=lambda r: (r.topic, r.partition, r.offset))
