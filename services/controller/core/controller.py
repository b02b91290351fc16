"""The controller's core: cluster model and decisions, pure (no sockets, files, clocks, threads).

    core = ControllerCore(config, random.Random(seed))
    effects = core.handle(event, now_ms)      # events.py in, effects.py out
    effects = core.tick(now_ms)               # metadata snapshot, leader rebalance, reassignments

State changes go through one door: every decision is a list of ZkWrite effects; `_apply` puts a
write into the model as it is emitted (the shell then persists it, fenced by the
/controller_epoch version; a failed write makes the shell feed LeadershipLost, and a re-elected
controller rebuilds everything with `replay` from what it reads). ZooKeeper bumps a znode's
version by exactly one per write, so the core knows the version its next conditional write needs.

Leader election (seed 002, docs/contracts.md): a partition's leader is the first replica, in
replica order, that is alive and in the ISR; the leader epoch grows by one at every change; the
ISR shrinks to live members. With no live ISR member the leader becomes -1 and the ISR is kept
as it was (so the last in-sync replica can lead again when it returns), unless the topic sets
unclean.leader.election.enable (topic config over the controller's default), which picks the
first live replica with ISR = [it].

Issue 4 (replication): ALTER_PARTITION (ISR changes proposed by leaders, fenced by leader epoch
and state-znode version), CONTROLLED_SHUTDOWN (leadership moved off a stopping node in one
batch), preferred-leader election (ELECT_LEADERS, /admin/preferred_replica_election, and the
automatic rebalance on tick: leader_balance.py) and partition reassignment
(ALTER_PARTITION_REASSIGNMENTS, /admin/reassign_partitions: reassignment.py).
"""
from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Iterable

from riverbed import errors
from riverbed._proto.v1 import (
    admin_ops_pb2, common_pb2, controller_pb2, header_pb2, metadata_pb2, replication_pb2)
from services.controller.config import ControllerConfig
from services.controller.core import leader_balance, topic_config
from services.controller.core.reassignment import Step, next_step
from services.controller.core.assignment import assign_replicas, topic_name_problem
from services.controller.core.effects import (
    DeletePreferredElection, DeleteTopicZnodes, Effect, MarkTopicForDeletion, PublishMetadata,
    Respond, SendLeaderAndIsr, SendStopReplica, WritePartitionState, WriteReassignments,
    WriteTopicAssignment, WriteTopicConfig, ZkWrite)
from services.controller.core.events import (
    BrokersChanged, ElectedAsController, Event, GatewaysChanged, LeadershipLost,
    PreferredElectionZnodeChanged, ReassignmentsZnodeChanged, RequestReceived)
from services.controller.core.model import (
    NEW, NO_LEADER, BrokerInfo, GatewayInfo, LeaderIsr, Reassignment, Topic, TopicSnapshot)

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
NONE = 0

# A full metadata snapshot goes out at least this often (docs/contracts.md: "every second").
METADATA_PUBLISH_INTERVAL_MS = 1000
# Bounds one topic's size: every partition is a state znode written in one ZooKeeper
# transaction, and ZooKeeper refuses requests over jute.maxbuffer (1 MiB by default).
MAX_PARTITIONS_PER_TOPIC = 4096
OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})

TopicPartition = tuple[str, int]


