"""Outputs of the controller core (what to do). The shell performs them in list order.

ZooKeeper writes (`ZkWrite` subclasses) returned by one `handle` call are performed as ONE
ZooKeeper transaction together with a version check on /controller_epoch (fencing); if it fails
the shell must not perform anything after it and feeds `LeadershipLost` back (the core has already
applied the writes to its model; a controller that resigns re-reads everything when re-elected).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.controller.core.model import LeaderIsr, Reassignment


class ZkWrite:
    """Marker base: a durable change of ZooKeeper state."""
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class WriteTopicAssignment(ZkWrite):
    """/brokers/topics/<topic> = {"version":1,"partitions":{"0":[1,2]}}; create if NEW."""
    topic: str
    assignment: dict[int, tuple[int, ...]]
    expected_version: int


@dataclass(frozen=True, slots=True)
class WriteTopicConfig(ZkWrite):
    """/config/topics/<topic> = {"version":1,"config":{...}}; create if NEW."""
    topic: str
    configs: dict[str, str]
    expected_version: int


@dataclass(frozen=True, slots=True)
class WritePartitionState(ZkWrite):
    """/brokers/topics/<t>/partitions/<p>/state; create (with the parents) if NEW."""
    topic: str
    partition: int
    state: LeaderIsr
    expected_version: int


@dataclass(frozen=True, slots=True)
class MarkTopicForDeletion(ZkWrite):
    """Create /admin/delete_topics/<topic>."""
    topic: str


@dataclass(frozen=True, slots=True)
class DeleteTopicZnodes(ZkWrite):
    """Remove the topic's state, partitions, assignment, config and admin deletion znodes."""
    topic: str
    partitions: tuple[int, ...]
    has_config: bool
    marked_for_deletion: bool


@dataclass(frozen=True, slots=True)
class WriteReassignments(ZkWrite):
    """/admin/reassign_partitions = the reassignments still in progress (Kafka's JSON); create
    if `expected_version` is NEW, delete the znode when `reassignments` is empty."""
    reassignments: tuple[Reassignment, ...]
    expected_version: int


@dataclass(frozen=True, slots=True)
class DeletePreferredElection(ZkWrite):
    """Remove /admin/preferred_replica_election (its election is done), at this version."""
    expected_version: int


@dataclass(frozen=True, slots=True)
class SendLeaderAndIsr:
    """Send a controller_pb2.LeaderAndIsrRequest to a storage node; retry while it is alive."""
    node_id: int
    request: Any


@dataclass(frozen=True, slots=True)
class SendStopReplica:
    """Send a controller_pb2.StopReplicaRequest to a storage node; retry while it is alive."""
    node_id: int
    request: Any


@dataclass(frozen=True, slots=True)
class PublishMetadata:
    """Publish a metadata_pb2.UpdateMetadataRequest (a full snapshot) on the PUB socket."""
    update: Any


@dataclass(frozen=True, slots=True)
class Respond:
    """The answer to the request being handled (always last in the list): a reply body, or
    `error` (a riverbed.errors.KafkaError) for an envelope error such as NOT_CONTROLLER."""
    body: Any
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class Resign:
    """Give up /controller (delete it if ours) and run the election again."""
    reason: str


Effect = (WriteTopicAssignment | WriteTopicConfig | WritePartitionState | MarkTopicForDeletion
          | DeleteTopicZnodes | WriteReassignments | DeletePreferredElection | SendLeaderAndIsr | SendStopReplica | PublishMetadata | Respond
          | Resign)
