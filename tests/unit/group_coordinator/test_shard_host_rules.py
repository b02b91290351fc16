"""The shard-ownership rule shared by group coordinators and offset managers."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.common.shard_host import desired_shards


def test_shards_go_round_robin_over_sorted_live_ids():
    assert desired_shards(3, [7, 3], 5) == {0, 2, 4}
    assert desired_shards(7, [7, 3], 5) == {1, 3}
    assert desired_shards(9, [7, 3], 5) == set()          # not registered: owns nothing


@given(st.sets(st.integers(0, 50), min_size=1, max_size=6), st.integers(1, 60))
def test_every_shard_has_exactly_one_owner(ids, n):
    owners = [desired_shards(i, ids, n) for i in ids]
    assert sorted(s for o in owners for s in o) == list(range(n))
    assert max(map(len, owners)) - min(map(len, owners)) <= 1
