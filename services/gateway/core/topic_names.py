"""Kafka's rule for topic names (`org.apache.kafka.common.internals.Topic.validate`)."""
from __future__ import annotations

import re

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+\Z")


def topic_name_error(name: str) -> str | None:
    """Why `name` is not a legal topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is {len(name)} characters long, more than {MAX_TOPIC_NAME_LENGTH}"
    if not _LEGAL.match(name):
        return f"topic name {name[:80]!r} has characters outside [a-zA-Z0-9._-]"
    return None


def is_valid_topic_name(name: str) -> bool:
    return topic_name_error(name) is None
