"""Requests from storage nodes to the controller: ALTER_PARTITION (a leader proposes an ISR
change, fenced by broker epoch, leader epoch and partition epoch) and CONTROLLED_SHUTDOWN
(leadership moved off a stopping node in one batch). A mixin of ControllerCore."""
from __future__ import annotations

import logging
from collections import defaultdict

from riverbed import errors
from riverbed._proto.v1 import replication_pb2
from services.controller.core.effects import Effect, ZkWrite
from services.controller.core.model import NO_LEADER, TopicPartition

log = logging.getLogger(__name__)

E = errors.ErrorCode
NONE = 0


class NodeRequests:
    # ---- ALTER_PARTITION (leader -> controller ISR change) -------------------------------------
    def _broker_epoch_problem(self, broker_id: int, broker_epoch: int) -> tuple[int, str] | None:
        b = self.brokers.get(broker_id)
        if b is None:
            return E.Value("INVALID_REQUEST"), f"storage node {broker_id} is not registered"
        if broker_epoch >= 0 and b.epoch >= 0 and broker_epoch != b.epoch:
            return (E.Value("INVALID_REQUEST"),
                    f"stale broker epoch {broker_epoch}: node {broker_id} registered as {b.epoch}")
        return None

    def _alter_partition(self, req: replication_pb2.AlterPartitionRequest, out: list[Effect]):
        resp = replication_pb2.AlterPartitionResponse(error_code=NONE)
        problem = self._broker_epoch_problem(req.broker_id, req.broker_epoch)
        if problem is not None:
            resp.error_code, resp.error_message = problem
            return resp
        counts: dict[TopicPartition, int] = defaultdict(int)
        for item in req.partitions:
            counts[(item.topic, item.partition)] += 1
        for item in req.partitions:
            tp = (item.topic, item.partition)
            if counts[tp] > 1:
                code, msg = E.Value("INVALID_REQUEST"), "partition named more than once"
            else:
                code, msg = self._alter_partition_one(req.broker_id, item, out)
            res = resp.partitions.add(topic=item.topic, partition=item.partition,
                                      error_code=code, error_message=msg)
            t = self.topics.get(item.topic)
            st = t.states.get(item.partition) if t is not None else None
            if st is not None:
                res.leader_id, res.leader_epoch = st.leader, st.leader_epoch
                res.isr.extend(st.isr)
                res.partition_epoch = st.zk_version
        if any(isinstance(e, ZkWrite) for e in out):
            self._advance_reassignments(out)
        return resp

    def _alter_partition_one(self, broker_id: int, item: replication_pb2.AlterPartitionItem,
                             out: list[Effect]) -> tuple[int, str]:
        """Kafka's AlterPartition checks, in Kafka's order; nothing changes unless all pass."""
        t = self.topics.get(item.topic)
        if t is None or item.partition not in t.assignment:
            return E.Value("UNKNOWN_TOPIC_OR_PARTITION"), "unknown topic or partition"
        st = t.states.get(item.partition)
        if st is None or st.leader != broker_id or item.leader_id != broker_id:
            return (E.Value("NOT_LEADER_FOR_PARTITION"),
                    f"the leader is {st.leader if st else NO_LEADER}, not {item.leader_id}")
        if item.leader_epoch != st.leader_epoch:
            return (E.Value("FENCED_LEADER_EPOCH"),
                    f"leader epoch {item.leader_epoch} is not the current {st.leader_epoch}")
        replicas = t.assignment[item.partition]
        new = list(item.new_isr)
        if set(new) == set(st.isr) and len(new) == len(st.isr):
            return NONE, ""          # already committed (a retry): answer with the state
        if item.partition_epoch != st.zk_version:
            return (E.Value("INVALID_REQUEST"),
                    f"partition epoch {item.partition_epoch} is stale (now {st.zk_version})")
        if len(set(new)) != len(new):
            return E.Value("INVALID_REQUEST"), "the ISR names a replica twice"
        if broker_id not in new:
            return E.Value("INVALID_REQUEST"), "the ISR must contain the leader"
        outside = [r for r in new if r not in replicas]
        if outside:
            return E.Value("INVALID_REQUEST"), f"{outside} are not replicas of the partition"
        ineligible = [r for r in new if r not in st.isr and r not in self._eligible()]
        if ineligible:
            return (E.Value("INVALID_REQUEST"),
                    f"{ineligible} cannot join the ISR: not live or shutting down")
        isr = tuple(r for r in replicas if r in new)
        log.info("[%s-%d leader_epoch=%d] ISR %s -> %s (from leader %d)", item.topic,
                 item.partition, st.leader_epoch, list(st.isr), list(isr), broker_id)
        self._write_state(out, item.topic, item.partition, st.leader, st.leader_epoch, isr)
        return NONE, ""

    # ---- CONTROLLED_SHUTDOWN -------------------------------------------------------------------
    def _controlled_shutdown(self, req: replication_pb2.ControlledShutdownRequest,
                             out: list[Effect]):
        resp = replication_pb2.ControlledShutdownResponse(error_code=NONE)
        node = req.broker_id
        if node not in self.brokers:
            resp.error_code = E.Value("BROKER_NOT_AVAILABLE")
            resp.error_message = f"storage node {node} is not registered"
            return resp
        problem = self._broker_epoch_problem(node, req.broker_epoch)
        if problem is not None:
            resp.error_code, resp.error_message = problem
            return resp
        self.shutting_down.add(node)
        changed: list[TopicPartition] = []
        remaining: list[TopicPartition] = []
        for tp in self._all_partitions():
            t = self.topics[tp[0]]
            st = t.states.get(tp[1])
            replicas = t.assignment[tp[1]]
            if st is None or node not in replicas:
                continue
            isr = tuple(r for r in st.isr if r != node)
            if st.leader == node:
                candidates = [r for r in replicas if r in isr and r in self._eligible()]
                if not candidates:
                    remaining.append(tp)
                    continue
                self._write_state_from(out, tp, (candidates[0], st.leader_epoch + 1, isr))
                changed.append(tp)
            elif node in st.isr and st.leader != NO_LEADER and isr:
                self._write_state_from(out, tp, (st.leader, st.leader_epoch + 1, isr))
                changed.append(tp)
        self._send_leader_and_isr(out, changed)
        log.info("controlled shutdown of node %d: %d partitions moved or shrunk, still leads %s",
                 node, len(changed), [f"{t}-{p}" for t, p in remaining])
        for topic, p in remaining:
            resp.remaining_partitions.add(topic=topic, partition=p)
        return resp
