"""`cluster health`'s verdict (riverbed.tools.health.assess), decided from metadata alone."""
from __future__ import annotations

from riverbed.structs import PartitionInfo
from riverbed.tools.health import assess


def p(topic, partition, leader, replicas, isr):
    return PartitionInfo(topic, partition, leader, tuple(replicas), tuple(isr))


IN_SYNC = [p("a", 0, 1, [1, 2, 3], [1, 2, 3]), p("a", 1, 2, [2, 3, 1], [2, 3, 1])]


def test_all_in_sync_with_a_controller_is_healthy():
    r = assess(1, [1, 2, 3], IN_SYNC)
    assert r.healthy and r.reasons == [] and r.partitions == 2 and r.live_nodes == [1, 2, 3]


def test_no_controller_is_unhealthy():
    r = assess(-1, [1, 2, 3], IN_SYNC)
    assert not r.healthy and r.reasons == ["no active controller"]


def test_under_replicated_and_down_node_are_named():
    parts = [p("a", 0, 1, [1, 2, 3], [1, 2]), p("a", 1, 2, [2, 3, 1], [2, 1])]
    r = assess(1, [1, 2], parts)
    assert not r.healthy
    assert r.under_replicated_partitions == ["a-0", "a-1"]
    assert r.down_nodes == [3]
    assert any("2 under-replicated partition(s): a-0, a-1" in x for x in r.reasons)
    assert "storage node 3 is not registered (down)" in r.reasons


def test_offline_partition_is_named():
    r = assess(1, [2, 3], [p("b", 0, -1, [1], [1])])
    assert r.offline_partitions == ["b-0"]
    assert any(x.startswith("1 offline partition(s) (no leader): b-0") for x in r.reasons)


def test_expected_node_must_be_registered_and_in_every_isr():
    # node 3 is back (registered) but not yet in the ISR of a-0
    parts = [p("a", 0, 1, [1, 3], [1]), p("a", 1, 3, [3, 1], [3, 1])]
    r = assess(1, [1, 2, 3], parts, expected_nodes=[3])
    assert not r.healthy
    assert any("storage node 3 is not in the ISR of 1 partition(s) it replicates: a-0" in x
               for x in r.reasons)
    r = assess(1, [1, 2], [], expected_nodes=[4])
    assert r.down_nodes == [4] and not r.healthy


def test_long_lists_are_cut():
    parts = [p("t", i, 1, [1, 2], [1]) for i in range(25)]
    r = assess(1, [1, 2], parts)
    assert any(x.endswith("and 15 more") for x in r.reasons)
    assert len(r.under_replicated_partitions) == 25
