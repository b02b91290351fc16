"""The storage node as a real process: the test plays controller (LEADER_AND_ISR), producer and
consumer over riverbed.wire.client.Channel, against a real ZooKeeper."""
from __future__ import annotations

import functools
import signal

import pytest
from node_helpers import NONE, fetch, fetch_all, leader_and_isr, produce, wait_registered

from riverbed import errors
from riverbed._proto.v1 import controller_pb2, fetch_pb2, list_offsets_pb2, produce_pb2
from riverbed.records import build_batch, decode_batches
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel

from services.common import znodes

pytestmark = pytest.mark.integration


@pytest.fixture
def nodes(storage_nodes):
    """storage_nodes, each node given 15 s to stop."""
    return functools.partial(storage_nodes, stop_timeout_s=15)


def batch(values, ts=1_700_000_000_000):
    return build_batch([(ts + i, None, v) for i, v in enumerate(values)])


def test_single_node_produce_fetch_restart_and_errors(nodes, zk):
    node = nodes(1, **{"message.max.bytes": 4096}).start()
    info = wait_registered(zk, node).info
    assert info.broker_id == 1 and node.endpoint in info.endpoints
    with Channel(node.endpoint) as ch:
        r = leader_and_isr(ch, 1, [("orders", 0, 1, 0, [1], [1]), ("orders", 1, 1, 0, [1], [1])])
        assert r.error_code == NONE
        assert [p.error_code for p in r.partitions] == [NONE, NONE]

        p = produce(ch, "orders", 0, batch([b"a", b"b", b"c"]))
        assert (p.error_code, p.base_offset) == (NONE, 0)
        p = produce(ch, "orders", 0, batch([b"d", b"e"]), acks=-1)   # ISR of one: at once
        assert (p.error_code, p.base_offset) == (NONE, 3)
        produce(ch, "orders", 0, batch([b"f"]), acks=0)
        p = produce(ch, "orders", 1, batch([b"x"]))
        assert (p.error_code, p.base_offset) == (NONE, 0)

        recs, part = fetch_all(ch, "orders", 0)
        assert [r.value for r in recs] == [b"a", b"b", b"c", b"d", b"e", b"f"]
        assert [r.offset for r in recs] == list(range(6))
        assert part.high_watermark == 6

        # LIST_OFFSETS
        req = list_offsets_pb2.ListOffsetsRequest(replica_id=-1)
        t = req.topics.add(name="orders")
        t.partitions.add(partition=0, timestamp=-2)
        t.partitions.add(partition=0, timestamp=-1)
        t.partitions.add(partition=0, timestamp=1_700_000_000_001)
        lo = ch.call(ApiKey.LIST_OFFSETS, req).body.topics[0].partitions
        assert [x.offset for x in lo] == [0, 6, 1]

        # Bad input: typed errors, nothing changes, the node keeps serving.
        p = produce(ch, "nope", 0, batch([b"z"]))
        assert p.error_code == errors.UnknownTopicOrPartitionError.code
        p = produce(ch, "orders", 0, batch([b"z" * 5000]))
        assert p.error_code == errors.MessageTooLargeError.code
        corrupt = bytearray(batch([b"z"]))
        corrupt[-1] ^= 0xFF
        p = produce(ch, "orders", 0, bytes(corrupt))
        assert p.error_code == errors.CorruptMessageError.code
        p = produce(ch, "orders", 0, batch([b"z"]), acks=2)
        assert p.error_code == errors.InvalidRequiredAcksError.code
        part, _ = fetch(ch, "orders", 0, -1)
        assert part.error_code == errors.OffsetOutOfRangeError.code
        part, _ = fetch(ch, "orders", 0, 99)
        assert part.error_code == errors.OffsetOutOfRangeError.code
        part, _ = fetch(ch, "nope", 0, 0)
        assert part.error_code == errors.UnknownTopicOrPartitionError.code
        # malformed frames: an envelope error, and the node still answers
        ch._sock.send_multipart([b"\xff\xfe garbage", b"more"])
        with pytest.raises(errors.KafkaError):
            ch.call(ApiKey.PRODUCE, produce_pb2.ProduceRequest(acks=1), payloads=[b"x", b"y"])
        # stale controller epoch
        r = leader_and_isr(ch, 0, [("orders", 0, 2, 5, [2], [1, 2])])
        assert r.error_code == errors.StaleControllerEpochError.code
        p = produce(ch, "orders", 0, batch([b"g"]))
        assert (p.error_code, p.base_offset) == (NONE, 6)   # still the leader

        # long poll: waits for min_bytes, answered when data arrives
        rid = ch.send(ApiKey.FETCH, _fetch_req("orders", 1, 1, max_wait_ms=5000, min_bytes=1),
                      timeout_ms=15000)
        assert ch.recv(300) is None          # nothing yet: the fetch is parked
        produce(ch, "orders", 1, batch([b"y"]))
        resp = ch.recv(10000)
        assert resp is not None and resp.correlation_id == rid
        assert [r.value for r in decode_batches(bytes(resp.payloads[0]))] == [b"y"]

        # STOP_REPLICA: a stale epoch is refused; with delete_partitions the log goes away
        stop = controller_pb2.StopReplicaRequest(controller_id=100, controller_epoch=0,
                                                 delete_partitions=True)
        stop.partitions.add(topic="orders", partition=1)
        assert ch.call(ApiKey.STOP_REPLICA, stop).body.error_code == \
            errors.StaleControllerEpochError.code
        assert (node.log_dir / "orders-1").exists()
        stop.controller_epoch = 1
        assert ch.call(ApiKey.STOP_REPLICA, stop).body.error_code == NONE
        assert not (node.log_dir / "orders-1").exists()
        assert produce(ch, "orders", 1, batch([b"w"])).error_code == \
            errors.UnknownTopicOrPartitionError.code

    # SIGKILL and restart: every acknowledged record is still there.
    assert node.stop(signal.SIGKILL) == -signal.SIGKILL
    node.start()
    wait_registered(zk, node)
    with Channel(node.endpoint) as ch:
        assert leader_and_isr(ch, 2, [("orders", 0, 1, 1, [1], [1])]).error_code == NONE
        recs, _ = fetch_all(ch, "orders", 0)
        assert [r.value for r in recs] == [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]

    # SIGTERM: exit 0, clean-shutdown marker written, registration gone.
    assert node.stop(signal.SIGTERM) == 0, node.log_tail()
    assert (node.log_dir / ".kafka_cleanshutdown").exists()
    assert zk.exists(znodes.broker_path(1)) is None


