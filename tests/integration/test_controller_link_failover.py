"""A storage node's requests to the controller follow a controller failover at once instead of
waiting out controller.socket.timeout.ms on the old controller (controller_link.py).

A real fleet (ZooKeeper, 2 controllers, 3 storage nodes, a gateway). The active controller is
paused (SIGSTOP: its port still accepts connections, so nothing is refused and a request to it
just waits); the storage nodes' controller.socket.timeout.ms is 10 minutes, longer than any
bound here, so a request that waited for the old controller would never finish in the test.
The controllers' ZooKeeper session is 4 s: the standby takes over when it expires.

1. CONTROLLED_SHUTDOWN sent to the paused controller: the node's stop completes with its
   leaderships moved by the new controller.
2. ALTER_PARTITION: a follower is paused past replica.lag.time.max.ms while the controller is
   paused too; the leader's ISR shrink is committed by the new controller. (Before the change
   this also ended well, later: the new controller's LEADER_AND_ISR superseded the proposal
   stuck on the old one and the leader proposed again; the stuck call lingered for the
   socket timeout. Test 1 is the one a request stuck on the old controller fails.)

Every wait is bounded and is not a threshold on speed. Every process is the fleet's, stopped by
Fleet.down (by PID); a paused controller is resumed in a finally block.
"""
from __future__ import annotations

import functools

import signal
import time

import node_helpers
import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, NewTopic, errors
from services.common import zk as zkmod
from services.common import znodes

pytestmark = pytest.mark.integration
WAIT_S = 90.0
SOCKET_TIMEOUT_MS = 600_000


wait_until = functools.partial(node_helpers.wait_until, timeout_s=WAIT_S, interval_s=0.2,
                               tolerate=(errors.RiverbedError,))


@pytest.fixture
def fleet(tmp_path):
    f = Fleet(tmp_path / "fleet", free_base_port(), storage_nodes=3, controllers=2, gateways=1,
              counts={"group_coordinator": 0, "offset_manager": 0, "transaction_coordinator": 0},
              # the stop of a node waits for its controlled shutdown (bounded by this)
              stop_grace_s=WAIT_S,
              config_overrides={
                  # ZooKeeper's session decides controller and node liveness (no heartbeat
                  # fencing: the paused follower must stay a registered ISR member)
                  "controller": {"zookeeper.session.timeout.ms": "4000",
                                 "broker.session.timeout.ms": "0",
                                 "auto.leader.rebalance.enable": "false"},
                  "storage_node": {"controller.socket.timeout.ms": str(SOCKET_TIMEOUT_MS),
                                   "zookeeper.session.timeout.ms": "30000",
                                   "replica.lag.time.max.ms": "2000",
                                   "controlled.shutdown.retry.backoff.ms": "1000"}})
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture
def zk(fleet):
    client = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False,
                           auth=fleet.zk_auth)
    try:
        yield client
    finally:
        zkmod.close(client)


def active_controller(zk) -> int | None:
    try:
        return znodes.decode_controller(zk.get(znodes.CONTROLLER)[0]).controller_id
    except Exception:  # noqa: BLE001 - none right now
        return None


def partitions(admin, topic):
    (desc,) = admin.describe_topics([topic])
    return {p.partition: p for p in desc.partitions}


def _setup(fleet, zk, admin, topic: str) -> int:
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])
    wait_until(lambda: all(p.leader >= 0 and len(p.isr) == 3
                           for p in partitions(admin, topic).values()), "leaders, full ISRs")
    return wait_until(lambda: active_controller(zk), "an active controller")


def test_controlled_shutdown_follows_a_controller_failover(fleet, zk):
    with Admin([fleet.gateway_endpoint], request_timeout_ms=10_000) as admin:
        old = _setup(fleet, zk, admin, "cs")
        led = {p for p, d in partitions(admin, "cs").items() if d.leader == 3}
        assert led, "storage-3 leads one of three partitions (seed 002's assignment)"
        fleet.signal(f"controller-{old}", signal.SIGSTOP)
        try:
            # SIGTERM: CONTROLLED_SHUTDOWN goes to the paused controller and waits there until
            # the standby is elected; stop() waits for the process (bounded by stop_grace_s).
            fleet.stop("storage-3")
            assert active_controller(zk) not in (None, old)
        finally:
            fleet.signal(f"controller-{old}", signal.SIGCONT)
        text = (fleet.data_dir / "logs" / "storage-3.log").read_text()
        assert "controlled shutdown succeeded" in text, text[-3000:]
        assert "stopping anyway" not in text
        after = partitions(admin, "cs")
        assert all(after[p].leader not in (3, -1) for p in led)


