"""The riverbed sink's exactly-once mode (exactlyOnce=true, riverbed.spark.exactly_once) against
a real fleet.

- The task protocol without Spark: a retried task (same partition and batch) fences the zombie
  attempt, whose prepared transaction the driver then cannot commit; a re-run of a committed
  batch skips the partition; another query with the same prefix does not.
- A streaming query whose driver commit dies half way (one partition's transaction committed,
  the other only prepared), restarted from its checkpoint, and then made to re-run a batch the
  sink had wholly committed (its commit-log entry removed, as a driver killed between the sink's
  commit and the checkpoint's leaves it): read_committed readers see every output record once,
  in order per partition; the aborted copies are in the log but never visible to them.

Every check reads the output back with read_committed and with read_uncommitted.
"""
from __future__ import annotations

import collections

import pytest

from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors
from riverbed.spark.arrow import WriteColumns
from riverbed.spark.clients import complete_transactions, write_exactly_once
from riverbed.spark.exactly_once import BatchContext, marker_partition
from spark_helpers import wait_for_leaders

QUERY_TIMEOUT_S = 300
CONFIG = {"acks": "all", "transaction_timeout_ms": 60000}


def create(bootstrap, topic, partitions):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 2)])
    wait_for_leaders(bootstrap, topic, partitions)


def read_back(bootstrap, topic, partitions, committed=True):
    """Every record of the topic: read_committed (or read_uncommitted), per partition in
    offset order."""
    out = collections.defaultdict(list)
    with Consumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2000, fetch_max_wait_ms=100,
                  isolation_level="read_committed" if committed else "read_uncommitted") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        for r in c:
            out[r.partition].append(r)
    return out


def values(by_partition):
    return [r.value for recs in by_partition.values() for r in recs]


def rows(*vals):
    return iter([WriteColumns(list(vals), None, None, None, None, len(vals))])


def test_a_retried_task_fences_its_zombie_and_a_rerun_skips_what_committed(bootstrap):
    topic, prefix = "eos-proto", "eos-proto-q"
    create(bootstrap, topic, 1)
    b0 = BatchContext("query-1", 0)
    zombie = write_exactly_once(bootstrap, CONFIG, topic, prefix, 0, b0, rows(b"z:0", b"z:1"))
    assert zombie.records == 2 and zombie.prepared is not None
    retry = write_exactly_once(bootstrap, CONFIG, topic, prefix, 0, b0, rows(b"a:0", b"a:1"))
    assert retry.prepared.producer_epoch > zombie.prepared.producer_epoch
    with pytest.raises(errors.ProducerFencedError):
        complete_transactions(bootstrap, [zombie.prepared], commit=True)
    complete_transactions(bootstrap, [retry.prepared], commit=True)
    complete_transactions(bootstrap, [retry.prepared], commit=True)      # a repeat: no change
    rerun = write_exactly_once(bootstrap, CONFIG, topic, prefix, 0, b0, rows(b"r:0"))
    assert rerun.skipped and rerun.prepared is None and rerun.records == 0
    assert write_exactly_once(bootstrap, CONFIG, topic, prefix, 0, BatchContext("query-1", 1),
                              iter([WriteColumns([], None, None, None, None, 0)])).records == 0
    b1 = write_exactly_once(bootstrap, CONFIG, topic, prefix, 0, BatchContext("query-1", 1),
                            rows(b"b:0"))
    complete_transactions(bootstrap, [b1.prepared], commit=True)
    # a new query (a new checkpoint) reusing the prefix starts afresh at batch 0
    other = write_exactly_once(bootstrap, CONFIG, topic, prefix, 0, BatchContext("query-2", 0),
                               rows(b"n:0"))
    assert not other.skipped
    complete_transactions(bootstrap, [other.prepared], commit=False)
    assert values(read_back(bootstrap, topic, 1)) == [b"a:0", b"a:1", b"b:0"]
    assert values(read_back(bootstrap, topic, 1, committed=False)) == [
        b"z:0", b"z:1", b"a:0", b"a:1", b"b:0", b"n:0"]
    with Admin(bootstrap) as admin:
        assert admin.list_group_offsets(prefix)[marker_partition(0)].offset == 2


