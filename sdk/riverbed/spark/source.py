"""The `riverbed` PySpark data source (Spark 4's Python Data Source API): batch and streaming
reads, batch and streaming writes. See `riverbed.spark` for how to use it.

Where things run:
- `RiverbedDataSource.reader()/streamReader()/writer()` and the readers' planning methods
  (`partitions`, `initialOffset`, `latestOffset`) run on the driver, in Python processes Spark
  starts for planning; they check options and look offsets up with an `OffsetReader`.
- `read()` and the writers' `write()` run in executors' Python workers, on copies of the
  reader/writer Spark pickled: they hold plain data only and make their SDK client when they
  start, closing it when the task's data is done.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from riverbed.spark.arrow import check_write_schema, empty_batch, records_to_batches, write_columns
from riverbed.spark.clients import (
    OffsetReader,
    RecordWriter,
    TaskWrite,
    complete_transactions,
    gc_paused,
    read_range,
    report_data_loss,
    write_exactly_once,
)
from riverbed.spark.exactly_once import batch_context
from riverbed.spark.offsets import (
    OffsetRange,
    batch_ranges,
    from_stream_offset,
    rate_limit,
    resolve_offsets,
    split_ranges,
    stream_ranges,
    to_stream_offset,
)
from riverbed.spark.options import (
    OptionError,
    ReadOptions,
    WriteOptions,
    parse_read_options,
    parse_write_options,
)

__all__ = ["RiverbedDataSource", "SCHEMA", "RangePartition"]

log = logging.getLogger(__name__)

SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])


class RangePartition(InputPartition):
    """One Spark task: the offset range of one topic-partition, and the topic's timestamp type."""

    def __init__(self, rng: OffsetRange, timestamp_type: int):
        super().__init__((rng.topic, rng.partition, rng.from_offset, rng.until_offset))
        self.range = rng
        self.timestamp_type = timestamp_type

    def __repr__(self) -> str:
        r = self.range
        return f"RangePartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


def _check_schema(schema: StructType) -> None:
    if schema != SCHEMA:
        raise OptionError(f"the riverbed source has a fixed schema ({SCHEMA.simpleString()}); "
                          f"do not give one (got {schema.simpleString()})")


def _read(opts: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """A task's rows: the range read by the SDK consumer, in Arrow batches."""
    if not isinstance(partition, RangePartition):
        yield empty_batch()            # Spark's stand-in partition when there is nothing to read
        return
    r = partition.range
    for records in read_range(r, opts.bootstrap, opts.consumer_config,
                              max_records=opts.max_records_per_batch,
                              poll_timeout_ms=opts.poll_timeout_ms,
                              fail_on_data_loss=opts.fail_on_data_loss):
        with gc_paused():
            batches = list(records_to_batches(records, r.topic, r.partition,
                                              partition.timestamp_type))
        del records
        yield from batches


def _input_partitions(ranges: list[OffsetRange], types: dict[str, int]) -> list[RangePartition]:
    return [RangePartition(r, types.get(r.topic, 0)) for r in ranges]


class RiverbedBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions):
        self.opts = opts

    def partitions(self) -> list[RangePartition]:
        """Resolve the offsets now: one input partition per topic-partition range (split for
        minPartitions). Runs on the driver before any task."""
        opts = self.opts
        lookup = OffsetReader(opts.bootstrap, opts.consumer_config)
        try:
            tps = lookup.partitions(opts.subscription)
            earliest, latest = lookup.earliest(tps), lookup.latest(tps)
            start = resolve_offsets(opts.starting, tps, earliest, latest, lookup.by_time,
                                    no_match=opts.starting_by_timestamp_strategy)
            assert opts.ending is not None
            end = resolve_offsets(opts.ending, tps, earliest, latest, lookup.by_time,
                                  no_match="latest")
            for tp, e in end.items():
                if e > latest[tp]:
                    raise OptionError(f"option {opts.ending.option}: {tp.topic}-{tp.partition} "
                                      f"ends at {e}, past its latest offset {latest[tp]}")
            ranges = split_ranges(batch_ranges(start, end), opts.min_partitions)
            types = lookup.timestamp_types([r.topic for r in ranges])
        finally:
            lookup.close()
        log.info("riverbed batch read of %s: %d ranges, %d records", opts.subscription.describe(),
                 len(ranges), sum(r.size for r in ranges))
        return _input_partitions(ranges, types)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)


class RiverbedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are Spark's Kafka JSON ({"topic": {"0": 23}}): what Spark checkpoints and hands
    back on restart. The driver-side methods share one OffsetReader (this object lives as long
    as the query in Spark's source process); copies sent to executors leave it behind."""

    def __init__(self, opts: ReadOptions):
        self.opts = opts
        self._lookup: OffsetReader | None = None
        self._available_now_end: dict | None = None
        self._latest_seen: dict | None = None
        self._timestamp_types: dict[str, int] = {}

    def __getstate__(self) -> dict:
        return {"opts": self.opts, "_lookup": None, "_available_now_end": None,
                "_latest_seen": None, "_timestamp_types": {}}

    @property
    def lookup(self) -> OffsetReader:
        if self._lookup is None:
            self._lookup = OffsetReader(self.opts.bootstrap, self.opts.consumer_config)
        return self._lookup

    def _current_partitions(self) -> list:
        # A subscribed topic deleted after the query started: read what is left; the
        # partitions that are gone are reported as data loss when the batch is planned.
        return self.lookup.partitions(self.opts.subscription, missing_ok=True)

    def initialOffset(self) -> dict:
        opts = self.opts
        tps = self.lookup.partitions(opts.subscription)     # unknown topics: OptionError
        earliest, latest = self.lookup.earliest(tps), self.lookup.latest(tps)
        start = resolve_offsets(opts.starting, tps, earliest, latest, self.lookup.by_time,
                                no_match=opts.starting_by_timestamp_strategy)
        log.info("riverbed stream of %s starts at %s", opts.subscription.describe(), start)
        return to_stream_offset(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._current_partitions()
        self._available_now_end = self.lookup.latest(tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_stream_offset(start)
        if self._available_now_end is not None:
            latest = dict(self._available_now_end)
        else:
            latest = self.lookup.latest(self._current_partitions())
        self._latest_seen = latest
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            base = dict(begin)
            base.update(self._earliest_known(new))
            end = rate_limit(base, latest, limit.max_rows)
        else:
            end = latest
        return to_stream_offset(end)

    def reportLatestOffset(self) -> dict | None:
        return to_stream_offset(self._latest_seen) if self._latest_seen is not None else None

    def _earliest_known(self, tps: list) -> dict:
        """Earliest offsets of these partitions, leaving out those whose topic is gone."""
        out: dict = {}
        for topic in sorted({tp.topic for tp in tps}):
            mine = [tp for tp in tps if tp.topic == topic]
            try:
                out.update(self.lookup.earliest(mine))
            except Exception as e:  # noqa: BLE001 - a deleted topic; reported as data loss
                log.warning("riverbed source: no earliest offsets for %s: %s", topic, e)
        return out

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        begin, until = from_stream_offset(start), from_stream_offset(end)
        new = self._earliest_known([tp for tp in until if tp not in begin])
        ranges, losses = stream_ranges(begin, until, new)
        for message in losses:
            report_data_loss(message, self.opts.fail_on_data_loss)
        ranges = split_ranges(ranges, self.opts.min_partitions)
        unknown = sorted({r.topic for r in ranges} - set(self._timestamp_types))
        if unknown:
            self._timestamp_types.update(self.lookup.timestamp_types(unknown))
        return _input_partitions(ranges, self._timestamp_types)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)

    def commit(self, end: dict) -> None:
        pass            # offsets live in Spark's checkpoint; nothing is committed to the cluster

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None


@dataclass
class RiverbedCommitMessage(WriterCommitMessage):
    """A write task's answer. exactlyOnce adds what the driver commits: the task's prepared
    transaction (None when it wrote nothing), and whether it skipped a partition an earlier run
    had committed, for batch `batch_id` and Spark partition `partition`."""
    records: int
    write: TaskWrite | None = None
    batch_id: int | None = None
    partition: int | None = None


def _write(opts: WriteOptions, iterator: Iterator[pa.RecordBatch]) -> RiverbedCommitMessage:
    if opts.exactly_once:
        return _write_exactly_once(opts, iterator)
    writer = RecordWriter(opts.bootstrap, opts.producer_config, opts.topic)
    try:
        for batch in iterator:
            writer.write(write_columns(batch, opts.topic))
        return RiverbedCommitMessage(writer.finish())
    finally:
        writer.close()


def _write_exactly_once(opts: WriteOptions, iterator: Iterator[pa.RecordBatch]
                        ) -> RiverbedCommitMessage:
    from pyspark import TaskContext
    tc = TaskContext.get()
    if tc is None:
        raise RuntimeError("exactlyOnce: the write runs outside a Spark task")
    ctx = batch_context({k: tc.getLocalProperty(k)
                         for k in ("sql.streaming.queryId", "streaming.sql.batchId")})
    partition = tc.partitionId()
    assert opts.transactional_id_prefix is not None
    done = write_exactly_once(opts.bootstrap, opts.producer_config, opts.topic,
                              opts.transactional_id_prefix, partition, ctx,
                              (write_columns(batch, opts.topic) for batch in iterator))
    return RiverbedCommitMessage(done.records, done, ctx.batch_id, partition)


def _total(messages) -> int:
    return sum(m.records for m in messages if isinstance(m, RiverbedCommitMessage))


def _prepared(messages, batch_id: int) -> list:
    """The transactions a batch's tasks prepared (exactlyOnce), checked to be this batch's."""
    out = []
    for m in messages:
        if not isinstance(m, RiverbedCommitMessage) or m.write is None:
            continue
        if m.batch_id != batch_id:
            raise RuntimeError(f"exactlyOnce: a commit message of batch {m.batch_id} (partition "
                               f"{m.partition}) reached the commit of batch {batch_id}")
        if m.write.prepared is not None:
            out.append(m.write.prepared)
    return out


class RiverbedBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions):
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RiverbedCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages) -> None:
        log.info("riverbed write: %d records acknowledged", _total(messages))

    def abort(self, messages) -> None:
        log.warning("riverbed write aborted: %d records had been acknowledged (they stay in "
                    "the topic)", _total(messages))


