"""Issue 4's fault ring: replication under kill -9, SIGSTOP and session expiry, checked with a
verifying producer (acks=all) and consumer (every acknowledged record at its offset, order per
partition kept; duplicates counted and printed: allowed for the plain producer, zero required
from the idempotent one).

Each test gets its own fleet (conftest.py: 2 controllers, 3 storage nodes, 1 gateway, 4 s
ZooKeeper sessions, replica.lag.time.max.ms 2000). Waits are bounded; nothing asserts on speed.
"""
from __future__ import annotations

import pytest

from faults import (active_controller, clean_shutdown, hard_kill, partitions, paused,
                    session_expiry, wait_full_isr, wait_partitions, wait_until)
from riverbed import NewTopic
from verifiers import VerifyingProducer, verify

MIN_ISR = {"min.insync.replicas": "2"}


def report(request, name: str, vp: VerifyingProducer, v) -> None:
    """Print (shown with -s or -rA) and attach the figures to the test's report."""
    line = f"[{name}] producer {vp.summary()}; verification: {v.describe()}"
    print(line)
    request.node.user_properties.append((name, line))


def check(request, name, bootstrap, topic, vp):
    v = verify(bootstrap, topic, [vp])
    report(request, name, vp, v)
    assert v.acked > 0
    assert v.ok, v.describe()
    return v


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_acked_records_survive_repeated_leader_kills(request, fleet, bootstrap, admin, idempotent):
    """Produce-consume-validate: 4 partitions, RF 3, min.insync.replicas 2, acks=all; the
    leader of partition 0 is SIGKILLed three times (restarted and back in every ISR between).
    The plain producer (one request per partition in flight) may duplicate after a lost
    answer; the idempotent one (5 in flight, sequences) must not."""
    topic = "pcv"
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=3, configs=MIN_ISR)])
    wait_full_isr(admin, topic, 4)
    kw = dict(enable_idempotence=True, max_in_flight_requests_per_connection=5) if idempotent \
        else {}
    with VerifyingProducer(bootstrap, topic, 4, **kw) as vp:
        vp.wait_for_acks(200)
        for kill in range(3):
            leader = partitions(admin, topic)[0].leader
            with hard_kill(fleet, f"storage-{leader}"):
                wait_partitions(admin, topic, lambda ps: ps[0].leader not in (-1, leader),
                                f"a successor to leader {leader} of partition 0 (kill {kill + 1})")
                vp.wait_for_acks(20, partition=0, what=f"on the successor (kill {kill + 1})")
            wait_full_isr(admin, topic, 4)      # the restarted node caught up and rejoined
            vp.wait_for_acks(100)
        vp.stop()
        assert vp.producer.idempotent == idempotent
    v = check(request, f"leader-kills ({'idempotent' if idempotent else 'plain'})", bootstrap,
              topic, vp)
    if idempotent:
        assert v.duplicates == 0, v.describe()


def test_killed_follower_catches_up_and_its_log_matches(request, fleet, bootstrap, admin):
    """A follower SIGKILLed while acks=all production goes on: production continues with the
    other two; restarted, it truncates by leader epochs, catches up and rejoins the ISR. Its
    log then serves every acknowledged record when it leads (the leader is stopped cleanly, so
    the controller moves leadership to it, the next replica in order)."""
    topic = "follower-kill"
    admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2, 3]}, configs=MIN_ISR)])
    wait_full_isr(admin, topic, 1)
    with VerifyingProducer(bootstrap, topic, [0]) as vp:
        vp.wait_for_acks(200)
        with hard_kill(fleet, "storage-2"):
            wait_partitions(admin, topic, lambda ps: 2 not in ps[0].isr and ps[0].leader == 1,
                            "node 2 out of the ISR, node 1 still leading")
            vp.wait_for_acks(300, partition=0, what="with node 2 down")
        wait_partitions(admin, topic, lambda ps: set(ps[0].isr) == {1, 2, 3},
                        "restarted node 2 back in the ISR")
        vp.wait_for_acks(100)
        vp.stop()
    with clean_shutdown(fleet, "storage-1"):
        wait_partitions(admin, topic, lambda ps: ps[0].leader == 2, "node 2 leading")
        check(request, "follower-kill, read from node 2", bootstrap, topic, vp)
        with clean_shutdown(fleet, "storage-2"):
            wait_partitions(admin, topic, lambda ps: ps[0].leader == 3, "node 3 leading")
            check(request, "follower-kill, read from node 3", bootstrap, topic, vp)


