"""spark.readStream.format("riverbed") against a real fleet: micro-batches capped by
maxOffsetsPerTrigger, restarts from Spark's checkpoint that pick up new partitions and new
topics matching a pattern, and failOnDataLoss when a topic goes away or back in time."""
from __future__ import annotations

import pytest

from riverbed import Admin, NewTopic, Producer, TopicPartition, errors
from spark_helpers import sdk_records, wait_for, wait_for_leaders

QUERY_TIMEOUT_S = 240


def create(bootstrap, topic, partitions):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 2)])
    wait_for_leaders(bootstrap, topic, partitions)


def produce(bootstrap, topic, n, partitions, tag=b""):
    with Producer(bootstrap, acks="all", linger_ms=2) as p:
        futs = [p.send(topic, tag + b"%s-%d" % (topic.encode(), i), partition=i % partitions)
                for i in range(n)]
        p.flush(60)
        for f in futs:
            f.result(0)


def stream(spark, bootstrap_option, **options):
    r = spark.readStream.format("riverbed").option("bootstrap.servers", bootstrap_option)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def run_available_now(df, checkpoint, sink, name=None, path=None):
    w = df.writeStream.format(sink).option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True)
    if name:
        w = w.queryName(name)
    q = w.start(path) if path else w.start()
    try:
        assert q.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish"
    finally:
        if q.isActive:
            q.stop()
    return q


def test_micro_batches_capped_by_max_offsets_per_trigger(spark, bootstrap, bootstrap_option,
                                                         tmp_path):
    create(bootstrap, "stream-cap", 3)
    produce(bootstrap, "stream-cap", 3000, 3)
    df = stream(spark, bootstrap_option, subscribe="stream-cap", startingOffsets="earliest",
                maxOffsetsPerTrigger="700")
    q = run_available_now(df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value"),
                          tmp_path / "chk", "memory", name="stream_cap")
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 3000
    assert len(sizes) >= 5 and max(sizes) <= 700, sizes
    rows = spark.sql("SELECT partition, offset, value FROM stream_cap").collect()
    expected = sdk_records(bootstrap, [TopicPartition("stream-cap", p) for p in range(3)])
    assert sorted((r["partition"], r["offset"], r["value"]) for r in rows) == \
        sorted((r.partition, r.offset, r.value.decode()) for r in expected)


def test_restart_from_checkpoint_picks_up_new_partitions_and_topics(spark, bootstrap,
                                                                   bootstrap_option, tmp_path):
    create(bootstrap, "pat-1", 2)
    produce(bootstrap, "pat-1", 400, 2, b"first-")
    out, chk = tmp_path / "out", tmp_path / "chk"

    def run():
        df = stream(spark, bootstrap_option, subscribePattern="pat-[0-9]+",
                    startingOffsets="earliest", maxOffsetsPerTrigger="300")
        run_available_now(df.selectExpr("topic", "partition", "offset",
                                        "CAST(value AS STRING) AS value"), chk, "parquet",
                          path=str(out))
        return sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())

    assert len(run()) == 400
    # while the query is down: pat-1 grows to 4 partitions, pat-2 appears, more records
    with Admin(bootstrap) as admin:
        admin.create_partitions("pat-1", 4)
    wait_for_leaders(bootstrap, "pat-1", 4)
    create(bootstrap, "pat-2", 2)
    produce(bootstrap, "pat-1", 400, 4, b"second-")
    produce(bootstrap, "pat-2", 200, 2, b"second-")
    got = run()
    expected = sorted((r.topic, r.partition, r.offset, r.value.decode()) for r in sdk_records(
        bootstrap, [TopicPartition("pat-1", p) for p in range(4)]
        + [TopicPartition("pat-2", p) for p in range(2)]))
    assert len(expected) == 1000
    assert got == expected                  # every record once: none skipped, none twice


def recreate(bootstrap, topic, partitions):
    with Admin(bootstrap) as admin:
        admin.delete_topics([topic])

        def gone():
            try:
                admin.describe_topics([topic])
                return False
            except errors.UnknownTopicOrPartitionError:
                return True
        wait_for(gone, 60, f"{topic} deleted")

        def created():
            try:
                admin.create_topics([NewTopic(topic, partitions, 2)])
                return True
            except errors.TopicAlreadyExistsError:
                return False                # the deletion is still being finished
        wait_for(created, 60, f"{topic} created again", interval_s=0.5)
    wait_for_leaders(bootstrap, topic, partitions)


def test_fail_on_data_loss_when_a_topic_goes_back_in_time(spark, bootstrap, bootstrap_option,
                                                         tmp_path):
    create(bootstrap, "lossy", 1)
    produce(bootstrap, "lossy", 100, 1)
    chk, out = tmp_path / "chk", tmp_path / "out"

    def run(fail_on_data_loss):
        df = stream(spark, bootstrap_option, subscribe="lossy", startingOffsets="earliest",
                    failOnDataLoss=fail_on_data_loss)
        run_available_now(df.selectExpr("offset", "CAST(value AS STRING) AS value"), chk,
                          "parquet", path=str(out))
        return sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())

    assert len(run("true")) == 100
    recreate(bootstrap, "lossy", 1)
    produce(bootstrap, "lossy", 10, 1, b"new-")
    with pytest.raises(Exception, match=r"lossy-0 went from 100 back to 10.*failOnDataLoss"):
        run("true")
    # told to go on, the query skips the lost range and reads what comes after
    assert len(run("false")) == 100
    produce(bootstrap, "lossy", 15, 1, b"new-")
    got = run("false")
    assert len(got) == 115
    assert [r for r in got if r[1].startswith("new-")] == [
        (10 + i, "new-lossy-%d" % i) for i in range(15)]
