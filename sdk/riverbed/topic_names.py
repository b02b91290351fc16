"""Kafka's rule for topic names (`org.apache.kafka.common.internals.Topic.validate`).

A legal name is 1..249 characters from [a-zA-Z0-9._-] and is neither "." nor "..". This module
owns the rule; each caller words the problem for its own answers (the controller and the gateway
both reply INVALID_TOPIC_EXCEPTION, each with its own message).
"""
from __future__ import annotations

import enum
import re

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


class TopicNameProblem(enum.Enum):
    EMPTY = "empty"
    DOT_NAME = "dot name"                  # "." or "..": they mean directories
    TOO_LONG = "too long"                  # more than MAX_TOPIC_NAME_LENGTH characters
    ILLEGAL_CHARACTERS = "illegal characters"   # anything outside [a-zA-Z0-9._-]


def topic_name_problem(name: str) -> TopicNameProblem | None:
    """None for a legal topic name, else what is wrong with it (checked in this order)."""
    if not name:
        return TopicNameProblem.EMPTY
    if name in (".", ".."):
        return TopicNameProblem.DOT_NAME
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return TopicNameProblem.TOO_LONG
    if not _LEGAL.fullmatch(name):
        return TopicNameProblem.ILLEGAL_CHARACTERS
    return None


def is_valid_topic_name(name: str) -> bool:
    return topic_name_problem(name) is None
