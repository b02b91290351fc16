"""The `riverbed` sink's exactly-once mode (`exactlyOnce=true`): the rules, pure (no Spark, no
network). riverbed.spark.clients runs them in the tasks, riverbed.spark.source on the driver.

Spark's streaming write contract (DataSourceStreamWriter): for micro-batch N, every task
`write()`s one partition p of the batch's rows in an executor and returns a commit message;
once every task succeeded, the driver calls `commit(messages, N)`, then records N in the
checkpoint's commit log. A task may run more than once (a retry after a failure or a lost
executor; a zombie attempt that is still running); the whole batch N runs again, with the same
rows per partition, when the driver dies after planning N and before its commit log entry (its
offset log entry makes the re-run read exactly the same input, and stateful operators start
from the state of N-1). A re-run must not write again what the first run committed.

Two-phase commit, one transaction per partition writer:

1. Task (N, p), in the executor: a transactional producer with the id `<prefix>-<p>`;
   `init_transactions()` fences every older producer of that id (a zombie attempt of the same
   partition; an attempt of a run the driver abandoned) and aborts the transaction it left open.
2. It then reads the committed offset of partition p of the pseudo-topic `__spark_batch` in the
   group `<prefix>` (require_stable: never while a commit of it is completing). If that marker
   says this query already committed batch N (or a later one) for p, the task writes nothing
   (it was committed before the driver died) and says so in its message.
3. Otherwise it writes its rows in a transaction, adds the marker (offset N + 1, metadata naming
   the query and N) to the same transaction with send_offsets_to_transaction, sends and waits
   for everything (`prepare_transaction()`), and returns the transaction's producer id and epoch
   in its commit message, leaving the transaction open.
4. The driver's `commit(messages, N)` commits each message's transaction by EndTxn at that
   producer id and epoch (`Admin.complete_transaction`). The rows and the marker of partition p
   become visible to read_committed readers together. `abort(messages, N)` aborts them.

Why a re-run of batch N is not written twice: a partition whose transaction committed has its
marker at N + 1 in the same transaction, so its task in the re-run finds it (step 2) and skips;
a partition whose transaction did not commit had it aborted by the re-run's init_transactions
(step 1: a transaction the driver had begun to commit completes first, and then its marker is
there), so its rows are written once, by the re-run. Zombies: an older attempt that writes after
a newer one's init_transactions is fenced (its batches fail with INVALID_PRODUCER_EPOCH); one
that inits after the driver committed finds the marker and skips; one that inits in between
aborts the prepared transaction, and the driver's commit then fails with ProducerFencedError: the
batch fails, and its re-run (Spark's restart of the query) writes the partition once.

What it needs: the rows of (N, p) must be the same on a re-run (they are for Spark's
deterministic plans: the source's offset log fixes the input, stateful operators their state and
shuffle partitions); different queries need different prefixes (two queries with one prefix
fence each other), and one query keeps its prefix across restarts.

Transactional ids are per partition, not per (partition, batch): the coordinator keeps one entry
per id and a producer id per entry (its epoch grows with each task; when it runs out the
coordinator gives a new producer id), and the next batch's init aborts whatever an earlier one
left. The batch id lives in the marker instead.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from riverbed.structs import OffsetAndMetadata, TopicPartition

__all__ = ["MARKER_TOPIC", "BatchContext", "transactional_id", "marker_group", "marker_partition",
           "marker", "committed_batch", "already_committed", "batch_context"]

# The pseudo-topic whose partition p holds writer p's last committed batch + 1 (no such topic
# exists; a group's offsets may name any topic).
MARKER_TOPIC = "__spark_batch"
# Spark's local properties of a micro-batch's jobs (StreamExecution.QUERY_ID_KEY and
# MicroBatchExecution.BATCH_ID_KEY): every task of the batch sees them in its TaskContext.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class BatchContext:
    """Which micro-batch of which query a task writes: Spark's query id (kept in the
    checkpoint, so the same across restarts) and batch id."""
    query_id: str
    batch_id: int


def batch_context(properties: Mapping[str, str | None]) -> BatchContext:
    """The batch a write task belongs to, from its TaskContext's local properties. Raises
    ValueError when they are missing (not a streaming query's task)."""
    query_id = properties.get(QUERY_ID_PROPERTY)
    raw = properties.get(BATCH_ID_PROPERTY)
    if not query_id or raw is None:
        raise ValueError("exactlyOnce: this task belongs to no streaming micro-batch (Spark set "
                         f"no {QUERY_ID_PROPERTY} / {BATCH_ID_PROPERTY}); the exactly-once "
                         "sink runs only in micro-batch streaming queries")
    try:
        batch_id = int(raw)
    except ValueError:
        raise ValueError(f"exactlyOnce: {BATCH_ID_PROPERTY}={raw!r} is not a batch id") from None
    if batch_id < 0:
        raise ValueError(f"exactlyOnce: {BATCH_ID_PROPERTY}={raw!r} is not a batch id")
    return BatchContext(query_id, batch_id)


def transactional_id(prefix: str, partition: int) -> str:
    """Partition writer p's transactional id: the same for every batch and every attempt."""
    return f"{prefix}-{partition}"


def marker_group(prefix: str) -> str:
    """The group whose offsets record what each partition writer committed."""
    return prefix


def marker_partition(partition: int) -> TopicPartition:
    return TopicPartition(MARKER_TOPIC, partition)


def marker(ctx: BatchContext) -> OffsetAndMetadata:
    """What writer p commits with batch N's rows: offset N + 1 (a committed offset is the next
    thing to do, as a consumer's is), metadata naming the query and the batch."""
    return OffsetAndMetadata(ctx.batch_id + 1, json.dumps(
        {"queryId": ctx.query_id, "batchId": ctx.batch_id}, separators=(",", ":")))


def committed_batch(om: OffsetAndMetadata | None, query_id: str) -> int | None:
    """The last batch of query `query_id` the marker says was committed, or None: no marker, a
    marker of another query (a new checkpoint reusing the prefix starts afresh), or not ours."""
    if om is None or om.offset is None or om.offset < 1:
        return None
    try:
        meta = json.loads(om.metadata or "")
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("queryId") != query_id:
        return None
    batch_id = meta.get("batchId")
    if not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id != om.offset - 1:
        return None
    return batch_id


def already_committed(om: OffsetAndMetadata | None, ctx: BatchContext) -> bool:
    """Skip this task's rows? Yes when its query committed this batch (or a later one: Spark
    never re-runs a batch older than the latest it planned, as its file sink assumes) for this
    partition."""
    done = committed_batch(om, ctx.query_id)
    return done is not None and done >= ctx.batch_id
