"""The offset manager's typed config: Kafka's keys in snake_case. The keys it shares with the
group coordinator (host, ZooKeeper, __consumer_offsets, limits) are in
services.common.sharded_role.ShardedRoleConfig."""
from __future__ import annotations

from dataclasses import dataclass

from services.common.sharded_role import ShardedRoleConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetManagerConfig(ShardedRoleConfig):
    offset_manager_id: int = 0
    port: int = 9096
    # Kafka's bound on a commit's metadata string (OFFSET_METADATA_TOO_LARGE above it).
    offset_metadata_max_bytes: int = 4096
    # The acks of the shell's __consumer_offsets writes (offsets.commit.timeout.ms bounds them).
    offsets_commit_required_acks: int = -1

    def __post_init__(self) -> None:
        ShardedRoleConfig.__post_init__(self)
        if self.offset_metadata_max_bytes < 0:
            raise ValueError("offset.metadata.max.bytes must be >= 0")
        if self.offsets_retention_minutes < 1:
            raise ValueError("offsets.retention.minutes must be >= 1")
