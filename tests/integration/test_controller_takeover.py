"""A standby takes over from a dead controller before ZooKeeper expires the dead one's session
(controller.fast.takeover.enable), and only from a dead one: a paused controller is still
replaced only at its session's expiry and is fenced when it wakes.

Real controller processes and ZooKeeper; storage nodes are the stand-ins of test_controller
(ephemeral registrations, nothing listening). The sessions are long on purpose: a takeover
within the test's bound (shorter than the session) can only be the fast one. No wall-clock
threshold decides a test: every wait is a bound on something that must happen.
"""
from __future__ import annotations

import signal
import time

import pytest

from riverbed.wire.client import Channel
from services.common import znodes
from test_controller import (  # noqa: F401 - fixtures by name
    Controllers, _try, active_controller, controller_epoch, controllers, create_topics,
    metadata, register_node, states, wait_until, zk_client)

pytestmark = pytest.mark.integration

LONG_SESSION_MS = 30_000        # the ZooKeeper server allows up to 20 ticks (40 s)
TAKEOVER_BOUND_S = 20.0         # < LONG_SESSION_MS: the session path cannot be what we see


def _start_pair(controllers: Controllers, zk_client, free_ports, session_ms: int):
    p1, pub1, p2, pub2, n1, n2 = free_ports(6)
    for node_id, port in ((1, n1), (2, n2)):
        register_node(zk_client, node_id, port)
    overrides = {"zookeeper.session.timeout.ms": session_ms}
    controllers.start(1, p1, pub1, **overrides)
    assert wait_until(lambda: active_controller(zk_client), "an active controller") == 1
    controllers.start(2, p2, pub2, **overrides)
    with Channel(controllers.endpoint(1)) as active:
        wait_until(lambda: _try(lambda: create_topics(active, ("orders", 4, 2, {}))),
                   "CREATE_TOPICS answered")
    # The standby is up and watching (its log says so once it read /controller).
    wait_until(lambda: "controller 2 up" in controllers.log(2), "the standby up")
    return controller_epoch(zk_client)


def test_killed_controller_is_replaced_before_its_session_expires(zk_client, controllers,
                                                                   free_ports):
    epoch = _start_pair(controllers, zk_client, free_ports, LONG_SESSION_MS)
    # The standby's probe must have been connected (a never-connected one never acts).
    wait_until(lambda: "watching the active controller 1" in controllers.log(2),
               "the standby's probe connected to controller 1")
    # A change the standby's warm copy must catch: node 2 leaves, the active controller moves
    # its leaderships (a state write per partition) -- and dies right after.
    zk_client.delete(znodes.broker_path(2))
    wait_until(lambda: all(s.leader != 2 for s in states(zk_client, "orders").values()),
               "node 2's leaderships moved")
    killed_at = time.monotonic()
    controllers.kill(1)
    wait_until(lambda: active_controller(zk_client) == 2, "the standby takes over",
               timeout_s=TAKEOVER_BOUND_S)
    assert time.monotonic() - killed_at < LONG_SESSION_MS / 1000
    assert "process gone" in controllers.log(2)
    wait_until(lambda: controller_epoch(zk_client) > epoch, "a higher controller epoch")
    with Channel(controllers.endpoint(2)) as now_active:
        md = wait_until(lambda: _try(lambda: metadata(now_active, ["orders"])),
                        "METADATA from the new active controller")
        assert md.controller_id == 2 and md.controller_epoch > epoch
        assert len(md.topics[0].partitions) == 4
        # The new controller's model is ZooKeeper's (it read only what changed since it
        # started standing by; its log says how much).
        zk_states = states(zk_client, "orders")
        assert {pm.partition: (pm.leader, tuple(pm.isr)) for pm in md.topics[0].partitions} \
            == {p: (s.leader, tuple(s.isr)) for p, s in zk_states.items()}
        assert "'topic_znodes_read'" in controllers.log(2)
        created = wait_until(lambda: _try(lambda: create_topics(now_active, ("more", 1, 1, {}))),
                             "CREATE_TOPICS on the new controller")
        assert [r.error_code for r in created] == [0]


def test_paused_controller_waits_for_its_session_and_is_fenced(zk_client, controllers,
                                                               free_ports):
    """SIGSTOP: ZMTP heartbeats to it time out, but its port still accepts connections, so the
    standby does not act until ZooKeeper expires the session; woken, the old controller finds
    a newer epoch and writes nothing."""
    epoch = _start_pair(controllers, zk_client, free_ports, 4000)
    old = controllers.procs[1]
    old.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: active_controller(zk_client) == 2, "the standby takes over",
                   timeout_s=60)
        new_epoch = wait_until(lambda: (e := controller_epoch(zk_client)) > epoch and e,
                               "a higher controller epoch")
        assert "process gone" not in controllers.log(2)
    finally:
        old.send_signal(signal.SIGCONT)
    wait_until(lambda: "stops acting" in controllers.log(1), "the woken controller stops acting")
    time.sleep(1.0)      # it had a chance to write: it must not have
    assert active_controller(zk_client) == 2
    assert controller_epoch(zk_client) == new_epoch
    data, _ = zk_client.get(znodes.partition_state_path("orders", 0))
    assert znodes.decode_partition_state(data).controller_epoch in (epoch, new_epoch)
