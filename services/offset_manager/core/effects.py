"""Outputs of the offset manager core (what to do). The shell performs them in list order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reply:
    request_id: int
    body: Any          # an offset_pb2 response


@dataclass(frozen=True, slots=True)
class AppendRecords:
    """Append (key, value|None) records, in order, to __consumer_offsets partition `shard`,
    acks=all, offsets.commit.timeout.ms; then feed back WriteCompleted(write_id, ...)."""
    write_id: int
    shard: int
    records: tuple[tuple[bytes, bytes | None], ...]


Effect = Reply | AppendRecords
