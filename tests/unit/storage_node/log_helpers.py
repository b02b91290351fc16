"""Helpers for the storage-engine tests: configs, batches, reading a whole log back."""
from __future__ import annotations

import random

from riverbed.records import build_batch, decode_batches, iter_batches
from services.storage_node.log import LogConfig, PartitionLog


def config(**keys) -> LogConfig:
    """LogConfig from Kafka keys given as snake_case kwargs: config(segment_bytes=300)."""
    return LogConfig.from_topic_configs(None, {k.replace("_", "."): str(v) for k, v in keys.items()})


def open_log(path, cfg: LogConfig | None = None, *, now_ms: int = 0, seed: int = 0, **kw) -> PartitionLog:
    return PartitionLog.open(str(path), "t", 0, cfg or config(), now_ms=now_ms,
                             rng=random.Random(seed), **kw)


def batch(values, *, ts: int = 1000, keys=None, compression=0) -> bytes:
    keys = keys if keys is not None else [b"k%d" % i for i in range(len(values))]
    return build_batch([(ts + i, k, v) for i, (k, v) in enumerate(zip(keys, values))],
                       compression=compression)


def read_all(plog: PartitionLog, start: int | None = None, max_bytes: int = 1 << 20) -> bytes:
    """Every batch from `start` (log start by default) to the log end, concatenated."""
    offset = plog.log_start_offset if start is None else start
    out = bytearray()
    while offset < plog.log_end_offset:
        r = plog.read(offset, max_bytes)
        if not r.data:
            break
        out += r.data
        offset = r.next_offset
    return bytes(out)


def records_from(plog: PartitionLog, start: int | None = None):
    return decode_batches(read_all(plog, start))


def headers_of(data: bytes):
    return [h for _pos, h in iter_batches(data)]
