"""Cooperative rebalancing (KIP-429) with real processes: three members (each its own process,
loadgen.rebalance_bench's member mode) share a 12-partition topic under a steady producer; a
fourth joins. The members keep the partitions that do not move and keep consuming them while
their rejoin is in flight; only the three partitions that move are revoked, once, and go to the
newcomer."""
from __future__ import annotations

import time

import pytest

from deploy.fleet import Fleet, free_base_port
from loadgen.rebalance_bench import PARTITIONS, MemberProc, PacedProducer, balanced, create_topic, \
    wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("coop-fleet"), free_base_port(), storage_nodes=1,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f.gateway_endpoint
    finally:
        f.down()


def test_members_keep_consuming_their_partitions_while_a_fourth_joins(bootstrap):
    topic, group = "coop-events", "coop-group"
    create_topic(bootstrap, topic, PARTITIONS)
    producer = PacedProducer(bootstrap, topic, rate=600)
    producer.start()
    members: list[MemberProc] = []
    try:
        members = [MemberProc(bootstrap, topic, group, "cooperative-sticky") for _ in range(3)]
        wait_until(lambda: balanced(members), "three members with 4 partitions each", 120)
        wait_until(lambda: {p for m in members for _, p, _, _ in m.snapshot()[2]}
                   == set(range(PARTITIONS)), "records on every partition", 60)
        before = [m.snapshot()[0] for m in members]
        t_join = time.monotonic()
        members.append(MemberProc(bootstrap, topic, group, "cooperative-sticky"))
        wait_until(lambda: balanced(members), "four members with 3 partitions each", 120)
        snaps = [m.snapshot() for m in members]
        newcomer = snaps[3][0]
        revoked_all: list[int] = []
        for i in range(3):
            owned, events, records = snaps[i]
            kept = owned
            assert kept <= before[i] and len(kept) == 3          # nothing gained, one moved
            revoked = [p for kind, t, tps in events if kind == "REVOKED" and t >= t_join
                       for p in tps]
            assert sorted(revoked) == sorted(before[i] - kept)    # only the moving partition
            revoked_all += revoked
            assert not [e for e in events if e[0] == "LOST"]
            # it kept consuming its kept partitions while its rejoin was in flight
            while_joining = [r for r in records if r[0] >= t_join and r[3] and r[1] in kept]
            assert while_joining, f"member {i} read nothing of {sorted(kept)} while rejoining"
        assert sorted(revoked_all) == sorted(newcomer)
    finally:
        for m in members:
            m.stop()
        producer.stop()
