"""Delayed operations (Kafka's purgatories), pure: time comes in as now_ms.

- `ProducePurgatory`: acks=-1 produces waiting for the high watermark. An operation holds, per
  partition, the offset the high watermark must reach (last appended offset + 1). It completes
  when every partition is satisfied (or failed: leadership lost), and times out on `tick` with
  REQUEST_TIMED_OUT for the partitions still waiting.
- `decide_fetch` + `FetchWaiters`: the long-poll decision for FETCH (respond now, or wait until
  `min_bytes` over the request or the deadline) and the registry of waiting fetches by the
  partitions they watch, so an append wakes only the fetches that care.
"""
from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from riverbed import errors

from services.storage_node.core.replica_state import NONE, TopicPartition

REQUEST_TIMED_OUT = errors.RequestTimedOutError.code
NOT_LEADER_FOR_PARTITION = errors.NotLeaderForPartitionError.code


# ---------------------------------------------------------------------------------------------
# acks=-1


@dataclass(slots=True)
class DelayedProduce:
    op_id: int
    deadline_ms: int
    required: dict[TopicPartition, int]              # tp -> offset the HW must reach
    results: dict[TopicPartition, int] = field(default_factory=dict)  # tp -> error code

    @property
    def done(self) -> bool:
        return len(self.results) == len(self.required)


class ProducePurgatory:
    def __init__(self) -> None:
        self._ops: dict[int, DelayedProduce] = {}
        self._by_tp: dict[TopicPartition, set[int]] = {}
        self._deadlines: list[tuple[int, int]] = []   # heap of (deadline_ms, op_id), lazy

    def __len__(self) -> int:
        return len(self._ops)

    def add(self, op_id: int, required: Mapping[TopicPartition, int], deadline_ms: int,
            high_watermarks: Mapping[TopicPartition, int]) -> DelayedProduce | None:
        """Register an acks=-1 produce. Returns the operation if it must wait, None if the
        current high watermarks already satisfy it (e.g. an ISR of one)."""
        if op_id in self._ops:
            raise ValueError(f"delayed produce {op_id} registered twice")
        op = DelayedProduce(op_id, deadline_ms, dict(required))
        for tp, offset in op.required.items():
            if high_watermarks.get(tp, -1) >= offset:
                op.results[tp] = NONE
        if op.done:
            return None
        self._ops[op_id] = op
        for tp in op.required:
            if tp not in op.results:
                self._by_tp.setdefault(tp, set()).add(op_id)
        heapq.heappush(self._deadlines, (deadline_ms, op_id))
        return op

    def on_high_watermark(self, tp: TopicPartition, high_watermark: int) -> list[DelayedProduce]:
        """The HW of tp moved: the operations this completes (removed from the purgatory)."""
        return self._settle(tp, lambda need: NONE if high_watermark >= need else None)

    def on_leadership_lost(self, tp: TopicPartition) -> list[DelayedProduce]:
        """This node no longer leads tp: its waiting partitions fail NOT_LEADER_FOR_PARTITION."""
        return self._settle(tp, lambda need: NOT_LEADER_FOR_PARTITION)

    def _settle(self, tp: TopicPartition, decide) -> list[DelayedProduce]:
        waiting = self._by_tp.get(tp)
        if not waiting:
            return []
        completed = []
        for op_id in list(waiting):
            op = self._ops[op_id]
            code = decide(op.required[tp])
            if code is None:
                continue
            op.results[tp] = code
            waiting.discard(op_id)
            if op.done:
                self._remove(op)
                completed.append(op)
        if not waiting:
            self._by_tp.pop(tp, None)
        return completed

    def tick(self, now_ms: int) -> list[DelayedProduce]:
        """Operations whose deadline passed: their unsettled partitions get REQUEST_TIMED_OUT."""
        expired = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, op_id = heapq.heappop(self._deadlines)
            op = self._ops.get(op_id)
            if op is None:
                continue
            for tp in op.required:
                op.results.setdefault(tp, REQUEST_TIMED_OUT)
            self._remove(op)
            expired.append(op)
        return expired

    def cancel(self, op_id: int) -> None:
        op = self._ops.get(op_id)
        if op is not None:
            self._remove(op)

    def next_deadline_ms(self) -> int | None:
        while self._deadlines and self._deadlines[0][1] not in self._ops:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def _remove(self, op: DelayedProduce) -> None:
        self._ops.pop(op.op_id, None)
        for tp in op.required:
            ids = self._by_tp.get(tp)
            if ids is not None:
                ids.discard(op.op_id)
                if not ids:
                    del self._by_tp[tp]


# ---------------------------------------------------------------------------------------------
# FETCH long poll


class FetchDecision(enum.Enum):
    RESPOND = "respond"
    WAIT = "wait"


def decide_fetch(available_bytes: Iterable[int], *, min_bytes: int, now_ms: int,
                 deadline_ms: int, any_error: bool = False) -> FetchDecision:
    """Respond now when an error must be reported, `min_bytes` are available over all
    partitions, or the deadline has come (max_wait_ms 0 answers at once); else wait."""
    if any_error or now_ms >= deadline_ms or min_bytes <= 0:
        return FetchDecision.RESPOND
    if sum(available_bytes) >= min_bytes:
        return FetchDecision.RESPOND
    return FetchDecision.WAIT


class FetchWaiters:
    """Fetches waiting for data, by partition, with their deadlines."""

    def __init__(self, max_waiting: int):
        self.max_waiting = max_waiting
        self._tps: dict[int, tuple[TopicPartition, ...]] = {}
        self._deadline: dict[int, int] = {}
        self._by_tp: dict[TopicPartition, set[int]] = {}
        self._heap: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._tps)

    def full(self) -> bool:
        return len(self._tps) >= self.max_waiting

    def add(self, waiter_id: int, tps: Iterable[TopicPartition], deadline_ms: int) -> None:
        if waiter_id in self._tps:
            self.remove(waiter_id)
        tps = tuple(tps)
        self._tps[waiter_id] = tps
        self._deadline[waiter_id] = deadline_ms
        for tp in tps:
            self._by_tp.setdefault(tp, set()).add(waiter_id)
        heapq.heappush(self._heap, (deadline_ms, waiter_id))

    def remove(self, waiter_id: int) -> None:
        tps = self._tps.pop(waiter_id, None)
        self._deadline.pop(waiter_id, None)
        for tp in tps or ():
            ids = self._by_tp.get(tp)
            if ids is not None:
                ids.discard(waiter_id)
                if not ids:
                    del self._by_tp[tp]

    def on_data(self, tp: TopicPartition) -> list[int]:
        """New data (or a role change) on tp: the waiters to re-check (they stay registered
        until the shell removes them)."""
        return sorted(self._by_tp.get(tp, ()))

    def tick(self, now_ms: int) -> list[int]:
        """Waiters whose deadline has come (still registered; the shell answers and removes)."""
        due = []
        while self._heap and self._heap[0][0] <= now_ms:
            deadline, wid = heapq.heappop(self._heap)
            if self._deadline.get(wid) == deadline:
                due.append(wid)
        return due

    def next_deadline_ms(self) -> int | None:
        while self._heap and self._deadline.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None
