"""Fencing storage nodes that stop heartbeating (broker.session.timeout.ms), in the controller core.
Virtual time: every input carries its now_ms."""
import random

from riverbed import errors
from riverbed._proto.v1 import header_pb2, replication_pb2
from services.controller.config import ControllerConfig
from services.controller.core.broker_liveness import BrokerLiveness
from services.controller.core.controller import ControllerCore
from services.controller.core.effects import (
    PublishMetadata, Respond, SendLeaderAndIsr, WritePartitionState)
from services.controller.core.events import BrokersChanged, ElectedAsController, RequestReceived
from services.controller.core.model import BrokerInfo, LeaderIsr, TopicSnapshot

Api = header_pb2.ApiKey
E = errors.ErrorCode
SESSION = 2000


def broker(i, epoch=-1):
    return BrokerInfo(i, "127.0.0.1", 9100 + i, f"tcp://127.0.0.1:{9100 + i}", epoch=epoch)


def new_core(session_ms=SESSION, epochs=None):
    """Nodes 1..3 live; t-0 led by 1 and t-1 led by 2, ISR 1,2,3 (leader epoch 4)."""
    epochs = epochs or {}
    core = ControllerCore(ControllerConfig(controller_id=100, broker_session_timeout_ms=session_ms),
                          random.Random(0))
    states = {0: LeaderIsr(1, 4, (1, 2, 3), 1, 0), 1: LeaderIsr(2, 4, (2, 3, 1), 1, 0)}
    topic = TopicSnapshot("t", {0: (1, 2, 3), 1: (2, 3, 1)}, {}, 0, 0, states)
    core.handle(ElectedAsController(5, "cid", tuple(broker(i, epochs.get(i, -1)) for i in (1, 2, 3)),
                                    (topic,)), 0)
    return core


def heartbeat(core, node, now_ms, epoch=-1):
    out = core.handle(RequestReceived(
        Api.BROKER_HEARTBEAT, replication_pb2.BrokerHeartbeatRequest(broker_id=node,
                                                                      broker_epoch=epoch)), now_ms)
    assert isinstance(out[-1], Respond)
    return out[:-1], out[-1].body


def of(effects, cls):
    return [e for e in effects if isinstance(e, cls)]


def run(core, until_ms, beating=(1, 2, 3), step_ms=100, hb_every_ms=500):
    """Ticks every step_ms up to until_ms; the `beating` nodes heartbeat every hb_every_ms."""
    effects = []
    t = 0
    while t < until_ms:
        t += step_ms
        if t % hb_every_ms == 0:
            for n in beating:
                effects += heartbeat(core, n, t)[0]
        effects += core.tick(t)
        core.check_invariants()
    return effects


def test_heartbeating_nodes_are_never_fenced():
    core = new_core()
    out = run(core, 20_000)
    assert of(out, WritePartitionState) == []
    assert set(core.brokers) == {1, 2, 3} and core.liveness.fencings == 0


def test_silent_node_is_fenced_after_the_session_and_its_partitions_move_in_one_pass():
    core = new_core()
    out = run(core, 1900, beating=(2, 3))
    assert of(out, WritePartitionState) == []          # within the session: nothing yet
    out = run_from(core, 1900, 2600, beating=(2, 3))
    writes = {w.partition: w.state for w in of(out, WritePartitionState)}
    assert writes[0].leader == 2 and writes[0].leader_epoch == 5 and writes[0].isr == (2, 3)
    assert writes[1].leader == 2 and writes[1].leader_epoch == 5 and writes[1].isr == (2, 3)
    assert 1 not in core.brokers and 1 in core.registered
    # one LEADER_AND_ISR per live node, none to the fenced node
    nodes = [s.node_id for s in of(out, SendLeaderAndIsr)]
    assert sorted(nodes) == [2, 3]
    [pub] = of(out, PublishMetadata)
    assert [b.node_id for b in pub.update.live_brokers] == [2, 3]


def run_from(core, start_ms, until_ms, beating, step_ms=100):
    effects = []
    t = start_ms
    while t < until_ms:
        t += step_ms
        if t % 500 == 0:
            for n in beating:
                effects += heartbeat(core, n, t)[0]
        effects += core.tick(t)
        core.check_invariants()
    return effects


