"""LogConfig: Kafka's topic-level log keys (field = key in snake_case) with Kafka's defaults."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from services.common import config as _config

LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30                 # segment.bytes: 1 GiB
    segment_ms: int = 7 * 24 * 3600 * 1000       # segment.ms: 7 days
    segment_jitter_ms: int = 0                   # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes: preallocated, trimmed on roll
    index_interval_bytes: int = 4096             # index.interval.bytes
    flush_messages: int = LONG_MAX               # flush.messages: leave flushing to the OS
    flush_ms: int = LONG_MAX                     # flush.ms
    retention_ms: int = 7 * 24 * 3600 * 1000     # retention.ms (-1: keep forever)
    retention_bytes: int = -1                    # retention.bytes (-1: no limit)
    file_delete_delay_ms: int = 60000            # file.delete.delay.ms
    cleanup_policy: str = "delete"               # cleanup.policy: delete | compact | compact,delete
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms: tombstones kept this long
    min_cleanable_dirty_ratio: float = 0.5       # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0               # min.compaction.lag.ms
    max_message_bytes: int = 1000012             # max.message.bytes: largest batch accepted
    message_timestamp_type: str = "CreateTime"   # message.timestamp.type: CreateTime | LogAppendTime

    def __post_init__(self) -> None:
        policies = set(self.policies)
        if not policies or not policies <= {"delete", "compact"}:
            raise ValueError(f"cleanup.policy {self.cleanup_policy!r}: use delete, compact or both")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message.timestamp.type {self.message_timestamp_type!r}")
        if self.segment_bytes < 14 or self.segment_index_bytes < 12 or self.index_interval_bytes < 0:
            raise ValueError("segment.bytes / segment.index.bytes / index.interval.bytes too small")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError("min.cleanable.dirty.ratio must be in [0, 1]")

    @cached_property
    def policies(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.cleanup_policy.split(",") if p.strip())

    @cached_property
    def compact(self) -> bool:
        return "compact" in self.policies

    @cached_property
    def delete(self) -> bool:
        return "delete" in self.policies

    @cached_property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_topic_configs(cls, defaults: Mapping[str, str] | LogConfig | None = None,
                           overrides: Mapping[str, str] | None = None) -> LogConfig:
        """Build from Kafka keys: `defaults` (a LogConfig or key map), then topic `overrides`."""
        if isinstance(defaults, LogConfig):
            defaults = _config.to_properties(defaults)
        return _config.build(cls, defaults or {}, overrides or {})
