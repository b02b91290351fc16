"""Assignors: Kafka's documented examples, and properties over random groups."""
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from riverbed.coordinator.assignors import ASSIGNORS, assign
from riverbed.coordinator.consumer_protocol import Subscription


def subs(**topics_by_member):
    return {m: Subscription(tuple(ts)) for m, ts in topics_by_member.items()}


def test_range_follows_seed_formula():
    # 7 partitions over 3 consumers: N = 2, M = 1 -> 3, 2, 2, contiguous, sorted ids.
    got = assign("range", subs(c2=["t"], c0=["t"], c1=["t"]), {"t": 7})
    assert got == {"c0": (("t", 0), ("t", 1), ("t", 2)), "c1": (("t", 3), ("t", 4)),
                   "c2": (("t", 5), ("t", 6))}


def test_range_kafka_javadoc_example():
    got = assign("range", subs(C0=["t0", "t1"], C1=["t0", "t1"]), {"t0": 3, "t1": 3})
    assert got == {"C0": (("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)), "C1": (("t0", 2), ("t1", 2))}


def test_range_more_consumers_than_partitions_and_unknown_topics():
    got = assign("range", subs(a=["t", "missing"], b=["t"], c=["t"]), {"t": 2})
    assert got == {"a": (("t", 0),), "b": (("t", 1),), "c": ()}


def test_roundrobin_kafka_javadoc_examples():
    got = assign("roundrobin", subs(C0=["t0", "t1"], C1=["t0", "t1"]), {"t0": 3, "t1": 3})
    assert got == {"C0": (("t0", 0), ("t0", 2), ("t1", 1)), "C1": (("t0", 1), ("t1", 0), ("t1", 2))}
    # C0 subscribes t0; C1 t0, t1; C2 t0, t1, t2 (partitions 1, 2, 3).
    got = assign("roundrobin", subs(C0=["t0"], C1=["t0", "t1"], C2=["t0", "t1", "t2"]),
                 {"t0": 1, "t1": 2, "t2": 3})
    assert got == {"C0": (("t0", 0),), "C1": (("t1", 0),),
                   "C2": (("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2))}


def test_sticky_keeps_owned_and_moves_the_minimum():
    before = {"a": Subscription(("t",), None, (("t", 0), ("t", 1), ("t", 2))),
              "b": Subscription(("t",), None, (("t", 3), ("t", 4), ("t", 5))),
              "c": Subscription(("t",))}
    got = assign("sticky", before, {"t": 6})
    assert [len(got[m]) for m in "abc"] == [2, 2, 2]
    assert set(got["a"]) <= {("t", 0), ("t", 1), ("t", 2)}
    assert set(got["b"]) <= {("t", 3), ("t", 4), ("t", 5)}


def test_sticky_drops_owned_partitions_of_unsubscribed_or_vanished_topics():
    got = assign("sticky", {"a": Subscription(("t",), None, (("u", 0), ("t", 9), ("t", 0)))}, {"t": 2, "u": 1})
    assert got == {"a": (("t", 0), ("t", 1))}


members = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True)
topic_names = ["t0", "t1", "t2", "t3"]


@st.composite
def groups(draw, homogeneous=False):
    ms = draw(members)
    counts = {t: draw(st.integers(0, 9)) for t in topic_names}
    if homogeneous:
        topics = draw(st.lists(st.sampled_from(topic_names), min_size=1, unique=True))
        return {m: Subscription(tuple(topics)) for m in ms}, counts
    return {m: Subscription(tuple(draw(st.lists(st.sampled_from(topic_names), unique=True))))
            for m in ms}, counts


def check_valid(got, subscriptions, counts):
    assert set(got) == set(subscriptions)
    owners = Counter(tp for tps in got.values() for tp in tps)
    expected = {(t, p) for s in subscriptions.values() for t in s.topics for p in range(counts.get(t, 0))}
    assert set(owners) == expected                       # every subscribed partition assigned
    assert all(n == 1 for n in owners.values())          # ... to exactly one member (guarantee 4)
    for m, tps in got.items():
        assert all(t in subscriptions[m].topics for t, _ in tps)
        assert list(tps) == sorted(tps)


@pytest.mark.parametrize("strategy", sorted(ASSIGNORS))
@settings(max_examples=120, deadline=None)
@given(g=groups())
def test_valid_and_deterministic(strategy, g):
    subscriptions, counts = g
    got = assign(strategy, subscriptions, counts)
    check_valid(got, subscriptions, counts)
    assert assign(strategy, dict(reversed(list(subscriptions.items()))), counts) == got


@pytest.mark.parametrize("strategy", sorted(ASSIGNORS))
@settings(max_examples=120, deadline=None)
@given(g=groups(homogeneous=True))
def test_balanced_with_same_subscriptions(strategy, g):
    subscriptions, counts = g
    got = assign(strategy, subscriptions, counts)
    sizes = [len(v) for v in got.values()]
    if strategy == "range":          # range balances per topic, not overall (Kafka's too)
        for t in topic_names:
            per = [sum(1 for tp in v if tp[0] == t) for v in got.values()]
            assert max(per) - min(per) <= 1
    else:
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(g=groups(), data=st.data())
def test_sticky_same_subscription_members_balanced(g, data):
    subscriptions, counts = g
    got = assign("sticky", subscriptions, counts)
    by_subs = {}
    for m, s in subscriptions.items():
        by_subs.setdefault(frozenset(s.topics), []).append(len(got[m]))
    for sizes in by_subs.values():
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(g=groups(homogeneous=True), data=st.data())
def test_sticky_survivors_keep_their_partitions_when_one_leaves(g, data):
    subscriptions, counts = g
    first = assign("sticky", subscriptions, counts)
    if len(first) < 2:
        return
    gone = data.draw(st.sampled_from(sorted(first)))
    after_subs = {m: Subscription(s.topics, None, first[m]) for m, s in subscriptions.items() if m != gone}
    after = assign("sticky", after_subs, counts)
    check_valid(after, after_subs, counts)
    for m in after:
        assert set(first[m]) <= set(after[m])
    sizes = [len(v) for v in after.values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=100, deadline=None)
@given(g=groups(homogeneous=True), data=st.data())
def test_sticky_with_a_new_member_moves_only_what_balance_needs(g, data):
    subscriptions, counts = g
    first = assign("sticky", subscriptions, counts)
    topics = next(iter(subscriptions.values())).topics
    after_subs = {m: Subscription(s.topics, None, first[m]) for m, s in subscriptions.items()}
    after_subs["z"] = Subscription(topics)
    after = assign("sticky", after_subs, counts)
    check_valid(after, after_subs, counts)
    moved = sum(len(set(first[m]) - set(after[m])) for m in first)
    assert moved == len(after["z"])                      # only the newcomer's share moved
    total = sum(len(v) for v in first.values())
    assert len(after["z"]) == total // len(after_subs)
