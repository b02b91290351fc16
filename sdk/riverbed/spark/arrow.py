"""Records <-> Arrow for the `riverbed` data source (pyarrow only; no Spark session).

Reading: the consumer's records of one partition become one Arrow RecordBatch per call, column
by column (one transpose of the tuples, then C-level array builds: no Python code per record
apart from the transpose). The schema is exactly what Spark's `to_arrow_schema` makes of the
source's Spark schema (Spark checks it): the tests compare the two.

Writing: an Arrow batch from Spark (columns value, and optionally key, topic, partition,
headers) becomes Python lists for the producer; string keys and values are cast to binary
(UTF-8) by Arrow.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["SCHEMA", "HEADER_TYPE", "records_to_batch", "records_to_batches", "empty_batch", "WriteColumns",
           "check_write_schema", "write_columns"]

HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
# Spark names a list's element field "element" (pyarrow's default is "item").
HEADER_TYPE = pa.list_(pa.field("element", HEADER_STRUCT))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", HEADER_TYPE),
])


def _constant_string(text: str, n: int) -> pa.Array:
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))


def _headers(headers: Sequence[Sequence[tuple[str, bytes]]]) -> pa.Array:
    n = len(headers)
    if not any(headers):
        return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)),
                                        pa.array([], HEADER_STRUCT), type=HEADER_TYPE)
    lengths = np.fromiter(map(len, headers), dtype=np.int32, count=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    keys = [h[0] for hs in headers for h in hs]
    values = [h[1] for hs in headers for h in hs]
    struct = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())],
                                        fields=list(HEADER_STRUCT))
    return pa.ListArray.from_arrays(pa.array(offsets), struct, type=HEADER_TYPE)


_MAX_BINARY_BYTES = 2**31 - 1     # Arrow's binary type has 32-bit offsets


def _binary_array(values: list) -> pa.Array:
    """bytes (or None) -> an Arrow binary array, built from one join and the lengths: no
    per-element Python objects (pa.array(values) makes a few per element, and the garbage
    collections they trigger cost five times the conversion). OverflowError past 2 GiB."""
    n = len(values)
    nulls = values.count(None)
    if nulls == n:
        return pa.nulls(n, pa.binary())
    validity = None
    if nulls:
        valid = np.fromiter((v is not None for v in values), dtype=bool, count=n)
        values = [b"" if v is None else v for v in values]
        validity = pa.array(valid, pa.bool_()).buffers()[1]
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _MAX_BINARY_BYTES:
        raise OverflowError(f"{offsets[-1]} bytes in one Arrow binary column")
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(b"".join(values))],
                                 null_count=nulls)


def records_to_batches(records: Sequence[tuple], topic: str, partition: int,
                       timestamp_type: int) -> Iterator[pa.RecordBatch]:
    """records_to_batch, split in halves while a column would pass Arrow's 2 GiB."""
    try:
        yield records_to_batch(records, topic, partition, timestamp_type)
    except OverflowError:
        if len(records) < 2:
            raise
        half = len(records) // 2
        yield from records_to_batches(records[:half], topic, partition, timestamp_type)
        yield from records_to_batches(records[half:], topic, partition, timestamp_type)


def records_to_batch(records: Sequence[tuple], topic: str, partition: int,
                     timestamp_type: int) -> pa.RecordBatch:
    """ConsumerRecords (topic, partition, offset, timestamp, key, value, headers) of one
    partition, in offset order -> a RecordBatch in SCHEMA. timestamp_type: 0 CreateTime,
    1 LogAppendTime. One list per column (map + itemgetter: no per-record bytecode; not
    zip(*records), whose 20,000 argument iterators wake the garbage collector)."""
    n = len(records)
    if n == 0:
        return empty_batch()
    first, last = records[0][2], records[-1][2]
    if last - first == n - 1:                       # no gap (the usual case): no per-record work
        offsets = np.arange(first, last + 1, dtype=np.int64)
    else:
        offsets = np.fromiter(map(_OFFSET, records), dtype=np.int64, count=n)
    ts_us = np.fromiter(map(_TIMESTAMP, records), dtype=np.int64, count=n)
    ts_us *= 1000
    return pa.RecordBatch.from_arrays([
        _binary_array(list(map(_KEY, records))),
        _binary_array(list(map(_VALUE, records))),
        _constant_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(ts_us, TIMESTAMP_TYPE),
        pa.array(np.full(n, timestamp_type, dtype=np.int32)),
        _headers(list(map(_HEADERS, records))),
    ], schema=SCHEMA)


