"""The transaction coordinator's typed config: Kafka's keys in snake_case. The keys every sharded
role shares (host, ZooKeeper, limits) are in services.common.sharded_role.ShardedServiceConfig;
the topic it shards is `__transaction_state` (Kafka's transaction.state.log.* keys)."""
from __future__ import annotations

from dataclasses import dataclass

from riverbed.coordinator.transaction_log import TRANSACTION_STATE_TOPIC
from services.common.sharded_role import ShardedServiceConfig, ShardTopic


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionCoordinatorConfig(ShardedServiceConfig):
    transaction_coordinator_id: int = 0
    port: int = 9097
    # __transaction_state (Kafka's keys and defaults): created by the first coordinator that finds
    # it missing, compacted; the replication factor is capped at the live storage nodes with a
    # WARNING, min.insync.replicas at the replication factor.
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104857600
    transaction_state_log_load_buffer_size: int = 5242880
    # Kafka's: the longest transaction.timeout.ms a producer may ask for (a longer one is refused
    # INVALID_TRANSACTION_TIMEOUT): bounds how long an abandoned transaction holds back the last
    # stable offset of its partitions.
    transaction_max_timeout_ms: int = 900000
    # How often open transactions are checked against their timeout (Kafka's
    # transaction.abort.timed.out.transaction.cleanup.interval.ms).
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    # A transactional id idle (Empty or completed) this long is forgotten (a tombstone in
    # __transaction_state), checked every transaction.remove.expired.transaction.cleanup.interval.ms.
    transactional_id_expiration_ms: int = 604800000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    # How long a __transaction_state write (acks=all) may take before it is failed (Kafka uses
    # request.timeout.ms; a separate key keeps writes shorter than a client's request).
    transaction_state_log_commit_timeout_ms: int = 5000
    # The pause between rounds of WRITE_TXN_MARKERS for partitions that answered a retriable
    # error (no leader, not enough replicas, a timeout); Kafka's retry.backoff.ms.
    transaction_marker_retry_backoff_ms: int = 100
    # Riverbed: an AddPartitionsToTxn/AddOffsetsToTxn that arrives while the id's previous
    # transaction is still completing (its markers being written) waits this long for it,
    # instead of CONCURRENT_TRANSACTIONS at once (which the client retries after a backoff):
    # the next transaction starts the moment the last one completed. 0: Kafka's answer at once.
    # At most transaction.max.parked.requests such requests wait at once (each holds one of
    # queued.max.requests' slots); past it they are answered at once.
    transaction_concurrent_request_max_wait_ms: int = 1000
    transaction_max_parked_requests: int = 250
    # Concurrent transactional ids per instance at most (each holds its metadata in memory):
    # an InitProducerId for a new id past it is answered COORDINATOR_NOT_AVAILABLE. Kafka has
    # no such bound; one keeps the cache finite.
    transaction_max_transactional_ids: int = 1000000

    def __post_init__(self) -> None:
        ShardedServiceConfig.__post_init__(self)
        for key, value in (
                ("transaction.state.log.num.partitions", self.transaction_state_log_num_partitions),
                ("transaction.state.log.replication.factor",
                 self.transaction_state_log_replication_factor),
                ("transaction.state.log.min.isr", self.transaction_state_log_min_isr),
                ("transaction.state.log.load.buffer.size",
                 self.transaction_state_log_load_buffer_size),
                ("transaction.max.timeout.ms", self.transaction_max_timeout_ms),
                ("transaction.abort.timed.out.transaction.cleanup.interval.ms",
                 self.transaction_abort_timed_out_transaction_cleanup_interval_ms),
                ("transactional.id.expiration.ms", self.transactional_id_expiration_ms),
                ("transaction.remove.expired.transaction.cleanup.interval.ms",
                 self.transaction_remove_expired_transaction_cleanup_interval_ms),
                ("transaction.state.log.commit.timeout.ms",
                 self.transaction_state_log_commit_timeout_ms),
                ("transaction.marker.retry.backoff.ms", self.transaction_marker_retry_backoff_ms),
                ("transaction.max.transactional.ids", self.transaction_max_transactional_ids)):
            if value < 1:
                raise ValueError(f"{key}={value}: must be positive")
        if self.transaction_concurrent_request_max_wait_ms < 0:
            raise ValueError("transaction.concurrent.request.max.wait.ms must be >= 0")
        if not 0 <= self.transaction_max_parked_requests < self.queued_max_requests:
            raise ValueError("transaction.max.parked.requests must be >= 0 and below "
                             "queued.max.requests")
        if self.transaction_state_log_segment_bytes < 14:
            raise ValueError("transaction.state.log.segment.bytes must be >= 14")

    def shard_topic(self) -> ShardTopic:
        return ShardTopic(TRANSACTION_STATE_TOPIC, self.transaction_state_log_num_partitions,
                          self.transaction_state_log_replication_factor,
                          self.transaction_state_log_segment_bytes,
                          self.transaction_state_log_commit_timeout_ms,
                          self.transaction_state_log_load_buffer_size,
                          min_insync_replicas=self.transaction_state_log_min_isr,
                          create_on_demand=True)