def test_fenced_node_heard_from_again_is_unfenced_and_told_its_partitions():
    core = new_core()
    run(core, 3000, beating=(2, 3))
    assert 1 in core.liveness.fenced
    effects, resp = heartbeat(core, 1, 3050)
    assert resp.error_code == 0 and resp.is_fenced
    assert 1 in core.brokers
    lai = {s.node_id: s.request for s in of(effects, SendLeaderAndIsr)}
    # it learns the new leader (2) and epoch of both partitions it replicates
    assert {(p.partition, p.leader, p.leader_epoch) for p in lai[1].partitions} == {(0, 2, 5),
                                                                                   (1, 2, 5)}
    effects, resp = heartbeat(core, 1, 3100)
    assert not resp.is_fenced and effects == []


def test_a_stalled_controller_does_not_fence_everyone():
    core = new_core()
    run(core, 1000)
    # the controller's loop stalls for 5 s (heartbeats queue up unread); the next tick must not
    # take the stall for silence
    assert not of(core.tick(6000), WritePartitionState)
    assert core.liveness.fenced == set()
    for n in (1, 2, 3):
        heartbeat(core, n, 6010)
    out = run_from(core, 6000, 12000, beating=(1, 2, 3))
    assert of(out, WritePartitionState) == [] and core.liveness.fenced == set()


def test_re_registration_unfences():
    core = new_core()
    run(core, 3000, beating=(2, 3))
    assert 1 in core.liveness.fenced
    out = core.handle(BrokersChanged((broker(1, epoch=99), broker(2), broker(3))), 3100)
    assert 1 in core.brokers and 1 not in core.liveness.fenced
    assert 1 in {s.node_id for s in of(out, SendLeaderAndIsr)}


def test_zookeeper_loss_still_removes_a_node_that_heartbeats():
    core = new_core()
    run(core, 1000)
    out = core.handle(BrokersChanged((broker(2), broker(3))), 1100)
    assert {w.partition for w in of(out, WritePartitionState)} == {0, 1}
    assert 1 not in core.brokers and 1 not in core.registered
    _, resp = heartbeat(core, 1, 1200)
    assert resp.error_code == E.Value("BROKER_NOT_AVAILABLE") and 1 not in core.brokers


def test_stale_broker_epoch_is_refused_and_changes_nothing():
    core = new_core(epochs={1: 10, 2: 20, 3: 30})
    run(core, 3000, beating=(2, 3))          # node 1 fenced
    effects, resp = heartbeat(core, 1, 3050, epoch=9)
    assert resp.error_code == E.Value("INVALID_REQUEST") and effects == []
    assert 1 in core.liveness.fenced


def test_session_zero_means_zookeeper_only():
    core = new_core(session_ms=0)
    out = run(core, 60_000, beating=())
    assert of(out, WritePartitionState) == [] and set(core.brokers) == {1, 2, 3}


def test_liveness_alone():
    lv = BrokerLiveness(1000)
    lv.reset([1, 2], 0)
    assert lv.expire(400) == set()
    assert lv.heard_from(1, 500) is False
    assert lv.expire(900) == set()
    assert lv.expire(1000) == {2}                   # 2 silent since the reset
    assert lv.expire(1100) == set()                 # counted once
    assert lv.expire(1500) == {1} and lv.fencings == 2
    assert lv.heard_from(2, 1600) is True and lv.fenced == {1}
    lv.registered([2, 3], fresh=[3], now_ms=1700)   # 1 gone from ZooKeeper, 3 new
    assert lv.fenced == set() and set(lv.deadline_ms) == {2, 3}


def test_heartbeat_fast_path_only_moves_the_deadline():
    core = new_core(epochs={1: 10, 2: 20, 3: 30})
    req = replication_pb2.BrokerHeartbeatRequest(broker_id=1, broker_epoch=10)
    resp = core.heartbeat_without_changes(req, 1500)
    assert resp is not None and resp.error_code == 0 and not resp.is_fenced
    assert core.liveness.deadline_ms[1] == 1500 + SESSION
    # stale epoch, unknown node: the full path answers (with an error)
    assert core.heartbeat_without_changes(
        replication_pb2.BrokerHeartbeatRequest(broker_id=1, broker_epoch=9), 1600) is None
    assert core.heartbeat_without_changes(
        replication_pb2.BrokerHeartbeatRequest(broker_id=7), 1600) is None
    # a fenced node: the full path (it unfences and tells the node its partitions)
    run(core, 4000, beating=(2, 3))
    assert 1 in core.liveness.fenced
    assert core.heartbeat_without_changes(req, 4000) is None
