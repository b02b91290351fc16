"""spark.read.format("riverbed") against a real fleet: what Spark reads is exactly what the SDK
reads, for several topics and partitions, empty partitions, JSON ranges, timestamps and
minPartitions; bad options fail on the driver before any task runs."""
from __future__ import annotations

import json

import pytest

from riverbed import Admin, NewTopic, Producer, TopicPartition
from riverbed.spark.arrow import SCHEMA as ARROW_SCHEMA
from spark_helpers import sdk_records, wait_for_leaders

T0 = 1_700_000_000_000          # record timestamps: T0 + i * 1000 ms
ROWS = "topic, partition, offset, key, value, unix_millis(timestamp) AS ts, timestampType, headers"


@pytest.fixture(scope="module")
def topics(bootstrap):
    """read-a: 3 partitions, keys (some null), headers on some records, explicit timestamps,
    partition 2 left empty; read-b: 1 partition of keyless values (send_many)."""
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("read-a", 3, 2), NewTopic("read-b", 1, 2)])
    wait_for_leaders(bootstrap, "read-a", 3)
    wait_for_leaders(bootstrap, "read-b", 1)
    with Producer(bootstrap, acks="all", linger_ms=2) as p:
        futs = []
        for i in range(3000):
            headers = [("n", b"%d" % i), ("parity", b"odd" if i % 2 else b"even")] if i % 7 == 0 \
                else None
            key = None if i % 5 == 0 else b"user-%d" % (i % 50)
            futs.append(p.send("read-a", b"a-%d" % i, key=key, partition=i % 2, headers=headers,
                               timestamp_ms=T0 + i * 1000))
        futs += p.send_many("read-b", [b"b-%d" % i for i in range(5000)], partition=0,
                            timestamp_ms=T0)
        p.flush(60)
        for f in futs:
            f.result(0)
    return {"read-a": 3, "read-b": 1}


def spark_rows(df):
    out = []
    for r in df.selectExpr(*ROWS.split(", ")).collect():
        headers = tuple((h["key"], bytes(h["value"]) if h["value"] is not None else None)
                        for h in r["headers"])
        out.append((r["topic"], r["partition"], r["offset"],
                    bytes(r["key"]) if r["key"] is not None else None, bytes(r["value"]), r["ts"],
                    headers))
    return sorted(out)


def sdk_rows(records):
    return sorted((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp,
                   tuple((k, v) for k, v in r.headers)) for r in records)


def reader(spark, bootstrap_option, **options):
    r = spark.read.format("riverbed").option("bootstrap.servers", bootstrap_option)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_schema_is_kafkas_with_headers(spark, bootstrap_option):
    from pyspark.sql.pandas.types import to_arrow_schema
    df = reader(spark, bootstrap_option, subscribe="read-a")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert to_arrow_schema(df.schema, timezone="UTC").equals(ARROW_SCHEMA)


def test_batch_read_returns_exactly_what_the_sdk_reads(spark, bootstrap, bootstrap_option, topics):
    tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
    expected = sdk_rows(sdk_records(bootstrap, tps))
    assert len(expected) == 8000
    df = reader(spark, bootstrap_option, subscribe="read-a,read-b")
    got = spark_rows(df)
    assert got == expected
    assert df.rdd.getNumPartitions() == 3          # read-a 0 and 1, read-b 0 (read-a 2 is empty)
    by_type = {r["timestampType"] for r in df.select("timestampType").distinct().collect()}
    assert by_type == {0}
    # the same with a pattern
    assert spark_rows(reader(spark, bootstrap_option, subscribePattern="read-.*")) == expected


def test_batch_read_json_ranges_and_timestamps(spark, bootstrap, bootstrap_option, topics):
    expected = sdk_rows(sdk_records(bootstrap, [TopicPartition("read-a", p) for p in range(3)]))
    starting = json.dumps({"read-a": {"0": 100, "1": -2, "2": -2}})
    ending = json.dumps({"read-a": {"0": 250, "1": 10, "2": -1}})
    got = spark_rows(reader(spark, bootstrap_option, subscribe="read-a",
                            startingOffsets=starting, endingOffsets=ending))
    assert got == [r for r in expected if (r[1] == 0 and 100 <= r[2] < 250)
                   or (r[1] == 1 and r[2] < 10)]
    # assign + a time range: records with timestamp in [T0 + 1000 s, T0 + 1100 s)
    got = spark_rows(reader(spark, bootstrap_option, assign=json.dumps({"read-a": [0, 1]}),
                            startingTimestamp=str(T0 + 1000_000),
                            endingTimestamp=str(T0 + 1100_000)))
    assert got == [r for r in expected if T0 + 1000_000 <= r[5] < T0 + 1100_000 and r[1] != 2]
    assert len(got) == 100


