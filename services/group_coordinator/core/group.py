"""A consumer group and its members, as the coordinator core holds them."""
from __future__ import annotations

from dataclasses import dataclass, field

from riverbed.coordinator.consumer_protocol import Subscription, TopicPartition
from services.group_coordinator.core.states import GroupState, check_transition


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, Subscription], ...]     # most preferred first
    assignment: tuple[TopicPartition, ...] = ()         # of the group's current generation
    heartbeat_deadline_ms: int | None = None            # None until loaded/joined
    join_request: int | None = None                     # a parked JoinGroup
    sync_request: int | None = None                     # a parked SyncGroup
    # A parked Heartbeat (HeartbeatRequest.max_wait_ms > 0 in a Stable group) and when its wait
    # ends: answered NONE then, REBALANCE_IN_PROGRESS as soon as the group leaves Stable.
    heartbeat_request: int | None = None
    heartbeat_answer_ms: int | None = None
    # Client assignment (Kafka's classic protocol): each protocol's metadata as the client sent
    # it (`protocols` then holds empty subscriptions), and the leader's assignment for this
    # member in the current generation.
    metadata: tuple[tuple[str, bytes], ...] = ()
    assignment_data: bytes = b""

    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def subscription(self, protocol: str) -> Subscription:
        for name, sub in self.protocols:
            if name == protocol:
                return sub
        raise KeyError(protocol)

    def raw_metadata(self, protocol: str) -> bytes | None:
        """The metadata bytes the client sent for `protocol` (client assignment), else None."""
        for name, data in self.metadata:
            if name == protocol:
                return data
        return None


@dataclass(slots=True)
class PendingWrite:
    group_id: str
    kind: str                          # "generation" | "empty" | "tombstone"
    generation: int
    value: bytes | None                # the encoded group-metadata value written


@dataclass(slots=True)
class Group:
    group_id: str
    shard: int
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)    # join order
    state_timestamp_ms: int = -1
    rebalance_deadline_ms: int | None = None
    # Kafka's InitialDelayedJoin: a group leaving Empty waits this long for more members first.
    initial_join_deadline_ms: int | None = None
    pending_write: int | None = None      # write id of the generation/tombstone write in flight
    pending_assignment: dict[str, tuple[TopicPartition, ...]] | None = None
    rebalance_after_write: bool = False
    log_offset: int = -1                  # of the last group-metadata record applied
    rebalance_started_ms: int | None = None   # entered PreparingRebalance (for the metrics)
    # How members are assigned (group.proto): False = by this coordinator (the SDK's), True = by
    # the group's leader (Kafka's classic protocol). Set by the first member; after a shard load
    # it is inferred from the stored record (`assignment_mode_known` False) and the next join
    # settles it.
    client_assignment: bool = False
    assignment_mode_known: bool = True
    # Client assignment: the leader's assignments (member id -> bytes) of the generation in
    # CompletingRebalance, from its SyncGroup, being written.
    pending_assignment_data: dict[str, bytes] | None = None
    # DeleteGroups (and expiry) in flight: the group's tombstone is being written; joins get
    # COORDINATOR_NOT_AVAILABLE meanwhile (Kafka's Dead group), the deletes wait for it.
    delete_waiters: list = field(default_factory=list)

    def transition(self, dst: GroupState, now_ms: int) -> None:
        check_transition(self.state, dst)
        self.state = dst
        self.state_timestamp_ms = now_ms

    def all_joined(self) -> bool:
        return all(m.join_request is not None for m in self.members.values())

    def supported_protocols(self, exclude: str | None = None) -> set[str] | None:
        """Protocol names every member (but `exclude`) supports; None when there is no member."""
        out: set[str] | None = None
        for mid, m in self.members.items():
            if mid == exclude:
                continue
            names = set(m.protocol_names())
            out = names if out is None else out & names
        return out
