"""Replica placement (seed 002, Kafka's AdminUtils), pure: the controller places a new topic's
replicas with it and `riverbed partitions reassign --generate` proposes with it, so the two agree.

Over a node list `n` (length N) from start index s, partition i's replica j is on
n[(s + i + j) mod N]: the first replicas (the preferred leaders) go round-robin over the nodes.

Rack-aware (Kafka's broker.rack, KIP-36) when every node names a rack and there are two or
more: `n` is rack_alternated (one node of each rack in turn) and each further replica is the
next node along `n` whose rack holds no replica of the partition yet (any rack again once all
hold one). Losing one rack -- a zone, or a host running several storage nodes -- then loses at
most one replica of a partition while there are as many racks as replicas.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["rack_aware", "rack_alternated", "place"]


def rack_aware(nodes: Sequence[int], racks: Mapping[int, str] | None) -> bool:
    """Every node names a rack and there are at least two (Kafka assigns rack-aware only when all
    brokers have one; a fleet given racks one node at a time keeps the plain order)."""
    return bool(racks) and all(racks.get(n) for n in nodes) and len({racks[n] for n in nodes}) > 1


def rack_alternated(nodes: Sequence[int], racks: Mapping[int, str] | None) -> list[int]:
    """The node order placement walks (Kafka's getRackAlternatedBrokerList): with racks, one node
    of each rack in turn (racks by name, nodes by id); without, the sorted node list."""
    ordered = sorted(set(nodes))
    if not rack_aware(ordered, racks):
        return ordered
    assert racks is not None
    by_rack: dict[str, list[int]] = {}
    for n in ordered:
        by_rack.setdefault(racks[n], []).append(n)
    columns = [by_rack[r] for r in sorted(by_rack)]
    return [col[i] for i in range(max(len(c) for c in columns)) for col in columns if i < len(col)]


def place(order: Sequence[int], index: int, count: int,
          racks: Mapping[int, str] | None = None) -> tuple[int, ...]:
    """The `count` replicas of the partition whose first replica is order[index mod N] (`order`
    from rack_alternated). Precondition: 1 <= count <= N."""
    n = len(order)
    assert 1 <= count <= n, (count, n)
    if not rack_aware(order, racks):
        return tuple(order[(index + j) % n] for j in range(count))
    assert racks is not None
    n_racks = len({racks[x] for x in order})
    chosen = [order[index % n]]
    used = {racks[chosen[0]]}
    k = 1
    while len(chosen) < count:
        cand = order[(index + k) % n]
        k += 1
        if cand in chosen or (racks[cand] in used and len(used) < n_racks):
            continue
        chosen.append(cand)
        used.add(racks[cand])
    return tuple(chosen)