def test_min_partitions_splits_ranges_and_reads_the_same(spark, bootstrap, bootstrap_option,
                                                          topics):
    df = reader(spark, bootstrap_option, subscribe="read-b", minPartitions="7",
                maxRecordsPerBatch="300")
    assert df.rdd.getNumPartitions() == 7
    expected = sdk_rows(sdk_records(bootstrap, [TopicPartition("read-b", 0)]))
    assert spark_rows(df) == expected
    assert df.count() == 5000


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "no-such-topic"}, "topic 'no-such-topic' .* does not exist"),
    ({"subscribe": "read-a", "startingOffsets": '{"read-a":{"0":1'},
     "startingOffsets: malformed JSON"),
    ({"subscribe": "read-a", "subscribePattern": "read-.*"},
     "only one of the options subscribe, subscribePattern and assign"),
    ({"subscribe": "read-a", "startingOffsets": '{"read-a":{"0":5}}'},
     "gives no offset for read-a-1"),
    ({"subscribe": "read-a", "endingOffsets": "earliest"}, "endingOffsets=earliest is not valid"),
    ({"subscribe": "read-a", "riverbed.group.id": "g"}, "riverbed.group.id is not supported"),
])
def test_bad_options_fail_before_any_task_runs(spark, bootstrap_option, topics, options, message):
    sc = spark.sparkContext
    group = f"bad-options-{abs(hash(message))}"
    sc.setJobGroup(group, "bad options")
    try:
        with pytest.raises(Exception, match=message):
            reader(spark, bootstrap_option, **options).count()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert list(sc.statusTracker().getJobIdsForGroup(group)) == []


def test_log_append_time_topics_say_so(spark, bootstrap, bootstrap_option):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("read-lat", 1, 2,
                                      configs={"message.timestamp.type": "LogAppendTime"})])
    wait_for_leaders(bootstrap, "read-lat", 1)
    with Producer(bootstrap, acks="all") as p:
        p.send_many("read-lat", [b"x%d" % i for i in range(50)], timestamp_ms=T0)
        p.flush(30)
    expected = sdk_rows(sdk_records(bootstrap, [TopicPartition("read-lat", 0)]))
    df = reader(spark, bootstrap_option, subscribe="read-lat")
    assert spark_rows(df) == expected
    assert all(r[5] > T0 for r in expected)                 # the log's time, not the producer's
    assert {r[0] for r in df.select("timestampType").collect()} == {1}


def test_deleted_records_fail_the_read_or_are_skipped(spark, bootstrap, bootstrap_option):
    """Retention deletes the oldest segments: a read that asks for them fails with
    failOnDataLoss=true and starts at the log start with false."""
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("read-retained", 1, 2, configs={
            "segment.bytes": "4096", "retention.bytes": "8192", "file.delete.delay.ms": "0"})])
    wait_for_leaders(bootstrap, "read-retained", 1)
    tp = TopicPartition("read-retained", 0)
    # fixed 1 KiB batches (no adaptive growth): several segments of 4 KiB, some retained
    with Producer(bootstrap, acks="all", batch_size=1024, batch_size_max=1024) as p:
        for i in range(1000):
            p.send("read-retained", b"r-%04d" % i, partition=0)
        p.flush(30)

    def log_start():
        from riverbed import Consumer
        with Consumer(bootstrap=bootstrap) as c:
            return c.beginning_offsets([tp])[tp]
    from spark_helpers import wait_for
    start = wait_for(log_start, 60, "retention to delete the first segments")
    starting = json.dumps({"read-retained": {"0": 0}})
    with pytest.raises(Exception, match=r"read-retained-0: offsets 0 to \d+ are no longer in "
                                        r"the log.*failOnDataLoss"):
        reader(spark, bootstrap_option, subscribe="read-retained",
               startingOffsets=starting).count()
    got = spark_rows(reader(spark, bootstrap_option, subscribe="read-retained",
                            startingOffsets=starting, failOnDataLoss="false"))
    assert got == sdk_rows(sdk_records(bootstrap, [tp]))
    assert got[0][2] >= start > 0 and got[-1][2] == 999
