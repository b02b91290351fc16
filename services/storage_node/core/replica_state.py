"""Replica state per partition: role, leader epoch, ISR, high watermark, followers' log ends,
and the controller-epoch fence. Pure: no I/O, no clock; the shell passes log end offsets in.

    state owned                      changed by
    -------------------------------  --------------------------------------------------------
    controller_epoch (newest seen)   LEADER_AND_ISR / STOP_REPLICA with an epoch >= it
    replicas[(topic, partition)]     LEADER_AND_ISR (become leader / follower), STOP_REPLICA
    Replica.log_end_offset           the shell after each local append / truncation
    Replica.follower_leos            a follower's FETCH (its fetch offset is its log end)
    Replica.high_watermark           leader: min LEO over the ISR (own included), never back;
                                     follower: min(leader's HW, own LEO)

Transitions (one table, h11 style): any -> LEADER, any -> FOLLOWER on a LEADER_AND_ISR whose
leader_epoch is >= the replica's; any -> (removed) on STOP_REPLICA. A state with an older
leader epoch is ignored and reported per partition (STALE_CONTROLLER_EPOCH, as Kafka's
LeaderAndIsr v0-v3 do); a request with an older controller epoch is refused as a whole.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from riverbed import errors

NONE = 0
STALE_CONTROLLER_EPOCH = errors.StaleControllerEpochError.code
UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartitionError.code
NOT_LEADER_FOR_PARTITION = errors.NotLeaderForPartitionError.code
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
    follower_leos: dict[int, int] = field(default_factory=dict)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER


@dataclass(frozen=True, slots=True)
class BecomeLeader:
    """Effect: serve produce/fetch for tp from now on (the shell stops fetching it)."""

    tp: TopicPartition
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BecomeFollower:
    """Effect: truncate the local log to `truncate_to`, then fetch tp from `leader`."""

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


class ReplicaManager:
    """Every replica this node hosts, and the newest controller epoch it has seen."""

    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.controller_epoch = -1
        self.replicas: dict[TopicPartition, Replica] = {}

    # -- queries ---------------------------------------------------------------------------
    def get(self, tp: TopicPartition) -> Replica | None:
        return self.replicas.get(tp)

    def leader_check(self, tp: TopicPartition) -> int:
        """NONE if this node leads tp, else the error code to answer a client with."""
        r = self.replicas.get(tp)
        if r is None:
            return UNKNOWN_TOPIC_OR_PARTITION
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
            elif s.replicas and self.broker_id not in s.replicas:
                perrs.append((s.tp, UNKNOWN_TOPIC_OR_PARTITION))
            else:
                accepted.append(s)
                perrs.append((s.tp, NONE))
        return LeaderAndIsrPlan(NONE, "", controller_epoch, tuple(accepted), tuple(perrs))

    def apply_leader_and_isr(self, plan: LeaderAndIsrPlan,
                             logs: Mapping[TopicPartition, LocalLog]
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
                              tuple(s.replicas), local.log_end_offset, known_hw)
            if (current is not None and current.role is role and current.leader == s.leader
                    and current.leader_epoch == s.leader_epoch):
                # The same state again (e.g. an ISR update or a controller failover):
                # keep what was learned.
                replica.follower_leos = current.follower_leos
                replica.log_end_offset = current.log_end_offset
                replica.high_watermark = current.high_watermark
                self.replicas[s.tp] = replica
                if role is Role.LEADER:
                    self._advance_hw(replica)
                continue
            self.replicas[s.tp] = replica
            if role is Role.LEADER:
                self._advance_hw(replica)
                effects.append(BecomeLeader(s.tp, s.leader_epoch))
            else:
                # Simple rule for now: truncate to the high watermark we know (the leader-epoch
                # rule replaces it in the replication issue).
                replica.log_end_offset = known_hw
                effects.append(BecomeFollower(s.tp, s.leader, s.leader_epoch, known_hw))
        return effects

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

    def on_follower_fetch(self, tp: TopicPartition, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched from fetch_offset: that is its log end. True if the HW moved."""
        r = self.replicas[tp]
        if r.role is not Role.LEADER:
            return False
        r.follower_leos[replica_id] = min(fetch_offset, r.log_end_offset)
        return self._advance_hw(r)

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

    def _advance_hw(self, r: Replica) -> bool:
        hw = compute_high_watermark(self.broker_id, r.log_end_offset, r.isr, r.follower_leos)
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
