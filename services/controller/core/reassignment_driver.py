"""Partition reassignment in the controller: ALTER/LIST_PARTITION_REASSIGNMENTS,
/admin/reassign_partitions, and one step per tick for every partition being moved (the step
itself is decided by reassignment.next_step). A mixin of ControllerCore."""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from riverbed import errors
from riverbed._proto.v1 import admin_ops_pb2, common_pb2, controller_pb2
from services.controller.core.reassignment import Step, next_step
from services.controller.core.effects import (
    Effect, SendStopReplica, WriteReassignments, WriteTopicAssignment)
from services.controller.core.model import NEW, NO_LEADER, Reassignment, TopicPartition

log = logging.getLogger(__name__)

E = errors.ErrorCode
NONE = 0


class ReassignmentDriver:
    # ---- reassignment --------------------------------------------------------------------------
    def _write_reassignments(self, out: list[Effect],
                             wanted: dict[TopicPartition, tuple[int, ...]]) -> None:
        items = tuple(Reassignment(t, p, r) for (t, p), r in sorted(wanted.items()))
        if not items and self.reassign_version == NEW:
            self.reassignments = {}
            return
        self._write(out, WriteReassignments(items, self.reassign_version))

    def _reassignment_problem(self, tp: TopicPartition, replicas: tuple[int, ...],
                              require_live: bool = True) -> tuple[int, str] | None:
        t = self.topics.get(tp[0])
        if t is None or tp[1] not in t.assignment:
            return E.Value("UNKNOWN_TOPIC_OR_PARTITION"), "unknown topic or partition"
        if not replicas:
            return (E.Value("INVALID_REPLICA_ASSIGNMENT"),
                    "empty replica list (cancelling a reassignment is not supported)")
        if len(set(replicas)) != len(replicas):
            return E.Value("INVALID_REPLICA_ASSIGNMENT"), "a node is named twice"
        if any(r < 0 for r in replicas):
            return E.Value("INVALID_REPLICA_ASSIGNMENT"), "negative node id"
        dead = [r for r in replicas if r not in self.brokers]
        if dead and require_live:
            return E.Value("INVALID_REPLICA_ASSIGNMENT"), f"nodes {dead} are not live storage nodes"
        current = self.reassignments.get(tp)
        if current is not None and current != replicas:
            return (E.Value("REASSIGNMENT_IN_PROGRESS"),
                    f"already moving to {list(current)}")
        return None

    def _alter_reassignments(self, req: admin_ops_pb2.AlterPartitionReassignmentsRequest,
                             out: list[Effect]):
        resp = admin_ops_pb2.AlterPartitionReassignmentsResponse(error_code=NONE)
        counts: dict[TopicPartition, int] = defaultdict(int)
        for item in req.partitions:
            counts[(item.topic, item.partition)] += 1
        wanted = dict(self.reassignments)
        for item in req.partitions:
            tp, replicas = (item.topic, item.partition), tuple(item.replicas)
            if counts[tp] > 1:
                problem = E.Value("INVALID_REQUEST"), "partition named more than once"
            else:
                problem = self._reassignment_problem(tp, replicas)
            if problem is None and self._replicas(tp) != replicas:
                wanted[tp] = replicas
            code, msg = problem if problem is not None else (NONE, "")
            resp.results.add(topic=item.topic, partition=item.partition, error_code=code,
                             error_message=msg)
        if wanted != self.reassignments:
            for tp in wanted.keys() - self.reassignments.keys():
                log.info("[%s-%d] reassignment %s -> %s requested", tp[0], tp[1],
                         list(self._replicas(tp)), list(wanted[tp]))
            self._write_reassignments(out, wanted)
            self._advance_reassignments(out)
        return resp

    def _list_reassignments(self, req: admin_ops_pb2.ListPartitionReassignmentsRequest,
                            out: list[Effect]):
        resp = admin_ops_pb2.ListPartitionReassignmentsResponse(error_code=NONE)
        wanted = ({(x.topic, x.partition) for x in req.partitions} if req.partitions else None)
        for tp, target in sorted(self.reassignments.items()):
            if wanted is not None and tp not in wanted:
                continue
            current = self._replicas(tp)
            resp.reassignments.add(
                topic=tp[0], partition=tp[1], replicas=current, target_replicas=target,
                adding_replicas=[r for r in target if r not in current or r not in self._isr(tp)],
                removing_replicas=[r for r in current if r not in target])
        return resp

    def _isr(self, tp: TopicPartition) -> tuple[int, ...]:
        st = self.topics[tp[0]].states.get(tp[1])
        return st.isr if st is not None else ()

    def _on_reassign_znode(self, out: list[Effect], items: Iterable[Reassignment],
                           zk_version: int, require_live: bool = True) -> None:
        """/admin/reassign_partitions as read (at election, or after a tool wrote it): start the
        new valid entries, keep the ones in progress, drop the invalid ones from the znode."""
        self.reassign_version = zk_version
        listed: dict[TopicPartition, tuple[int, ...]] = {}
        for r in items:
            listed.setdefault((r.topic, r.partition), tuple(r.replicas))
        wanted = dict(self.reassignments)
        for tp, replicas in listed.items():
            if tp in wanted:
                if wanted[tp] != replicas:
                    log.warning("[%s-%d] ignoring reassignment to %s: already moving to %s",
                                tp[0], tp[1], list(replicas), list(wanted[tp]))
                continue
            problem = self._reassignment_problem(tp, replicas, require_live)
            if problem is not None:
                log.warning("[%s-%d] ignoring reassignment to %s: %s", tp[0], tp[1],
                            list(replicas), problem[1])
                continue
            log.info("[%s-%d] reassignment %s -> %s (from /admin/reassign_partitions)", tp[0],
                     tp[1], list(self._replicas(tp)), list(replicas))
            wanted[tp] = replicas
        self.reassignments = {}        # the znode's content decides; rewritten below if needed
        if wanted != listed or zk_version == NEW and wanted:
            self._write_reassignments(out, wanted)
        else:
            self.reassignments = wanted
        self._advance_reassignments(out)

    def _advance_reassignments(self, out: list[Effect]) -> None:
        """One step (reassignment.next_step) for every partition being moved; one assignment
        write per topic, one LEADER_AND_ISR per node, one STOP_REPLICA per node."""
        if not self.reassignments:
            return
        eligible = self._eligible()
        assignments: dict[str, dict[int, tuple[int, ...]]] = defaultdict(dict)
        states: dict[TopicPartition, tuple[int, int, tuple[int, ...]]] = {}
        notify: list[TopicPartition] = []
        stop: dict[int, list[TopicPartition]] = defaultdict(list)
        finished: list[TopicPartition] = []
        for tp, target in sorted(self.reassignments.items()):
            t = self.topics[tp[0]]
            st = t.states.get(tp[1])
            current = t.assignment[tp[1]]
            d = next_step(current, target, st.isr if st else (),
                          st.leader if st else NO_LEADER, eligible)
            if d.step is Step.DONE:
                finished.append(tp)
            elif d.step is Step.EXPAND:
                log.info("[%s-%d] reassignment: assignment %s -> %s; new replicas catch up",
                         tp[0], tp[1], list(current), list(d.assignment))
                assignments[tp[0]][tp[1]] = d.assignment
                if st is not None:
                    states[tp] = (st.leader, st.leader_epoch + 1, st.isr)
                notify.append(tp)
            elif d.step is Step.COMPLETE:
                log.info("[%s-%d] reassignment complete: %s -> %s, leader %d", tp[0], tp[1],
                         list(current), list(d.assignment), d.leader)
                assignments[tp[0]][tp[1]] = d.assignment
                states[tp] = (d.leader, st.leader_epoch + 1, d.isr)
                notify.append(tp)
                for r in d.removed:
                    if r in self.brokers:
                        stop[r].append(tp)
                finished.append(tp)
        for topic in sorted(assignments):
            t = self.topics[topic]
            assignment = dict(t.assignment)
            assignment.update(assignments[topic])
            self._write(out, WriteTopicAssignment(topic, assignment, t.assignment_version))
        for tp in sorted(states):
            self._write_state_from(out, tp, states[tp])
        if finished:
            self._write_reassignments(out, {tp: r for tp, r in self.reassignments.items()
                                            if tp not in finished})
        self._send_leader_and_isr(out, notify)
        for node in sorted(stop):
            out.append(SendStopReplica(node, controller_pb2.StopReplicaRequest(
                controller_id=self.config.controller_id, controller_epoch=self.controller_epoch,
                broker_epoch=self._broker_epoch(node), delete_partitions=True,
                partitions=[common_pb2.TopicPartition(topic=t, partition=p)
                            for t, p in stop[node]])))
