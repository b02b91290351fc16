"""Client-side cluster metadata and the connection to the gateways.

`ClusterMetadata` is pure state: the newest METADATA answer (topics, partitions, leaders,
storage nodes, live gateways). `GatewayConnection` owns one `wire.client.Channel` (a DEALER) to
one gateway at a time; clients start from their `bootstrap` list, learn the live gateways from
every METADATA answer, and when their gateway stops answering they move to the next one.

Not thread-safe: the thread that owns a GatewayConnection (a producer's sender thread, a
consumer's or admin's caller) is the only one to use it. ClusterMetadata may be read from other
threads: `update` swaps whole dicts, so readers see either the old or the new snapshot.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Callable, Iterable, Sequence

from riverbed import errors, process_owner
from riverbed._proto.v1 import header_pb2, metadata_pb2
from riverbed.structs import BrokerInfo, GatewayInfo, PartitionInfo, TopicDescription, TopicPartition
from riverbed.wire.apis import api_name

__all__ = ["ClusterMetadata", "GatewayConnection", "DEFAULT_BOOTSTRAP", "default_bootstrap",
           "normalize_bootstrap", "resolve_bootstrap", "BOOTSTRAP_ENV", "require_gateway",
           "API_VERSION_AUTO_TIMEOUT_MS", "BOOTSTRAP_TIMEOUT_MS", "bootstrap_timeout"]

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
DEFAULT_BOOTSTRAP = "tcp://127.0.0.1:9092"
BOOTSTRAP_ENV = "RIVERBED_BOOTSTRAP"

Bootstrap = str | Sequence[str]
# kafka-python 2.x's api_version_auto_timeout_ms default: how long its clients' constructors
# waited for a bootstrap address to answer before raising NoBrokersAvailable.
API_VERSION_AUTO_TIMEOUT_MS = 2000
# kafka-python 3.0's bootstrap_timeout_ms default (its rename of the above): how long the
# kafka-python clients' constructors wait before raising KafkaTimeoutError.
BOOTSTRAP_TIMEOUT_MS = 30000


def bootstrap_timeout(configs: dict, default_ms: int = BOOTSTRAP_TIMEOUT_MS) -> tuple[int, str]:
    """The kafka-python clients' constructor check: (timeout ms, the setting's name) from
    `bootstrap_timeout_ms` (kafka-python 3.0) or its 2.x name `api_version_auto_timeout_ms`,
    popped from `configs`; both given is a KafkaConfigurationError, a value <= 0 too."""
    new = configs.pop("bootstrap_timeout_ms", None)
    old = configs.pop("api_version_auto_timeout_ms", None)
    if new is not None and old is not None:
        raise errors.KafkaConfigurationError(
            "bootstrap_timeout_ms and its kafka-python 2.x name api_version_auto_timeout_ms "
            "both given: give one")
    name = "api_version_auto_timeout_ms" if old is not None else "bootstrap_timeout_ms"
    value = old if old is not None else new if new is not None else default_ms
    if value <= 0:
        raise errors.KafkaConfigurationError(f"{name}={value}: must be > 0")
    return int(value), name


def default_bootstrap() -> list[str]:
    """RIVERBED_BOOTSTRAP (comma-separated) or the local fleet's gateway."""
    return normalize_bootstrap(os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP)


def resolve_bootstrap(bootstrap_servers: Bootstrap | None, bootstrap: Bootstrap | None
                      ) -> Bootstrap | None:
    """The clients' one spelling is `bootstrap_servers` (Kafka's); `bootstrap` is an alias.
    Both given and different is a ClientError; neither: None (RIVERBED_BOOTSTRAP, else the
    local fleet, applies later)."""
    if bootstrap is None:
        return bootstrap_servers
    if bootstrap_servers is not None and \
            normalize_bootstrap(bootstrap_servers) != normalize_bootstrap(bootstrap):
        raise errors.ClientError(f"bootstrap_servers={bootstrap_servers!r} and its alias "
                                 f"bootstrap={bootstrap!r} disagree: give one")
    return bootstrap


def normalize_bootstrap(bootstrap: str | Iterable[str] | None) -> list[str]:
    """Accept "host:port", "tcp://host:port", a comma-separated string or a list of them."""
    if bootstrap is None:
        return default_bootstrap()
    if isinstance(bootstrap, str):
        bootstrap = bootstrap.split(",")
    out: list[str] = []
    for item in bootstrap:
        item = item.strip()
        if not item:
            continue
        if "://" not in item:
            item = "tcp://" + item
        if item not in out:
            out.append(item)
    if not out:
        raise errors.ClientError("bootstrap lists no gateway endpoint")
    return out