def _half_commit_source(flag_path: str, failing_batch: int):
    """A `riverbed` source whose stream writer's commit of `failing_batch`, the first time,
    commits one task's transaction and then fails (a driver dying half way through the sink's
    commit). Defined here so that cloudpickle ships it by value to Spark's Python workers."""
    import os

    from riverbed.spark import source

    class HalfCommitWriter(source.RiverbedStreamWriter):
        def commit(self, messages, batchId):  # noqa: N803 - Spark's name
            if batchId == failing_batch and not os.path.exists(flag_path):
                open(flag_path, "w").close()
                prepared = source._prepared(messages, batchId)
                assert len(prepared) == 2, prepared
                source.complete_transactions(self.opts.bootstrap, prepared[:1], commit=True)
                raise RuntimeError("the driver died half way through the sink's commit")
            super().commit(messages, batchId)

    class HalfCommitSource(source.RiverbedDataSource):
        @classmethod
        def name(cls):
            return "riverbed-half-commit"

        def streamWriter(self, schema, overwrite):  # noqa: N802 - Spark's name
            return HalfCommitWriter(self._write_options(schema, overwrite, streaming=True))

    return HalfCommitSource


@pytest.mark.timeout(1200)
def test_a_query_restarted_after_a_half_done_commit_writes_each_record_once(
        spark, bootstrap, bootstrap_option, tmp_path):
    src, dst, prefix = "eos-in", "eos-out", "eos-query"
    create(bootstrap, src, 2)
    create(bootstrap, dst, 3)
    n = 600
    with Producer(bootstrap, acks="all", linger_ms=2) as p:
        for i in range(n):
            p.send(src, b"in:%d" % i, key=b"k%d" % i, partition=i % 2)
        p.flush(60)
    spark.dataSource.register(_half_commit_source(str(tmp_path / "failed-once"), 1))
    chk = tmp_path / "chk"

    def run(sink):
        df = (spark.readStream.format("riverbed").option("bootstrap.servers", bootstrap_option)
              .option("subscribe", src).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "200").load()
              .selectExpr("key", "concat('out:', CAST(value AS STRING)) AS value"))
        q = (df.writeStream.format(sink).option("bootstrap.servers", bootstrap_option)
             .option("topic", dst).option("exactlyOnce", "true")
             .option("transactional.id.prefix", prefix)
             .option("checkpointLocation", str(chk)).trigger(availableNow=True).start())
        try:
            q.awaitTermination(QUERY_TIMEOUT_S)
        except Exception as e:   # noqa: BLE001 - the failing commit ends the first run
            return e
        finally:
            if q.isActive:
                q.stop()
        assert not q.isActive, "the query did not finish"
        return q.exception()

    failure = run("riverbed-half-commit")
    assert failure is not None and "half way" in str(failure)
    assert sorted(int(f.name) for f in (chk / "commits").glob("[0-9]*")) == [0]
    assert run("riverbed") is None                  # re-runs batch 1, then batch 2
    # a driver killed after the sink committed batch 2 but before the checkpoint recorded it
    for name in ("2", ".2.crc"):                   # the entry and Hadoop's checksum of it
        (chk / "commits" / name).unlink(missing_ok=True)
    assert run("riverbed") is None                  # re-runs batch 2: every partition skipped
    assert sorted(int(f.name) for f in (chk / "commits").glob("[0-9]*")) == [0, 1, 2]

    committed = read_back(bootstrap, dst, 3)
    got = values(committed)
    dupes = [v for v, c in collections.Counter(got).items() if c > 1]
    assert dupes == [], f"{len(dupes)} records read twice, e.g. {dupes[:3]}"
    assert set(got) == {b"out:in:%d" % i for i in range(n)}
    for recs in committed.values():                 # each input partition's order kept
        last = {}
        for r in recs:
            i = int(r.value.split(b":")[-1])
            assert i > last.get(i % 2, -1), f"order broken at {r.value!r}"
            last[i % 2] = i
    # the half-committed batch's other partition was written, prepared and then aborted: in the
    # log, never visible to read_committed
    everything = values(read_back(bootstrap, dst, 3, committed=False))
    aborted = collections.Counter(everything) - collections.Counter(got)
    assert sum(aborted.values()) == 100, sum(aborted.values())
    with Admin(bootstrap) as admin:
        markers = admin.list_group_offsets(prefix)
    assert {tp.partition: om.offset for tp, om in markers.items()} == {0: 3, 1: 3}
