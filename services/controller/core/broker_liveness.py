"""Which registered storage nodes the controller counts as alive: direct heartbeats beside the
ZooKeeper session (Kafka's BrokerHeartbeat and broker.session.timeout.ms, KIP-631). Pure.

A node's ephemeral /brokers/ids/<id> lives as long as its ZooKeeper session, which ZooKeeper
expires only after zookeeper.session.timeout.ms (6 s by default; the server will not go below
2 x its tickTime). A node also sends BROKER_HEARTBEAT to the active controller every
broker.heartbeat.interval.ms; one not heard from for broker.session.timeout.ms is *fenced*:
counted out of the live set, so its partitions get new leaders (with a new leader epoch, which
fences the old leader's writes and ISR changes) without waiting for ZooKeeper. A fenced node
is unfenced as soon as it is heard from again (it gets LEADER_AND_ISR for its partitions and
follows), or when it registers anew.

Deadlines are refreshed by heartbeats and by (re-)registration; a new controller grants every
registered node one full session before it may fence it. When the controller itself was
stalled (ticks further apart than half a session: a busy machine, a long GC, SIGSTOP), it
cannot tell a silent node from heartbeats still queued in its own socket, so every deadline is
pushed back by the stall instead of fencing the whole cluster at once.

broker.session.timeout.ms = 0 turns fencing off (ZooKeeper's session alone decides).
"""
from __future__ import annotations

from collections.abc import Iterable


class BrokerLiveness:
    def __init__(self, session_timeout_ms: int):
        self.session_timeout_ms = session_timeout_ms
        self.deadline_ms: dict[int, int] = {}
        self.fenced: set[int] = set()
        self.last_tick_ms: int | None = None
        self.fencings = 0            # total, for the metrics

    @property
    def enabled(self) -> bool:
        return self.session_timeout_ms > 0

    def reset(self, registered: Iterable[int], now_ms: int) -> None:
        """A controller just became active: every registered node gets one full session."""
        self.deadline_ms = {n: now_ms + self.session_timeout_ms for n in registered}
        self.fenced = set()
        self.last_tick_ms = now_ms

    def registered(self, nodes: Iterable[int], fresh: Iterable[int], now_ms: int) -> None:
        """/brokers/ids changed: `nodes` are registered now, `fresh` (re-)registered since the
        last call (a new session: a new deadline, and not fenced)."""
        nodes = set(nodes)
        for n in list(self.deadline_ms):
            if n not in nodes:
                del self.deadline_ms[n]
        self.fenced &= nodes
        for n in fresh:
            self.fenced.discard(n)
            self.deadline_ms[n] = now_ms + self.session_timeout_ms
        for n in nodes:
            self.deadline_ms.setdefault(n, now_ms + self.session_timeout_ms)

    def heard_from(self, node: int, now_ms: int) -> bool:
        """A heartbeat from a registered node. True when it was fenced (and is not any more)."""
        self.deadline_ms[node] = now_ms + self.session_timeout_ms
        if node in self.fenced:
            self.fenced.discard(node)
            return True
        return False

    def expire(self, now_ms: int) -> set[int]:
        """Nodes whose deadline passed (now fenced); none while fencing is off."""
        last, self.last_tick_ms = self.last_tick_ms, now_ms
        if not self.enabled:
            return set()
        if last is not None and now_ms - last > self.session_timeout_ms // 2:
            stall = now_ms - last
            for n in self.deadline_ms:
                self.deadline_ms[n] += stall
            return set()
        out = {n for n, d in self.deadline_ms.items() if d <= now_ms and n not in self.fenced}
        self.fenced |= out
        self.fencings += len(out)
        return out