def isrs(zk, topic: str) -> dict[int, tuple[int, ...]]:
    """ISRs as committed in ZooKeeper (not through the gateway, whose requests may wait for
    the paused controller)."""
    assignment = znodes.decode_topic_assignment(zk.get(znodes.topic_path(topic))[0])
    return {p: tuple(znodes.decode_partition_state(
        zk.get(znodes.partition_state_path(topic, p))[0]).isr) for p in assignment}


def test_isr_shrink_proposed_to_a_paused_controller_is_committed_by_the_next(fleet, zk):
    with Admin([fleet.gateway_endpoint], request_timeout_ms=10_000) as admin:
        old = _setup(fleet, zk, admin, "shrink")
        others = {p for p, d in partitions(admin, "shrink").items() if d.leader != 3}
    assert others
    fleet.signal(f"controller-{old}", signal.SIGSTOP)
    fleet.signal("storage-3", signal.SIGSTOP)
    try:
        # Storage-3 falls out of sync (replica.lag.time.max.ms 2 s) while its ZooKeeper
        # session (30 s; it is resumed well before) keeps it registered: the leaders propose the shrink to the paused
        # controller; the standby, elected when the paused one's session expires, commits it.
        # (The new controller's LEADER_AND_ISR restates the ISR it read, so a leader may
        # propose again; either way nothing may wait for the paused controller.)
        wait_until(lambda: active_controller(zk) not in (None, old), "a new controller")
        wait_until(lambda: all(3 not in isr for p, isr in isrs(zk, "shrink").items()
                               if p in others),
                   "storage-3 out of the ISR of every partition it does not lead")
    finally:
        fleet.signal("storage-3", signal.SIGCONT)
        fleet.signal(f"controller-{old}", signal.SIGCONT)
    wait_until(lambda: all(len(isr) == 3 for isr in isrs(zk, "shrink").values()),
               "storage-3 back in every ISR (expanded through the new controller)")


def test_follower_back_after_its_session_expired_rejoins_every_isr(tmp_path):
    """A follower paused past its ZooKeeper session: when it resumes it fetches at once, so
    the leaders may propose adding it back before it has registered again; the controller
    refuses (not live) and a refused leader waits for a LEADER_AND_ISR. The node's
    re-registration must send one to those leaders, or the ISRs stay shrunk for good."""
    f = Fleet(tmp_path / "fleet", free_base_port(), storage_nodes=3, controllers=1, gateways=1,
              counts={"group_coordinator": 0, "offset_manager": 0, "transaction_coordinator": 0},
              config_overrides={
                  "controller": {"broker.session.timeout.ms": "0",
                                 "auto.leader.rebalance.enable": "false"},
                  "storage_node": {"zookeeper.session.timeout.ms": "4000",
                                   "replica.lag.time.max.ms": "2000"}})
    try:
        f.up()
        client = zkmod.connect(f.zk_connect, timeout_s=10, create_chroot=False, auth=f.zk_auth)
        try:
            with Admin([f.gateway_endpoint], request_timeout_ms=10_000) as admin:
                _setup(f, client, admin, "back")
            f.signal("storage-3", signal.SIGSTOP)
            try:
                wait_until(lambda: client.exists(znodes.broker_path(3)) is None,
                           "storage-3's registration expired")
                wait_until(lambda: all(3 not in isr for isr in isrs(client, "back").values()),
                           "storage-3 out of every ISR")
            finally:
                f.signal("storage-3", signal.SIGCONT)
            wait_until(lambda: all(len(isr) == 3 for isr in isrs(client, "back").values()),
                       "storage-3 back in every ISR")
        finally:
            zkmod.close(client)
    finally:
        f.down()