def test_controller_killed_with_a_storage_node_successor_elects(request, fleet, bootstrap, admin,
                                                                zk):
    """The active controller and a storage node SIGKILLed together: the standby becomes active
    and elects leaders for every partition the dead node led; production resumes on each."""
    topic = "ctl-kill"
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=3, configs=MIN_ISR)])
    wait_full_isr(admin, topic, 4)
    first = wait_until(lambda: active_controller(zk), "an active controller")
    with VerifyingProducer(bootstrap, topic, 4) as vp:
        vp.wait_for_acks(200)
        victim = partitions(admin, topic)[0].leader
        led = [p for p, info in partitions(admin, topic).items() if info.leader == victim]
        with hard_kill(fleet, f"storage-{victim}"), hard_kill(fleet, f"controller-{first}"):
            wait_until(lambda: active_controller(zk) not in (None, first), "the standby active")
            wait_partitions(admin, topic, lambda ps: all(
                ps[p].leader not in (-1, victim) for p in ps), f"no partition led by {victim}")
            for p in led:
                vp.wait_for_acks(20, partition=p, what=f"on partition {p} after the election")
        wait_full_isr(admin, topic, 4)
        vp.wait_for_acks(100)
        vp.stop()
    check(request, "controller+node kill", bootstrap, topic, vp)


def test_paused_follower_leaves_and_rejoins_the_isr(request, fleet, bootstrap, admin):
    """A follower SIGSTOPped: the leader drops it from the ISR (replica.lag.time.max.ms, or the
    controller when its session expires) and acks=all goes on with 2 of 3 in sync
    (min.insync.replicas 2); after SIGCONT it catches up and rejoins."""
    topic = "paused-follower"
    admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2, 3]}, configs=MIN_ISR)])
    wait_full_isr(admin, topic, 1)
    with VerifyingProducer(bootstrap, topic, [0]) as vp:
        vp.wait_for_acks(200)
        with paused(fleet, "storage-3"):
            wait_partitions(admin, topic, lambda ps: set(ps[0].isr) == {1, 2},
                            "paused node 3 out of the ISR")
            vp.wait_for_acks(50, partition=0, what="while node 3 is paused")
        wait_partitions(admin, topic, lambda ps: set(ps[0].isr) == {1, 2, 3},
                        "node 3 back in the ISR")
        vp.wait_for_acks(100)
        vp.stop()
    check(request, "paused follower", bootstrap, topic, vp)


def test_leader_session_expiry_zombie_is_fenced(request, fleet, bootstrap, admin, zk):
    """The leader paused until ZooKeeper expires its session: node 2 takes over; resumed, the
    old leader (a zombie until it sees the expiry) must not get acks=all records acknowledged,
    re-registers, truncates and rejoins. Then it leads again and serves every acked record."""
    topic = "zombie"
    admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2, 3]}, configs=MIN_ISR)])
    wait_full_isr(admin, topic, 1)
    with VerifyingProducer(bootstrap, topic, [0]) as vp:
        vp.wait_for_acks(200)
        with session_expiry(fleet, "storage-1", zk):
            wait_partitions(admin, topic, lambda ps: ps[0].leader == 2, "node 2 leading")
            vp.wait_for_acks(100, partition=0, what="on node 2")
        wait_partitions(admin, topic, lambda ps: set(ps[0].isr) == {1, 2, 3},
                        "node 1 back in the ISR")
        vp.wait_for_acks(100)
        vp.stop()
    check(request, "zombie leader", bootstrap, topic, vp)
    with clean_shutdown(fleet, "storage-2"):
        wait_partitions(admin, topic, lambda ps: ps[0].leader == 1, "node 1 leading")
        check(request, "zombie leader, read from node 1", bootstrap, topic, vp)
