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
ISR shrinks to live members. With no live ISR member, the first live eligible leader replica
(KIP-966, eligible_leaders.py: a replica that was in the ISR when it fell below
min.insync.replicas) leads with ISR = [it]; with none, the leader becomes -1 and the ISR is kept
as it was (so the last in-sync replica can lead again when it returns), unless the topic sets
unclean.leader.election.enable (topic config over the controller's default), which picks the
first live replica with ISR = [it].

Issue 4 (replication): ALTER_PARTITION (ISR changes proposed by leaders, fenced by leader epoch
and state-znode version), CONTROLLED_SHUTDOWN (leadership moved off a stopping node in one
batch), preferred-leader election (ELECT_LEADERS, /admin/preferred_replica_election, and the
automatic rebalance on tick: leader_balance.py) and partition reassignment
(ALTER_PARTITION_REASSIGNMENTS, /admin/reassign_partitions: reassignment.py).

The class is split along its seams; this module keeps the surface, the one door, leader election
on node changes and the LEADER_AND_ISR builder, and mixes in:
    metadata_view.py        UPDATE_METADATA snapshot, METADATA, DESCRIBE_CLUSTER
    topic_admin.py          CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, configs
    node_requests.py        ALTER_PARTITION, CONTROLLED_SHUTDOWN
    preferred_leaders.py    ELECT_LEADERS, /admin/preferred_replica_election, auto rebalance
    reassignment_driver.py  partition reassignment
"""
from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Iterable

from riverbed import errors
from riverbed._proto.v1 import common_pb2, controller_pb2, header_pb2, replication_pb2
from services.controller.config import ControllerConfig
from services.controller.core.broker_liveness import BrokerLiveness
from services.controller.core import eligible_leaders
from services.controller.core.effects import (
    DeletePreferredElection, DeleteTopicZnodes, Effect, MarkTopicForDeletion, PublishMetadata,
    Respond, SendLeaderAndIsr, WritePartitionState, WriteReassignments, WriteTopicAssignment,
    WriteTopicConfig, ZkWrite)
from services.controller.core.events import (
    BrokersChanged, ElectedAsController, Event, GatewaysChanged, LeadershipLost,
    PreferredElectionZnodeChanged, ReassignmentsZnodeChanged, RequestReceived)
from services.controller.core.metadata_view import METADATA_PUBLISH_INTERVAL_MS, MetadataView
from services.controller.core.model import (
    INTERNAL_TOPICS, MAX_PARTITIONS_PER_TOPIC, NEW, NO_LEADER, OFFSETS_TOPIC, BrokerInfo,
    GatewayInfo, LeaderIsr, Topic, TopicPartition)
from services.controller.core.node_requests import NodeRequests
from services.controller.core.preferred_leaders import PreferredLeaders
from services.controller.core.reassignment_driver import ReassignmentDriver
from services.controller.core.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
NONE = 0

# Re-exported for callers that name them here.
__all__ = ["ControllerCore", "INTERNAL_TOPICS", "MAX_PARTITIONS_PER_TOPIC",
           "METADATA_PUBLISH_INTERVAL_MS", "OFFSETS_TOPIC"]


class ControllerCore(MetadataView, TopicAdmin, NodeRequests, PreferredLeaders,
                     ReassignmentDriver):
    def __init__(self, config: ControllerConfig, rng: random.Random):
        self.config = config
        self.rng = rng
        self.active = False
        self.controller_epoch = 0
        self.cluster_id = ""
        # Registered in /brokers/ids (ZooKeeper's view) and, of those, the live ones: not
        # fenced for missing heartbeats (broker_liveness.py). Elections use `brokers`.
        self.registered: dict[int, BrokerInfo] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        self.liveness = BrokerLiveness(config.broker_session_timeout_ms)
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
        # Storage nodes that joined (or re-registered, or were unfenced) and that left, as seen
        # while active: one per node, however many of them one ZooKeeper event carries.
        self.broker_changes = 0
        self.elr_elections = 0          # clean elections of an eligible leader replica (KIP-966)

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
        fenced = self.liveness.expire(now_ms)
        if fenced:
            log.warning("storage nodes %s fenced: no heartbeat in broker.session.timeout.ms=%d "
                        "(their ZooKeeper sessions may still be open)", sorted(fenced),
                        self.liveness.session_timeout_ms)
            out = self._set_live(now_ms)
            if out:
                return out
        out = []
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
        self.registered = {b.node_id: b for b in snapshot.brokers}
        self.brokers = dict(self.registered)
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
                assert not set(st.elr) & set(st.isr), (t.name, p, st)
                assert not set(st.elr) & set(st.last_known_elr), (t.name, p, st)
                assert set(st.elr) <= set(replicas), (t.name, p, st, replicas)
        assert set(self.brokers) <= set(self.registered), (self.brokers, self.registered)
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
                     isr: Iterable[int], *,
                     elr: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> None:
        """Write a partition's state. Its eligible leader replicas follow from the ISR change
        (eligible_leaders.next_elr) unless `elr` gives (ELR, LastKnownElr); a leader from
        outside the old ISR and ELR (an unclean election) empties both."""
        t = self.topics[topic]
        old = t.states.get(p)
        expected = NEW if old is None else old.zk_version
        isr = tuple(isr)
        if elr is None:
            elr = self._next_elr(t, p, old, leader, isr)
        state = LeaderIsr(leader, leader_epoch, isr, self.controller_epoch,
                          0 if old is None else old.zk_version + 1, *elr)
        if old is not None and (old.elr, old.last_known_elr) != elr:
            log.info("[%s-%d] eligible leader replicas %s -> %s, last known %s -> %s", topic, p,
                     list(old.elr), list(elr[0]), list(old.last_known_elr), list(elr[1]))
        self._write(out, WritePartitionState(topic, p, state, expected))

    def _min_isr(self, t: Topic, p: int) -> int:
        return eligible_leaders.min_isr(t.configs, self.config.min_insync_replicas,
                                        len(t.assignment.get(p, ())))

    def _next_elr(self, t: Topic, p: int, old: LeaderIsr | None, leader: int,
                  isr: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if old is None or not self.config.eligible_leader_replicas_enable:
            return (), ()
        if leader != NO_LEADER and leader != old.leader and leader not in old.isr \
                and leader not in old.elr:
            return (), ()                     # unclean: what the ELR promised no longer holds
        return eligible_leaders.next_elr(old.isr, old.elr, old.last_known_elr, isr,
                                         self._min_isr(t, p), t.assignment.get(p, ()))

    def _leave_elr(self, out: list[Effect], nodes: set[int]) -> list[TopicPartition]:
        """KIP-966: nodes that registered after an unclean shutdown may have lost records: out
        of every ELR (into LastKnownElr), without a leader epoch bump. Returns the partitions
        changed (their replicas need the state's new version)."""
        changed = []
        for t in self.topics.values():
            for p, st in sorted(t.states.items()):
                gone = [r for r in st.elr if r in nodes]
                if not gone:
                    continue
                replicas = t.assignment.get(p, ())
                elr = tuple(r for r in st.elr if r not in nodes)
                last = eligible_leaders.in_replica_order(set(st.last_known_elr) | set(gone),
                                                         replicas)
                log.warning("[%s-%d] storage node(s) %s shut down uncleanly: no longer eligible "
                            "leaders", t.name, p, gone)
                self._write_state(out, t.name, p, st.leader, st.leader_epoch, st.isr,
                                  elr=(elr, last))
                changed.append((t.name, p))
        return changed

    def _clear_elr(self, out: list[Effect], topic: str) -> list[TopicPartition]:
        """A topic's min.insync.replicas changed: its ELR and LastKnownElr no longer say what
        they said (KIP-966 empties them)."""
        t = self.topics[topic]
        changed = []
        for p, st in sorted(t.states.items()):
            if st.elr or st.last_known_elr:
                self._write_state(out, topic, p, st.leader, st.leader_epoch, st.isr,
                                  elr=((), ()))
                changed.append((topic, p))
        return changed

    # ---- election, broker changes ------------------------------------------------------------
    def _on_elected(self, ev: ElectedAsController, now_ms: int) -> list[Effect]:
        self.replay(ev)
        self.liveness.reset(self.registered, now_ms)
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
        registered = {b.node_id: b for b in ev.brokers}
        fresh = {i for i, b in registered.items() if self.registered.get(i) != b}
        old = self.registered
        unclean = {i for i in fresh if registered[i].unclean_shutdown
                   and (i not in old or registered[i].epoch != old[i].epoch)}
        self.registered = registered
        self.liveness.registered(registered, fresh, now_ms)
        out: list[Effect] = []
        if unclean and self.config.eligible_leader_replicas_enable:
            # before any election: these nodes must not be elected from an ELR
            changed = self._leave_elr(out, unclean)
            self._send_leader_and_isr(out, changed)
        more = self._set_live(now_ms)
        if out and not any(isinstance(e, PublishMetadata) for e in more):
            more.append(self._publish(now_ms))
        return out + more

    def _set_live(self, now_ms: int) -> list[Effect]:
        """The live set is the registered nodes that are not fenced; elect and tell what that
        changes."""
        new = {i: b for i, b in self.registered.items() if i not in self.liveness.fenced}
        old = self.brokers
        added = {i for i, b in new.items() if old.get(i) != b}   # new, re-registered, unfenced
        removed = set(old) - set(new)
        self.brokers = new
        self.shutting_down -= removed | added
        if not self.active:
            return []
        self.broker_changes += len(added) + len(removed)
        if added or removed:
            log.info("storage nodes up %s, down %s; live %s", sorted(added), sorted(removed),
                     sorted(new))
        out: list[Effect] = []
        changed = self._elect_leaders()
        for tp in changed:
            self._write_state_from(out, tp, changed[tp])
        # One LEADER_AND_ISR per node: the changed partitions to their live replicas, every
        # partition a newly registered node replicates to that node, and to its leader when the
        # node is out of the ISR: a leader whose proposal to add it back was refused while it
        # was away (INVALID_REQUEST: not live) waits for a LEADER_AND_ISR before proposing
        # again, and nothing else would send one (Kafka tells every broker of a broker's
        # return with UPDATE_METADATA).
        per_node: dict[int, set[TopicPartition]] = defaultdict(set)
        for tp in changed:
            for r in self._replicas(tp):
                if r in self.brokers:
                    per_node[r].add(tp)
        if added:
            for t in self.topics.values():
                for p, replicas in t.assignment.items():
                    joined = [r for r in replicas if r in added]
                    if not joined:
                        continue
                    for r in joined:
                        per_node[r].add((t.name, p))
                    st = t.states.get(p)
                    if (st is not None and st.leader in self.brokers and st.leader not in added
                            and any(r not in st.isr for r in joined)):
                        per_node[st.leader].add((t.name, p))
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
        # Failed log dirs are rare: look for them once, not once per partition (10,000 here).
        any_offline = any(b.offline_partitions for b in self.brokers.values())
        for t in self.topics.values():
            unclean = self._unclean_enabled(t)
            for p, replicas in sorted(t.assignment.items()):
                st = t.states.get(p)
                # live for this partition: registered, and its log dir for it not offline
                live = self._live_replicas((t.name, p)) if any_offline else self.brokers
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
                elr = st.elr if self.config.eligible_leader_replicas_enable else ()
                won = eligible_leaders.elect(replicas, st.isr, elr, live, unclean_enabled=unclean,
                                             prefer=self._prefer_running)
                if won.how:
                    changes[(t.name, p)] = (won.leader, st.leader_epoch + 1, won.isr)
                    self.leader_elections += 1
                if won.how == "elr":
                    # KIP-966: no live ISR member, but a replica that was in the ISR when it fell
                    # below min.insync.replicas is live: a clean election.
                    log.info("[%s-%d] leader from the eligible leader replicas %s: %d (ISR %s "
                             "has no live member)", t.name, p, list(st.elr), won.leader,
                             list(st.isr))
                    self.elr_elections += 1
                elif won.how == "unclean":
                    log.warning("[%s-%d] unclean leader election: %d (not in the ISR %s) leads; "
                                "records committed since it fell behind are lost",
                                t.name, p, won.leader, list(st.isr))
                    self.unclean_elections += 1
                elif not won.how and st.leader != NO_LEADER:
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

    def heartbeat_without_changes(self, req: replication_pb2.BrokerHeartbeatRequest,
                                  now_ms: int) -> replication_pb2.BrokerHeartbeatResponse | None:
        """The common BROKER_HEARTBEAT: from a registered, unfenced node with the right epoch to
        the active controller. It only moves the node's deadline, so the shell may answer it
        without waiting for ZooKeeper writes in flight (a heartbeat queued behind a long
        transaction must not count as silence). None: take the full path (`handle`)."""
        b = self.registered.get(req.broker_id)
        if (not self.active or b is None or req.broker_id in self.liveness.fenced
                or (req.broker_epoch >= 0 and b.epoch >= 0 and req.broker_epoch != b.epoch)):
            return None
        self.liveness.heard_from(req.broker_id, now_ms)
        return replication_pb2.BrokerHeartbeatResponse(error_code=NONE)

    def _on_heartbeat(self, req: replication_pb2.BrokerHeartbeatRequest,
                      now_ms: int) -> list[Effect]:
        """BROKER_HEARTBEAT: refresh the node's deadline; a fenced node is live again."""
        resp = replication_pb2.BrokerHeartbeatResponse(error_code=NONE)
        if req.broker_id not in self.registered:
            resp.error_code = errors.ErrorCode.Value("BROKER_NOT_AVAILABLE")
            resp.error_message = f"storage node {req.broker_id} is not registered"
            return [Respond(resp)]
        b = self.registered[req.broker_id]
        if req.broker_epoch >= 0 and b.epoch >= 0 and req.broker_epoch != b.epoch:
            resp.error_code = errors.ErrorCode.Value("INVALID_REQUEST")
            resp.error_message = (f"stale broker epoch {req.broker_epoch}: node {req.broker_id} "
                                  f"registered as {b.epoch}")
            return [Respond(resp)]
        out: list[Effect] = []
        if self.liveness.heard_from(req.broker_id, now_ms):
            resp.is_fenced = True
            log.info("storage node %d heard from again: unfenced", req.broker_id)
            out = self._set_live(now_ms)
        out.append(Respond(resp))
        return out

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
            controller_id=self.config.controller_id, controller_epoch=self.controller_epoch,
            broker_epoch=self._broker_epoch(node))
        leaders: set[int] = set()
        add = req.partitions.add          # built in place: no copy per partition (10,000 here)
        for topic, p in partitions:
            t = self.topics[topic]
            st = t.states[p]
            add(topic=topic, partition=p, controller_epoch=st.controller_epoch, leader=st.leader,
                leader_epoch=st.leader_epoch, isr=st.isr, zk_version=st.zk_version,
                replicas=t.assignment[p], is_new=is_new, topic_configs=t.configs)
            if st.leader in self.brokers:
                leaders.add(st.leader)
        for b in sorted(leaders):
            req.live_leaders.append(self._broker_pb(self.brokers[b]))
        return SendLeaderAndIsr(node, req)

    def _broker_epoch(self, node: int) -> int:
        """The registration (broker epoch) of `node` a request to it is meant for; 0 when not
        known (not stamped: the node does not check it)."""
        b = self.brokers.get(node)
        return b.epoch if b is not None and b.epoch > 0 else 0

    @staticmethod
    def _broker_pb(b: BrokerInfo) -> common_pb2.Broker:
        return common_pb2.Broker(node_id=b.node_id, host=b.host, port=b.port, endpoint=b.endpoint,
                                 rack=b.rack)


    # ---- requests ---------------------------------------------------------------------------
    def _on_request(self, ev: RequestReceived, now_ms: int) -> list[Effect]:
        if ev.api == ApiKey.BROKER_HEARTBEAT:
            return self._on_heartbeat(ev.body, now_ms)
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
