"""df.write / writeStream .format("riverbed") against a real fleet: what Spark writes is what
the SDK reads back (keys, values, headers, partitions, topics from a column), a record that
cannot be written fails the job, and a bad schema fails before any task runs."""
from __future__ import annotations

import pytest

from riverbed import Admin, NewTopic, Producer, TopicPartition
from spark_helpers import sdk_records, wait_for_leaders


@pytest.fixture(scope="module")
def write_topics(bootstrap):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(t, n, 2) for t, n in
                             (("write-a", 3), ("write-b", 2), ("write-c", 2), ("write-src", 2),
                              ("write-dst", 2))])
    for t, n in (("write-a", 3), ("write-b", 2), ("write-c", 2), ("write-src", 2),
                 ("write-dst", 2)):
        wait_for_leaders(bootstrap, t, n)


def writer(df, bootstrap_option, **options):
    w = df.write.format("riverbed").option("bootstrap.servers", bootstrap_option).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    return w


def test_write_then_read_back_round_trip(spark, bootstrap, bootstrap_option, write_topics):
    rows = [("k-%d" % (i % 10) if i % 4 else None, b"value-%d" % i, i % 3,
             [("n", b"%d" % i)] if i % 3 == 0 else [])
            for i in range(2000)]
    df = spark.createDataFrame(
        rows, "key string, value binary, partition int, headers array<struct<key:string,value:binary>>")
    writer(df, bootstrap_option, topic="write-a").save()
    got = sdk_records(bootstrap, [TopicPartition("write-a", p) for p in range(3)])
    assert sorted((r.value, r.key, r.partition, list(r.headers)) for r in got) == sorted(
        (v, k.encode() if k else None, p, h) for k, v, p, h in rows)
    # and Spark reads back the same rows
    back = spark.read.format("riverbed").option("bootstrap.servers", bootstrap_option) \
        .option("subscribe", "write-a").load() \
        .selectExpr("CAST(key AS STRING) AS key", "value", "partition", "headers").collect()
    assert sorted((bytes(r["value"]), r["key"], r["partition"],
                   [(h["key"], bytes(h["value"])) for h in r["headers"]]) for r in back) == \
        sorted((v, k, p, h) for k, v, p, h in rows)


def test_topic_column_and_keyless_values(spark, bootstrap, bootstrap_option, write_topics):
    df = spark.range(3000).selectExpr(
        "CASE WHEN id % 2 = 0 THEN 'write-b' ELSE 'write-c' END AS topic",
        "CAST(id AS STRING) AS value")
    writer(df, bootstrap_option).save()                 # the topic from the column
    b = sdk_records(bootstrap, [TopicPartition("write-b", p) for p in range(2)])
    c = sdk_records(bootstrap, [TopicPartition("write-c", p) for p in range(2)])
    assert sorted(int(r.value) for r in b) == list(range(0, 3000, 2))
    assert sorted(int(r.value) for r in c) == list(range(1, 3000, 2))
    assert all(r.key is None for r in b + c)


def test_a_record_that_cannot_be_written_fails_the_job(spark, bootstrap_option, write_topics):
    df = spark.createDataFrame([(b"v", 0), (b"w", 99)], "value binary, partition int")
    with pytest.raises(Exception, match="partition 99"):
        writer(df, bootstrap_option, topic="write-b").save()


@pytest.mark.parametrize("ddl, options, message", [
    ("key binary", {"topic": "write-b"}, "needs a column 'value'"),
    ("value binary", {}, "needs a column 'topic'"),
    ("value int", {"topic": "write-b"}, "column 'value' is int"),
])
def test_bad_write_schema_fails_before_any_task_runs(spark, bootstrap_option, write_topics, ddl,
                                                     options, message):
    sc = spark.sparkContext
    group = f"bad-write-{abs(hash(message))}"
    sc.setJobGroup(group, "bad write")
    try:
        with pytest.raises(Exception, match=message):
            writer(spark.createDataFrame([], ddl), bootstrap_option, **options).save()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert list(sc.statusTracker().getJobIdsForGroup(group)) == []


def test_write_stream_copies_a_topic(spark, bootstrap, bootstrap_option, write_topics, tmp_path):
    with Producer(bootstrap, acks="all") as p:
        for i in range(1500):
            p.send("write-src", b"src-%d" % i, key=b"k%d" % (i % 7))
        p.flush(60)
    src = spark.readStream.format("riverbed").option("bootstrap.servers", bootstrap_option) \
        .option("subscribe", "write-src").option("startingOffsets", "earliest") \
        .option("maxOffsetsPerTrigger", "500").load()
    q = src.selectExpr("key", "value", "headers").writeStream.format("riverbed") \
        .option("bootstrap.servers", bootstrap_option).option("topic", "write-dst") \
        .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start()
    try:
        assert q.awaitTermination(240)
    finally:
        if q.isActive:
            q.stop()
    got = sdk_records(bootstrap, [TopicPartition("write-dst", p) for p in range(2)])
    assert sorted(r.value for r in got) == sorted(b"src-%d" % i for i in range(1500))
    # same key, same partition (murmur2, as the source topic's producer chose)
    src_recs = sdk_records(bootstrap, [TopicPartition("write-src", p) for p in range(2)])
    assert {(r.key, r.partition) for r in got} == {(r.key, r.partition) for r in src_recs}
