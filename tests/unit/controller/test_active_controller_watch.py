"""A standby's verdict on the active controller's process (core/active_controller_watch.py)."""
from __future__ import annotations

import pytest

from services.controller.core.active_controller_watch import ActiveController, ActiveControllerWatch

A = ActiveController(1, "tcp://127.0.0.1:9093", czxid=100)
B = ActiveController(2, "tcp://127.0.0.1:9095", czxid=200)


def watching(target=A, refusals=2) -> ActiveControllerWatch:
    w = ActiveControllerWatch(refusals)
    assert w.watch(target)
    return w


def test_connected_lost_then_refused_twice_is_gone_once():
    w = watching()
    w.connected()
    w.connection_lost()
    assert w.gone() is None
    w.connect_refused()
    assert w.gone() is None              # one refusal: could be a full listen queue
    w.connect_refused()
    assert w.gone() == A
    assert w.gone() is None              # reported once
    w.connect_refused()
    assert w.gone() is None


def test_never_connected_is_never_gone():
    """A controller we never reached (a firewall, a wrong endpoint) is left to its session."""
    w = watching()
    for _ in range(5):
        w.connect_refused()
    w.connection_lost()
    w.connect_refused()
    w.connect_refused()
    assert w.gone() is None


@pytest.mark.parametrize("between", ["connect_failed", "connected"])
def test_refusals_must_be_consecutive(between):
    """A timed-out connect (a paused or cut-off host keeps its port) or a reconnect that
    succeeds (a process listening again) starts the count over."""
    w = watching()
    w.connected()
    w.connection_lost()
    w.connect_refused()
    getattr(w, between)()
    if between == "connected":
        w.connection_lost()
    w.connect_refused()
    assert w.gone() is None
    w.connect_refused()
    assert w.gone() == A


def test_paused_controller_heartbeat_timeout_then_connects_is_not_gone():
    """SIGSTOP: ZMTP heartbeats time out (connection lost), but the kernel still accepts
    connections on its listening socket: reconnects are not refused."""
    w = watching()
    w.connected()
    for _ in range(10):
        w.connection_lost()
        w.connected()
    assert w.gone() is None


def test_a_new_target_starts_over():
    w = watching()
    w.connected()
    w.connection_lost()
    w.connect_refused()
    assert w.watch(B)
    assert not w.watch(B)                # the same target again: no change
    w.connect_refused()
    assert w.gone() is None              # B was never connected
    w.connected()
    w.connection_lost()
    w.connect_refused()
    w.connect_refused()
    assert w.gone() == B
    assert w.watch(None)
    assert w.gone() is None


def test_a_re_elected_controller_is_another_target():
    """Same id and endpoint, new /controller znode (czxid): a fresh watch."""
    w = watching()
    w.connected()
    w.connection_lost()
    w.connect_refused()
    w.connect_refused()
    assert w.gone() == A
    again = ActiveController(A.controller_id, A.endpoint, czxid=300)
    assert w.watch(again)
    w.connected()
    w.connection_lost()
    w.connect_refused()
    w.connect_refused()
    assert w.gone() == again


def test_refusals_to_confirm_is_checked():
    with pytest.raises(ValueError):
        ActiveControllerWatch(0)
