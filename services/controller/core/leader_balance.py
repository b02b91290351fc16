"""Preferred-leader balance (Kafka's auto.leader.rebalance.enable), pure.

A partition's preferred leader is its first assigned replica. Per node, the imbalance ratio is
(partitions whose preferred replica is the node but whose leader is another) / (partitions whose
preferred replica is the node). When a node's ratio is above
leader.imbalance.per.broker.percentage / 100, the controller moves leadership of those
partitions back to it where it is live and in the ISR.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from services.controller.core.model import LeaderIsr

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class NodeBalance:
    node_id: int
    preferred: int                 # partitions whose preferred replica is this node
    not_led: int                   # ... whose leader is another node (or none)

    @property
    def ratio(self) -> float:
        return self.not_led / self.preferred if self.preferred else 0.0


def balance(partitions: Iterable[tuple[TopicPartition, Sequence[int], LeaderIsr | None]]
            ) -> dict[int, NodeBalance]:
    """Per preferred node: counts over (tp, replicas, state) triples."""
    preferred: dict[int, int] = {}
    not_led: dict[int, int] = {}
    for _tp, replicas, st in partitions:
        if not replicas:
            continue
        node = replicas[0]
        preferred[node] = preferred.get(node, 0) + 1
        if st is None or st.leader != node:
            not_led[node] = not_led.get(node, 0) + 1
    return {n: NodeBalance(n, preferred[n], not_led.get(n, 0)) for n in sorted(preferred)}


def imbalanced_nodes(per_node: Mapping[int, NodeBalance], percentage: int) -> list[int]:
    """Nodes whose ratio is above `percentage` percent (Kafka compares ratio > percentage/100)."""
    return [n for n, b in sorted(per_node.items()) if b.not_led * 100 > percentage * b.preferred]
