"""Inputs to the controller core (what happened). Frozen dataclasses; no I/O."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.controller.core.model import NEW, BrokerInfo, GatewayInfo, Reassignment, TopicSnapshot


@dataclass(frozen=True, slots=True)
class ElectedAsController:
    """The shell won /controller and bumped /controller_epoch; this is everything it read."""
    controller_epoch: int
    cluster_id: str
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicSnapshot, ...]
    pending_deletions: tuple[str, ...] = ()          # children of /admin/delete_topics
    # /admin/reassign_partitions: reassignments a predecessor began (or tools asked for), and
    # the znode's version (NEW = absent). The new controller finishes them.
    reassignments: tuple[Reassignment, ...] = ()
    reassignments_version: int = NEW
    gateways: tuple[GatewayInfo, ...] = ()


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


@dataclass(frozen=True, slots=True)
class GatewaysChanged:
    """The full set of registrations under /riverbed/gateways."""
    gateways: tuple[GatewayInfo, ...]


@dataclass(frozen=True, slots=True)
class ReassignmentsZnodeChanged:
    """/admin/reassign_partitions as read now (under the shell's lock, so after every write of
    ours): its entries (unreadable JSON: none) and version (NEW = absent)."""
    reassignments: tuple[Reassignment, ...]
    zk_version: int


@dataclass(frozen=True, slots=True)
class PreferredElectionZnodeChanged:
    """/admin/preferred_replica_election as read now: (topic, partition) pairs and the version
    (NEW = absent)."""
    partitions: tuple[tuple[str, int], ...]
    zk_version: int


Event = (ElectedAsController | LeadershipLost | BrokersChanged | RequestReceived
         | GatewaysChanged | ReassignmentsZnodeChanged | PreferredElectionZnodeChanged)
