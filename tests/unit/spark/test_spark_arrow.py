"""Records <-> Arrow for the riverbed data source: the exact schema Spark expects, columns built
from the consumer's records, and the sink's columns (pyarrow only; no Spark session)."""
import datetime as dt

import pyarrow as pa
import pytest

from riverbed import ConsumerRecord
from riverbed.spark.arrow import SCHEMA, check_write_schema, records_to_batch, write_columns


def test_schema_is_what_spark_makes_of_the_source_schema():
    from pyspark.sql.pandas.types import to_arrow_schema

    from riverbed.spark.source import SCHEMA as SPARK_SCHEMA
    assert to_arrow_schema(SPARK_SCHEMA, timezone="UTC").equals(SCHEMA)


def test_records_become_columns():
    recs = [ConsumerRecord("t", 3, 10, 1_700_000_000_123, b"k", b"v0", ()),
            ConsumerRecord("t", 3, 11, 1_700_000_000_124, None, b"v1", (("h", b"x"), ("i", None))),
            ConsumerRecord("t", 3, 13, 1_700_000_000_125, b"k2", None, ())]
    b = records_to_batch(recs, "t", 3, 1)
    assert b.schema.equals(SCHEMA) and b.num_rows == 3
    rows = b.to_pylist()
    assert [r["offset"] for r in rows] == [10, 11, 13]
    assert [r["key"] for r in rows] == [b"k", None, b"k2"]
    assert [r["value"] for r in rows] == [b"v0", b"v1", None]
    assert {r["topic"] for r in rows} == {"t"} and {r["partition"] for r in rows} == {3}
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000,
                                               tzinfo=dt.timezone.utc)
    assert [r["timestampType"] for r in rows] == [1, 1, 1]
    assert [r["headers"] for r in rows] == [[], [{"key": "h", "value": b"x"},
                                                 {"key": "i", "value": None}], []]
    assert records_to_batch([], "t", 0, 0).num_rows == 0


def test_write_schema_checks():
    check_write_schema({"value": "binary"}, "t")
    check_write_schema({"key": "string", "value": "string", "topic": "string", "partition": "int",
                        "headers": "array<struct<key:string,value:binary>>", "other": "int"}, None)
    with pytest.raises(ValueError, match="needs a column 'value'"):
        check_write_schema({"key": "binary"}, "t")
    with pytest.raises(ValueError, match="needs a column 'topic'"):
        check_write_schema({"value": "binary"}, None)
    with pytest.raises(ValueError, match="column 'partition' is bigint"):
        check_write_schema({"value": "binary", "partition": "bigint"}, "t")


def test_write_columns():
    b = pa.RecordBatch.from_pydict({
        "value": pa.array(["a", "b"], pa.string()),
        "key": pa.array([None, None], pa.binary()),
        "topic": pa.array(["x", "x"])})
    cols = write_columns(b, None)
    assert cols.values == [b"a", b"b"] and cols.keys is None and cols.keyless
    assert cols.single_topic() == "x"
    b = pa.RecordBatch.from_pydict({
        "value": pa.array([b"a", None], pa.binary()),
        "key": pa.array(["k", None]),
        "partition": pa.array([1, None], pa.int32()),
        "headers": pa.array([[{"key": "h", "value": b"1"}], None],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))})
    cols = write_columns(b, "t")
    assert cols.topics is None and cols.keys == [b"k", None] and cols.partitions == [1, None]
    assert cols.headers == [[("h", b"1")], None] and not cols.keyless
    with pytest.raises(ValueError, match="null topic"):
        write_columns(pa.RecordBatch.from_pydict({"value": [b"a"], "topic": pa.array([None],
                                                                                     pa.string())}),
                      None)
