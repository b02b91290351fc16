"""Issue 15: fast failure detection must not cost safety. A leader SIGSTOPped for longer than
broker.session.timeout.ms (but far shorter than its ZooKeeper session) is fenced by the
controller from missing heartbeats alone: its partition gets a new leader and leader epoch while
its /brokers/ids registration still exists. Every record acknowledged (acks=all, idempotent)
is then read back at its offset, none twice; resumed, the old leader is unfenced as a follower
and a write sent straight to it is refused.

Its own fleet: ZooKeeper sessions of 20 s (so the session cannot be what moves the leader),
the default heartbeat settings (broker.heartbeat.interval.ms 500, broker.session.timeout.ms
2000). Waits are bounded and poll; nothing asserts on speed.
"""
from __future__ import annotations

import time

import pytest

from deploy.fleet import Fleet, free_base_port
from faults import ephemeral_present, paused, wait_full_isr, wait_partitions, wait_until
from riverbed import Admin, NewTopic
from riverbed.records import build_batch
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel
from riverbed._proto.v1 import produce_pb2
from services.common import znodes
from verifiers import VerifyingProducer, verify

LONG_ZK_SESSION_MS = 20000
NOT_LEADER = {6, 74}       # NOT_LEADER_FOR_PARTITION, FENCED_LEADER_EPOCH


@pytest.fixture
def long_session_fleet(tmp_path):
    zk = {"zookeeper.session.timeout.ms": str(LONG_ZK_SESSION_MS)}
    overrides = {
        "storage_node": {**zk, "replica.lag.time.max.ms": "2000",
                         "replica.fetch.wait.max.ms": "200", "replica.fetch.backoff.ms": "100",
                         "alter.partition.retry.backoff.ms": "100",
                         "controlled.shutdown.retry.backoff.ms": "200"},
        "controller": {**zk, "auto.leader.rebalance.enable": "false"},
        "gateway": dict(zk),
    }
    f = Fleet(tmp_path / "fleet", free_base_port(), storage_nodes=3, controllers=2, gateways=1,
              counts={"group_coordinator": 0, "offset_manager": 0,
                      "transaction_coordinator": 0}, config_overrides=overrides)
    with f:
        f.up()
        yield f
        f.down()


def _state(zk, topic, p=0):
    data, _ = zk.get(znodes.partition_state_path(topic, p))
    return znodes.decode_partition_state(data)


def test_paused_leader_is_fenced_by_heartbeats_before_its_session_expires(request,
                                                                          long_session_fleet):
    fleet = long_session_fleet
    bootstrap = [fleet.gateway_endpoint]
    from services.common import zk as zkmod
    zk = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False)
    try:
        with Admin(bootstrap, request_timeout_ms=30000) as admin:
            topic = "hb-fenced"
            admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2, 3]},
                                          configs={"min.insync.replicas": "2"})])
            wait_full_isr(admin, topic, 1)
            before = _state(zk, topic)
            assert before.leader == 1
            with VerifyingProducer(bootstrap, topic, [0], enable_idempotence=True) as vp:
                vp.wait_for_acks(200)
                with paused(fleet, "storage-1"):
                    t_pause = time.monotonic()
                    wait_until(lambda: _state(zk, topic).leader not in (-1, 1),
                               "a new leader for the paused node's partition")
                    moved_after_s = time.monotonic() - t_pause
                    after = _state(zk, topic)
                    # Fenced by heartbeats: ZooKeeper still holds the paused node's session.
                    assert ephemeral_present(zk, fleet, "storage-1"), (
                        f"leader moved after {moved_after_s:.1f} s, but only once ZooKeeper "
                        "expired the session")
                    assert after.leader_epoch > before.leader_epoch
                    assert 1 not in after.isr
                    vp.wait_for_acks(100, partition=0, what=f"on node {after.leader}")
                # Resumed: heard from again, unfenced, told to follow; back in the ISR.
                wait_partitions(admin, topic, lambda ps: set(ps[0].isr) == {1, 2, 3},
                                "node 1 back in the ISR", timeout_s=120)
                assert ephemeral_present(zk, fleet, "storage-1")    # never lost its session
                # A write straight to the old leader (no gateway) is refused.
                req = produce_pb2.ProduceRequest(acks=1, timeout_ms=5000)
                req.topics.add(name=topic).partitions.add(partition=0)
                batch = build_batch([(1_700_000_000_000, None, b"zombie write")])
                with Channel(fleet.process("storage-1").endpoint) as ch:
                    resp = ch.call(ApiKey.PRODUCE, req, payloads=[batch], timeout_ms=10000)
                code = resp.body.topics[0].partitions[0].error_code
                assert code in NOT_LEADER, f"old leader answered a produce with {code}"
                vp.wait_for_acks(100)
                vp.stop()
            v = verify(bootstrap, topic, [vp])
            line = (f"[heartbeat fencing] leader moved {moved_after_s:.1f} s after SIGSTOP "
                    f"(epoch {before.leader_epoch} -> {after.leader_epoch}); producer "
                    f"{vp.summary()}; verification: {v.describe()}")
            print(line)
            request.node.user_properties.append(("heartbeat fencing", line))
            assert v.acked > 0
            assert v.ok, v.describe()
            assert v.duplicates == 0, v.describe()
    finally:
        zkmod.close(zk)