class ClusterMetadata:
    """What the newest METADATA answer said. `version` counts updates (for waiters)."""

    def __init__(self) -> None:
        self.version = 0
        self.cluster_id = ""
        self.controller_id = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self.gateways: list[GatewayInfo] = []
        self._partitions: dict[str, tuple[PartitionInfo, ...]] = {}
        self._available: dict[str, tuple[int, ...]] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._internal: dict[str, bool] = {}
        self._topic_errors: dict[str, tuple[int, str]] = {}
        # topic -> number of partitions; swapped whole on update (the producer's hot path reads it)
        self.partition_counts: dict[str, int] = {}
        # called (no arguments) after every update, e.g. to drop caches derived from metadata
        self.listeners: list[Callable[[], None]] = []

    def update(self, resp: metadata_pb2.MetadataResponse, *, full: bool = False) -> None:
        """Merge an answer. With full=True (a request for all topics) forget topics it omits."""
        partitions = {} if full else dict(self._partitions)
        available = {} if full else dict(self._available)
        configs = {} if full else dict(self._configs)
        internal = {} if full else dict(self._internal)
        topic_errors = {} if full else dict(self._topic_errors)
        for t in resp.topics:
            if t.error_code != 0 and not t.partitions:
                topic_errors[t.name] = (t.error_code, t.error_message)
                partitions.pop(t.name, None)
                available.pop(t.name, None)
                continue
            topic_errors.pop(t.name, None)
            parts = tuple(sorted(
                (PartitionInfo(t.name, p.partition, p.leader, tuple(p.replicas), tuple(p.isr),
                               tuple(p.offline_replicas), p.leader_epoch, p.error_code,
                               tuple(p.eligible_leader_replicas), tuple(p.last_known_elr))
                 for p in t.partitions), key=lambda p: p.partition))
            partitions[t.name] = parts
            available[t.name] = tuple(p.partition for p in parts if p.leader >= 0)
            configs[t.name] = dict(t.configs)
            internal[t.name] = t.is_internal
        self._partitions, self._available = partitions, available
        self.partition_counts = {t: len(parts) for t, parts in partitions.items()}
        self._configs, self._internal, self._topic_errors = configs, internal, topic_errors
        self.brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.endpoint, b.rack or None)
                        for b in resp.brokers}
        if resp.gateways:
            self.gateways = [GatewayInfo(g.gateway_id, g.endpoint) for g in resp.gateways]
        self.controller_id = resp.controller_id
        if resp.cluster_id:
            self.cluster_id = resp.cluster_id
        self.version += 1
        for listener in self.listeners:
            listener()

    # -- queries ----------------------------------------------------------------------------
    def topics(self) -> set[str]:
        return set(self._partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        parts = self._partitions.get(topic)
        return None if parts is None else {p.partition for p in parts}

    def num_partitions(self, topic: str) -> int | None:
        parts = self._partitions.get(topic)
        return None if parts is None else len(parts)

    def available_partitions_for_topic(self, topic: str) -> tuple[int, ...]:
        return self._available.get(topic, ())

    def partition_info(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self._partitions.get(topic, ())

    def leader_for(self, tp: TopicPartition) -> int:
        """The leader's node id; -1 when unknown or none."""
        parts = self._partitions.get(tp.topic)
        if parts is None:
            return -1
        for p in parts:
            if p.partition == tp.partition:
                return p.leader
        return -1

    def topic_error(self, topic: str) -> tuple[int, str] | None:
        return self._topic_errors.get(topic)

    def describe(self, topic: str) -> TopicDescription | None:
        parts = self._partitions.get(topic)
        if parts is None:
            return None
        return TopicDescription(topic, parts, dict(self._configs.get(topic, {})),
                                self._internal.get(topic, False))


def _fail_fast_channel(endpoint: str, **kw):
    """The clients' gateway channel: a refused or lost connection ends the requests awaiting it
    at once (riverbed.wire.liveness), so the client moves to the next gateway."""
    from riverbed.wire.client import Channel
    return Channel(endpoint, fail_fast=True, **kw)


class GatewayConnection:
    """One Channel to one gateway at a time, with failover over bootstrap + learned gateways."""

    def __init__(self, bootstrap: str | Sequence[str] | None, *, client_id: str = "riverbed",
                 request_timeout_ms: int = 30000, channel_factory: Callable | None = None):
        self.bootstrap = normalize_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        if channel_factory is None:
            channel_factory = _fail_fast_channel
        self._channel_factory = channel_factory
        self._endpoints = list(self.bootstrap)
        self._index = 0
        self._channel = None
        self.metadata = ClusterMetadata()
        self.failovers = 0
        self._owner_pid = process_owner.current_pid()

    @property
    def endpoint(self) -> str:
        return self._endpoints[self._index]

    @property
    def channel(self):
        process_owner.check_owner(self._owner_pid, f"this client ({self.client_id})")
        if self._channel is None:
            self._channel = self._channel_factory(self.endpoint, client_id=self.client_id)
        return self._channel

    @property
    def endpoints(self) -> list[str]:
        return list(self._endpoints)

    def learn_gateways(self, gateways: Iterable[GatewayInfo]) -> None:
        """Known endpoints: the current one, the live gateways, then the bootstrap list."""
        current = self.endpoint
        ordered = [current]
        for e in [g.endpoint for g in gateways] + self.bootstrap:
            if e and e not in ordered:
                ordered.append(e)
        self._endpoints = ordered
        self._index = 0

    def failover(self, reason: str = "") -> str:
        """Drop the current channel (its pending requests are lost) and move to the next
        endpoint. Returns the new endpoint."""
        old = self.endpoint
        self.close()
        self._index = (self._index + 1) % len(self._endpoints)
        self.failovers += 1
        if len(self._endpoints) > 1:
            log.warning("gateway %s lost (%s); moving to %s", old, reason, self.endpoint)
        return self.endpoint

    def call(self, api: int, body, *, payloads: Sequence = (), timeout_ms: int | None = None,
             api_version: int = 0):
        """A request/response call; on no answer, tries each other known gateway once.
        Raises the envelope error, or NoBrokersAvailable (a RequestTimedOutError) naming the
        endpoints when no gateway answered."""
        process_owner.check_owner(self._owner_pid, f"this client ({self.client_id})")
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        tried = list(self._endpoints)
        failures: list[str] = []
        for _ in range(len(tried)):
            endpoint = self.endpoint
            try:
                channel = self.channel
            except errors.NetworkError as e:   # CURVE: no key known for this endpoint
                failures.append(f"{endpoint} ({e})")
                self.failover(str(e))
                continue
            try:
                return channel.call(api, body, payloads=payloads, timeout_ms=timeout_ms,
                                    api_version=api_version)
            except errors.RequestTimedOutError as e:
                state = getattr(self._channel, "connection_state", None)
                reason = getattr(self._channel, "down_reason", None) or \
                    f"no answer within {timeout_ms} ms" + (f"; {state}" if state else "")
                failures.append(f"{endpoint} ({reason})")
                self.failover(str(e))
        raise errors.NoBrokersAvailable(
            f"no gateway available for {api_name(api)}: tried {', '.join(failures)}")

    def fetch_metadata(self, topics: Iterable[str] | None = None, *,
                       allow_auto_topic_creation: bool = False,
                       timeout_ms: int | None = None) -> metadata_pb2.MetadataResponse:
        """METADATA for these topics (None = all); updates `metadata` and the gateway list."""
        names = sorted(set(topics)) if topics is not None else []
        req = metadata_pb2.MetadataRequest(topics=names,
                                           allow_auto_topic_creation=allow_auto_topic_creation)
        resp = self.call(ApiKey.METADATA, req, timeout_ms=timeout_ms).body
        self.metadata.update(resp, full=topics is None)
        if resp.gateways:
            self.learn_gateways(self.metadata.gateways)
        return resp

    def close(self) -> None:
        if self._channel is not None:
            try:
                self._channel.close()
            finally:
                self._channel = None


def require_gateway(conn: GatewayConnection, timeout_ms: int,
                    setting: str = "bootstrap_timeout_ms") -> None:
    """kafka-python's constructor check: return once some bootstrap endpoint of `conn` answers
    (a DESCRIBE_CLUSTER, which every gateway answers from its cache, to anyone), else raise
    NoBrokersAvailable (a KafkaTimeoutError) naming each endpoint and why, after at most
    `timeout_ms` in all (`setting` names where that came from, for the message).

    Probes on channels of its own (same endpoints, client id and channel factory: the same CURVE
    keys), closed before returning, so `conn` stays with the thread that owns it. An endpoint
    gets an even share of the time left; one that refuses the connection fails at once
    (riverbed.wire.liveness) and leaves its share to the next. Any answer counts, an error one
    (an ACL's refusal) too: a gateway is there."""
    if timeout_ms <= 0:
        raise errors.KafkaConfigurationError(f"{setting}={timeout_ms}: must be > 0")
    process_owner.check_owner(conn._owner_pid, f"this client ({conn.client_id})")
    deadline = time.monotonic() + timeout_ms / 1000.0
    endpoints = list(conn.bootstrap)
    failures: list[str] = []
    for i, endpoint in enumerate(endpoints):
        share_ms = int((deadline - time.monotonic()) * 1000 / (len(endpoints) - i))
        if share_ms <= 0:
            failures.append(f"{endpoint} (not tried: no time left)")
            continue
        try:
            channel = conn._channel_factory(endpoint, client_id=conn.client_id)
        except errors.RiverbedError as e:      # e.g. CURVE: no key known for this server
            failures.append(f"{endpoint} ({e})")
            continue
        try:
            channel.call(ApiKey.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest(),
                         timeout_ms=share_ms)
            return
        except (errors.RequestTimedOutError, errors.KafkaTimeoutError) as e:
            failures.append(f"{endpoint} ({getattr(channel, 'down_reason', None) or e})")
        except errors.KafkaError:
            return                  # an answer, if a refusal: a gateway is there
        finally:
            channel.close()
    raise errors.NoBrokersAvailable(
        f"Unable to bootstrap: no bootstrap address answered within {setting}={timeout_ms}: "
        f"tried {', '.join(failures)}")
