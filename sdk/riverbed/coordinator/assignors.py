"""Partition assignment strategies of consumer groups: pure, deterministic functions.

Every assignor takes `subscriptions` (member id -> Subscription whose `topics` are already
resolved: a pattern has been matched against the topic list by the caller) and
`partitions_per_topic` (topic -> partition count; topics missing from it are skipped) and returns
member id -> sorted tuple of (topic, partition), with an entry for every member.

Guarantee 4 of ARCHITECTURE.md: every partition of a subscribed, existing topic goes to exactly
one member, and only to a member subscribed to its topic.

- `range`: seed 000 §5.6 and Kafka's RangeAssignor — per topic, partitions in numeric order,
  subscribed members sorted by member id; N = partitions // members, M = partitions % members;
  the member at index i gets N partitions, plus one more if i < M, contiguously.
- `roundrobin`: Kafka's RoundRobinAssignor — all subscribed topic-partitions sorted (topic, then
  partition), members sorted, dealt in circular order, skipping members not subscribed to the
  partition's topic.
- `sticky`: keeps each member's owned partitions (Subscription.owned_partitions, which the
  coordinator fills from the previous generation) as far as balance allows, then moves as few
  as it can: members with the same subscriptions end with counts differing by at most one, and
  no partition could move to an eligible member holding two fewer (Kafka's "balanced").
- `cooperative-sticky`: KIP-429's incremental protocol on top of `sticky`. The target is sticky's;
  a partition whose target is another member than the one owning it now is withheld from
  everyone this generation: its owner's assignment simply lacks it (the owner revokes only that
  partition, keeps consuming the rest, and rejoins at once), and the next generation, where
  nobody owns it, gives it to its target. Members never lose partitions that do not move, and a
  partition is never assigned to two members at once, even while owners have not revoked yet.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from riverbed.coordinator.consumer_protocol import Subscription, TopicPartition

Assignor = Callable[[Mapping[str, Subscription], Mapping[str, int]], dict[str, tuple[TopicPartition, ...]]]


def _topics_of(subscriptions: Mapping[str, Subscription],
               partitions_per_topic: Mapping[str, int]) -> dict[str, list[str]]:
    """topic -> sorted member ids subscribed to it, for topics that exist with partitions."""
    out: dict[str, list[str]] = {}
    for member in sorted(subscriptions):
        for topic in set(subscriptions[member].topics):
            if partitions_per_topic.get(topic, 0) > 0:
                out.setdefault(topic, []).append(member)
    return out


def _finish(members: Mapping[str, object], got: Mapping[str, list[TopicPartition]]
            ) -> dict[str, tuple[TopicPartition, ...]]:
    return {m: tuple(sorted(got.get(m, ()))) for m in sorted(members)}


def range_assign(subscriptions: Mapping[str, Subscription],
                 partitions_per_topic: Mapping[str, int]) -> dict[str, tuple[TopicPartition, ...]]:
    got: dict[str, list[TopicPartition]] = {}
    for topic, members in sorted(_topics_of(subscriptions, partitions_per_topic).items()):
        n_parts = partitions_per_topic[topic]
        per_member, extra = divmod(n_parts, len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            got.setdefault(member, []).extend((topic, p) for p in range(start, start + length))
    return _finish(subscriptions, got)


def roundrobin_assign(subscriptions: Mapping[str, Subscription],
                      partitions_per_topic: Mapping[str, int]) -> dict[str, tuple[TopicPartition, ...]]:
    topics = _topics_of(subscriptions, partitions_per_topic)
    members = sorted(subscriptions)
    subscribed = {m: set(subscriptions[m].topics) for m in members}
    got: dict[str, list[TopicPartition]] = {}
    cursor = 0
    for topic in sorted(topics):
        for p in range(partitions_per_topic[topic]):
            while topic not in subscribed[members[cursor]]:
                cursor = (cursor + 1) % len(members)
            got.setdefault(members[cursor], []).append((topic, p))
            cursor = (cursor + 1) % len(members)
    return _finish(subscriptions, got)


def sticky_assign(subscriptions: Mapping[str, Subscription],
                  partitions_per_topic: Mapping[str, int]) -> dict[str, tuple[TopicPartition, ...]]:
    topics = _topics_of(subscriptions, partitions_per_topic)
    members = sorted(subscriptions)
    eligible_topics = {m: {t for t in subscriptions[m].topics if t in topics} for m in members}
    owner: dict[TopicPartition, str] = {}
    got: dict[str, set[TopicPartition]] = {m: set() for m in members}
    # 1. Keep what each member owned and may still own; a partition claimed twice goes to the
    #    first claimant in member-id order (a stale claim; the coordinator's view wins upstream).
    for m in members:
        for tp in sorted(set(subscriptions[m].owned_partitions)):
            topic, p = tp
            if topic in eligible_topics[m] and 0 <= p < partitions_per_topic[topic] and tp not in owner:
                owner[tp] = m
                got[m].add(tp)
    # 2. Give every unowned partition to the eligible member holding the fewest; the most
    #    constrained partitions (fewest eligible members) first.
    free = [(len(topics[t]), t, p) for t in sorted(topics) for p in range(partitions_per_topic[t])
            if (t, p) not in owner]
    for _, topic, p in sorted(free):
        m = min(topics[topic], key=lambda x: (len(got[x]), x))
        owner[(topic, p)] = m
        got[m].add((topic, p))
    # 3. Balance: move one partition at a time from a fuller member to an eligible member holding
    #    at least two fewer. Each move lowers the sum of squared counts, so this terminates.
    while True:
        moved = False
        by_count_desc = sorted(members, key=lambda x: (-len(got[x]), x))
        by_count_asc = sorted(members, key=lambda x: (len(got[x]), x))
        for src in by_count_desc:
            for dst in by_count_asc:
                if len(got[src]) - len(got[dst]) < 2:
                    break
                movable = sorted(tp for tp in got[src] if tp[0] in eligible_topics[dst])
                if movable:
                    tp = movable[-1]
                    got[src].remove(tp)
                    got[dst].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return _finish(subscriptions, {m: sorted(v) for m, v in got.items()})


def current_owners(subscriptions: Mapping[str, Subscription],
                   partitions_per_topic: Mapping[str, int]) -> dict[TopicPartition, str]:
    """partition -> the member owning it now (Subscription.owned_partitions): the first claimant
    in member-id order when two claim it, as `sticky` decides; partitions that no longer exist
    are left out."""
    owner: dict[TopicPartition, str] = {}
    for m in sorted(subscriptions):
        for tp in sorted(set(subscriptions[m].owned_partitions)):
            topic, p = tp
            if 0 <= p < partitions_per_topic.get(topic, 0) and tp not in owner:
                owner[tp] = m
    return owner


def cooperative_sticky_assign(subscriptions: Mapping[str, Subscription],
                              partitions_per_topic: Mapping[str, int]
                              ) -> dict[str, tuple[TopicPartition, ...]]:
    target = sticky_assign(subscriptions, partitions_per_topic)
    owner = current_owners(subscriptions, partitions_per_topic)
    # A partition owned by someone else is not given to its new member until a later generation
    # (after its owner revoked it): KIP-429's first round.
    return {m: tuple(tp for tp in tps if owner.get(tp, m) == m) for m, tps in target.items()}


ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "sticky": sticky_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}

# Strategies of KIP-429's incremental (COOPERATIVE) rebalance protocol: a member keeps its
# partitions across a rebalance and revokes only those its new assignment lacks.
COOPERATIVE = frozenset({"cooperative-sticky"})


def assign(strategy: str, subscriptions: Mapping[str, Subscription],
           partitions_per_topic: Mapping[str, int]) -> dict[str, tuple[TopicPartition, ...]]:
    """Run the named strategy; KeyError for a name not in ASSIGNORS."""
    return ASSIGNORS[strategy](subscriptions, partitions_per_topic)
