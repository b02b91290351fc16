"""Issue 24, point 3: Eligible Leader Replicas (KIP-966). A leader cut off from its followers
shrinks the ISR to itself and refuses acks=all (min.insync.replicas 2), which is right; if that
lone leader then dies, the followers that were in the ISR when it fell below
min.insync.replicas are still eligible, and one of them is elected cleanly (unclean election
stays off) with nothing acknowledged lost. Before ELR the partition stayed leaderless until the
dead leader came back.

The followers are cut off by SIGSTOP: the controller fences them (no heartbeats) and the ISR
shrinks to the leader, the ELR holds both; then the leader is SIGKILLed and the followers
resumed. Waits are bounded and poll; nothing asserts on speed.
"""
from __future__ import annotations

import contextlib
import logging

from faults import paused, wait_until
from riverbed import Admin, NewTopic
from services.common import znodes
from verifiers import VerifyingProducer, verify

TOPIC = "elr"


def _state(zk):
    return znodes.decode_partition_state(zk.get(znodes.partition_state_path(TOPIC, 0))[0])


def test_a_lone_leader_dies_and_an_eligible_follower_is_elected_cleanly(fleet):
    bootstrap = [fleet.gateway_endpoint]
    logging.getLogger("riverbed").setLevel(logging.ERROR)   # the retries while leaderless
    from services.common import zk as zkmod
    zk = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False)
    try:
        with Admin(bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                                          configs={"min.insync.replicas": "2"})])
            wait_until(lambda: len(_state(zk).isr) == 3, "a full ISR")
            vp = VerifyingProducer(bootstrap, TOPIC, 1, enable_idempotence=None,
                                   delivery_timeout_ms=120_000)
            with vp:
                vp.wait_for_acks(50, what="before the fault")
                leader = _state(zk).leader
                followers = [n for n in (1, 2, 3) if n != leader]
                with contextlib.ExitStack() as cut:
                    for n in followers:        # SIGCONT on exit, even on failure
                        cut.enter_context(paused(fleet, f"storage-{n}"))
                    st = wait_until(lambda: (s := _state(zk)).isr == (leader,) and s,
                                    "the ISR shrunk to the lone leader")
                    # KIP-966: the replicas that left the ISR as it fell below min.insync
                    # are eligible. Both followers when one change fenced them together; when
                    # they were fenced one at a time, only the second: the HW advanced while
                    # the ISR was {leader, second}, so the first may lack committed records.
                    assert st.elr and set(st.elr) <= set(followers), st
                    elr = set(st.elr)
                    # the eligible replicas, as `riverbed topics describe` shows them
                    (p,) = wait_until(lambda: (d := admin.describe_topics([TOPIC])[0])
                                      and set(d.partitions[0].elr) == elr
                                      and d.partitions, "the ELR in the metadata")
                    assert p.isr == (leader,) and p.last_known_elr == ()
                    fleet.stop(f"storage-{leader}", kill=True)
                # the followers are back; the dead leader is not. Unclean election is off and
                # the ISR was the dead leader alone: only the ELR can have given this leader.
                st = wait_until(lambda: (s := _state(zk)).leader in elr and s,
                                "a leader elected from the eligible leader replicas", 90)
                assert leader not in st.isr, st
                vp.wait_for_acks(50, timeout_s=120, what="after the election")
            report = verify(bootstrap, TOPIC, [vp])
            assert report.ok, report.describe()
            assert report.acked > 100
            # the eligible follower that was not elected rejoined: the ISR is back at 2
            wait_until(lambda: len(_state(zk).isr) >= 2 and not _state(zk).elr,
                       "the ISR back at min.insync.replicas, the ELR emptied")
    finally:
        zkmod.close(zk)
