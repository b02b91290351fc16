"""The SDK's clients as the `riverbed` data source uses them (no Spark here).

- `OffsetReader` (driver): the partitions a subscription names, their earliest and latest
  offsets and offsets by time, the topics' timestamp types. Like Spark's KafkaOffsetReader.
- `read_range` (executor): one offset range [from, until), read exactly by a Consumer with no
  group (assign + seek), in chunks of at most max_records records.
- `RecordWriter` (executor): one task's Producer; `finish()` waits for every record and raises
  the first error, so a task never ends with a record unacknowledged.
- `write_exactly_once` (executor) and `complete_transactions` (driver): the sink's
  exactly-once mode, by the rules of riverbed.spark.exactly_once.

Clients are made when first needed, inside the process that uses them (a ZeroMQ context does
not pickle), and closed by `close()` or when the generator is closed.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from riverbed import Admin, Consumer, PreparedTxnState, Producer, TopicPartition, errors
from riverbed.spark.arrow import WriteColumns
from riverbed.spark.exactly_once import (
    BatchContext,
    already_committed,
    committed_batch,
    marker,
    marker_group,
    marker_partition,
    transactional_id,
)
from riverbed.spark.offsets import DataLoss, OffsetRange, on_out_of_range
from riverbed.spark.options import OptionError, Subscription

__all__ = ["OffsetReader", "read_range", "RecordWriter", "report_data_loss", "gc_paused",
           "TaskWrite", "write_exactly_once", "complete_transactions"]

log = logging.getLogger(__name__)

CREATE_TIME, LOG_APPEND_TIME = 0, 1


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a block that makes many short-lived tuples (a poll's
    ConsumerRecords, an Arrow conversion): none of them form cycles, yet every 700 allocations
    start a collection, and the full ones walk everything the process holds. Reading 500,000
    records: 260,000 records/s with it on, 475,000 with it off (one core). Never held across a
    yield: the block ends before records are handed on."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def report_data_loss(message: str, fail: bool) -> None:
    """failOnDataLoss: raise DataLoss, or log it and go on."""
    if fail:
        raise DataLoss(message)
    log.warning("riverbed source: %s; going on (failOnDataLoss=false)", message)


def _client_id(role: str) -> str:
    return f"riverbed-spark-{role}-{os.getpid()}"


class OffsetReader:
    """The driver's lookups. Not thread-safe; one per reader, closed by `close()`."""

    def __init__(self, bootstrap: Sequence[str], consumer_config: Mapping[str, Any]):
        self.bootstrap = list(bootstrap)
        self.config = dict(consumer_config)
        self._admin: Admin | None = None
        self._consumer: Consumer | None = None

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self.bootstrap, client_id=self.config.get("client_id")
                                or _client_id("driver"),
                                request_timeout_ms=self.config.get("request_timeout_ms", 30000))
        return self._admin

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            cfg = dict(self.config)
            cfg.setdefault("client_id", _client_id("driver"))
            self._consumer = Consumer(bootstrap=self.bootstrap, enable_auto_commit=False,
                                      auto_offset_reset="none", **cfg)
        return self._consumer

    def partitions(self, subscription: Subscription, *, missing_ok: bool = False
                   ) -> list[TopicPartition]:
        """The partitions to read now. Topics named by subscribe or assign must exist
        (OptionError) unless missing_ok (a stream whose topic was deleted reads what is left);
        a pattern may match nothing."""
        if subscription.mode == "subscribePattern":
            topics = tuple(t for t in self.admin.list_topics() if subscription.matches(t))
        else:
            topics = subscription.topics or tuple(dict.fromkeys(
                tp.topic for tp in subscription.partitions))
        found: dict[str, set[int]] = {}
        for name in topics:
            try:
                (desc,) = self.admin.describe_topics([name])
            except errors.UnknownTopicOrPartitionError:
                if missing_ok or subscription.mode == "subscribePattern":
                    continue                    # deleted (since it was listed)
                raise OptionError(f"topic {name!r} of {subscription.describe()} does not exist "
                                  f"(gateways {','.join(self.bootstrap)})") from None
            found[name] = {p.partition for p in desc.partitions}
        if subscription.mode != "assign":
            return sorted(TopicPartition(t, p) for t, ps in found.items() for p in ps)
        out = []
        for tp in subscription.partitions:
            if tp.partition in found.get(tp.topic, ()):
                out.append(tp)
            elif not missing_ok:
                raise OptionError(f"partition {tp.topic}-{tp.partition} of "
                                  f"{subscription.describe()} does not exist (the topic has "
                                  f"{len(found[tp.topic])} partitions)")
        return sorted(out)

    def timestamp_types(self, topics: Sequence[str]) -> dict[str, int]:
        """0 (CreateTime) or 1 (LogAppendTime) per topic, from message.timestamp.type."""
        out = {}
        for topic in sorted(set(topics)):
            try:
                entry = self.admin.describe_configs(topic).get("message.timestamp.type")
            except errors.UnknownTopicOrPartitionError:
                entry = None
            out[topic] = LOG_APPEND_TIME if entry is not None and \
                entry.value == "LogAppendTime" else CREATE_TIME
        return out

    def earliest(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return self.consumer.beginning_offsets(tps) if tps else {}

    def latest(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermarks: the end of what consumers may read."""
        return self.consumer.end_offsets(tps) if tps else {}

    def by_time(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        found = self.consumer.offsets_for_times(wanted) if wanted else {}
        return {tp: (o.offset if o is not None else None) for tp, o in found.items()}

    def close(self) -> None:
        for client in (self._consumer, self._admin):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - closing only
                    log.debug("closing %r failed", client, exc_info=True)
        self._consumer = self._admin = None


def _offset_of(record) -> int:
    return record[2]


def read_range(rng: OffsetRange, bootstrap: Sequence[str], consumer_config: Mapping[str, Any], *,
               max_records: int, poll_timeout_ms: int, fail_on_data_loss: bool
               ) -> Iterator[list]:
    """Yield the records of [from, until) of one partition, in offset order, in lists of at most
    max_records ConsumerRecords. Offsets missing inside the range (compaction, transaction
    markers) are skipped; offsets deleted (before the log start) or truncated (past the high
    watermark) are data loss, raised or logged per fail_on_data_loss. No record for
    poll_timeout_ms while the log still holds the rest of the range: KafkaTimeoutError."""
    if rng.size <= 0:
        return
    tp = rng.tp
    until = rng.until_offset
    cfg = dict(consumer_config)
    cfg.setdefault("client_id", _client_id("executor"))
    consumer = Consumer(bootstrap=list(bootstrap), enable_auto_commit=False,
                        auto_offset_reset="none", **cfg)
    try:
        consumer.assign([tp])
        position = rng.from_offset
        consumer.seek(tp, position)
        chunk: list = []
        deadline = time.monotonic() + poll_timeout_ms / 1000.0
        while position < until:
            try:
                with gc_paused():
                    got = consumer.poll(timeout_ms=min(1000, poll_timeout_ms),
                                        max_records=max_records - len(chunk))
            except errors.OffsetOutOfRangeError:
                consumer.resume(tp)             # the consumer pauses a partition it raised for
                earliest = consumer.beginning_offsets([tp])[tp]
                latest = consumer.end_offsets([tp])[tp]
                if earliest <= position < latest:
                    consumer.seek(tp, position)     # moved under us (leader change): again
                    continue
                decision = on_out_of_range(rng, position, earliest, latest)
                report_data_loss(decision.loss, fail_on_data_loss)
                if decision.resume_at is None:
                    break
                position = decision.resume_at
                consumer.seek(tp, position)
                continue
            records = got.get(tp)
            if not records:
                position = consumer.position(tp)    # past control batches or compacted gaps
                if position >= until or time.monotonic() < deadline:
                    continue
                latest = consumer.end_offsets([tp])[tp]
                if latest < until:
                    decision = on_out_of_range(rng, position, min(position, latest), latest)
                    report_data_loss(decision.loss, fail_on_data_loss)
                    break
                raise errors.KafkaTimeoutError(
                    f"{tp.topic}-{tp.partition}: no record of offsets [{position}, {until}) "
                    f"within pollTimeoutMs={poll_timeout_ms} although the log holds them")
            deadline = time.monotonic() + poll_timeout_ms / 1000.0
            position = consumer.position(tp)
            if records[-1][2] >= until:
                records = records[:bisect_left(records, until, key=_offset_of)]
            chunk += records
            if len(chunk) >= max_records:
                yield chunk
                chunk = []
        if chunk:
            yield chunk
    finally:
        consumer.close()


class RecordWriter:
    """One task's writes: a Producer made on the first write, acks=all and idempotent unless the
    riverbed. settings say otherwise. `finish()` flushes and raises the first failed send."""

    # Handles of sent records kept before the done ones are checked and dropped.
    PRUNE_AT = 200_000

    def __init__(self, bootstrap: Sequence[str], producer_config: Mapping[str, Any],
                 topic: str | None, transactional_id: str | None = None):
        self.bootstrap = list(bootstrap)
        self.config = dict(producer_config)
        if transactional_id is not None:
            self.config["transactional_id"] = transactional_id
        else:
            self.config.pop("transaction_timeout_ms", None)
        self.topic = topic
        self._producer: Producer | None = None
        self._futures: list = []
        self.records = 0

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            cfg = dict(self.config)
            cfg.setdefault("client_id", _client_id("writer"))
            self._producer = Producer(self.bootstrap, **cfg)
        return self._producer

    def write(self, cols: WriteColumns) -> None:
        if cols.num_rows == 0:
            return
        producer = self.producer
        futures = self._futures
        topic = self.topic if cols.topics is None else cols.single_topic()
        if topic is not None and cols.keyless:
            futures += producer.send_many(topic, cols.values)
        else:
            send = producer.send
            n = cols.num_rows
            topics = cols.topics or [self.topic] * n
            keys = cols.keys or [None] * n
            parts = cols.partitions or [None] * n
            headers = cols.headers or [None] * n
            for t, v, k, p, h in zip(topics, cols.values, keys, parts, headers):
                futures.append(send(t, v, key=k, partition=p, headers=h))
        self.records += cols.num_rows
        if len(futures) >= self.PRUNE_AT:
            self._check(done_only=True)

    def _check(self, done_only: bool) -> None:
        keep = []
        for f in self._futures:
            if not f.done():
                if done_only:
                    keep.append(f)
                    continue
            err = f.exception(timeout=0) if f.done() else errors.KafkaTimeoutError(
                f"record for {f.topic}-{f.partition} not acknowledged")
            if err is not None:
                raise err
        self._futures = keep

    def finish(self) -> int:
        """Wait for every record sent; raise the first error (the task fails and Spark retries
        it). Returns the number of records written."""
        if self._producer is not None:
            self._producer.flush()
            self._check(done_only=False)
        return self.records

    def close(self) -> None:
        if self._producer is not None:
            try:
                self._producer.close()
            finally:
                self._producer = None


# -- exactly once (riverbed.spark.exactly_once has the protocol) --------------------------------

@dataclass(frozen=True)
class TaskWrite:
    """What an exactly-once write task did: `records` written in a transaction it prepared
    (`prepared`: what the driver commits), or none because this query had committed the batch
    for this partition already (`skipped`: a re-run), or none because it had no rows."""
    records: int
    prepared: PreparedTxnState | None = None
    skipped: bool = False


def _wait_s(producer: Producer) -> float:
    # the bound of every transactional call of a task: a record's own bound
    # (delivery.timeout.ms); past it the task fails and Spark retries it
    return producer.config["delivery_timeout_ms"] / 1000.0


def read_marker(bootstrap: Sequence[str], prefix: str, partition: int, wait_s: float,
                client_id: str) -> Any:
    """Writer `partition`'s marker (an OffsetAndMetadata, or None), read stable: while a
    transaction that commits it is still completing, asked again."""
    tp = marker_partition(partition)
    deadline = time.monotonic() + wait_s
    with Admin(list(bootstrap), client_id=client_id) as admin:
        while True:
            try:
                return admin.list_group_offsets(marker_group(prefix), [tp],
                                                require_stable=True).get(tp)
            except errors.RiverbedError as e:
                if not getattr(e, "retriable", False) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.05)


def write_exactly_once(bootstrap: Sequence[str], producer_config: Mapping[str, Any],
                       topic: str | None, prefix: str, partition: int, ctx: BatchContext,
                       batches: Iterator[WriteColumns]) -> TaskWrite:
    """Task (ctx.batch_id, partition) of an exactly-once write: init_transactions (fencing
    older attempts), the marker check, then the rows and the marker in one transaction, sent
    and prepared but not committed (the driver commits). Any error aborts what it began (best
    effort: a newer attempt's init_transactions, or the timeout, aborts it otherwise) and
    raises, failing the task for Spark to retry."""
    rows = iter(batches)
    first = next((cols for cols in rows if cols.num_rows), None)
    if first is None:
        return TaskWrite(0)            # nothing to write: no transaction (a re-run has none too)
    tid = transactional_id(prefix, partition)
    writer = RecordWriter(bootstrap, producer_config, topic, transactional_id=tid)
    producer = writer.producer
    began = False
    try:
        wait_s = _wait_s(producer)
        producer.init_transactions(timeout=wait_s)
        done = read_marker(bootstrap, prefix, partition, wait_s, f"{producer.client_id}-marker")
        if already_committed(done, ctx):
            for _ in rows:             # Spark hands the rest of the partition anyway
                pass
            log.info("riverbed exactly-once write: batch %d, partition %d was committed by an "
                     "earlier run (marker: batch %s): skipped", ctx.batch_id, partition,
                     committed_batch(done, ctx.query_id))
            return TaskWrite(0, skipped=True)
        producer.begin_transaction()
        began = True
        writer.write(first)
        for cols in rows:
            writer.write(cols)
        producer.send_offsets_to_transaction({marker_partition(partition): marker(ctx)},
                                             marker_group(prefix), timeout=wait_s)
        prepared = producer.prepare_transaction(timeout=wait_s)
        return TaskWrite(writer.finish(), prepared)
    except BaseException:
        if began:
            try:
                producer.abort_transaction(timeout=10)
            except Exception as e:     # noqa: BLE001 - fenced or gone: the next attempt aborts it
                log.info("riverbed exactly-once write: abort of %s failed (%r); the next "
                         "attempt's init_transactions aborts it", tid, e)
        raise
    finally:
        writer.close()


def complete_transactions(bootstrap: Sequence[str], prepared: Sequence[PreparedTxnState],
                          commit: bool, timeout_ms: int = 120_000) -> None:
    """The driver's half: EndTxn (commit or abort) for each prepared transaction of a batch.
    A commit raises the first error (the batch then fails, and its re-run writes exactly the
    partitions that did not commit); an abort only logs them."""
    if not prepared:
        return
    with Admin(list(bootstrap), client_id=_client_id("committer")) as admin:
        for state in prepared:
            try:
                admin.complete_transaction(state, commit=commit, timeout_ms=timeout_ms)
            except errors.RiverbedError as e:
                if commit:
                    raise
                log.warning("riverbed exactly-once write: abort of %s failed (%r); the next "
                            "batch's init_transactions or transaction.timeout.ms aborts it",
                            state.transactional_id, e)
