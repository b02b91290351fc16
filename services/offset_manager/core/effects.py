"""Outputs of the offset manager core (what to do). The shell performs them in list order.

Both are the sharded roles' shared outputs (services.common.sharded_role): `Reply` answers a
request with an offset_pb2 response (a commit's after its write completes), `AppendRecords`
writes to a __consumer_offsets shard.
"""
from __future__ import annotations

from services.common.sharded_role import AppendRecords, Reply

__all__ = ["AppendRecords", "Effect", "Reply"]

Effect = Reply | AppendRecords