_OFFSET, _TIMESTAMP, _KEY, _VALUE, _HEADERS = (itemgetter(i) for i in range(2, 7))


def empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=SCHEMA)


# -- writing -----------------------------------------------------------------------------------

# Spark's simpleString of the types the sink takes, per column.
_WRITE_TYPES = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
}


def check_write_schema(columns: Mapping[str, str], topic_option: str | None) -> None:
    """The sink's columns, as Spark's Kafka sink checks them, before any task runs: `value`
    (binary or string) is required, `key` (binary or string), `topic` (string; required unless
    the topic option is given), `partition` (int) and `headers`
    (array<struct<key: string, value: binary>>) are optional; other columns are ignored.
    columns: name -> Spark's simpleString of its type. Raises ValueError naming the column."""
    cols = {name.lower(): t.replace(" ", "").lower() for name, t in columns.items()}
    if "value" not in cols:
        raise ValueError(f"the data to write needs a column 'value' (binary or string); it has "
                         f"{', '.join(columns) or 'no columns'}")
    if topic_option is None and "topic" not in cols:
        raise ValueError("the data to write needs a column 'topic' (string), or give the option "
                         "topic")
    for name, allowed in _WRITE_TYPES.items():
        if name in cols and cols[name] not in allowed:
            raise ValueError(f"column {name!r} is {cols[name]}, the sink takes "
                             f"{' or '.join(allowed)}")


class WriteColumns:
    """One Arrow batch's rows as Python lists for the producer (topics None: the topic option's
    topic for every row; keys, partitions, headers None: absent or all null)."""

    __slots__ = ("values", "keys", "topics", "partitions", "headers", "num_rows")

    def __init__(self, values: list, keys: list | None, topics: list | None,
                 partitions: list | None, headers: list | None, num_rows: int):
        self.values = values
        self.keys = keys
        self.topics = topics
        self.partitions = partitions
        self.headers = headers
        self.num_rows = num_rows

    @property
    def keyless(self) -> bool:
        """No keys, partitions, headers or null values: Producer.send_many can take the values."""
        return self.keys is None and self.partitions is None and self.headers is None \
            and None not in self.values

    def single_topic(self) -> str | None:
        """The topic column's one value when every row has the same (None otherwise)."""
        if not self.topics:
            return None
        first = self.topics[0]
        return first if self.topics.count(first) == len(self.topics) else None


def _binary(col: pa.Array) -> pa.Array:
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return col.cast(pa.binary())
    return col


def write_columns(batch: pa.RecordBatch, topic_option: str | None) -> WriteColumns:
    """Split a batch into lists; all-null optional columns count as absent. With the topic option
    every row goes to that topic (as in Spark's Kafka sink, the option wins over the column)."""
    names = {n.lower(): i for i, n in enumerate(batch.schema.names)}

    def optional(name: str) -> pa.Array | None:
        i = names.get(name)
        if i is None:
            return None
        col = batch.column(i)
        return None if col.null_count == len(col) else col

    values = _binary(batch.column(names["value"])).to_pylist()
    key = optional("key")
    keys = _binary(key).to_pylist() if key is not None else None
    topics = None
    if topic_option is None:
        topic_col = batch.column(names["topic"])
        if topic_col.null_count:
            raise ValueError("a row to write has a null topic and no topic option is given")
        topics = topic_col.to_pylist()
    part = optional("partition")
    partitions = part.to_pylist() if part is not None else None
    hdr = optional("headers")
    headers = None
    if hdr is not None:
        headers = [None if hs is None else [(h["key"], h["value"]) for h in hs]
                   for hs in hdr.to_pylist()]
        if not any(headers):
            headers = None
    return WriteColumns(values, keys, topics, partitions, headers, batch.num_rows)