def _fetch_req(topic, partition, offset, *, max_wait_ms, min_bytes, replica_id=-1):
    req = fetch_pb2.FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms,
                                 min_bytes=min_bytes)
    req.topics.add(name=topic).partitions.add(partition=partition, fetch_offset=offset,
                                              partition_max_bytes=1 << 20)
    return req


def test_two_nodes_replicate_and_acks_all(nodes, zk):
    a = nodes(1).start()
    b = nodes(2).start()
    wait_registered(zk, a)
    wait_registered(zk, b)
    state = ("events", 0, 1, 0, [1, 2], [1, 2])
    with Channel(a.endpoint) as ca, Channel(b.endpoint) as cb:
        assert leader_and_isr(ca, 1, [state], [a]).error_code == NONE
        assert leader_and_isr(cb, 1, [state], [a]).error_code == NONE
        p = produce(ca, "events", 0, batch([b"one", b"two"]), acks=-1, timeout_ms=10000)
        assert (p.error_code, p.base_offset) == (NONE, 0)
        p = produce(ca, "events", 0, batch([b"three"]), acks=-1, timeout_ms=10000)
        assert (p.error_code, p.base_offset) == (NONE, 2)
        # the follower refuses clients, and has the leader's records at the leader's offsets
        part, _ = fetch(cb, "events", 0, 0)
        assert part.error_code == errors.NotLeaderForPartitionError.code
        # make the follower the leader (epoch 1) and read what it replicated
        assert leader_and_isr(cb, 2, [("events", 0, 2, 1, [2], [1, 2])]).error_code == NONE
        recs, _ = fetch_all(cb, "events", 0)
        assert [(r.offset, r.value) for r in recs] == [(0, b"one"), (1, b"two"), (2, b"three")]
    # node 1 leads again with ISR [1, 2]; with node 2 gone, acks=-1 cannot complete
    b.stop(signal.SIGKILL)
    with Channel(a.endpoint) as ca:
        assert leader_and_isr(ca, 3, [("events", 0, 1, 2, [1, 2], [1, 2])]).error_code == NONE
        p = produce(ca, "events", 0, batch([b"four"]), acks=-1, timeout_ms=500)
        assert p.error_code == errors.RequestTimedOutError.code
