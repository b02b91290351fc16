"""The controller's typed config: Kafka's keys in snake_case (docs/contracts.md, "Controller")."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    controller_id: int = 0
    host_name: str = "127.0.0.1"
    port: int = 9093
    pub_port: int = 9094
    # Prometheus text endpoint on host.name (http://host:port/metrics): 0 picks a free port, -1 none.
    metrics_port: int = 0
    zookeeper_connect: str = "127.0.0.1:2181/riverbed"
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    socket_request_max_bytes: int = 104857600
    message_max_bytes: int = 1000012
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    # How long one LEADER_AND_ISR / STOP_REPLICA attempt waits for the storage node's answer.
    controller_socket_timeout_ms: int = 30000
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    # Cluster default for the topic key of the same name: may a live replica that is not in the
    # ISR become leader when no ISR member is alive (losing committed records)? Kafka: false.
    unclean_leader_election_enable: bool = False
    # Cluster default for the topic key of the same name (the storage nodes' default must be
    # the same): with eligible leader replicas (KIP-966), replicas that leave the ISR while it
    # is below this stay eligible for a clean election (core/eligible_leaders.py).
    min_insync_replicas: int = 1
    # Track eligible leader replicas (ELR, LastKnownElr) in the partition states and elect from
    # them when no ISR member is live (Kafka 4's eligible.leader.replicas.version=1). false:
    # never populated (and dropped at each partition's next state write).
    eligible_leader_replicas_enable: bool = True
    # Move leadership back to preferred replicas when a node's share of partitions it prefers
    # but does not lead is above leader.imbalance.per.broker.percentage, checked every
    # leader.imbalance.check.interval.seconds (Kafka's defaults).
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    # A storage node not heard from (BROKER_HEARTBEAT, every broker.heartbeat.interval.ms of
    # the node) for this long is fenced: its partitions get new leaders at once, without
    # waiting for ZooKeeper to expire its session (Kafka's KRaft key; its default is 9000 ms
    # for a 2000 ms heartbeat). Ours is 2000 ms for a 500 ms heartbeat: four beats may be lost
    # or late before a node is counted out, and failover stays under 3 s. 0 = ZooKeeper only.
    broker_session_timeout_ms: int = 2000
    # A standby keeps a connection to the active controller; when it breaks and reconnects are
    # refused (nothing listens: the process is gone), the standby deletes that controller's
    # /controller and runs the election at once instead of waiting for ZooKeeper to expire the
    # dead session (zookeeper.session.timeout.ms plus a tick). A paused or cut-off controller
    # is still found only by its session. Safe either way: the election bumps
    # /controller_epoch, which fences every write of the old one.
    controller_fast_takeover_enable: bool = True
    # A standby keeps a copy of every topic znode (assignments, configs, partition states)
    # current through ZooKeeper watches, so that when elected it reads only the znodes that
    # changed since (shell/warm_topics.py) instead of all of them. Costs the standby one read
    # per partition-state write of the active controller, and ZooKeeper one watch per znode.
    controller_warm_standby_enable: bool = True

    def __post_init__(self) -> None:
        if not -1 <= self.metrics_port < 65536:
            raise ConfigError(f"metrics.port={self.metrics_port}: must be -1 (none), 0 (any "
                              "free port) or a TCP port")
        for name in ("port", "pub_port"):
            v = getattr(self, name)
            if not 0 < v < 65536:
                raise ValueError(f"{name.replace('_', '.')}={v}: not a TCP port")
        if self.num_partitions < 1:
            raise ValueError(f"num.partitions={self.num_partitions}: must be >= 1")
        if self.default_replication_factor < 1:
            raise ValueError("default.replication.factor must be >= 1")
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be >= 1")
        if self.offsets_topic_replication_factor < 1:
            raise ValueError("offsets.topic.replication.factor must be >= 1")
        if not 0 <= self.leader_imbalance_per_broker_percentage <= 100:
            raise ValueError("leader.imbalance.per.broker.percentage must be in [0, 100]")
        if self.broker_session_timeout_ms < 0:
            raise ValueError("broker.session.timeout.ms must be >= 0 (0: ZooKeeper only)")
        if self.leader_imbalance_check_interval_seconds < 1:
            raise ValueError("leader.imbalance.check.interval.seconds must be >= 1")
        if self.controller_socket_timeout_ms < 1:
            raise ValueError("controller.socket.timeout.ms must be >= 1")
        if self.min_insync_replicas < 1:
            raise ValueError("min.insync.replicas must be >= 1")

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host_name}:{self.port}"

    @property
    def pub_endpoint(self) -> str:
        return f"tcp://{self.host_name}:{self.pub_port}"
