"""The group coordinator's typed config: Kafka's keys in snake_case. The keys it shares with the
offset manager (host, ZooKeeper, __consumer_offsets, limits) are in
services.common.sharded_role.ShardedRoleConfig."""
from __future__ import annotations

from dataclasses import dataclass

from services.common.sharded_role import ShardedRoleConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCoordinatorConfig(ShardedRoleConfig):
    group_coordinator_id: int = 0
    port: int = 9095
    # Kafka's bounds on a member's session.timeout.ms (INVALID_SESSION_TIMEOUT outside them):
    # the minimum stops members from heartbeating the coordinator to death, the maximum bounds
    # how long a dead consumer can hold partitions.
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    # Kafka's group.max.size (its default is unbounded; a bound keeps the join map finite).
    group_max_size: int = 1000
    # Kafka's group.initial.rebalance.delay.ms: the first rebalance of an Empty group waits this
    # long (at most the rebalance timeout) so members starting together land in one generation
    # instead of one rebalance each.
    group_initial_rebalance_delay_ms: int = 3000
    # Riverbed: heartbeats parked at once at most (HeartbeatRequest.max_wait_ms, a long poll that
    # tells members of a rebalance the moment it starts). A parked heartbeat holds one of the
    # queued.max.requests request slots, as a parked join or sync does: half of its default
    # leaves the other half to joins, syncs and everything else. Past it a heartbeat is answered
    # at once, as Kafka's are; 0 never parks one.
    group_max_parked_heartbeats: int = 250

    def __post_init__(self) -> None:
        ShardedRoleConfig.__post_init__(self)
        if self.group_min_session_timeout_ms < 1:
            raise ValueError("group.min.session.timeout.ms must be >= 1")
        if self.group_max_session_timeout_ms < self.group_min_session_timeout_ms:
            raise ValueError("group.max.session.timeout.ms must be >= group.min.session.timeout.ms")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must be >= 0")
        if self.group_max_size < 1:
            raise ValueError("group.max.size must be >= 1")
        if not 0 <= self.group_max_parked_heartbeats < self.queued_max_requests:
            raise ValueError("group.max.parked.heartbeats must be >= 0 and below queued.max.requests")
