"""Plain value types shared by the Producer, Consumer and Admin clients (kafka-python's shapes).

Named tuples where kafka-python has them (TopicPartition, RecordMetadata, ConsumerRecord), so
code written for kafka-python unpacks them the same way; frozen dataclasses for admin results.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Sequence


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """What a successful `Producer.send` resolves to. offset is -1 with acks=0."""
    topic: str
    partition: int
    offset: int
    timestamp: int          # ms: the record's create time, or the log-append time


class OffsetAndTimestamp(NamedTuple):
    """What `Consumer.offsets_for_times` finds: the first offset whose timestamp is >= the one
    asked for, and that record's timestamp (ms)."""
    offset: int
    timestamp: int


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
    default.replication.factor); replica_assignment maps partition -> replica node ids."""
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    replica_assignment: dict[int, Sequence[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as the cluster metadata describes it. leader is -1 when there is none."""
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    leader_epoch: int = -1
    error_code: int = 0


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
