"""The controller's cluster model: plain values the core decides over and the shell persists."""
from __future__ import annotations

from dataclasses import dataclass, field

NO_LEADER = -1
# ZooKeeper versions: `expected_version` NEW means "create; the znode must not exist".
NEW = -1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live storage node, from its ephemeral /brokers/ids/<id> registration."""
    node_id: int
    host: str
    port: int
    endpoint: str
    rack: str = ""
    # czxid of the registration znode (Kafka's broker epoch): a re-registration changes it, and
    # ALTER_PARTITION / CONTROLLED_SHUTDOWN name it so a stale incarnation is refused. -1 = unknown.
    epoch: int = -1
    # Replicas of this node whose log dir failed (KIP-112): offline until it registers without them.
    offline_partitions: frozenset[tuple[str, int]] = frozenset()
    # This registration follows an unclean shutdown of the node (KIP-966): it leaves every ELR.
    unclean_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class GatewayInfo:
    """A live gateway, from its ephemeral /riverbed/gateways/<id> registration."""
    gateway_id: int
    endpoint: str


@dataclass(frozen=True, slots=True)
class Reassignment:
    """One entry of /admin/reassign_partitions: move topic-partition to `replicas` (RAR)."""
    topic: str
    partition: int
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """/brokers/topics/<t>/partitions/<p>/state plus the znode's version (for fenced writes).
    `elr` and `last_known_elr`: eligible leader replicas (KIP-966, eligible_leaders.py)."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


@dataclass(slots=True)
class Topic:
    name: str
    assignment: dict[int, tuple[int, ...]]          # partition -> replicas (first = preferred)
    configs: dict[str, str] = field(default_factory=dict)  # /config/topics/<t> overrides
    assignment_version: int = 0                      # version of /brokers/topics/<t>
    config_version: int = 0                          # version of /config/topics/<t>
    states: dict[int, LeaderIsr] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0]) if self.assignment else 0


@dataclass(frozen=True, slots=True)
class TopicSnapshot:
    """One topic as read from ZooKeeper when a controller is elected (input to `replay`)."""
    name: str
    assignment: dict[int, tuple[int, ...]]
    configs: dict[str, str]
    assignment_version: int
    config_version: int
    states: dict[int, LeaderIsr]                     # missing partitions: no state znode yet


TopicPartition = tuple[str, int]

# Bounds one topic's size: every partition is a state znode written in one ZooKeeper
# transaction, and ZooKeeper refuses requests over jute.maxbuffer (1 MiB by default).
MAX_PARTITIONS_PER_TOPIC = 4096
OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})
