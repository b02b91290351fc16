"""The exactly-once sink's rules (riverbed.spark.exactly_once), with no Spark and no network:
transactional ids, the batch marker, and when a task skips a partition it committed before."""
import pytest

from riverbed import OffsetAndMetadata, TopicPartition
from riverbed.spark.exactly_once import (
    BatchContext,
    already_committed,
    batch_context,
    committed_batch,
    marker,
    marker_group,
    marker_partition,
    transactional_id,
)

Q = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"


def test_ids_and_marker_names():
    assert transactional_id("clicks", 3) == "clicks-3"
    assert marker_group("clicks") == "clicks"
    assert marker_partition(3) == TopicPartition("__spark_batch", 3)


def test_the_marker_is_the_next_batch_and_names_the_query():
    m = marker(BatchContext(Q, 7))
    assert m.offset == 8
    assert committed_batch(m, Q) == 7
    assert committed_batch(m, "another query") is None        # a new checkpoint, same prefix
    assert committed_batch(None, Q) is None
    assert committed_batch(OffsetAndMetadata(8, "not json"), Q) is None
    assert committed_batch(OffsetAndMetadata(9, m.metadata), Q) is None   # offset disagrees
    assert committed_batch(OffsetAndMetadata(8, '{"queryId":"%s","batchId":true}' % Q), Q) is None


@pytest.mark.parametrize("committed,batch,skip", [
    (None, 0, False),          # never committed
    (6, 7, False),             # the batch before: write this one
    (7, 7, True),              # this batch committed before the driver died: a re-run skips it
    (8, 7, True),              # a later one (Spark does not re-run older batches)
])
def test_a_task_skips_only_what_its_query_committed(committed, batch, skip):
    om = None if committed is None else marker(BatchContext(Q, committed))
    assert already_committed(om, BatchContext(Q, batch)) is skip
    assert already_committed(om, BatchContext("other", batch)) is False


def test_batch_context_from_task_properties():
    props = {"sql.streaming.queryId": Q, "streaming.sql.batchId": "12"}
    assert batch_context(props) == BatchContext(Q, 12)
    for bad in ({}, {"sql.streaming.queryId": Q}, {**props, "streaming.sql.batchId": "x"},
                {**props, "streaming.sql.batchId": "-1"}):
        with pytest.raises(ValueError, match="exactlyOnce"):
            batch_context(bad)
