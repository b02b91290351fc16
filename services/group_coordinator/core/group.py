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

    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def subscription(self, protocol: str) -> Subscription:
        for name, sub in self.protocols:
            if name == protocol:
                return sub
        raise KeyError(protocol)


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
