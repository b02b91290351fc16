"""Consumer groups' public types and wire helpers, shared by the Consumer's GroupMembership and
the Admin client: the rebalance listener interface, group listings and descriptions, lag rows,
OffsetCommit request/response helpers and the assignment-strategy names. No I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from riverbed import errors
from riverbed._proto.v1 import offset_pb2
from riverbed.structs import OffsetAndMetadata, TopicPartition

__all__ = ["ConsumerRebalanceListener", "GroupListing", "MemberDescription", "GroupDescription",
           "PartitionLag", "offsets_to_commit_request", "commit_response_error",
           "normalize_offsets", "normalize_strategies", "STRATEGIES"]

STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")


# ------------------------------------------------------------------------------- public types

class ConsumerRebalanceListener:
    """Subclass and pass to `subscribe(listener=...)` (kafka-python's / Kafka's interface).

    on_partitions_revoked runs before the consumer rejoins (commit there for exactly-where-you-
    stopped semantics; the generation is still valid), on_partitions_assigned after SyncGroup,
    before positions are read from the committed offsets (so a seek there wins).
    on_partitions_lost runs instead of revoked when the membership was already gone (session
    expired): committing is pointless then. Exceptions from a listener are logged, not raised."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...] = ()
    subscribed_topics: tuple[str, ...] = ()
    topic_pattern: str = ""


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str                      # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    protocol: str                   # the assignment strategy chosen
    generation_id: int
    leader: str
    members: tuple[MemberDescription, ...] = field(default_factory=tuple)

    @property
    def is_empty(self) -> bool:
        return self.state in ("Empty", "Dead") and not self.members


@dataclass(frozen=True)
class PartitionLag:
    """One row of `riverbed groups describe` (kafka-consumer-groups.sh --describe)."""
    topic: str
    partition: int
    current_offset: int | None      # committed; None = nothing committed
    log_end_offset: int | None      # the high watermark; None = unknown
    consumer_id: str = ""
    host: str = ""
    client_id: str = ""

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.current_offset, 0)


# ------------------------------------------------------------------------------- wire helpers

def offsets_to_commit_request(group_id: str, generation_id: int, member_id: str,
                              offsets: Mapping[TopicPartition, OffsetAndMetadata]
                              ) -> offset_pb2.OffsetCommitRequest:
    req = offset_pb2.OffsetCommitRequest(group_id=group_id, generation_id=generation_id,
                                         member_id=member_id, retention_time_ms=-1)
    by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
    for tp, om in offsets.items():
        by_topic.setdefault(tp[0], []).append((tp[1], om))
    for topic in sorted(by_topic):
        t = req.topics.add(name=topic)
        for p, om in sorted(by_topic[topic], key=lambda x: x[0]):
            epoch = -1 if om.leader_epoch is None else om.leader_epoch
            t.partitions.add(partition_index=p, committed_offset=om.offset,
                             committed_leader_epoch=epoch, committed_metadata=om.metadata or "")
    return req


def commit_response_error(resp: offset_pb2.OffsetCommitResponse) -> errors.KafkaError | None:
    """The whole-request error, else the first per-partition error, else None."""
    if resp.error_code != 0:
        return errors.for_code(resp.error_code, resp.error_message)
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != 0:
                return errors.for_code(p.error_code, p.error_message, topic=t.name,
                                       partition=p.partition_index)
    return None


def normalize_offsets(offsets: Mapping) -> dict[TopicPartition, OffsetAndMetadata]:
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, v in offsets.items():
        tp = TopicPartition(*tp)
        if isinstance(v, OffsetAndMetadata):
            om = v
        elif isinstance(v, int):
            om = OffsetAndMetadata(v)
        elif isinstance(v, tuple):
            om = OffsetAndMetadata(*v)
        else:
            raise TypeError(f"offset for {tp}: expected int or OffsetAndMetadata, got {v!r}")
        if om.offset < 0:
            raise ValueError(f"offset for {tp} must be >= 0, got {om.offset}")
        out[tp] = om
    return out


def normalize_strategies(strategy: str | Sequence[str] | None) -> tuple[str, ...]:
    """"range" / ["sticky", "range"] / kafka-python class names (RangePartitionAssignor)."""
    if strategy is None:
        return ("range",)
    items = [strategy] if isinstance(strategy, str) else list(strategy)
    out: list[str] = []
    for s in items:
        name = getattr(s, "name", s)
        if not isinstance(name, str):
            raise ValueError(f"partition_assignment_strategy: {s!r} is not a strategy name")
        key = name.lower().replace("partitionassignor", "").replace("assignor", "").replace("_", "")
        key = {"roundrobin": "roundrobin", "round-robin": "roundrobin",
               "cooperativesticky": "cooperative-sticky"}.get(key, key)
        if key not in STRATEGIES:
            raise ValueError(f"partition_assignment_strategy {name!r}: expected one of {STRATEGIES}")
        if key not in out:
            out.append(key)
    if not out:
        raise ValueError("partition_assignment_strategy is empty")
    return tuple(out)
