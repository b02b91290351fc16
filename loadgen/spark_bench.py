"""Spark against the SDK: reading and writing the same records, in the same run.

    python -m loadgen.spark_bench                    # 2,000,000 x 100 B in 4 partitions
    python -m loadgen.spark_bench --records 500000   # quicker
    ... [--bootstrap-server tcp://HOST:PORT]         # a running fleet instead of our own
    ... [--master local[2]] [--json FILE]

Rows (records/s, MB/s of record values):
  producer send_many   one SDK Producer, send_many in 10,000-record slices, acks=all
                       (idempotent), batch.size 262144, linger.ms 5: fills the topic
  consumer             one SDK Consumer assigned all partitions, from the start to the high
                       watermark
  spark count          spark.read.format("riverbed")...load().count()
  spark to parquet     the same read written to a Parquet folder
  spark write          N cached 100 B values (spark.range, built before timing, as the
                       producer's are) -> df.write.format("riverbed") into a new topic with the
                       producer's settings
The ratios the issue aims at: spark count / consumer >= 1, spark write / producer >= 0.5.
The SparkSession (local[2] by default) is started and warmed up (Python workers forked) before
timing; every Spark row is the best of --repeat runs, every SDK row too. Figures depend on the
cores the fleet shares with Spark: the load average is printed with them.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid

__all__ = ["main"]

BATCH_SIZE = 262144
LINGER_MS = 5
SLICE = 10_000


@contextlib.contextmanager
def _fleet(bootstrap: str | None):
    if bootstrap:
        yield bootstrap
        return
    from deploy.fleet import Fleet, free_base_port
    d = tempfile.mkdtemp(prefix="rbd-spark-bench-")
    try:
        with Fleet(d, free_base_port(), storage_nodes=3, controllers=1, gateways=1,
                   counts={"group_coordinator": 0, "offset_manager": 0}) as fleet:
            fleet.up(detach=True)
            yield fleet.gateway_endpoint
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _create(bootstrap: list[str], topic: str, partitions: int) -> None:
    from riverbed import Admin, NewTopic, errors
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        deadline = time.monotonic() + 60
        while True:
            try:
                (desc,) = admin.describe_topics([topic])
                if all(p.leader >= 0 for p in desc.partitions):
                    return
            except errors.RiverbedError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{topic}: no leaders after 60 s")
            time.sleep(0.1)


def produce(bootstrap: list[str], topic: str, records: int, size: int) -> float:
    from riverbed import Producer
    values = [os.urandom(size) for _ in range(SLICE)]
    with Producer(bootstrap, acks="all", batch_size=BATCH_SIZE, linger_ms=LINGER_MS) as p:
        start = time.perf_counter()
        futures = []
        left = records
        while left > 0:
            n = min(SLICE, left)
            futures += p.send_many(topic, values[:n])
            left -= n
        p.flush()
        elapsed = time.perf_counter() - start
        for f in futures:
            f.result(0)
    return elapsed


def consume(bootstrap: list[str], topic: str, partitions: int) -> tuple[float, int]:
    from riverbed import Consumer, TopicPartition
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(bootstrap=bootstrap, enable_auto_commit=False) as c:
        ends = c.end_offsets(tps)
        c.assign(tps)
        c.seek_to_beginning()
        for tp in tps:
            c.position(tp)
        n = 0
        start = time.perf_counter()
        left = set(tps)
        while left:
            for tp, recs in c.poll(timeout_ms=1000, max_records=50_000).items():
                n += len(recs)
                if c.position(tp) >= ends[tp]:
                    left.discard(tp)
        return time.perf_counter() - start, n


def _session(master: str, tmp: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from riverbed.spark import register
    spark = (SparkSession.builder.master(master).appName("riverbed-spark-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.local.dir", os.path.join(tmp, "local"))
             .config("spark.driver.memory", "2g")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def _best(fn, repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.spark_bench", description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--repeat", type=int, default=2, help="runs per row; the best counts")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--bootstrap-server", help="a running fleet's gateway (default: start one)")
    p.add_argument("--json", help="write the figures to this file too")
    args = p.parse_args(argv)
    n, size = args.records, args.record_size
    rows: dict[str, float] = {}
    tmp = tempfile.mkdtemp(prefix="rbd-spark-bench-")
    try:
        with _fleet(args.bootstrap_server) as gateway:
            bootstrap = [gateway]
            topic = f"spark-bench-{uuid.uuid4().hex[:8]}"
            _create(bootstrap, topic, args.partitions)
            _log(f"producing {n} x {size} B to {topic} ({args.partitions} partitions)")
            rows["producer send_many"] = n / produce(bootstrap, topic, n, size)

            def sdk_read() -> float:
                elapsed, got = consume(bootstrap, topic, args.partitions)
                assert got == n, f"consumer read {got} of {n}"
                return elapsed
            rows["consumer"] = n / _best(sdk_read, args.repeat)
            _log(f"starting Spark ({args.master})")
            spark = _session(args.master, tmp)
            try:
                def source():
                    return (spark.read.format("riverbed").option("bootstrap.servers", gateway)
                            .option("subscribe", topic).load())
                source().limit(10).collect()                  # warm-up: workers forked

                def count() -> float:
                    start = time.perf_counter()
                    got = source().count()
                    elapsed = time.perf_counter() - start
                    assert got == n, f"spark counted {got} of {n}"
                    return elapsed
                rows["spark count"] = n / _best(count, args.repeat)

                def to_parquet() -> float:
                    out = os.path.join(tmp, f"parquet-{uuid.uuid4().hex[:6]}")
                    start = time.perf_counter()
                    source().write.parquet(out)
                    elapsed = time.perf_counter() - start
                    shutil.rmtree(out, ignore_errors=True)
                    return elapsed
                rows["spark to parquet"] = n / _best(to_parquet, args.repeat)

                # the rows to write, built and cached before timing (the producer's values
                # are built before its clock starts too)
                values = spark.range(n, numPartitions=args.partitions).selectExpr(
                    f"CAST(lpad(CAST(id AS STRING), {size}, 'x') AS BINARY) AS value").cache()
                values.count()

                def write(rows=values, expect=n) -> float:
                    target = f"spark-bench-out-{uuid.uuid4().hex[:8]}"
                    _create(bootstrap, target, args.partitions)
                    start = time.perf_counter()
                    (rows.write.format("riverbed").option("bootstrap.servers", gateway)
                     .option("topic", target).option("riverbed.batch.size", str(BATCH_SIZE))
                     .option("riverbed.linger.ms", str(LINGER_MS)).mode("append").save())
                    elapsed = time.perf_counter() - start
                    from riverbed import Consumer, TopicPartition
                    with Consumer(bootstrap=bootstrap) as c:
                        ends = c.end_offsets([TopicPartition(target, q)
                                              for q in range(args.partitions)])
                    assert sum(ends.values()) == expect, \
                        f"spark wrote {sum(ends.values())} of {expect}"
                    return elapsed
                write(values.limit(10_000), 10_000)                # warm-up
                rows["spark write"] = n / _best(write, args.repeat)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()
    conditions = {"records": n, "record_size": size, "partitions": args.partitions,
                  "replication_factor": 1, "master": args.master, "cpus": os.cpu_count(),
                  "loadavg_after": [round(x, 2) for x in load],
                  "producer": {"acks": "all", "batch_size": BATCH_SIZE, "linger_ms": LINGER_MS}}
    ratios = {"spark count / consumer": rows["spark count"] / rows["consumer"],
              "spark to parquet / consumer": rows["spark to parquet"] / rows["consumer"],
              "spark write / producer send_many": rows["spark write"] / rows["producer send_many"]}
    print(f"{n:,} x {size} B records, {args.partitions} partitions (RF 1), Spark {args.master}, "
          f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'':24}{'records/s':>12}{'MB/s':>9}")
    for name, rps in rows.items():
        print(f"{name:24}{rps:>12,.0f}{rps * size / 1e6:>9.1f}")
    for name, r in ratios.items():
        print(f"{name:36}{r:>6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"conditions": conditions, "records_per_sec": rows, "ratios": ratios}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