class RiverbedStreamWriter(DataSourceStreamArrowWriter):
    """At-least-once by default; with exactlyOnce, each task prepares a transaction and
    `commit` (on the driver, once every task of the batch succeeded) commits them all
    (riverbed.spark.exactly_once)."""

    def __init__(self, opts: WriteOptions):
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RiverbedCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages, batchId: int) -> None:  # noqa: N803 - Spark's name
        if self.opts.exactly_once:
            prepared = _prepared(messages, batchId)
            complete_transactions(self.opts.bootstrap, prepared, commit=True)
            skipped = sorted(m.partition for m in messages
                             if isinstance(m, RiverbedCommitMessage) and m.write is not None
                             and m.write.skipped)
            log.info("riverbed exactly-once write, batch %d: %d records committed in %d "
                     "transactions%s", batchId, _total(messages), len(prepared),
                     f"; partitions {skipped} were committed by an earlier run" if skipped
                     else "")
            return
        log.info("riverbed stream write, batch %d: %d records acknowledged", batchId,
                 _total(messages))

    def abort(self, messages, batchId: int) -> None:  # noqa: N803 - Spark's name
        if self.opts.exactly_once:
            prepared = _prepared(messages, batchId)
            complete_transactions(self.opts.bootstrap, prepared, commit=False)
            log.warning("riverbed exactly-once write, batch %d aborted: %d prepared "
                        "transactions aborted (a re-run writes the batch once)", batchId,
                        len(prepared))
            return
        log.warning("riverbed stream write, batch %d aborted: %d records had been acknowledged "
                    "(a retry writes them again: at-least-once)", batchId, _total(messages))


class RiverbedDataSource(DataSource):
    """`spark.read.format("riverbed")`, `readStream`, `df.write`, `writeStream`."""

    @classmethod
    def name(cls) -> str:
        return "riverbed"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> RiverbedBatchReader:
        _check_schema(schema)
        return RiverbedBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> RiverbedStreamReader:
        _check_schema(schema)
        return RiverbedStreamReader(parse_read_options(self.options, streaming=True))

    def _write_options(self, schema: StructType, overwrite: bool, streaming: bool
                       ) -> WriteOptions:
        if overwrite:
            raise OptionError("a riverbed topic cannot be overwritten: write with mode append")
        opts = parse_write_options(self.options, streaming=streaming)
        try:
            check_write_schema({f.name: f.dataType.simpleString() for f in schema.fields},
                               opts.topic)
        except ValueError as e:
            raise OptionError(str(e)) from None
        return opts

    def writer(self, schema: StructType, overwrite: bool) -> RiverbedBatchWriter:
        return RiverbedBatchWriter(self._write_options(schema, overwrite, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> RiverbedStreamWriter:
        return RiverbedStreamWriter(self._write_options(schema, overwrite, streaming=True))
