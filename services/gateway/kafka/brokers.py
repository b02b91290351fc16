"""The gateways as the brokers Kafka clients see (pure).

A Kafka client sends each partition's requests to the partition's leader and group requests to
the group's coordinator, both named in Metadata / FindCoordinator. Behind the Kafka listener
every gateway can serve every partition (it forwards to the storage node that leads it), so the
"leader" a client is told is a gateway, chosen to spread partitions evenly and stably:

- the live gateways that advertise the client's listener, sorted by id, are the brokers;
- partition p of topic t is led by brokers[(crc32(t) + p) % n]: a topic's partitions go round
  the gateways from a start fixed by the topic's name (the same on every gateway, and while the
  set of gateways stays the same, the same answer every time); replicas and ISR are the next
  brokers round, as many as the partition has (at most n);
- a group's coordinator is brokers[shard % n] (shard: the group's __consumer_offsets partition),
  and ListGroups at a broker lists the groups it coordinates (Kafka's answer), so a client that
  asks every broker (kafka-python's list_groups(), the Java Admin's listConsumerGroups) lists
  each group once, although every gateway can ask every group coordinator;
- the controller a client is told is the gateway with the lowest id (admin requests sent there
  are forwarded to the active controller like any other).
When a gateway joins or leaves, clients learn it through their normal metadata refresh.
"""
from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaBroker:
    node_id: int           # the gateway's gateway.id
    host: str
    port: int
    rack: str | None = None


def sorted_brokers(brokers: Sequence[KafkaBroker]) -> tuple[KafkaBroker, ...]:
    seen: dict[int, KafkaBroker] = {}
    for b in brokers:
        seen.setdefault(b.node_id, b)
    return tuple(seen[i] for i in sorted(seen))


def topic_start(topic: str) -> int:
    return zlib.crc32(topic.encode("utf-8", "surrogatepass"))


def placement(topic: str, partition: int, broker_ids: Sequence[int], replicas: int
              ) -> tuple[int, tuple[int, ...]]:
    """(leader, replica list with the leader first) of a partition over sorted `broker_ids`;
    (-1, ()) with no brokers."""
    n = len(broker_ids)
    if n == 0:
        return -1, ()
    first = (topic_start(topic) + partition) % n
    count = max(1, min(replicas, n))
    ids = tuple(broker_ids[(first + i) % n] for i in range(count))
    return ids[0], ids


def coordinator(shard: int, broker_ids: Sequence[int]) -> int:
    """The broker a group whose __consumer_offsets partition is `shard` is sent to; -1: none."""
    return broker_ids[shard % len(broker_ids)] if broker_ids else -1


def lists_group(shard: int | None, broker_ids: Sequence[int], me: int) -> bool:
    """Whether broker `me` lists a group whose __consumer_offsets partition is `shard` in its
    ListGroups answer: when it is the group's coordinator. With the shard unknown (the
    gateway's metadata has no __consumer_offsets yet) the controller broker lists the group,
    so that asking every broker still lists it once."""
    if shard is None:
        return me == controller(broker_ids)
    return coordinator(shard, broker_ids) == me


def controller(broker_ids: Sequence[int]) -> int:
    return min(broker_ids) if broker_ids else -1
