"""Replica assignment (seed 002), topic names and topic-config validation: pure functions."""
import random
from collections import Counter

import pytest

from services.controller.core import topic_config
from riverbed.replica_assignment import rack_alternated, rack_aware
from services.controller.core.assignment import assign_replicas, topic_name_problem


@pytest.mark.parametrize("nodes,parts,rf,start,expected", [
    ([1, 2, 3], 3, 1, 0, {0: (1,), 1: (2,), 2: (3,)}),
    ([1, 2, 3], 4, 2, 1, {0: (2, 3), 1: (3, 1), 2: (1, 2), 3: (2, 3)}),
    ([3, 1, 2], 2, 3, 2, {0: (3, 1, 2), 1: (1, 2, 3)}),       # unsorted input is sorted
    ([5], 3, 1, 0, {0: (5,), 1: (5,), 2: (5,)}),
])
def test_assignment_follows_the_seed_formula(nodes, parts, rf, start, expected):
    assert assign_replicas(nodes, parts, rf, random.Random(0), start_index=start) == expected


@pytest.mark.parametrize("seed", range(20))
def test_assignment_formula_with_random_start_and_even_leaders(seed):
    nodes = [10, 11, 12, 13, 14]
    rng = random.Random(seed)
    start = random.Random(seed).randrange(len(nodes))   # the same draw the function makes
    a = assign_replicas(nodes, 12, 3, rng)
    for i, replicas in a.items():
        assert replicas == tuple(nodes[(start + i + j) % 5] for j in range(3))
        assert len(set(replicas)) == 3
    leaders = Counter(r[0] for r in a.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1
    assert set(leaders) == set(nodes)


def test_assignment_continues_for_new_partitions():
    a = assign_replicas([1, 2, 3], 2, 2, random.Random(1), first_partition=3, start_index=0)
    assert a == {3: (1, 2), 4: (2, 3)}


# --- rack-aware (broker.rack): a host running several storage nodes is one rack -----------------

HOSTS = {1: "h2", 5: "h2", 2: "h3", 3: "h4", 4: "h5"}     # the test bed: h2 runs nodes 1 and 5


def test_rack_alternated_takes_one_node_per_rack_in_turn():
    assert rack_alternated([1, 2, 3, 4, 5], HOSTS) == [1, 2, 3, 4, 5]
    assert rack_alternated([1, 2, 3, 4], {1: "a", 2: "a", 3: "b", 4: "b"}) == [1, 3, 2, 4]
    assert rack_alternated([3, 1, 2], None) == [1, 2, 3]
    # Kafka assigns rack-aware only when every node has a rack and there are two racks or more
    assert not rack_aware([1, 2, 3], {1: "a", 2: "b"}) and rack_alternated([1, 2, 3], {1: "a", 2: "b"}) == [1, 2, 3]
    assert not rack_aware([1, 2], {1: "a", 2: "a"})


@pytest.mark.parametrize("seed", range(30))
def test_rack_aware_assignment_never_puts_two_replicas_in_one_rack(seed):
    a = assign_replicas(list(HOSTS), 40, 3, random.Random(seed), racks=HOSTS)
    for replicas in a.values():
        assert len(set(replicas)) == 3
        assert len({HOSTS[r] for r in replicas}) == 3, replicas
    leaders = Counter(r[0] for r in a.values())
    assert set(leaders) == set(HOSTS) and max(leaders.values()) - min(leaders.values()) <= 1


def test_rack_aware_assignment_reuses_racks_only_when_every_rack_holds_one():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    a = assign_replicas([1, 2, 3, 4], 8, 3, random.Random(0), racks=racks)
    for replicas in a.values():
        assert {racks[r] for r in replicas} == {"a", "b"} and len(set(replicas)) == 3
    # and it continues a topic along the same order
    more = assign_replicas([1, 2, 3, 4], 2, 2, random.Random(0), racks=racks, first_partition=8,
                           start_index=0)
    assert all({racks[r] for r in reps} == {"a", "b"} for reps in more.values())


def test_without_racks_the_assignment_is_the_seed_formula_unchanged():
    for racks in (None, {}, {1: "a", 2: "b"}):     # node 3 without one: plain order
        assert assign_replicas([1, 2, 3], 4, 2, random.Random(0), start_index=1, racks=racks) == \
            {0: (2, 3), 1: (3, 1), 2: (1, 2), 3: (2, 3)}


@pytest.mark.parametrize("name,ok", [
    ("orders", True), ("a.b_c-D9", True), ("x" * 249, True), ("x" * 250, False), ("", False),
    (".", False), ("..", False), ("...", True), ("has space", False), ("slash/no", False),
    ("ünï", False), ("tab\t", False),
])
def test_topic_names(name, ok):
    assert (topic_name_problem(name) is None) == ok


@pytest.mark.parametrize("configs,ok", [
    ({}, True),
    ({"retention.ms": "-1", "segment.bytes": "1048576", "cleanup.policy": "compact,delete"}, True),
    ({"cleanup.policy": "delete,compact"}, True),
    ({"cleanup.policy": "compact"}, True),
    ({"cleanup.policy": "shred"}, False),
    ({"cleanup.policy": ""}, False),
    ({"cleanup.policy": "compact,compact"}, False),
    ({"segment.bytes": "13"}, False),
    ({"segment.bytes": "2147483648"}, False),
    ({"segment.ms": "0"}, False),
    ({"retention.ms": "-2"}, False),
    ({"retention.bytes": "abc"}, False),
    ({"min.cleanable.dirty.ratio": "0.25"}, True),
    ({"min.cleanable.dirty.ratio": "1.5"}, False),
    ({"min.cleanable.dirty.ratio": "nan"}, False),
    ({"min.insync.replicas": "0"}, False),
    ({"min.insync.replicas": "2"}, True),
    ({"unclean.leader.election.enable": "TRUE"}, True),
    ({"unclean.leader.election.enable": "yes"}, False),
    ({"message.timestamp.type": "LogAppendTime"}, True),
    ({"message.timestamp.type": "Now"}, False),
    ({"max.message.bytes": "-1"}, False),
    ({"flush.messages": "1"}, True),
    ({"segment.jitter.ms": "0"}, True),
    ({"segment.index.bytes": "3"}, False),
    ({"index.interval.bytes": "4096"}, True),
    ({"file.delete.delay.ms": "-5"}, False),
    ({"delete.retention.ms": "1000"}, True),
    ({"min.compaction.lag.ms": "-1"}, False),
    ({"flush.ms": "9223372036854775808"}, False),
    ({"log.retention.ms": "1000"}, False),                 # broker key, not a topic key
    ({"no.such.key": "1"}, False),
])
def test_topic_config_validation(configs, ok):
    assert (topic_config.validate(configs) is None) == ok


def test_every_default_is_valid():
    for key, (check, default) in topic_config.TOPIC_CONFIGS.items():
        assert check(default) is None, key
