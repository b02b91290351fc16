"""The console tools say on stderr when a partition they use has no leader, instead of sitting
silent while the controller elects one (and say again when it has one).

`LeaderWatch.check()` asks the cluster at most once per `interval_s` (the tools call it while
they wait); `changes()` is the pure part: previous and new leaders -> the lines to print.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

__all__ = ["LeaderWatch", "leader_changes"]


def leader_changes(topic: str, before: dict[int, int], now: dict[int, int]) -> list[str]:
    """Lines for partitions whose leader went away or came back (-1 = no leader)."""
    lines = []
    for p in sorted(now):
        old, new = before.get(p), now[p]
        if new < 0 and (old is None or old >= 0):
            lines.append(f"% {topic} [{p}]: no leader (election in progress?); waiting")
        elif new >= 0 and old is not None and old < 0:
            lines.append(f"% {topic} [{p}]: leader is now node {new}")
    return lines


class LeaderWatch:
    """Prints leader losses and recoveries of `topic` (only `partitions`, if given)."""

    def __init__(self, bootstrap: str, topic: str, partitions: set[int] | None = None, *,
                 interval_s: float = 1.0, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.interval_s = interval_s
        self.out = out or sys.stderr
        self._clock = clock
        self._leaders: dict[int, int] = {}
        self._next = 0.0
        self._admin: Any = None      # riverbed.admin.Admin, created on the first check

    def check(self) -> None:
        """Ask for the topic's leaders if interval_s passed; print what changed. Errors asking
        are printed once per kind and otherwise ignored (the tool goes on waiting)."""
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self.interval_s
        from riverbed import errors
        try:
            if self._admin is None:
                from riverbed.admin import Admin
                self._admin = Admin(self.bootstrap, request_timeout_ms=5000)
            (desc,) = self._admin.describe_topics([self.topic])
        except errors.RiverbedError as e:
            print(f"% {self.topic}: cannot read its leaders: {e}", file=self.out, flush=True)
            return
        leaders = {p.partition: p.leader for p in desc.partitions
                   if self.partitions is None or p.partition in self.partitions}
        for line in leader_changes(self.topic, self._leaders, leaders):
            print(line, file=self.out, flush=True)
        self._leaders = leaders

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
