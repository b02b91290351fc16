"""The gateway's wording for illegal topic names; the rule itself is Kafka's, in
riverbed.topic_names (shared with the controller and the SDK)."""
from __future__ import annotations

from riverbed import topic_names
from riverbed.topic_names import MAX_TOPIC_NAME_LENGTH, TopicNameProblem, is_valid_topic_name

__all__ = ["topic_name_error", "is_valid_topic_name"]


def topic_name_error(name: str) -> str | None:
    """Why `name` is not a legal topic name, or None when it is."""
    problem = topic_names.topic_name_problem(name)
    if problem is None:
        return None
    if problem is TopicNameProblem.EMPTY:
        return "topic name is empty"
    if problem is TopicNameProblem.DOT_NAME:
        return f"topic name cannot be {name!r}"
    if problem is TopicNameProblem.TOO_LONG:
        return f"topic name is {len(name)} characters long, more than {MAX_TOPIC_NAME_LENGTH}"
    return f"topic name {name[:80]!r} has characters outside [a-zA-Z0-9._-]"
