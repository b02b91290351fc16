"""Topic administration in the controller: CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS,
DESCRIBE_CONFIGS and ALTER_CONFIGS. A mixin of ControllerCore: every change goes through the
core's one door (`_write`) and is announced with LEADER_AND_ISR / STOP_REPLICA effects."""
from __future__ import annotations

import logging
from collections import defaultdict

from riverbed import errors
from riverbed._proto.v1 import common_pb2, controller_pb2
from riverbed.replica_assignment import rack_alternated
from services.controller.core import topic_config
from services.controller.core.assignment import assign_replicas, topic_name_problem
from services.controller.core.effects import (
    DeleteTopicZnodes, Effect, MarkTopicForDeletion, SendStopReplica, WriteTopicAssignment,
    WriteTopicConfig)
from services.controller.core.model import MAX_PARTITIONS_PER_TOPIC, NEW, NO_LEADER, TopicPartition

log = logging.getLogger(__name__)

E = errors.ErrorCode
NONE = 0


class TopicAdmin:
    # CREATE_TOPICS ----------------------------------------------------------------------------
    def _create_topics(self, req: controller_pb2.CreateTopicsRequest, out: list[Effect]):
        resp = controller_pb2.CreateTopicsResponse()
        counts: dict[str, int] = defaultdict(int)
        for t in req.topics:
            counts[t.name] += 1
        for t in req.topics:
            if counts[t.name] > 1:
                code, msg = E.Value("INVALID_REQUEST"), "topic named more than once in the request"
                resp.topics.append(controller_pb2.TopicResult(
                    name=t.name, error_code=code, error_message=msg))
                continue
            explicit = ({p: tuple(rl.replicas) for p, rl in t.assignment.items()}
                        if t.assignment else None)
            num = t.num_partitions if t.num_partitions not in (-1, 0) else self.config.num_partitions
            rf = (t.replication_factor if t.replication_factor not in (-1, 0)
                  else self.config.default_replication_factor)
            if explicit is not None and (t.num_partitions not in (-1, 0)
                                         or t.replication_factor not in (-1, 0)):
                code, msg = (E.Value("INVALID_REQUEST"),
                             "give either an assignment or num_partitions/replication_factor")
            else:
                code, msg = self._create_one(out, t.name, num, rf, explicit, dict(t.configs),
                                             validate_only=req.validate_only)
            res = controller_pb2.TopicResult(name=t.name, error_code=code, error_message=msg)
            if code == NONE:
                if explicit is not None:
                    num, rf = len(explicit), len(explicit[0])
                res.num_partitions, res.replication_factor = num, rf
            resp.topics.append(res)
        return resp

    def _create_one(self, out: list[Effect], name: str, num_partitions: int,
                    replication_factor: int, explicit: dict[int, tuple[int, ...]] | None,
                    configs: dict[str, str], validate_only: bool = False) -> tuple[int, str]:
        """Validate and (unless validate_only) create one topic. (error code, message)."""
        problem = topic_name_problem(name)
        if problem is not None:
            return E.Value("INVALID_TOPIC_EXCEPTION"), problem
        if name in self.topics:
            return E.Value("TOPIC_ALREADY_EXISTS"), f"topic {name!r} already exists"
        live = sorted(self.brokers)
        if explicit is not None:
            problem = self._assignment_problem(explicit, 0)
            if problem is not None:
                return E.Value("INVALID_REPLICA_ASSIGNMENT"), problem
        else:
            if not 1 <= num_partitions <= MAX_PARTITIONS_PER_TOPIC:
                return (E.Value("INVALID_PARTITIONS"),
                        f"number of partitions must be in [1, {MAX_PARTITIONS_PER_TOPIC}], "
                        f"got {num_partitions}")
            if not 1 <= replication_factor <= len(live):
                return (E.Value("INVALID_REPLICATION_FACTOR"),
                        f"replication factor {replication_factor} must be in [1, live storage "
                        f"nodes = {len(live)}]")
        problem = topic_config.validate(configs)
        if problem is not None:
            return E.Value("INVALID_CONFIG"), problem
        if validate_only:
            return NONE, ""
        assignment = explicit if explicit is not None else assign_replicas(
            live, num_partitions, replication_factor, self.rng, racks=self._racks(live))
        configs = topic_config.normalise(configs)
        self._write(out, WriteTopicAssignment(name, assignment, NEW))
        self._write(out, WriteTopicConfig(name, configs, NEW))
        for p in sorted(assignment):
            self._init_partition(out, name, p)
        log.info("created topic %s: %s configs=%s", name,
                 {p: list(r) for p, r in assignment.items()}, configs)
        self._send_leader_and_isr(out, [(name, p) for p in sorted(assignment)], is_new=True)
        return NONE, ""

    def _racks(self, nodes) -> dict[int, str]:
        """node -> broker.rack of live nodes that name one."""
        return {n: self.brokers[n].rack for n in nodes if n in self.brokers and self.brokers[n].rack}

    def _init_partition(self, out: list[Effect], topic: str, p: int) -> None:
        replicas = self.topics[topic].assignment[p]
        live = [r for r in replicas if r in self.brokers]
        leader = live[0] if live else NO_LEADER
        self._write_state(out, topic, p, leader, 0, replicas)

    def _assignment_problem(self, assignment: dict[int, tuple[int, ...]], first: int) -> str | None:
        if not assignment:
            return "empty assignment"
        if sorted(assignment) != list(range(first, first + len(assignment))):
            return f"partitions must be numbered {first}..{first + len(assignment) - 1}"
        if first + len(assignment) > MAX_PARTITIONS_PER_TOPIC:
            return f"more than {MAX_PARTITIONS_PER_TOPIC} partitions"
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) != 1 or 0 in sizes:
            return "every partition needs the same, non-zero number of replicas"
        for p, replicas in assignment.items():
            if len(set(replicas)) != len(replicas):
                return f"partition {p} names a node twice"
            dead = [r for r in replicas if r not in self.brokers]
            if dead:
                return f"partition {p}: nodes {dead} are not live storage nodes"
        return None

    # DELETE_TOPICS ----------------------------------------------------------------------------
    def _delete_topics(self, req: controller_pb2.DeleteTopicsRequest, out: list[Effect]):
        resp = controller_pb2.DeleteTopicsResponse()
        for name in dict.fromkeys(req.names):
            if not self.config.delete_topic_enable:
                code, msg = E.Value("TOPIC_DELETION_DISABLED"), "delete.topic.enable is false"
            elif name not in self.topics:
                code, msg = E.Value("UNKNOWN_TOPIC_OR_PARTITION"), "unknown topic"
            else:
                self._delete_topic(out, name, already_marked=False)
                code, msg = NONE, ""
            resp.topics.append(controller_pb2.TopicResult(name=name, error_code=code,
                                                          error_message=msg))
        return resp

    def _delete_topic(self, out: list[Effect], name: str, already_marked: bool) -> None:
        t = self.topics[name]
        if not already_marked:
            self._write(out, MarkTopicForDeletion(name))
        per_node: dict[int, list[int]] = defaultdict(list)
        for p, replicas in sorted(t.assignment.items()):
            for r in replicas:
                if r in self.brokers:
                    per_node[r].append(p)
        for node in sorted(per_node):
            out.append(SendStopReplica(node, controller_pb2.StopReplicaRequest(
                controller_id=self.config.controller_id, controller_epoch=self.controller_epoch,
                broker_epoch=self._broker_epoch(node), delete_partitions=True,
                partitions=[common_pb2.TopicPartition(topic=name, partition=p)
                            for p in per_node[node]])))
        self._write(out, DeleteTopicZnodes(name, tuple(sorted(t.states)), True, True))
        if any(topic == name for topic, _ in self.reassignments):
            self._write_reassignments(out, {tp: r for tp, r in self.reassignments.items()
                                            if tp[0] != name})
        log.info("deleted topic %s", name)

    # CREATE_PARTITIONS ------------------------------------------------------------------------
    def _create_partitions(self, req: controller_pb2.CreatePartitionsRequest, out: list[Effect]):
        resp = controller_pb2.CreatePartitionsResponse()
        counts: dict[str, int] = defaultdict(int)
        for t in req.topics:
            counts[t.name] += 1
        for t in req.topics:
            code, msg = self._create_partitions_one(t, out, req.validate_only, counts[t.name])
            res = controller_pb2.TopicResult(name=t.name, error_code=code, error_message=msg)
            topic = self.topics.get(t.name)
            if code == NONE and topic is not None:
                res.num_partitions = t.count
                res.replication_factor = topic.replication_factor
            resp.topics.append(res)
        return resp

    def _create_partitions_one(self, req: controller_pb2.CreatePartitionsTopic, out: list[Effect],
                               validate_only: bool, times_named: int) -> tuple[int, str]:
        if times_named > 1:
            return E.Value("INVALID_REQUEST"), "topic named more than once in the request"
        t = self.topics.get(req.name)
        if t is None:
            return E.Value("UNKNOWN_TOPIC_OR_PARTITION"), "unknown topic"
        current = t.num_partitions
        if req.count <= current:
            return (E.Value("INVALID_PARTITIONS"),
                    f"topic has {current} partitions; the count can only grow")
        if req.count > MAX_PARTITIONS_PER_TOPIC:
            return E.Value("INVALID_PARTITIONS"), f"at most {MAX_PARTITIONS_PER_TOPIC} partitions"
        rf = t.replication_factor
        if req.assignment:
            if len(req.assignment) != req.count - current:
                return (E.Value("INVALID_REPLICA_ASSIGNMENT"),
                        f"need {req.count - current} replica lists, got {len(req.assignment)}")
            extra = {current + i: tuple(rl.replicas) for i, rl in enumerate(req.assignment)}
            problem = self._assignment_problem(extra, current)
            if problem is None and any(len(r) != rf for r in extra.values()):
                problem = f"every new partition needs {rf} replicas"
            if problem is not None:
                return E.Value("INVALID_REPLICA_ASSIGNMENT"), problem
        else:
            live = sorted(self.brokers)
            if rf > len(live):
                return (E.Value("INVALID_REPLICATION_FACTOR"),
                        f"replication factor {rf} exceeds live storage nodes ({len(live)})")
            first = t.assignment[0][0]
            order = rack_alternated(live, self._racks(live))
            start = order.index(first) if first in order else None
            extra = assign_replicas(live, req.count - current, rf, self.rng,
                                    first_partition=current, start_index=start,
                                    racks=self._racks(live))
        if validate_only:
            return NONE, ""
        assignment = dict(t.assignment)
        assignment.update(extra)
        self._write(out, WriteTopicAssignment(t.name, assignment, t.assignment_version))
        for p in sorted(extra):
            self._init_partition(out, t.name, p)
        log.info("topic %s: partitions %d -> %d", t.name, current, req.count)
        self._send_leader_and_isr(out, [(t.name, p) for p in sorted(extra)], is_new=True)
        return NONE, ""

    # DESCRIBE_CONFIGS / ALTER_CONFIGS ----------------------------------------------------------
    def _describe_configs(self, req: controller_pb2.DescribeConfigsRequest, out: list[Effect]):
        resp = controller_pb2.DescribeConfigsResponse()
        names = list(dict.fromkeys(req.topics)) if req.topics else sorted(self.topics)
        for name in names:
            t = self.topics.get(name)
            if t is None:
                resp.results.append(controller_pb2.DescribeConfigsResult(
                    topic=name, error_code=E.Value("UNKNOWN_TOPIC_OR_PARTITION"),
                    error_message="unknown topic"))
                continue
            res = controller_pb2.DescribeConfigsResult(topic=name, error_code=NONE)
            for key in sorted(topic_config.TOPIC_CONFIGS):
                if key in t.configs:
                    res.entries.append(controller_pb2.ConfigEntry(
                        name=key, value=t.configs[key], is_default=False))
                elif req.include_defaults:
                    res.entries.append(controller_pb2.ConfigEntry(
                        name=key, value=topic_config.default(key), is_default=True))
            resp.results.append(res)
        return resp

    def _alter_configs(self, req: controller_pb2.AlterConfigsRequest, out: list[Effect]):
        resp = controller_pb2.AlterConfigsResponse()
        counts: dict[str, int] = defaultdict(int)
        for a in req.topics:
            counts[a.name] += 1
        for a in req.topics:
            t = self.topics.get(a.name)
            if counts[a.name] > 1:
                code, msg = E.Value("INVALID_REQUEST"), "topic named more than once in the request"
            elif t is None:
                code, msg = E.Value("UNKNOWN_TOPIC_OR_PARTITION"), "unknown topic"
            else:
                unknown = [k for k in a.delete if k not in topic_config.TOPIC_CONFIGS]
                problem = (f"unknown topic config {unknown[0]!r}" if unknown
                           else topic_config.validate(dict(a.set)))
                if problem is not None:
                    code, msg = E.Value("INVALID_CONFIG"), problem
                else:
                    code, msg = NONE, ""
                    if not req.validate_only:
                        configs = dict(t.configs)
                        for k in a.delete:
                            configs.pop(k, None)
                        configs.update(topic_config.normalise(dict(a.set)))
                        if configs != t.configs:
                            min_isr_changed = (configs.get("min.insync.replicas")
                                               != t.configs.get("min.insync.replicas"))
                            self._write(out, WriteTopicConfig(t.name, configs, t.config_version))
                            log.info("topic %s configs: %s", t.name, configs)
                            if min_isr_changed:      # KIP-966: the ELR said "below the old one"
                                self._clear_elr(out, t.name)
                            self._send_leader_and_isr(
                                out, [(t.name, p) for p in sorted(t.assignment)])
                            # e.g. unclean.leader.election.enable turned on for an offline
                            # partition: elect now rather than at the next node change.
                            changed = self._elect_leaders()
                            for tp in changed:
                                self._write_state_from(out, tp, changed[tp])
                            self._send_leader_and_isr(out, sorted(changed))
            resp.topics.append(controller_pb2.TopicResult(name=a.name, error_code=code,
                                                          error_message=msg))
        return resp
