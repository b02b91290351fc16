"""Topic-level config keys (Kafka's `LogConfig`): names, defaults, validation.

`validate(configs)` returns None or a message for people; the caller answers INVALID_CONFIG.
Defaults are Kafka's; a storage node applies its own `log.*` defaults under a topic's overrides,
so the defaults here are only what DESCRIBE_CONFIGS reports for keys a topic does not override.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


def _integer(lo: int, hi: int) -> Callable[[str], str | None]:
    def check(raw: str) -> str | None:
        try:
            v = int(raw.strip())
        except ValueError:
            return "not an integer"
        if not lo <= v <= hi:
            return f"must be in [{lo}, {hi}]"
        return None
    return check


def _ratio(raw: str) -> str | None:
    try:
        v = float(raw.strip())
    except ValueError:
        return "not a number"
    if not 0.0 <= v <= 1.0:      # NaN fails this too
        return "must be in [0, 1]"
    return None


def _boolean(raw: str) -> str | None:
    return None if raw.strip().lower() in ("true", "false") else "must be true or false"


def _one_of(*choices: str) -> Callable[[str], str | None]:
    def check(raw: str) -> str | None:
        return None if raw.strip() in choices else f"must be one of {', '.join(choices)}"
    return check


def _cleanup_policy(raw: str) -> str | None:
    parts = [p.strip() for p in raw.split(",")]
    if not parts or any(p not in ("delete", "compact") for p in parts) or len(set(parts)) != len(parts):
        return "must be delete, compact or compact,delete"
    return None


# key -> (validator, Kafka's default)
TOPIC_CONFIGS: dict[str, tuple[Callable[[str], str | None], str]] = {
    "segment.bytes": (_integer(14, INT_MAX), "1073741824"),
    "segment.ms": (_integer(1, LONG_MAX), "604800000"),
    "segment.jitter.ms": (_integer(0, LONG_MAX), "0"),
    "segment.index.bytes": (_integer(4, INT_MAX), "10485760"),
    "index.interval.bytes": (_integer(0, INT_MAX), "4096"),
    "flush.messages": (_integer(1, LONG_MAX), str(LONG_MAX)),
    "flush.ms": (_integer(0, LONG_MAX), str(LONG_MAX)),
    "retention.ms": (_integer(-1, LONG_MAX), "604800000"),
    "retention.bytes": (_integer(-1, LONG_MAX), "-1"),
    "file.delete.delay.ms": (_integer(0, LONG_MAX), "60000"),
    "cleanup.policy": (_cleanup_policy, "delete"),
    "delete.retention.ms": (_integer(0, LONG_MAX), "86400000"),
    "min.cleanable.dirty.ratio": (_ratio, "0.5"),
    "max.message.bytes": (_integer(0, INT_MAX), "1000012"),
    "min.insync.replicas": (_integer(1, INT_MAX), "1"),
    "unclean.leader.election.enable": (_boolean, "false"),
    "message.timestamp.type": (_one_of("CreateTime", "LogAppendTime"), "CreateTime"),
    "min.compaction.lag.ms": (_integer(0, LONG_MAX), "0"),
}


def validate(configs: Mapping[str, str]) -> str | None:
    """None when every key is a known topic-level config with a valid value, else why not."""
    for key in sorted(configs):
        spec = TOPIC_CONFIGS.get(key)
        if spec is None:
            return f"unknown topic config {key!r}"
        value = configs[key]
        if not isinstance(value, str):
            return f"{key}: value must be a string"
        problem = spec[0](value)
        if problem is not None:
            return f"{key}={value!r}: {problem}"
    return None


def normalise(configs: Mapping[str, str]) -> dict[str, str]:
    """Validated values as stored: surrounding spaces removed."""
    return {k: v.strip() for k, v in configs.items()}


def default(key: str) -> str:
    return TOPIC_CONFIGS[key][1]
