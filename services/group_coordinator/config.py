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
    # Kafka's group.initial.rebalance.delay.ms: the first rebalance of an Empty group waits this
    # long (at most the rebalance timeout) so members starting together land in one generation
    # instead of one rebalance each.
    group_initial_rebalance_delay_ms: int = 3000
    offsets_topic_num_partitions: int = 50
    # An Empty group's metadata is deleted (tombstoned) this long after it became empty.
    offsets_retention_minutes: int = 1440
    offsets_retention_check_interval_ms: int = 600000
    # How long the shell waits for a __consumer_offsets write (acks=all) before failing it.
    offsets_commit_timeout_ms: int = 5000
    # __consumer_offsets itself, created by the first coordinator or offset manager that finds it
    # missing (Kafka's keys and defaults): the replication factor is capped at the live storage
    # nodes with a WARNING; the segment size is Kafka's offsets.topic.segment.bytes.
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    # Bytes asked per FETCH while loading (and tailing) a shard (Kafka's offsets.load.buffer.size).
    offsets_load_buffer_size: int = 5242880
    # How long a call to the controller (METADATA, CREATE_TOPICS) or a storage node may take.
    request_timeout_ms: int = 30000
    # Requests handled at once at most (Kafka's queued.max.requests); joins and syncs park here.
    queued_max_requests: int = 500

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port={self.port}: not a TCP port")
        if self.group_min_session_timeout_ms < 1:
            raise ValueError("group.min.session.timeout.ms must be >= 1")
        if self.group_max_session_timeout_ms < self.group_min_session_timeout_ms:
            raise ValueError("group.max.session.timeout.ms must be >= group.min.session.timeout.ms")
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be >= 1")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must be >= 0")
        if self.group_max_size < 1:
            raise ValueError("group.max.size must be >= 1")
        if self.offsets_topic_replication_factor < 1:
            raise ValueError("offsets.topic.replication.factor must be >= 1")
        if self.offsets_topic_segment_bytes < 14:
            raise ValueError("offsets.topic.segment.bytes must be >= 14")
        for key, value in (("offsets.load.buffer.size", self.offsets_load_buffer_size),
                           ("offsets.commit.timeout.ms", self.offsets_commit_timeout_ms),
                           ("request.timeout.ms", self.request_timeout_ms),
                           ("queued.max.requests", self.queued_max_requests)):
            if value < 1:
                raise ValueError(f"{key}={value}: must be positive")

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host_name}:{self.port}"
