"""Plain value types shared by the Producer, Consumer and Admin clients (kafka-python's shapes).

Named tuples where kafka-python has them (TopicPartition, RecordMetadata, ConsumerRecord), so
code written for kafka-python unpacks them the same way; frozen dataclasses for admin results.
"""

import enum
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class TopicPartitionReplica(NamedTuple):
    """A partition's replica on one node (kafka-python's; alter_replica_log_dirs' keys)."""
    topic: str
    partition: int
    broker_id: int


class RecordMetadata(NamedTuple):
    """What a successful `Producer.send` resolves to. offset is -1 with acks=0."""
    topic: str
    partition: int
    offset: int
    timestamp: int          # ms: the record's create time, or the log-append time


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the next offset to consume, and free-form metadata (kafka-python)."""
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    """What `Consumer.offsets_for_times` finds: the first offset whose timestamp is >= the one
    asked for, that record's timestamp (ms) and the leader epoch it was written in (None when
    not known), as kafka-python 3.0's."""
    offset: int
    timestamp: int
    leader_epoch: int | None = None


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]] = ()


@dataclass(frozen=True)
class NewTopic:
    """A topic to create. -1 means the cluster default (num.partitions,
    default.replication.factor); replica_assignment maps partition -> replica node ids.

    kafka-python's keywords are accepted too: `topic_configs=` (same as `configs=`) and
    `replica_assignments=` (same as `replica_assignment=`); giving both spellings of one is a
    ValueError."""
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    replica_assignment: dict[int, Sequence[int]] = field(default_factory=dict)
    topic_configs: Mapping[str, str] | None = field(default=None, repr=False, compare=False)
    replica_assignments: Mapping[int, Sequence[int]] | None = field(default=None, repr=False,
                                                                     compare=False)

    def __post_init__(self) -> None:
        if self.topic_configs is not None:
            if self.configs:
                raise ValueError(f"NewTopic {self.name!r}: configs= and topic_configs= both given")
            object.__setattr__(self, "configs", dict(self.topic_configs))
            object.__setattr__(self, "topic_configs", None)
        if self.replica_assignments is not None:
            if self.replica_assignment:
                raise ValueError(f"NewTopic {self.name!r}: replica_assignment= and "
                                 "replica_assignments= both given")
            object.__setattr__(self, "replica_assignment", dict(self.replica_assignments))
            object.__setattr__(self, "replica_assignments", None)


@dataclass(frozen=True)
class NewPartitions:
    """kafka-python's: grow a topic to `total_count` partitions; `new_assignments` lists the
    replica node ids of each new partition (first = preferred leader), or None for the cluster's
    choice. Used as `Admin.create_partitions({topic: NewPartitions(6)})`."""
    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


class ConfigResourceType(enum.IntEnum):
    """kafka-python's (Kafka's numbers). Riverbed's configs are per topic: other resources are
    refused with InvalidRequestError (kafka-python 3.0's KafkaAdminClient: described empty)."""
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass
class ConfigResource:
    """kafka-python's: a resource whose configs to describe or alter. `resource_type` is a
    ConfigResourceType or its name ("TOPIC"); `configs` holds the values to set
    (alter_configs) or the names to describe (describe_configs; None = all)."""
    resource_type: ConfigResourceType | str | int
    name: str
    configs: Mapping[str, str | None] | Sequence[str] | None = None

    def __post_init__(self) -> None:
        rt = self.resource_type
        try:
            if isinstance(rt, str):
                self.resource_type = ConfigResourceType[rt.upper()]
            else:
                self.resource_type = ConfigResourceType(rt)
        except (KeyError, ValueError):
            raise ValueError(f"ConfigResource {self.name!r}: unknown resource_type {rt!r}; "
                             f"expected one of {[t.name for t in ConfigResourceType]}") from None


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as the cluster metadata describes it. leader is -1 when there is none.
    `elr`: eligible leader replicas (KIP-966), replicas outside the ISR that may still be
    elected cleanly; `last_known_elr`: those that were and no longer are (unclean shutdown)."""
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    leader_epoch: int = -1
    error_code: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionInfo, ...]
    configs: dict[str, str] = field(default_factory=dict)
    is_internal: bool = False

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True)
class BrokerInfo:
    """A storage node."""
    node_id: int
    host: str
    port: int
    endpoint: str = ""
    rack: str | None = None


@dataclass(frozen=True)
class GatewayInfo:
    gateway_id: int
    endpoint: str


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    gateways: tuple[GatewayInfo, ...]


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str
    is_default: bool = False


@dataclass(frozen=True)
class TransactionListing:
    """One transactional id as `Admin.list_transactions` finds it (Kafka's TransactionListing)."""
    transactional_id: str
    producer_id: int
    state: str                  # Kafka's names: Empty, Ongoing, PrepareCommit, CompleteCommit...
    coordinator_id: int = -1


@dataclass(frozen=True)
class TransactionDescription:
    """A transactional id's state at its coordinator (Kafka's TransactionDescription)."""
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int          # -1 when no transaction is open
    topic_partitions: tuple[TopicPartition, ...]
