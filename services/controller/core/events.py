"""Inputs to the controller core (what happened). Frozen dataclasses; no I/O."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.controller.core.model import BrokerInfo, TopicSnapshot


@dataclass(frozen=True, slots=True)
class ElectedAsController:
    """The shell won /controller and bumped /controller_epoch; this is everything it read."""
    controller_epoch: int
    cluster_id: str
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicSnapshot, ...]
    pending_deletions: tuple[str, ...] = ()          # children of /admin/delete_topics


@dataclass(frozen=True, slots=True)
class LeadershipLost:
    """Session SUSPENDED/LOST, /controller gone, or a fenced write failed: stop acting."""
    reason: str


@dataclass(frozen=True, slots=True)
class BrokersChanged:
    """The full set of registrations under /brokers/ids (children watch fired)."""
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A request from the ROUTER: `api` is a header_pb2.ApiKey, `body` the decoded protobuf."""
    api: int
    body: Any


Event = ElectedAsController | LeadershipLost | BrokersChanged | RequestReceived
