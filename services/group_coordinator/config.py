"""The group coordinator's typed config: Kafka's keys in snake_case."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    group_coordinator_id: int = 0
    host_name: str = "127.0.0.1"
    port: int = 9095
    zookeeper_connect: str = "127.0.0.1:2181/riverbed"
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    socket_request_max_bytes: int = 104857600
    # Kafka's bounds on a member's session.timeout.ms (INVALID_SESSION_TIMEOUT outside them):
    # the minimum stops members from heartbeating the coordinator to death, the maximum bounds
    # how long a dead consumer can hold partitions.
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    # Kafka's group.max.size (its default is unbounded; a bound keeps the join map finite).
    group_max_size: int = 1000
    offsets_topic_num_partitions: int = 50
    # An Empty group's metadata is deleted (tombstoned) this long after it became empty.
    offsets_retention_minutes: int = 1440
    offsets_retention_check_interval_ms: int = 600000
    # How long the shell waits for a __consumer_offsets write (acks=all) before failing it.
    offsets_commit_timeout_ms: int = 5000

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port={self.port}: not a TCP port")
        if self.group_min_session_timeout_ms < 1:
            raise ValueError("group.min.session.timeout.ms must be >= 1")
        if self.group_max_session_timeout_ms < self.group_min_session_timeout_ms:
            raise ValueError("group.max.session.timeout.ms must be >= group.min.session.timeout.ms")
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be >= 1")
        if self.group_max_size < 1:
            raise ValueError("group.max.size must be >= 1")

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host_name}:{self.port}"
