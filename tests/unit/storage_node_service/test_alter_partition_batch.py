"""The storage node's ISR proposals go to the controller together (controller_link.py
`_send_alter_batch`): one ALTER_PARTITION for many partitions, each answer applied on its own,
retriable ones handed back to be sent again. A fake channel; no sockets."""
import asyncio
from types import SimpleNamespace

from riverbed import errors
from riverbed._proto.v1 import replication_pb2
from services.storage_node.core.replica_state import (LocalLog, PartitionStateIn,
                                                      ReplicaManager)
from services.storage_node.shell.controller_link import ControllerLink

NONE = 0
A, B = ("t", 0), ("t", 1)


class FakeChannel:
    def __init__(self, answer):
        self.answer = answer
        self.requests = []

    async def call(self, api, req, timeout_ms):
        self.requests.append(req)
        return SimpleNamespace(body=self.answer(req))


class Node(ControllerLink):
    def __init__(self, answer):
        self.cfg = SimpleNamespace(broker_id=1, controller_socket_timeout_ms=1000,
                                   alter_partition_retry_backoff_ms=10)
        self.core = ReplicaManager(1)
        self.broker_epoch = 7
        self._controller_moves = 0
        self.channel = FakeChannel(answer)
        self.changed = []

    async def _controller_channel(self):
        return self.channel

    def _partition_changed(self, tp, moved):
        self.changed.append(tp)


def leading_two_partitions(node):
    states = [PartitionStateIn(tp[0], tp[1], 1, 0, (1, 2, 3), (1, 2, 3), {}, 4) for tp in (A, B)]
    plan = node.core.plan_leader_and_isr(1, states)
    node.core.apply_leader_and_isr(plan, {tp: LocalLog(0, 0) for tp in (A, B)})
    return {tp: node.core._propose(node.core.get(tp), (1, 2)) for tp in (A, B)}


def test_one_request_for_every_proposal_each_answer_applied_retriable_ones_handed_back():
    def answer(req):
        resp = replication_pb2.AlterPartitionResponse()
        for item in req.partitions:
            if item.partition == 0:
                resp.partitions.add(topic="t", partition=0, leader_id=1, leader_epoch=0,
                                    isr=[1, 2], partition_epoch=5)
            else:              # the controller was busy with this one: send it again
                resp.partitions.add(topic="t", partition=1,
                                    error_code=errors.NotControllerError.code)
        return resp

    node = Node(answer)
    batch = leading_two_partitions(node)
    retry, _ = asyncio.run(node._send_alter_batch(batch))
    (req,) = node.channel.requests
    assert (req.broker_id, req.broker_epoch) == (1, 7)
    assert [(p.partition, list(p.new_isr), p.partition_epoch) for p in req.partitions] == [
        (0, [1, 2], 4), (1, [1, 2], 4)]
    assert node.core.get(A).isr == (1, 2) and node.core.get(A).pending_isr is None
    assert retry == {B: batch[B]} and node.core.get(B).pending_isr == (1, 2)
    assert node.changed == [A]


def test_an_envelope_error_and_a_missing_answer_are_per_partition_results():
    body = replication_pb2.AlterPartitionResponse(error_code=errors.InvalidRequestError.code)
    out = ControllerLink._alter_results({A: None, B: None}, body)
    assert {tp: r.error_code for tp, r in out.items()} == {
        A: errors.InvalidRequestError.code, B: errors.InvalidRequestError.code}
    body = replication_pb2.AlterPartitionResponse()
    body.partitions.add(topic="t", partition=0, leader_id=1, isr=[1], partition_epoch=3)
    out = ControllerLink._alter_results({A: None, B: None}, body)
    assert (out[A].error_code, out[A].isr, out[A].zk_version) == (NONE, (1,), 3)
    assert out[B].error_code == errors.UnknownTopicOrPartitionError.code
