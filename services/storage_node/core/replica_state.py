"""Replica state per partition: role, leader epoch, ISR, high watermark, followers' log ends,
and the controller-epoch fence. Pure: no I/O, no clock; the shell passes log end offsets in.

    state owned                      changed by
    -------------------------------  --------------------------------------------------------
    controller_epoch (newest seen)   LEADER_AND_ISR / STOP_REPLICA with an epoch >= it
    replicas[(topic, partition)]     LEADER_AND_ISR (become leader / follower), STOP_REPLICA
    Replica.log_end_offset           the shell after each local append / truncation
    Replica.followers                a follower's FETCH (its fetch offset is its log end; the
                                     caught-up time of core.isr)
    Replica.high_watermark           leader: min LEO over the maximal ISR (committed ISR plus
                                     a replica being added), never back;
                                     follower: min(leader's HW, own LEO)
    Replica.pending_isr              the ISR change in flight to the controller (at most one)
    Replica.isr / zk_version         LEADER_AND_ISR, or the controller's ALTER_PARTITION answer

ISR changes (Kafka's AlterPartition): the leader proposes (`isr_tick` shrinks, `maybe_expand_isr`
grows) and emits `AlterIsr`; the proposal is applied only when the controller answers with the
committed state (`on_alter_partition_result`) or a LEADER_AND_ISR arrives. A refused proposal
(stale leader epoch / zk version) blocks further proposals until the next LEADER_AND_ISR.

Transitions (one table, h11 style): any -> LEADER, any -> FOLLOWER on a LEADER_AND_ISR whose
leader_epoch is >= the replica's; any -> (removed) on STOP_REPLICA. A state with an older
leader epoch is ignored and reported per partition (STALE_CONTROLLER_EPOCH, as Kafka's
LeaderAndIsr v0-v3 do); a request with an older controller epoch is refused as a whole.
"""
from __future__ import annotations

import enum
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from riverbed import errors

from services.storage_node.core import isr as isr_mod
from services.storage_node.core.isr import FollowerState

NONE = 0
STALE_CONTROLLER_EPOCH = errors.StaleControllerEpochError.code
UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartitionError.code
NOT_LEADER_FOR_PARTITION = errors.NotLeaderForPartitionError.code
KAFKA_STORAGE_ERROR = errors.KafkaStorageError.code
INVALID_REQUEST = errors.InvalidRequestError.code

TopicPartition = tuple[str, int]

UNKNOWN_OFFSET = -1


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


# The allowed transitions, beside the enum (None = not hosted yet).
TRANSITIONS: dict[Role | None, frozenset[Role]] = {
    None: frozenset({Role.LEADER, Role.FOLLOWER}),
    Role.LEADER: frozenset({Role.LEADER, Role.FOLLOWER}),
    Role.FOLLOWER: frozenset({Role.LEADER, Role.FOLLOWER}),
}


