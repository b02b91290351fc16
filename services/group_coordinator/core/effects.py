"""Outputs of the group coordinator core (what to do). The shell performs them in list order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer request `request_id` with `body` (a group_pb2 response)."""
    request_id: int
    body: Any


@dataclass(frozen=True, slots=True)
class AppendRecords:
    """Append these (key, value|None) records, in order, to __consumer_offsets partition `shard`
    with acks=all and offsets.commit.timeout.ms; then feed back WriteCompleted(write_id, ...)."""
    write_id: int
    shard: int
    records: tuple[tuple[bytes, bytes | None], ...]


Effect = Reply | AppendRecords
