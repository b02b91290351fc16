"""Topic names and replica assignment (seed 002, Kafka's AdminUtils), pure functions."""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from riverbed import topic_names
from riverbed.replica_assignment import place, rack_alternated
from riverbed.topic_names import MAX_TOPIC_NAME_LENGTH, TopicNameProblem

_PROBLEM_MESSAGES = {
    TopicNameProblem.EMPTY: "topic name is empty",
    TopicNameProblem.DOT_NAME: "topic name cannot be {name!r}",
    TopicNameProblem.TOO_LONG: f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters",
    TopicNameProblem.ILLEGAL_CHARACTERS:
        "topic name may contain only ASCII letters, digits, '.', '_' and '-'",
}


def topic_name_problem(name: str) -> str | None:
    """None for a legal topic name (Kafka's rule, riverbed.topic_names), else why it is not
    (answered as INVALID_TOPIC_EXCEPTION)."""
    problem = topic_names.topic_name_problem(name)
    return None if problem is None else _PROBLEM_MESSAGES[problem].format(name=name)


def assign_replicas(live_nodes: Sequence[int], num_partitions: int, replication_factor: int,
                    rng: random.Random, *, first_partition: int = 0,
                    start_index: int | None = None,
                    racks: Mapping[int, str] | None = None) -> dict[int, tuple[int, ...]]:
    """Seed 002's assignment over the node list `n` (len N) with start index s: partition i's
    replica j is on n[(s + i + j) mod N]. So the first replicas (the preferred leaders) go
    round-robin over the nodes and every node leads about num_partitions/N.

    With `racks` (node -> broker.rack) naming a rack for every live node, and at least two
    racks, `n` is rack-alternated and each further replica is the next node along it whose rack
    holds no replica of the partition yet (riverbed.replica_assignment, which the reassignment
    tool's proposals share).

    `first_partition` > 0 continues an existing topic (CREATE_PARTITIONS), with `start_index`
    the index in `n` of partition 0's first replica so the round-robin carries on.
    Preconditions (the caller checks them and answers with typed errors):
    1 <= replication_factor <= N."""
    nodes = rack_alternated(live_nodes, racks)
    n = len(nodes)
    assert 1 <= replication_factor <= n, (replication_factor, n)
    assert num_partitions >= 0
    s = rng.randrange(n) if start_index is None else start_index % n
    return {i: place(nodes, s + i, replication_factor, racks)
            for i in range(first_partition, first_partition + num_partitions)}
