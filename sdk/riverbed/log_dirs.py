"""What `Admin.describe_log_dirs()` returns (Kafka's DescribeLogDirs, KIP-113): per storage
node, each log dir with its space, state and replicas."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ReplicaLogDirInfo", "LogDirInfo", "NodeLogDirs"]


@dataclass(frozen=True)
class ReplicaLogDirInfo:
    topic: str
    partition: int
    size_bytes: int            # -1 when its dir is offline
    offset_lag: int            # Kafka's offsetLag: high watermark - log end offset (>= 0)
    log_end_offset: int
    is_future: bool = False    # a copy being made by alter_replica_log_dirs
    role: str = ""             # "leader", "follower" or "" (not serving)


@dataclass(frozen=True)
class LogDirInfo:
    path: str
    state: str                 # "online", "offline" (an I/O error) or "low-space"
    error: str | None          # Kafka's error name (KAFKA_STORAGE_ERROR when offline)
    total_bytes: int           # of its file system; -1 unknown
    free_bytes: int
    size_bytes: int            # its replicas together
    replicas: tuple[ReplicaLogDirInfo, ...] = ()

    @property
    def online(self) -> bool:
        return self.state != "offline"


@dataclass(frozen=True)
class NodeLogDirs:
    node_id: int
    error: str | None          # the node could not be asked (e.g. BROKER_NOT_AVAILABLE)
    error_message: str = ""
    log_dirs: tuple[LogDirInfo, ...] = field(default_factory=tuple)


def from_response(resp) -> list[NodeLogDirs]:
    from riverbed import errors
    name = lambda code: None if code == 0 else errors.error_class(code).name  # noqa: E731
    out = []
    for b in resp.brokers:
        dirs = tuple(LogDirInfo(
            d.path, d.state, name(d.error_code), d.total_bytes, d.free_bytes, d.size_bytes,
            tuple(ReplicaLogDirInfo(r.topic, r.partition, r.size_bytes, r.offset_lag,
                                    r.log_end_offset, r.is_future, r.role) for r in d.replicas))
            for d in b.log_dirs)
        out.append(NodeLogDirs(b.broker_id, name(b.error_code), b.error_message, dirs))
    return out
