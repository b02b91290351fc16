"""The storage node's config: Kafka's broker keys (docs/contracts.md "Storage node").

Field names are the Kafka keys in snake_case (`log.segment.bytes` <-> `log_segment_bytes`);
built with `services.common.config.build` from defaults, a .properties file, then overrides.
The `log_*` fields are the node's defaults for every partition log; a topic's overrides
(LEADER_AND_ISR `topic_configs`, Kafka's topic-level names such as `segment.bytes`) win.
"""
from __future__ import annotations

from dataclasses import dataclass

from services.common.config import ConfigError


@dataclass(frozen=True, slots=True)
class StorageNodeConfig:
    broker_id: int = -1
    # The failure domain this node shares with others (Kafka's broker.rack: a rack, a zone, or a
    # host running several storage-node processes); the controller spreads a new partition's
    # replicas over distinct racks when every live node names one. Empty: none.
    broker_rack: str = ""
    host_name: str = "127.0.0.1"
    port: int = 9101
    # Prometheus text endpoint on host.name (http://host:port/metrics): 0 picks a free port, -1 none.
    metrics_port: int = 0
    log_dirs: str = "/tmp/riverbed-logs"
    zookeeper_connect: str = "127.0.0.1:2181/riverbed"
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    # Largest request the ROUTER accepts (ZMQ_MAXMSGSIZE); Kafka's default, 100 MiB.
    socket_request_max_bytes: int = 104857600
    # Largest record batch (Kafka's default: 1 MB + 12 bytes of log overhead).
    message_max_bytes: int = 1000012
    # Requests waiting for the loop (and delayed produce/fetch in purgatory) at most; Kafka's 500.
    queued_max_requests: int = 500

    # -- log defaults (Kafka's broker keys) ----------------------------------------------
    log_segment_bytes: int = 1073741824
    log_roll_ms: int | None = None
    log_roll_hours: int = 168
    log_roll_jitter_ms: int = 0
    log_index_size_max_bytes: int = 10485760
    log_index_interval_bytes: int = 4096
    log_flush_interval_messages: int = 9223372036854775807
    log_flush_interval_ms: int | None = None
    log_retention_ms: int | None = None
    log_retention_hours: int = 168
    log_retention_bytes: int = -1
    log_cleanup_policy: str = "delete"
    log_segment_delete_delay_ms: int = 60000
    # Headroom (KIP-112's spirit): a log dir with less free space than this refuses appends and
    # hands its partitions' leadership and ISR places to other replicas until space is back
    # (one and a half times this); retention keeps running on it. 0 turns the check off.
    log_dir_free_bytes_min: int = 16777216
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_delete_retention_ms: int = 86400000
    log_cleaner_backoff_ms: int = 15000
    log_retention_check_interval_ms: int = 300000

    # -- replication ---------------------------------------------------------------------
    num_replica_fetchers: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_lag_time_max_ms: int = 10000
    # How long a replica fetcher waits for its leader's answer before retrying.
    replica_socket_timeout_ms: int = 30000
    # Pause after a failed replica fetch (Kafka's replica.fetch.backoff.ms).
    replica_fetch_backoff_ms: int = 1000
    # Bytes over a whole replica FETCH response (Kafka's default, 10 MiB); at least one batch
    # is always returned so a batch above the limits still replicates.
    replica_fetch_response_max_bytes: int = 10485760
    # Incremental fetch sessions (KIP-227) the leader keeps for its followers' fetchers at most
    # (Kafka's key and default); 0: none, every replica fetch is a full one.
    max_incremental_fetch_session_cache_slots: int = 1000
    # How often the leader checks its ISR for lagging followers (Kafka: lag.time.max.ms / 2).
    replica_lag_check_interval_ms: int | None = None
    # acks=-1 needs an ISR of at least this many (Kafka's broker default; topics override).
    min_insync_replicas: int = 1
    # How often each log dir's replication-offset-checkpoint (the high watermarks) is written
    # (Kafka's key and default). Written by a worker thread, off the request loop.
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    # Pause between ALTER_PARTITION retries after a network error or NOT_CONTROLLER.
    alter_partition_retry_backoff_ms: int = 500

    # How long a call to the controller (ALTER_PARTITION, CONTROLLED_SHUTDOWN) may take.
    controller_socket_timeout_ms: int = 30000

    # BROKER_HEARTBEAT to the active controller this often, beside the ZooKeeper session
    # (Kafka's KRaft key; default 2000 there). The controller fences a node it has not heard
    # from in its broker.session.timeout.ms (2000), so a dead node's partitions move in about
    # two seconds instead of zookeeper.session.timeout.ms. 0 = no heartbeats (ZooKeeper only;
    # then set broker.session.timeout.ms=0 on the controllers too).
    broker_heartbeat_interval_ms: int = 500

    # -- controlled shutdown (Kafka's keys and defaults) ---------------------------------
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000

    # -- idempotent producers (Kafka's keys and defaults) --------------------------------
    # A producer id whose last batch is this old is forgotten (its next batch is accepted with
    # any sequence, KIP-360); Kafka >= 2.8: one day.
    producer_id_expiration_ms: int = 86400000
    # How often the expiry runs (Kafka: 10 minutes).
    producer_id_expiration_check_interval_ms: int = 600000
    # Batches remembered per producer and partition to recognise a retried duplicate (Kafka's
    # fixed ProducerStateEntry.NUM_BATCHES_TO_RETAIN, 5). An idempotent producer keeps at most
    # this many batches per partition unacknowledged (it learns the figure from INIT_PRODUCER_ID),
    # so a larger window lets more batches be in flight on the acks=all path. Kept across
    # restarts in the producer snapshots; a retry older than the window is looked up in the log.
    producer_state_batches_retained: int = 5

    # -- requests ------------------------------------------------------------------------
    # acks=-1 wait when the request's timeout_ms is 0 (Kafka's request.timeout.ms).
    request_timeout_ms: int = 30000

    def __post_init__(self) -> None:
        if not -1 <= self.metrics_port < 65536:
            raise ConfigError(f"metrics.port={self.metrics_port}: must be -1 (none), 0 (any "
                              "free port) or a TCP port")
        if self.log_dir_free_bytes_min < 0:
            raise ConfigError(f"log.dir.free.bytes.min={self.log_dir_free_bytes_min}: must be >= 0")
        if self.broker_id < 0:
            raise ConfigError("broker.id must be set to a non-negative integer")
        if not (0 < self.port < 65536):
            raise ConfigError(f"port={self.port}: must be in 1..65535")
        if not self.log_dirs.strip():
            raise ConfigError("log.dirs must name at least one directory")
        if self.message_max_bytes <= 0:
            raise ConfigError(f"message.max.bytes={self.message_max_bytes}: must be positive")
        if self.socket_request_max_bytes <= 0:
            raise ConfigError("socket.request.max.bytes must be positive")
        if self.queued_max_requests <= 0:
            raise ConfigError("queued.max.requests must be positive")
        if self.num_replica_fetchers < 1:
            raise ConfigError("num.replica.fetchers must be >= 1")
        if self.replica_fetch_max_bytes <= 0:
            raise ConfigError("replica.fetch.max.bytes must be positive")
        if self.replica_fetch_response_max_bytes <= 0:
            raise ConfigError("replica.fetch.response.max.bytes must be positive")
        if self.max_incremental_fetch_session_cache_slots < 0:
            raise ConfigError("max.incremental.fetch.session.cache.slots must be >= 0")
        if self.replica_fetch_wait_max_ms < 0 or self.replica_fetch_min_bytes < 0:
            raise ConfigError("replica.fetch.wait.max.ms / replica.fetch.min.bytes must be >= 0")
        if self.replica_lag_time_max_ms <= 0:
            raise ConfigError("replica.lag.time.max.ms must be positive")
        if self.replica_high_watermark_checkpoint_interval_ms <= 0:
            raise ConfigError("replica.high.watermark.checkpoint.interval.ms must be positive")
        if self.min_insync_replicas < 1:
            raise ConfigError("min.insync.replicas must be >= 1")
        if self.controlled_shutdown_max_retries < 0:
            raise ConfigError("controlled.shutdown.max.retries must be >= 0")
        if self.broker_heartbeat_interval_ms < 0:
            raise ConfigError("broker.heartbeat.interval.ms must be >= 0 (0: no heartbeats)")
        if self.controlled_shutdown_retry_backoff_ms < 0:
            raise ConfigError("controlled.shutdown.retry.backoff.ms must be >= 0")
        if self.producer_id_expiration_ms <= 0:
            raise ConfigError("producer.id.expiration.ms must be positive")
        if self.producer_id_expiration_check_interval_ms <= 0:
            raise ConfigError("producer.id.expiration.check.interval.ms must be positive")
        if not 1 <= self.producer_state_batches_retained <= 1024:
            raise ConfigError("producer.state.batches.retained must be in 1..1024")
        if self.log_cleanup_policy not in ("delete", "compact", "compact,delete", "delete,compact"):
            raise ConfigError(f"log.cleanup.policy={self.log_cleanup_policy!r}: "
                              "expected delete, compact or both")

    @property
    def effective_replica_lag_check_interval_ms(self) -> int:
        if self.replica_lag_check_interval_ms is not None:
            return max(1, self.replica_lag_check_interval_ms)
        return max(1, self.replica_lag_time_max_ms // 2)

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host_name}:{self.port}"

    @property
    def log_dir_list(self) -> list[str]:
        return [d.strip() for d in self.log_dirs.split(",") if d.strip()]

    @property
    def effective_log_retention_ms(self) -> int:
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        return self.log_retention_hours * 3600_000

    @property
    def effective_log_roll_ms(self) -> int:
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * 3600_000
