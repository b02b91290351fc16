"""What a sharded role's core and shell share (group coordinator, offset manager, transaction
coordinator): the config keys they read, and the inputs/outputs around the ShardHost. No I/O:
cores import this module.

Each role owns shards, i.e. partitions of an internal compacted topic (`__consumer_offsets` for
the group coordinator and the offset manager, `__transaction_state` for the transaction
coordinator), through services.common.shard_host.ShardHost; services.common.sharded_service is
the shell around it. Each role adds its own config keys (a subclass of ShardedRoleConfig or,
for another topic, of ShardedServiceConfig), its own RequestReceived and other inputs, and its
own core.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class ShardTopic:
    """The internal topic a sharded role's shards are the partitions of, and how it is written:
    created (when missing) with `num_partitions`, `replication_factor` (capped at the live
    storage nodes), cleanup.policy=compact, segment.bytes and, when set, min.insync.replicas."""
    name: str
    num_partitions: int
    replication_factor: int
    segment_bytes: int
    commit_timeout_ms: int           # how long one acks=all write may take
    load_buffer_size: int            # bytes per FETCH while loading a shard
    min_insync_replicas: int | None = None
    # Created only once a request needs it (ShardHost.request_topic), as Kafka creates
    # __transaction_state on the first transactional request: a fleet that never uses
    # transactions never has it.
    create_on_demand: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardedServiceConfig:
    """The keys every sharded role reads, Kafka's names in snake_case."""
    host_name: str = "127.0.0.1"
    port: int = 0                    # each role sets its default (9095, 9096, 9097)
    # Prometheus text endpoint on host.name (http://host:port/metrics): 0 picks a free port, -1 none.
    metrics_port: int = 0
    zookeeper_connect: str = "127.0.0.1:2181/riverbed"
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    socket_request_max_bytes: int = 104857600
    # How long a call to the controller (METADATA, CREATE_TOPICS) or a storage node may take.
    request_timeout_ms: int = 30000
    # Requests handled at once at most (Kafka's queued.max.requests); joins and syncs park here.
    queued_max_requests: int = 500

    def __post_init__(self) -> None:
        """The shared keys' bounds (ValueError naming the key). A subclass's __post_init__ calls
        its parent's explicitly (not zero-argument super(): slots) and then checks its keys."""
        if not 0 < self.port < 65536:
            raise ValueError(f"port={self.port}: not a TCP port")
        if not -1 <= self.metrics_port < 65536:
            raise ValueError(f"metrics.port={self.metrics_port}: must be -1 (none), 0 (any free "
                             "port) or a TCP port")
        for key, value in (("request.timeout.ms", self.request_timeout_ms),
                           ("queued.max.requests", self.queued_max_requests)):
            if value < 1:
                raise ValueError(f"{key}={value}: must be positive")

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host_name}:{self.port}"

    def shard_topic(self) -> ShardTopic:
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardedRoleConfig(ShardedServiceConfig):
    """The keys both `__consumer_offsets` roles read (group coordinator, offset manager). A role
    subclasses it (frozen, slots, kw_only), adds its id and keys and sets its own `port`
    default."""
    offsets_topic_num_partitions: int = 50
    # An Empty group's metadata is deleted (tombstoned) by the group coordinator, and its
    # offsets expire at the offset manager, this long after it emptied (or after the commit).
    offsets_retention_minutes: int = 1440
    offsets_retention_check_interval_ms: int = 600000
    # How long the shell waits for a __consumer_offsets write (acks=all) before failing it;
    # a timed-out write is answered with an error.
    offsets_commit_timeout_ms: int = 5000
    # __consumer_offsets itself, created by the first coordinator or offset manager that finds it
    # missing (Kafka's keys and defaults): the replication factor is capped at the live storage
    # nodes with a WARNING; the segment size is Kafka's offsets.topic.segment.bytes.
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    # Bytes asked per FETCH while loading (and tailing) a shard (Kafka's offsets.load.buffer.size).
    offsets_load_buffer_size: int = 5242880

    def __post_init__(self) -> None:
        """The shared keys' bounds (ValueError naming the key). A role's __post_init__ calls
        `ShardedRoleConfig.__post_init__(self)` (not zero-argument super(): slots) and then
        checks its own keys."""
        ShardedServiceConfig.__post_init__(self)
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be >= 1")
        if self.offsets_topic_replication_factor < 1:
            raise ValueError("offsets.topic.replication.factor must be >= 1")
        if self.offsets_topic_segment_bytes < 14:
            raise ValueError("offsets.topic.segment.bytes must be >= 14")
        for key, value in (("offsets.load.buffer.size", self.offsets_load_buffer_size),
                           ("offsets.commit.timeout.ms", self.offsets_commit_timeout_ms)):
            if value < 1:
                raise ValueError(f"{key}={value}: must be positive")

    def shard_topic(self) -> ShardTopic:
        return ShardTopic(OFFSETS_TOPIC, self.offsets_topic_num_partitions,
                          self.offsets_topic_replication_factor, self.offsets_topic_segment_bytes,
                          self.offsets_commit_timeout_ms, self.offsets_load_buffer_size)


# -- inputs (what happened) ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ShardLoadStarted:
    """This instance now owns shard (a partition of its topic) `shard`; the shell reads it
    from the start and passes each record to `replay`, then sends ShardLoadCompleted. With
    tailing on (the offset manager) it keeps reading the partition into `replay` afterwards, so
    records other writers append arrive (a core recognises its own by log offset).
    `coordinator_epoch`: the shard's epoch this instance took it with (transaction coordinators;
    -1 for the roles that keep none)."""
    shard: int
    coordinator_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ShardLoadCompleted:
    shard: int


@dataclass(frozen=True, slots=True)
class ShardUnloaded:
    """Ownership of the shard moved elsewhere (or the instance resigns it): forget its state."""
    shard: int


@dataclass(frozen=True, slots=True)
class WriteCompleted:
    """An AppendRecords finished. error_code NONE = every record is durable (acks=all), the
    first at log offset `base_offset`; anything else = the storage error (REQUEST_TIMED_OUT,
    NOT_LEADER_FOR_PARTITION...): it failed or timed out."""
    write_id: int
    error_code: int
    base_offset: int = -1


# -- outputs (what to do); the shell performs them in list order -------------------------------

@dataclass(frozen=True, slots=True)
class Reply:
    """Answer request `request_id` with `body` (the role's response message)."""
    request_id: int
    body: Any


@dataclass(frozen=True, slots=True)
class AppendRecords:
    """Append these (key, value|None) records, in order, as one batch to partition `shard` of the
    role's topic with acks=all and its commit timeout; then feed back WriteCompleted(write_id,
    ...). With `producer_id` >= 0 the batch is a transactional one of that producer and epoch
    (TXN_OFFSET_COMMIT: it counts once the transaction's COMMIT marker follows it)."""
    write_id: int
    shard: int
    records: tuple[tuple[bytes, bytes | None], ...]
    producer_id: int = -1
    producer_epoch: int = -1