@dataclass(frozen=True, slots=True)
class PartitionStateIn:
    """One partition of a LEADER_AND_ISR request, as the core sees it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...] = ()
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    zk_version: int = -1

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(slots=True)
class Replica:
    topic: str
    partition: int
    role: Role
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    log_end_offset: int
    high_watermark: int
    followers: dict[int, FollowerState] = field(default_factory=dict)
    zk_version: int = -1
    leader_epoch_start_offset: int = 0
    pending_isr: tuple[int, ...] | None = None
    # A proposal was refused as stale: no new one until a LEADER_AND_ISR brings the state.
    isr_change_blocked: bool = False

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def follower_leos(self) -> dict[int, int]:
        return {n: st.log_end_offset for n, st in self.followers.items()
                if st.log_end_offset >= 0}

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: the committed one plus a replica being added
        (a shrink counts only once committed), as Kafka's PendingExpandIsr/PendingShrinkIsr."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(n for n in self.pending_isr if n not in self.isr)


@dataclass(frozen=True, slots=True)
class BecomeLeader:
    """Effect: serve produce/fetch for tp from now on (the shell stops fetching it) and record
    (leader_epoch, start_offset) in the leader-epoch cache."""

    tp: TopicPartition
    leader_epoch: int
    start_offset: int = 0


@dataclass(frozen=True, slots=True)
class BecomeFollower:
    """Effect: truncate the local log to `truncate_to` (== its end when it has leader epochs:
    the leader's FETCH answers say where it diverges), then fetch tp from `leader`."""

    tp: TopicPartition
    leader: int
    leader_epoch: int
    truncate_to: int


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPlan:
    """What a LEADER_AND_ISR request would do, decided before any log is touched."""

    error_code: int
    error_message: str
    controller_epoch: int
    accepted: tuple[PartitionStateIn, ...]
    partition_errors: tuple[tuple[TopicPartition, int], ...]   # every partition of the request


@dataclass(frozen=True, slots=True)
class LocalLog:
    """What the shell knows of a local log when the core takes the replica over."""

    log_end_offset: int
    high_watermark: int   # from the replication-offset checkpoint, 0 if none
    latest_epoch: int = -1   # the leader epoch of its last batch; -1 = no epochs recorded


@dataclass(frozen=True, slots=True)
class AlterIsr:
    """Effect: ask the active controller to commit `new_isr` (ALTER_PARTITION)."""

    tp: TopicPartition
    leader_id: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    zk_version: int


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """The controller's answer for one partition, as the core sees it."""

    tp: TopicPartition
    error_code: int
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    zk_version: int = -1


def compute_high_watermark(leader_id: int, leader_leo: int, isr: Iterable[int],
                           follower_leos: Mapping[int, int]) -> int:
    """min LEO over the ISR, the leader's own LEO included; a follower not heard from yet
    counts as UNKNOWN_OFFSET (-1), which holds the high watermark where it is."""
    hw = leader_leo
    for node in isr:
        if node == leader_id:
            continue
        hw = min(hw, follower_leos.get(node, UNKNOWN_OFFSET))
    return hw


def stale_broker_epoch(requested: int, own: int) -> bool:
    """A controller request stamped for registration `requested` of this node (its broker
    epoch: the czxid of /brokers/ids/<id>) is stale when this node has registered since (`own`
    is newer): it was meant for an earlier incarnation, e.g. a process that stopped before it
    was answered and whose request a channel sent again to its successor (KIP-380's
    STALE_BROKER_EPOCH). Unstamped requests (0, an older controller) and a node not registered
    yet (own < 0) are not refused; a newer stamp is this node's registration seen by the
    controller before this node's own thread noted it."""
    return requested > 0 and own > 0 and requested < own


def fetcher_id(tp: TopicPartition, num_replica_fetchers: int) -> int:
    """Which of a leader's fetchers pulls tp: a stable hash (not Python's salted hash())."""
    return zlib.crc32(f"{tp[0]}-{tp[1]}".encode()) % max(1, num_replica_fetchers)


class ReplicaManager:
    """Every replica this node hosts, and the newest controller epoch it has seen."""

    def __init__(self, broker_id: int,
                 min_insync_of: Callable[[str], int] = lambda topic: 1):
        self.broker_id = broker_id
        # A topic's min.insync.replicas (its override, else the node's default): a leader's
        # high watermark advances only while its ISR has that many members (`_advance_hw`).
        self.min_insync_of = min_insync_of
        self.controller_epoch = -1
        self.replicas: dict[TopicPartition, Replica] = {}
        # Replicas whose log dir failed (KIP-112): not served, refused in LEADER_AND_ISR, until
        # the node restarts.
        self.offline: set[TopicPartition] = set()

    # -- queries ---------------------------------------------------------------------------
    def get(self, tp: TopicPartition) -> Replica | None:
        return self.replicas.get(tp)

    def leader_check(self, tp: TopicPartition) -> int:
        """NONE if this node leads tp, else the error code to answer a client with."""
        r = self.replicas.get(tp)
        if r is None:
            return KAFKA_STORAGE_ERROR if tp in self.offline else UNKNOWN_TOPIC_OR_PARTITION
        if r.role is not Role.LEADER:
            return NOT_LEADER_FOR_PARTITION
        return NONE

    def followed_leaders(self) -> dict[int, list[TopicPartition]]:
        """leader id -> partitions this node follows from it (one fetcher per leader)."""
        out: dict[int, list[TopicPartition]] = {}
        for tp, r in self.replicas.items():
            if r.role is Role.FOLLOWER and r.leader >= 0 and r.leader != self.broker_id:
                out.setdefault(r.leader, []).append(tp)
        return out

    def followed_fetchers(self, num_replica_fetchers: int
                          ) -> dict[tuple[int, int], list[TopicPartition]]:
        """(leader id, fetcher id) -> partitions that fetcher pulls (num.replica.fetchers per
        leader; a partition always maps to the same fetcher, as Kafka's getFetcherId)."""
        out: dict[tuple[int, int], list[TopicPartition]] = {}
        for leader, tps in self.followed_leaders().items():
            for tp in tps:
                out.setdefault((leader, fetcher_id(tp, num_replica_fetchers)), []).append(tp)
        return out

    # -- controller epoch ------------------------------------------------------------------
    def check_controller_epoch(self, controller_epoch: int) -> int:
        if controller_epoch < self.controller_epoch:
            return STALE_CONTROLLER_EPOCH
        return NONE

    # -- LEADER_AND_ISR --------------------------------------------------------------------
    def plan_leader_and_isr(self, controller_epoch: int,
                            states: Iterable[PartitionStateIn]) -> LeaderAndIsrPlan:
        """Decide without changing anything: refuse a stale controller epoch; per partition
        ignore an older leader epoch or a state that does not name this node as a replica."""
        states = tuple(states)
        if self.check_controller_epoch(controller_epoch) != NONE:
            return LeaderAndIsrPlan(
                STALE_CONTROLLER_EPOCH,
                f"controller epoch {controller_epoch} is older than {self.controller_epoch}",
                controller_epoch, (),
                tuple((s.tp, STALE_CONTROLLER_EPOCH) for s in states))
        accepted: list[PartitionStateIn] = []
        perrs: list[tuple[TopicPartition, int]] = []
        for s in states:
            current = self.replicas.get(s.tp)
            if not s.topic or s.partition < 0 or s.leader_epoch < 0:
                perrs.append((s.tp, INVALID_REQUEST))
            elif current is not None and s.leader_epoch < current.leader_epoch:
                perrs.append((s.tp, STALE_CONTROLLER_EPOCH))
            elif (current is not None and s.leader_epoch == current.leader_epoch
                  and 0 <= s.zk_version < current.zk_version):
                # An older state of this epoch, e.g. a new controller's election LEADER_AND_ISR
                # built before it committed our ISR change and delivered after its answer:
                # what we have is newer (the state znode's version only grows). Nothing to do.
                perrs.append((s.tp, NONE))
            elif s.replicas and self.broker_id not in s.replicas:
                perrs.append((s.tp, UNKNOWN_TOPIC_OR_PARTITION))
            elif s.tp in self.offline:
                perrs.append((s.tp, KAFKA_STORAGE_ERROR))
            else:
                accepted.append(s)
                perrs.append((s.tp, NONE))
        return LeaderAndIsrPlan(NONE, "", controller_epoch, tuple(accepted), tuple(perrs))

    def apply_leader_and_isr(self, plan: LeaderAndIsrPlan,
                             logs: Mapping[TopicPartition, LocalLog], now_ms: int = 0
                             ) -> list[BecomeLeader | BecomeFollower]:
        """Apply an accepted plan; `logs` describes every accepted partition's local log (the
        shell opened or created it). Returns the role changes for the shell to carry out."""
        if plan.error_code != NONE:
            return []
        self.controller_epoch = max(self.controller_epoch, plan.controller_epoch)
        effects: list[BecomeLeader | BecomeFollower] = []
        for s in plan.accepted:
            local = logs[s.tp]
            current = self.replicas.get(s.tp)
            if s.leader == self.broker_id:
                role = Role.LEADER
            else:
                role = Role.FOLLOWER
            assert role in TRANSITIONS[current.role if current else None]
            known_hw = current.high_watermark if current else local.high_watermark
            known_hw = min(known_hw, local.log_end_offset)
            replica = Replica(s.topic, s.partition, role, s.leader, s.leader_epoch, tuple(s.isr),
                              tuple(s.replicas), local.log_end_offset, known_hw,
                              zk_version=s.zk_version)
            if (current is not None and current.role is role and current.leader == s.leader
                    and current.leader_epoch == s.leader_epoch):
                # The same state again (an ISR change the controller made, or a controller
                # failover): keep what was learned. An ISR proposal in flight is superseded by
                # a newer state, but not by the state it was proposed against (same zk_version,
                # e.g. a new controller's election LEADER_AND_ISR delivered while our proposal
                # travels to it): the controller may still commit it, and its answer must apply,
                # or ZooKeeper would hold an ISR this leader never learns.
                if current.pending_isr is not None and s.zk_version == current.zk_version \
                        and tuple(s.replicas) == current.replicas:
                    replica.pending_isr = current.pending_isr
                replica.followers = current.followers
                replica.log_end_offset = current.log_end_offset
                replica.high_watermark = current.high_watermark
                replica.leader_epoch_start_offset = current.leader_epoch_start_offset
                for node in replica.replicas:
                    if node != self.broker_id and node not in replica.followers:
                        replica.followers[node] = isr_mod.initial_follower_state(
                            node in replica.isr, now_ms)
                self.replicas[s.tp] = replica
                if role is Role.LEADER:
                    self._advance_hw(replica)
                continue
            self.replicas[s.tp] = replica
            if role is Role.LEADER:
                replica.leader_epoch_start_offset = local.log_end_offset
                replica.followers = {
                    node: isr_mod.initial_follower_state(node in replica.isr, now_ms)
                    for node in set(replica.replicas) | set(replica.isr)
                    if node != self.broker_id}
                self._advance_hw(replica)
                effects.append(BecomeLeader(s.tp, s.leader_epoch, local.log_end_offset))
            else:
                # KIP-101: a log with leader epochs keeps its tail; the leader's answer to the
                # first FETCH (diverging epoch) says where to cut. Without epochs (an old log),
                # fall back to the high watermark.
                truncate_to = local.log_end_offset if local.latest_epoch >= 0 else known_hw
                replica.log_end_offset = truncate_to
                effects.append(BecomeFollower(s.tp, s.leader, s.leader_epoch, truncate_to))
        return effects

    # -- log dir failure -------------------------------------------------------------------
    def mark_offline(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """The log dir of `tps` failed: stop hosting them (no fetcher follows them, clients get
        KAFKA_STORAGE_ERROR, LEADER_AND_ISR is refused for them). Returns those that were
        hosted (their waiting produces and fetches must be answered)."""
        removed = []
        for tp in tps:
            self.offline.add(tp)
            if self.replicas.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def mark_online(self, tps: Iterable[TopicPartition]) -> None:
        """Their log dir takes appends again (space came back): the next LEADER_AND_ISR may
        make them replicas again."""
        for tp in tps:
            self.offline.discard(tp)

    # -- STOP_REPLICA ----------------------------------------------------------------------
    def stop_replica(self, controller_epoch: int, tps: Iterable[TopicPartition]
                     ) -> tuple[int, list[tuple[TopicPartition, int]], list[TopicPartition]]:
        """(error_code, per-partition errors, partitions removed)."""
        tps = list(tps)
        if self.check_controller_epoch(controller_epoch) != NONE:
            return STALE_CONTROLLER_EPOCH, [(tp, STALE_CONTROLLER_EPOCH) for tp in tps], []
        self.controller_epoch = controller_epoch
        removed = []
        for tp in tps:
            if self.replicas.pop(tp, None) is not None:
                removed.append(tp)
        return NONE, [(tp, NONE) for tp in tps], removed

    # -- offsets ---------------------------------------------------------------------------
    def on_local_append(self, tp: TopicPartition, log_end_offset: int) -> bool:
        """The local log now ends at log_end_offset. True if the high watermark moved."""
        r = self.replicas[tp]
        r.log_end_offset = log_end_offset
        if r.role is Role.LEADER:
            return self._advance_hw(r)
        return False

    def on_follower_fetch(self, tp: TopicPartition, replica_id: int, fetch_offset: int,
                          now_ms: int = 0) -> bool:
        """A follower fetched from fetch_offset (its log agreeing with ours, checked before):
        that is its log end. True if the HW moved."""
        r = self.replicas[tp]
        if r.role is not Role.LEADER or replica_id == self.broker_id:
            return False
        st = r.followers.get(replica_id)
        if st is None:
            st = r.followers[replica_id] = FollowerState()
        isr_mod.update_follower_fetch_state(st, min(fetch_offset, r.log_end_offset),
                                            r.log_end_offset, now_ms)
        return self._advance_hw(r)

    # -- ISR changes ---------------------------------------------------------------------------
    def _can_propose(self, r: Replica) -> bool:
        return r.role is Role.LEADER and r.pending_isr is None and not r.isr_change_blocked

    def _propose(self, r: Replica, new_isr: tuple[int, ...]) -> AlterIsr:
        r.pending_isr = new_isr
        return AlterIsr(r.tp, self.broker_id, r.leader_epoch, new_isr, r.zk_version)

    def maybe_expand_isr(self, tp: TopicPartition, replica_id: int) -> AlterIsr | None:
        """After a follower's fetch: propose adding it back if it has caught up (its log end
        reached the high watermark and the start of the leader's epoch)."""
        r = self.replicas.get(tp)
        if r is None or not self._can_propose(r) or replica_id in r.isr \
                or replica_id not in r.replicas:
            return None
        st = r.followers.get(replica_id)
        if st is None or not isr_mod.is_follower_in_sync(st, r.high_watermark,
                                                         r.leader_epoch_start_offset):
            return None
        return self._propose(r, r.isr + (replica_id,))

    def isr_tick(self, now_ms: int, replica_lag_time_max_ms: int) -> list[AlterIsr]:
        """Propose dropping ISR members that have not caught up within the lag time."""
        out = []
        for r in self.replicas.values():
            if not self._can_propose(r):
                continue
            lagging = isr_mod.out_of_sync_replicas(self.broker_id, r.isr, r.log_end_offset,
                                                   r.followers, now_ms, replica_lag_time_max_ms)
            if lagging:
                out.append(self._propose(r, tuple(n for n in r.isr if n not in lagging)))
        return out

    def pending_alter(self, tp: TopicPartition) -> AlterIsr | None:
        """The proposal in flight for tp (to resend after a retriable failure), if any."""
        r = self.replicas.get(tp)
        if r is None or r.role is not Role.LEADER or r.pending_isr is None:
            return None
        return AlterIsr(tp, self.broker_id, r.leader_epoch, r.pending_isr, r.zk_version)

    def on_alter_partition_result(self, sent: AlterIsr, result: AlterPartitionResult) -> bool:
        """The controller answered `sent`. Applies a committed state; a refusal drops the
        proposal and waits for LEADER_AND_ISR. True if the high watermark moved."""
        r = self.replicas.get(sent.tp)
        if r is None or r.role is not Role.LEADER or r.leader_epoch != sent.leader_epoch \
                or r.pending_isr != sent.new_isr or r.zk_version != sent.zk_version:
            return False          # superseded (a LEADER_AND_ISR came meanwhile)
        r.pending_isr = None
        if result.error_code != NONE:
            r.isr_change_blocked = True
            return False
        if result.leader_id != self.broker_id or result.leader_epoch != r.leader_epoch:
            r.isr_change_blocked = True      # the controller moved on; LEADER_AND_ISR follows
            return False
        r.isr = tuple(result.isr)
        r.zk_version = result.zk_version
        for node in r.isr:
            if node != self.broker_id and node not in r.followers:
                r.followers[node] = FollowerState()
        return self._advance_hw(r)

    def isr_size(self, tp: TopicPartition) -> int:
        r = self.replicas.get(tp)
        return len(r.isr) if r is not None else 0

    def on_follower_appended(self, tp: TopicPartition, log_end_offset: int,
                             leader_high_watermark: int) -> bool:
        """This node, a follower, appended up to log_end_offset; the leader's HW was given.
        True if the local high watermark moved."""
        r = self.replicas[tp]
        r.log_end_offset = log_end_offset
        new_hw = min(leader_high_watermark, log_end_offset)
        if new_hw > r.high_watermark:
            r.high_watermark = new_hw
            return True
        return False

    def on_truncated(self, tp: TopicPartition, log_end_offset: int) -> None:
        r = self.replicas[tp]
        r.log_end_offset = log_end_offset
        r.high_watermark = min(r.high_watermark, log_end_offset)

    def under_min_isr(self, r: Replica) -> bool:
        """KIP-966's strict min ISR: is the committed ISR smaller than min.insync.replicas (at
        most the replication factor, as Kafka's effectiveMinIsr)?"""
        return len(r.isr) < min(self.min_insync_of(r.topic), len(r.replicas) or len(r.isr))

    def _advance_hw(self, r: Replica) -> bool:
        # Not while the ISR is below min.insync.replicas (Kafka 4, KIP-966): then every record
        # below the high watermark is on each replica that was in the ISR when it fell below,
        # which the controller keeps as eligible leaders (ELR) and may elect cleanly.
        if self.under_min_isr(r):
            return False
        hw = isr_mod.compute_high_watermark(self.broker_id, r.log_end_offset, r.maximal_isr,
                                            r.followers)
        if hw > r.high_watermark:
            r.high_watermark = hw
            return True
        return False

    def check_invariants(self) -> None:
        for tp, r in self.replicas.items():
            if r.high_watermark > r.log_end_offset:
                raise AssertionError(f"{tp}: high watermark {r.high_watermark} beyond "
                                     f"log end {r.log_end_offset}")
            if r.tp != tp:
                raise AssertionError(f"{tp}: replica keyed under the wrong partition")
            if r.role is Role.LEADER and self.broker_id not in r.isr and r.isr:
                raise AssertionError(f"{tp}: leader {self.broker_id} not in its ISR {r.isr}")
            if r.pending_isr is not None and r.role is not Role.LEADER:
                raise AssertionError(f"{tp}: a follower with an ISR change in flight")
