"""The gateway's metadata cache: the newest full snapshot from the active controller.

Inputs: `UpdateMetadataRequest` snapshots (PUB and push) and `MetadataResponse`s to the gateway's
own all-topics METADATA requests, both full snapshots stamped `(controller_epoch,
metadata_version)`; the live gateways (children of `/riverbed/gateways`). The cache keeps the
newest stamp: an older snapshot (a deposed controller's, or one delayed on the wire) is ignored.
Outputs: leader lookups for routing, and METADATA / DESCRIBE_CLUSTER answers.

Pure: time is passed in (`now_ms`) only to remember when the last snapshot arrived.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from riverbed._proto.v1 import common_pb2, errors_pb2, metadata_pb2

from services.gateway.core.topic_names import topic_name_error

E = errors_pb2.ErrorCode
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class Leader:
    """Where a partition's requests go."""
    node_id: int
    endpoint: str
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class NoLeader:
    """Why a partition cannot be routed: UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE."""
    error_code: int
    message: str


def broker_endpoint(broker: common_pb2.Broker) -> str:
    if broker.endpoint:
        return broker.endpoint
    return f"tcp://{broker.host}:{broker.port}"


class MetadataCache:
    """The newest snapshot of cluster metadata, plus the live gateways."""

    def __init__(self) -> None:
        self._stamp: tuple[int, int] | None = None     # (controller_epoch, metadata_version)
        self._controller_id = NO_LEADER
        self._cluster_id = ""
        self._brokers: dict[int, common_pb2.Broker] = {}
        self._topics: dict[str, metadata_pb2.TopicMetadata] = {}
        # topic -> partition -> PartitionMetadata, for O(1) routing
        self._partitions: dict[str, dict[int, metadata_pb2.PartitionMetadata]] = {}
        self._gateways: tuple[tuple[int, str], ...] = ()
        self._applied_at_ms: int | None = None
        self.snapshots_applied = 0
        self.snapshots_ignored = 0

    # -- inputs ---------------------------------------------------------------------------
    def apply_update(self, update: metadata_pb2.UpdateMetadataRequest, now_ms: int) -> bool:
        """Apply a pushed snapshot; False (and nothing changes) when it is older than ours."""
        return self._apply(update.controller_id, update.controller_epoch, update.metadata_version,
                           update.cluster_id, update.live_brokers, update.topics, now_ms)

    def apply_metadata_response(self, resp: metadata_pb2.MetadataResponse, now_ms: int) -> bool:
        """Apply the controller's answer to an all-topics METADATA request (a full snapshot).
        Answers to requests naming topics are partial: never pass them here."""
        return self._apply(resp.controller_id, resp.controller_epoch, resp.metadata_version,
                           resp.cluster_id, resp.brokers, resp.topics, now_ms)

    def _apply(self, controller_id: int, controller_epoch: int, metadata_version: int,
               cluster_id: str, brokers: Iterable[common_pb2.Broker],
               topics: Iterable[metadata_pb2.TopicMetadata], now_ms: int) -> bool:
        stamp = (controller_epoch, metadata_version)
        # The same stamp again is the same snapshot (PUB repeats it every second): accepting it
        # only refreshes the age.
        if self._stamp is not None and stamp < self._stamp:
            self.snapshots_ignored += 1
            return False
        self._applied_at_ms = now_ms
        if stamp == self._stamp:
            return True
        self._stamp = stamp
        self._controller_id = controller_id
        self._cluster_id = cluster_id
        self._brokers = {b.node_id: _copy(common_pb2.Broker, b) for b in brokers}
        self._topics = {}
        self._partitions = {}
        for t in topics:
            if t.error_code != E.NONE or topic_name_error(t.name) is not None:
                continue  # a topic the controller reports as broken is unknown to clients
            tm = _copy(metadata_pb2.TopicMetadata, t)
            self._topics[t.name] = tm
            self._partitions[t.name] = {p.partition: p for p in tm.partitions}
        self.snapshots_applied += 1
        return True

    def set_gateways(self, gateways: Iterable[tuple[int, str]]) -> None:
        """The live gateways (id, endpoint), from /riverbed/gateways."""
        self._gateways = tuple(sorted(set(gateways)))

    def set_controller_hint(self, controller_id: int) -> None:
        """The controller id from /controller, used until a snapshot names one."""
        if self._stamp is None:
            self._controller_id = controller_id

    # -- queries --------------------------------------------------------------------------
    @property
    def stamp(self) -> tuple[int, int] | None:
        return self._stamp

    @property
    def controller_id(self) -> int:
        return self._controller_id

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def gateways(self) -> tuple[tuple[int, str], ...]:
        return self._gateways

    @property
    def topic_names(self) -> list[str]:
        return list(self._topics)

    def has_topic(self, name: str) -> bool:
        return name in self._topics

    def partition_count(self, name: str) -> int | None:
        """How many partitions `name` has, or None for an unknown topic."""
        parts = self._partitions.get(name)
        return None if parts is None else len(parts)

    def is_stale(self, now_ms: int, max_age_ms: int) -> bool:
        """True with no snapshot yet, or when the last one is older than max_age_ms."""
        return self._applied_at_ms is None or now_ms - self._applied_at_ms >= max_age_ms

    def node_endpoints(self) -> frozenset[str]:
        """Endpoints of the live storage nodes in the snapshot."""
        return frozenset(broker_endpoint(b) for b in self._brokers.values())

    def endpoint_of(self, node_id: int) -> str | None:
        b = self._brokers.get(node_id)
        return None if b is None else broker_endpoint(b)

    def leader_for(self, topic: str, partition: int) -> Leader | NoLeader:
        parts = self._partitions.get(topic)
        if parts is None:
            return NoLeader(E.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {topic!r}")
        pm = parts.get(partition)
        if pm is None:
            return NoLeader(E.UNKNOWN_TOPIC_OR_PARTITION,
                            f"topic {topic!r} has no partition {partition} "
                            f"({len(parts)} partitions)")
        if pm.leader == NO_LEADER:
            return NoLeader(E.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
        endpoint = self.endpoint_of(pm.leader)
        if endpoint is None:
            return NoLeader(E.LEADER_NOT_AVAILABLE,
                            f"{topic}-{partition}'s leader {pm.leader} is not a live node")
        return Leader(pm.leader, endpoint, pm.leader_epoch)

    # -- answers --------------------------------------------------------------------------
    def metadata_response(self, request: metadata_pb2.MetadataRequest
                          ) -> tuple[metadata_pb2.MetadataResponse, list[str]]:
        """The answer from the cache, and the valid requested topics the cache does not know
        (those got UNKNOWN_TOPIC_OR_PARTITION; the caller may refresh or forward, then ask
        again). Requested topics keep the request's order; duplicates are answered once."""
        resp = self._response_skeleton()
        missing: list[str] = []
        if not request.topics:
            for name in sorted(self._topics):
                resp.topics.append(self._topics[name])
            return resp, missing
        seen: set[str] = set()
        for name in request.topics:
            if name in seen:
                continue
            seen.add(name)
            why = topic_name_error(name)
            if why is not None:
                resp.topics.append(metadata_pb2.TopicMetadata(
                    name=name, error_code=E.INVALID_TOPIC_EXCEPTION, error_message=why))
            elif name in self._topics:
                resp.topics.append(self._topics[name])
            else:
                missing.append(name)
                resp.topics.append(metadata_pb2.TopicMetadata(
                    name=name, error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"unknown topic {name!r}"))
        return resp, missing

    def _response_skeleton(self) -> metadata_pb2.MetadataResponse:
        resp = metadata_pb2.MetadataResponse(
            controller_id=self._controller_id, cluster_id=self._cluster_id,
            metadata_version=self._stamp[1] if self._stamp else 0,
            controller_epoch=self._stamp[0] if self._stamp else 0)
        resp.brokers.extend(self._brokers[i] for i in sorted(self._brokers))
        resp.gateways.extend(self.gateway_infos())
        return resp

    def gateway_infos(self) -> list[metadata_pb2.GatewayInfo]:
        return [metadata_pb2.GatewayInfo(gateway_id=i, endpoint=e) for i, e in self._gateways]

    def describe_cluster(self) -> metadata_pb2.DescribeClusterResponse:
        resp = metadata_pb2.DescribeClusterResponse(
            error_code=E.NONE, cluster_id=self._cluster_id, controller_id=self._controller_id)
        resp.brokers.extend(self._brokers[i] for i in sorted(self._brokers))
        resp.gateways.extend(self.gateway_infos())
        return resp

    def with_gateways(self, resp: metadata_pb2.MetadataResponse) -> metadata_pb2.MetadataResponse:
        """A controller's METADATA answer with this gateway's view of the live gateways."""
        out = _copy(metadata_pb2.MetadataResponse, resp)
        del out.gateways[:]
        out.gateways.extend(self.gateway_infos())
        return out


def _copy(cls, msg):
    out = cls()
    out.CopyFrom(msg)
    return out


def missing_topics(names: Sequence[str], cache: MetadataCache) -> list[str]:
    """The valid names in `names` that the cache does not know, first occurrence order."""
    out: list[str] = []
    for n in names:
        if n not in out and topic_name_error(n) is None and not cache.has_topic(n):
            out.append(n)
    return out
