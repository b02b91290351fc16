"""LIST_OFFSETS for the Consumer (positions, beginning/end offsets, offsets_for_times), with
retries of retriable per-partition errors after a metadata refresh."""
from __future__ import annotations

import time
from typing import Any, Callable

from riverbed import errors
from riverbed._proto.v1 import header_pb2, list_offsets_pb2
from riverbed.cluster import GatewayConnection
from riverbed.structs import TopicPartition

__all__ = ["list_offsets"]

ApiKey = header_pb2.ApiKey


def _now_ms() -> float:
    return time.monotonic() * 1000.0


def list_offsets(conn: GatewayConnection, want: dict[TopicPartition, int], *,
                 with_timestamps: bool = False, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100,
                 sleep: Callable[[float], None] = time.sleep,
                 isolation_level: int = 0) -> dict[TopicPartition, Any]:
    """LIST_OFFSETS with retries of retriable errors (metadata refresh + backoff): tp ->
    offset, or (offset, timestamp, leader epoch or None) with_timestamps (-1 offset: no record
    that late). isolation_level 1 (read_committed, LIST_OFFSETS v1): latest is the last stable
    offset."""
    out: dict[TopicPartition, Any] = {}
    deadline = _now_ms() + request_timeout_ms
    todo = dict(want)
    while todo:
        req = list_offsets_pb2.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level)
        by_topic: dict[str, list] = {}
        for tp, ts in todo.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, ts))
        for topic, parts in by_topic.items():
            t = req.topics.add(name=topic)
            for p, ts in parts:
                t.partitions.add(partition=p, timestamp=ts, current_leader_epoch=-1)
        resp = conn.call(ApiKey.LIST_OFFSETS, req, timeout_ms=request_timeout_ms,
                         api_version=1 if isolation_level else 0)
        retry: list[errors.KafkaError] = []
        for t in resp.body.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                if tp not in todo:
                    continue
                if p.error_code == 0:
                    out[tp] = ((p.offset, p.timestamp,
                                p.leader_epoch if p.leader_epoch >= 0 else None)
                               if with_timestamps else p.offset)
                    del todo[tp]
                    continue
                err = errors.for_code(p.error_code, p.error_message, topic=tp.topic,
                                      partition=tp.partition)
                if not err.retriable:
                    raise err
                retry.append(err)
        if todo:
            if _now_ms() > deadline:
                raise retry[0] if retry else errors.KafkaTimeoutError(
                    f"LIST_OFFSETS gave no answer for {sorted(todo)}")
            if any(e.refresh_metadata for e in retry):
                conn.fetch_metadata({tp.topic for tp in todo})
            sleep(retry_backoff_ms / 1000.0)
    return out