class ControllerCore:
    def __init__(self, config: ControllerConfig, rng: random.Random):
        self.config = config
        self.rng = rng
        self.active = False
        self.controller_epoch = 0
        self.cluster_id = ""
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, Topic] = {}
        self.metadata_version = 0
        self.next_publish_ms: int | None = None
        self.gateways: dict[int, GatewayInfo] = {}
        # In-progress reassignments (topic, partition) -> RAR, mirrored in
        # /admin/reassign_partitions (whose version is reassign_version; NEW = absent).
        self.reassignments: dict[TopicPartition, tuple[int, ...]] = {}
        self.reassign_version = NEW
        # Nodes that asked for CONTROLLED_SHUTDOWN and are still registered: never elected.
        self.shutting_down: set[int] = set()
        self.next_imbalance_check_ms: int | None = None
        # Totals for the metrics (Kafka's LeaderElectionRateAndTimeMs, UncleanLeaderElectionsPerSec).
        self.leader_elections = 0
        self.unclean_elections = 0

    # ---- the surface ----------------------------------------------------------------------
    def handle(self, event: Event, now_ms: int) -> list[Effect]:
        if isinstance(event, ElectedAsController):
            return self._on_elected(event, now_ms)
        if isinstance(event, LeadershipLost):
            if self.active:
                log.info("controller %d resigns (epoch %d): %s", self.config.controller_id,
                         self.controller_epoch, event.reason)
            self._reset()
            return []
        if isinstance(event, BrokersChanged):
            return self._on_brokers_changed(event, now_ms)
        if isinstance(event, GatewaysChanged):
            self.gateways = {g.gateway_id: g for g in event.gateways}
            return []
        if isinstance(event, ReassignmentsZnodeChanged):
            if not self.active:
                return []
            out: list[Effect] = []
            self._on_reassign_znode(out, event.reassignments, event.zk_version)
            return self._with_publish(out, now_ms)
        if isinstance(event, PreferredElectionZnodeChanged):
            if not self.active or event.zk_version == NEW:
                return []
            out = []
            results = self._elect_preferred(out, [tp for tp in dict.fromkeys(event.partitions)])
            log.info("preferred replica election from /admin/preferred_replica_election: %s",
                     {f"{t}-{p}": errors.ErrorCode.Name(c) for (t, p), (c, _) in results.items()})
            self._write(out, DeletePreferredElection(event.zk_version))
            return self._with_publish(out, now_ms)
        if isinstance(event, RequestReceived):
            if not self.active:
                return [Respond(None, errors.NotControllerError(
                    f"node {self.config.controller_id} is not the active controller"))]
            return self._on_request(event, now_ms)
        raise TypeError(f"unknown event {event!r}")

    def tick(self, now_ms: int) -> list[Effect]:
        if not self.active:
            return []
        out: list[Effect] = []
        cfg = self.config
        if self.next_imbalance_check_ms is None:
            self.next_imbalance_check_ms = now_ms + cfg.leader_imbalance_check_interval_seconds * 1000
        elif now_ms >= self.next_imbalance_check_ms:
            self.next_imbalance_check_ms = now_ms + cfg.leader_imbalance_check_interval_seconds * 1000
            if cfg.auto_leader_rebalance_enable:
                self._auto_rebalance(out)
        self._advance_reassignments(out)
        if any(isinstance(e, ZkWrite) for e in out) or (
                self.next_publish_ms is not None and now_ms >= self.next_publish_ms):
            out.append(self._publish(now_ms))
        return out

    def _with_publish(self, out: list[Effect], now_ms: int) -> list[Effect]:
        if any(isinstance(e, ZkWrite) for e in out):
            out.append(self._publish(now_ms))
        return out

    def replay(self, snapshot: ElectedAsController) -> None:
        """Rebuild the whole model from what was read in ZooKeeper at election."""
        self._reset()
        self.active = True
        self.controller_epoch = snapshot.controller_epoch
        self.cluster_id = snapshot.cluster_id
        self.brokers = {b.node_id: b for b in snapshot.brokers}
        self.gateways = {g.gateway_id: g for g in snapshot.gateways} or self.gateways
        for t in snapshot.topics:
            self.topics[t.name] = Topic(
                name=t.name, assignment={p: tuple(r) for p, r in t.assignment.items()},
                configs=dict(t.configs), assignment_version=t.assignment_version,
                config_version=t.config_version, states=dict(t.states))

    def check_invariants(self) -> None:
        for t in self.topics.values():
            assert sorted(t.assignment) == list(range(len(t.assignment))), (t.name, "gaps")
            for p, st in t.states.items():
                replicas = t.assignment[p]
                assert st.leader == NO_LEADER or st.leader in st.isr, (t.name, p, st)
                assert st.leader == NO_LEADER or st.leader in replicas, (t.name, p, st)
                assert st.zk_version >= 0, (t.name, p, st)
                assert len(set(replicas)) == len(replicas), (t.name, p, replicas)
                assert set(st.isr) <= set(replicas), (t.name, p, st, replicas)
        for (topic, p), target in self.reassignments.items():
            assert topic in self.topics and p in self.topics[topic].assignment, (topic, p)
            assert target and len(set(target)) == len(target), (topic, p, target)

    # ---- model changes: the one door --------------------------------------------------------
    def _reset(self) -> None:
        self.active = False
        self.topics = {}
        self.metadata_version = 0
        self.next_publish_ms = None
        self.reassignments = {}
        self.reassign_version = NEW
        self.shutting_down = set()
        self.next_imbalance_check_ms = None

    def _apply(self, w: ZkWrite) -> None:
        if isinstance(w, WriteTopicAssignment):
            t = self.topics.get(w.topic)
            if t is None:
                self.topics[w.topic] = Topic(w.topic, dict(w.assignment))
            else:
                t.assignment = dict(w.assignment)
                t.assignment_version = w.expected_version + 1
        elif isinstance(w, WriteTopicConfig):
            t = self.topics[w.topic]
            t.configs = dict(w.configs)
            t.config_version = 0 if w.expected_version == NEW else w.expected_version + 1
        elif isinstance(w, WritePartitionState):
            self.topics[w.topic].states[w.partition] = w.state
        elif isinstance(w, DeleteTopicZnodes):
            self.topics.pop(w.topic, None)
        elif isinstance(w, MarkTopicForDeletion):
            pass
        elif isinstance(w, WriteReassignments):
            self.reassignments = {(r.topic, r.partition): r.replicas for r in w.reassignments}
            if not w.reassignments:
                self.reassign_version = NEW
            else:
                self.reassign_version = 0 if w.expected_version == NEW else w.expected_version + 1
        elif isinstance(w, DeletePreferredElection):
            pass
        else:  # pragma: no cover - a bug
            raise TypeError(w)

    def _write(self, out: list[Effect], w: ZkWrite) -> None:
        self._apply(w)
        out.append(w)

    def _write_state(self, out: list[Effect], topic: str, p: int, leader: int, leader_epoch: int,
                     isr: Iterable[int]) -> None:
        old = self.topics[topic].states.get(p)
        expected = NEW if old is None else old.zk_version
        state = LeaderIsr(leader, leader_epoch, tuple(isr), self.controller_epoch,
                          0 if old is None else old.zk_version + 1)
        self._write(out, WritePartitionState(topic, p, state, expected))

    # ---- election, broker changes ------------------------------------------------------------
    def _on_elected(self, ev: ElectedAsController, now_ms: int) -> list[Effect]:
        self.replay(ev)
        log.info("controller %d active with epoch %d: %d topics, live nodes %s",
                 self.config.controller_id, self.controller_epoch, len(self.topics),
                 sorted(self.brokers))
        out: list[Effect] = []
        for name in ev.pending_deletions:
            if name in self.topics:
                self._delete_topic(out, name, already_marked=True)
        changed = self._elect_leaders()
        for tp in changed:
            self._write_state_from(out, tp, changed[tp])
        # Every live node learns every partition it replicates.
        self._send_leader_and_isr(out, self._all_partitions(), nodes=set(self.brokers))
        # Finish what a predecessor began (or tools asked for) in /admin/reassign_partitions.
        # Nodes named there may be down right now (e.g. the predecessor died while a new replica
        # was away): resume anyway, the move waits for them.
        self._on_reassign_znode(out, ev.reassignments, ev.reassignments_version,
                                require_live=False)
        self.next_imbalance_check_ms = (
            now_ms + self.config.leader_imbalance_check_interval_seconds * 1000)
        out.append(self._publish(now_ms))
        return out

    def _on_brokers_changed(self, ev: BrokersChanged, now_ms: int) -> list[Effect]:
        new = {b.node_id: b for b in ev.brokers}
        old = self.brokers
        added = {i for i, b in new.items() if old.get(i) != b}   # new or re-registered
        removed = set(old) - set(new)
        self.brokers = new
        self.shutting_down -= removed | added
        if not self.active:
            return []
        if added or removed:
            log.info("storage nodes up %s, down %s; live %s", sorted(added), sorted(removed),
                     sorted(new))
        out: list[Effect] = []
        changed = self._elect_leaders()
        for tp in changed:
            self._write_state_from(out, tp, changed[tp])
        # One LEADER_AND_ISR per node: the changed partitions to their live replicas, and every
        # partition a newly registered node replicates to that node.
        per_node: dict[int, set[TopicPartition]] = defaultdict(set)
        for tp in changed:
            for r in self._replicas(tp):
                if r in self.brokers:
                    per_node[r].add(tp)
        for tp in self._all_partitions():
            for r in self._replicas(tp):
                if r in added:
                    per_node[r].add(tp)
        for node in sorted(per_node):
            out.append(self._leader_and_isr(node, sorted(per_node[node])))
        self._advance_reassignments(out)
        if added or removed or changed or any(isinstance(e, ZkWrite) for e in out):
            out.append(self._publish(now_ms))
        return out

    def _elect_leaders(self) -> dict[TopicPartition, tuple[int, int, tuple[int, ...]]]:
        """One pass over every partition: (leader, leader_epoch, isr) for those that must
        change because a leader or ISR member is not live, or a leaderless partition has a
        live ISR member again."""
        changes: dict[TopicPartition, tuple[int, int, tuple[int, ...]]] = {}
        for t in self.topics.values():
            unclean = self._unclean_enabled(t)
            for p, replicas in sorted(t.assignment.items()):
                st = t.states.get(p)
                # live for this partition: registered, and its log dir for it not offline
                live = self._live_replicas((t.name, p))
                if st is None:      # state znode missing (e.g. a crash mid-creation)
                    live_replicas = [r for r in replicas if r in live]
                    leader = live_replicas[0] if live_replicas else NO_LEADER
                    changes[(t.name, p)] = (leader, 0, tuple(live_replicas) or tuple(replicas))
                    continue
                live_isr = tuple(r for r in st.isr if r in live)
                if st.leader != NO_LEADER and st.leader in live:
                    if live_isr != st.isr:          # a follower died: shrink the ISR
                        changes[(t.name, p)] = (st.leader, st.leader_epoch + 1, live_isr)
                    continue
                candidates = self._prefer_running([r for r in replicas if r in live_isr])
                if candidates:
                    changes[(t.name, p)] = (candidates[0], st.leader_epoch + 1, live_isr)
                    self.leader_elections += 1
                elif unclean and any(r in live for r in replicas):
                    leader = self._prefer_running([r for r in replicas if r in live])[0]
                    log.warning("[%s-%d] unclean leader election: %d (not in the ISR %s) leads; "
                                "records committed since it fell behind are lost",
                                t.name, p, leader, list(st.isr))
                    changes[(t.name, p)] = (leader, st.leader_epoch + 1, (leader,))
                    self.leader_elections += 1
                    self.unclean_elections += 1
                elif st.leader != NO_LEADER:
                    # No live in-sync replica: offline. Keep the ISR (see the module doc).
                    changes[(t.name, p)] = (NO_LEADER, st.leader_epoch + 1, st.isr)
        return changes

    def _live_replicas(self, tp: TopicPartition) -> set[int] | dict:
        """Nodes that can host tp now: registered, and tp not in one of their failed log dirs."""
        if not any(b.offline_partitions for b in self.brokers.values()):
            return self.brokers
        return {n for n, b in self.brokers.items() if tp not in b.offline_partitions}

    def offline_partitions(self) -> int:
        """Partitions with no leader (Kafka's OfflinePartitionsCount); 0 unless active."""
        if not self.active:
            return 0
        return sum(1 for t in self.topics.values() for p in t.assignment
                   if (st := t.states.get(p)) is None or st.leader == NO_LEADER)

    def _unclean_enabled(self, t: Topic) -> bool:
        raw = t.configs.get("unclean.leader.election.enable")
        if raw is None:
            return self.config.unclean_leader_election_enable
        return raw.strip().lower() == "true"

    def _prefer_running(self, candidates: list[int]) -> list[int]:
        """Candidates not shutting down first (a stopping node leads only if nobody else can)."""
        return ([c for c in candidates if c not in self.shutting_down]
                + [c for c in candidates if c in self.shutting_down])

    def _eligible(self) -> set[int]:
        """Nodes that may be made leader: live and not shutting down."""
        return set(self.brokers) - self.shutting_down

    def _write_state_from(self, out: list[Effect], tp: TopicPartition,
                          change: tuple[int, int, tuple[int, ...]]) -> None:
        leader, epoch, isr = change
        old = self.topics[tp[0]].states.get(tp[1])
        log.info("[%s-%d] leader %s -> %d leader_epoch=%d isr=%s", tp[0], tp[1],
                 old.leader if old else None, leader, epoch, list(isr))
        self._write_state(out, tp[0], tp[1], leader, epoch, isr)

    # ---- storage-node requests ------------------------------------------------------------
    def _replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.topics[tp[0]].assignment[tp[1]]

    def _all_partitions(self) -> list[TopicPartition]:
        return [(t.name, p) for t in self.topics.values() for p in sorted(t.assignment)]

    def _send_leader_and_isr(self, out: list[Effect], partitions: Iterable[TopicPartition],
                             nodes: set[int] | None = None, is_new: bool = False) -> None:
        """One LEADER_AND_ISR per live replica node of `partitions` (restricted to `nodes`)."""
        per_node: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            for r in self._replicas(tp):
                if r in self.brokers and (nodes is None or r in nodes):
                    per_node[r].append(tp)
        for node in sorted(per_node):
            out.append(self._leader_and_isr(node, per_node[node], is_new=is_new))

    def _leader_and_isr(self, node: int, partitions: list[TopicPartition],
                        is_new: bool = False) -> SendLeaderAndIsr:
        req = controller_pb2.LeaderAndIsrRequest(
            controller_id=self.config.controller_id, controller_epoch=self.controller_epoch)
        leaders: set[int] = set()
        for topic, p in partitions:
            t = self.topics[topic]
            st = t.states[p]
            req.partitions.append(controller_pb2.PartitionState(
                topic=topic, partition=p, controller_epoch=st.controller_epoch, leader=st.leader,
                leader_epoch=st.leader_epoch, isr=st.isr, zk_version=st.zk_version,
                replicas=t.assignment[p], is_new=is_new, topic_configs=t.configs))
            if st.leader in self.brokers:
                leaders.add(st.leader)
        for b in sorted(leaders):
            req.live_leaders.append(self._broker_pb(self.brokers[b]))
        return SendLeaderAndIsr(node, req)

    @staticmethod
    def _broker_pb(b: BrokerInfo) -> common_pb2.Broker:
        return common_pb2.Broker(node_id=b.node_id, host=b.host, port=b.port, endpoint=b.endpoint,
                                 rack=b.rack)

    # ---- metadata ---------------------------------------------------------------------------
    def _topic_metadata(self, t: Topic) -> metadata_pb2.TopicMetadata:
        tm = metadata_pb2.TopicMetadata(error_code=NONE, name=t.name,
                                        is_internal=t.name in INTERNAL_TOPICS, configs=t.configs)
        for p in sorted(t.assignment):
            replicas = t.assignment[p]
            st = t.states.get(p)
            leader = st.leader if st is not None and st.leader in self.brokers else NO_LEADER
            tm.partitions.append(metadata_pb2.PartitionMetadata(
                error_code=NONE if leader != NO_LEADER else E.Value("LEADER_NOT_AVAILABLE"),
                partition=p, leader=leader, leader_epoch=st.leader_epoch if st else 0,
                replicas=replicas, isr=st.isr if st else (),
                offline_replicas=[r for r in replicas if r not in self.brokers
                                  or (t.name, p) in self.brokers[r].offline_partitions]))
        return tm

    def snapshot(self) -> metadata_pb2.UpdateMetadataRequest:
        """The full metadata snapshot (without bumping metadata_version)."""
        up = metadata_pb2.UpdateMetadataRequest(
            controller_id=self.config.controller_id, controller_epoch=self.controller_epoch,
            metadata_version=self.metadata_version, cluster_id=self.cluster_id)
        for b in sorted(self.brokers):
            up.live_brokers.append(self._broker_pb(self.brokers[b]))
        for name in sorted(self.topics):
            up.topics.append(self._topic_metadata(self.topics[name]))
        return up

    def _publish(self, now_ms: int) -> PublishMetadata:
        self.metadata_version += 1
        self.next_publish_ms = now_ms + METADATA_PUBLISH_INTERVAL_MS
        return PublishMetadata(self.snapshot())

    # ---- requests ---------------------------------------------------------------------------
    def _on_request(self, ev: RequestReceived, now_ms: int) -> list[Effect]:
        handler = {
            ApiKey.METADATA: self._metadata,
            ApiKey.DESCRIBE_CLUSTER: self._describe_cluster,
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.DELETE_TOPICS: self._delete_topics,
            ApiKey.CREATE_PARTITIONS: self._create_partitions,
            ApiKey.DESCRIBE_CONFIGS: self._describe_configs,
            ApiKey.ALTER_CONFIGS: self._alter_configs,
            ApiKey.ALTER_PARTITION: self._alter_partition,
            ApiKey.CONTROLLED_SHUTDOWN: self._controlled_shutdown,
            ApiKey.ELECT_LEADERS: self._elect_leaders_request,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self._alter_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self._list_reassignments,
        }.get(ev.api)
        if handler is None:
            return [Respond(None, errors.InvalidRequestError(
                f"the controller does not serve api {ev.api}"))]
        out: list[Effect] = []
        body = handler(ev.body, out)
        if any(isinstance(e, ZkWrite) for e in out):
            out.append(self._publish(now_ms))
        out.append(Respond(body))
        return out

    def _describe_cluster(self, req, out) -> metadata_pb2.DescribeClusterResponse:
        resp = metadata_pb2.DescribeClusterResponse(
            error_code=NONE, cluster_id=self.cluster_id, controller_id=self.config.controller_id)
        for b in sorted(self.brokers):
            resp.brokers.append(self._broker_pb(self.brokers[b]))
        for g in sorted(self.gateways):
            resp.gateways.append(metadata_pb2.GatewayInfo(
                gateway_id=g, endpoint=self.gateways[g].endpoint))
        return resp

    def _metadata(self, req: metadata_pb2.MetadataRequest, out: list[Effect]):
        resp = metadata_pb2.MetadataResponse(
            controller_id=self.config.controller_id, cluster_id=self.cluster_id,
            controller_epoch=self.controller_epoch, metadata_version=self.metadata_version)
        for b in sorted(self.brokers):
            resp.brokers.append(self._broker_pb(self.brokers[b]))
        for g in sorted(self.gateways):
            resp.gateways.append(metadata_pb2.GatewayInfo(
                gateway_id=g, endpoint=self.gateways[g].endpoint))
        names = list(dict.fromkeys(req.topics)) if req.topics else sorted(self.topics)
        for name in names:
            if name not in self.topics:
                problem = topic_name_problem(name)
                if problem is not None:
                    resp.topics.append(metadata_pb2.TopicMetadata(
                        name=name, error_code=E.Value("INVALID_TOPIC_EXCEPTION"),
                        error_message=problem))
                    continue
                if not (req.allow_auto_topic_creation and self.config.auto_create_topics_enable):
                    resp.topics.append(metadata_pb2.TopicMetadata(
                        name=name, error_code=E.Value("UNKNOWN_TOPIC_OR_PARTITION"),
                        error_message="unknown topic"))
                    continue
                code, msg = self._auto_create(name, out)
                if code != NONE:
                    resp.topics.append(metadata_pb2.TopicMetadata(
                        name=name, error_code=code, error_message=msg))
                    continue
            resp.topics.append(self._topic_metadata(self.topics[name]))
        return resp

    def _auto_create(self, name: str, out: list[Effect]) -> tuple[int, str]:
        cfg = self.config
        if name == OFFSETS_TOPIC:
            rf = min(cfg.offsets_topic_replication_factor, max(len(self.brokers), 1))
            return self._create_one(out, name, cfg.offsets_topic_num_partitions, rf,
                                    None, {"cleanup.policy": "compact"})
        return self._create_one(out, name, cfg.num_partitions, cfg.default_replication_factor,
                                None, {})

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
            live, num_partitions, replication_factor, self.rng)
        configs = topic_config.normalise(configs)
        self._write(out, WriteTopicAssignment(name, assignment, NEW))
        self._write(out, WriteTopicConfig(name, configs, NEW))
        for p in sorted(assignment):
            self._init_partition(out, name, p)
        log.info("created topic %s: %s configs=%s", name,
                 {p: list(r) for p, r in assignment.items()}, configs)
        self._send_leader_and_isr(out, [(name, p) for p in sorted(assignment)], is_new=True)
        return NONE, ""

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
                delete_partitions=True,
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
            start = live.index(first) if first in live else None
            extra = assign_replicas(live, req.count - current, rf, self.rng,
                                    first_partition=current, start_index=start)
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
                            self._write(out, WriteTopicConfig(t.name, configs, t.config_version))
                            log.info("topic %s configs: %s", t.name, configs)
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

    # ---- preferred leaders ---------------------------------------------------------------------
    def _elect_preferred(self, out: list[Effect], partitions: Iterable[TopicPartition]
                         ) -> dict[TopicPartition, tuple[int, str]]:
        """Make each partition's first replica its leader where it is live and in the ISR;
        one LEADER_AND_ISR per node for all of them."""
        results: dict[TopicPartition, tuple[int, str]] = {}
        changed: list[TopicPartition] = []
        for tp in partitions:
            t = self.topics.get(tp[0])
            if t is None or tp[1] not in t.assignment:
                results[tp] = E.Value("UNKNOWN_TOPIC_OR_PARTITION"), "unknown topic or partition"
                continue
            preferred = t.assignment[tp[1]][0]
            st = t.states.get(tp[1])
            if st is not None and st.leader == preferred:
                results[tp] = E.Value("ELECTION_NOT_NEEDED"), f"{preferred} already leads"
            elif st is None or preferred not in self._eligible() or preferred not in st.isr:
                results[tp] = (E.Value("PREFERRED_LEADER_NOT_AVAILABLE"),
                               f"preferred replica {preferred} is not live or not in the ISR")
            else:
                self._write_state_from(out, tp, (preferred, st.leader_epoch + 1, st.isr))
                changed.append(tp)
                results[tp] = NONE, ""
        self._send_leader_and_isr(out, changed)
        return results

    def _elect_leaders_request(self, req: admin_ops_pb2.ElectLeadersRequest, out: list[Effect]):
        tps = (list(dict.fromkeys((x.topic, x.partition) for x in req.partitions))
               if req.partitions else self._all_partitions())
        resp = admin_ops_pb2.ElectLeadersResponse(error_code=NONE)
        for (topic, p), (code, msg) in self._elect_preferred(out, tps).items():
            resp.results.add(topic=topic, partition=p, error_code=code, error_message=msg)
        return resp

    def preferred_balance(self) -> dict[int, leader_balance.NodeBalance]:
        return leader_balance.balance(
            (tp, self._replicas(tp), self.topics[tp[0]].states.get(tp[1]))
            for tp in self._all_partitions())

    def _auto_rebalance(self, out: list[Effect]) -> None:
        per_node = self.preferred_balance()
        nodes = leader_balance.imbalanced_nodes(
            per_node, self.config.leader_imbalance_per_broker_percentage)
        if not nodes:
            return
        tps = []
        for tp in self._all_partitions():
            st = self.topics[tp[0]].states.get(tp[1])
            preferred = self._replicas(tp)[0]
            if (preferred in nodes and tp not in self.reassignments and st is not None
                    and st.leader != preferred and preferred in st.isr
                    and preferred in self._eligible()):
                tps.append(tp)
        if tps:
            log.info("leader imbalance on nodes %s (%s): electing preferred leaders of %s",
                     nodes, {n: f"{per_node[n].not_led}/{per_node[n].preferred}" for n in nodes},
                     [f"{t}-{p}" for t, p in tps])
            self._elect_preferred(out, tps)

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
                delete_partitions=True,
                partitions=[common_pb2.TopicPartition(topic=t, partition=p)
                            for t, p in stop[node]])))
