"""The Admin client: topics, configs, partitions and the cluster (kafka-python's KafkaAdminClient).

Every call is synchronous over one gateway (which forwards topic admin to the active
controller). Per-topic errors raise the matching riverbed.errors class naming the topic;
retriable ones (NOT_CONTROLLER during a controller move, timeouts) are retried with a
metadata refresh and backoff until request_timeout_ms.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Iterable, Sequence

from riverbed import errors
from riverbed._proto.v1 import controller_pb2, header_pb2, metadata_pb2
from riverbed.cluster import GatewayConnection
from riverbed.structs import (
    BrokerInfo,
    ClusterDescription,
    ConfigEntry,
    GatewayInfo,
    NewTopic,
    TopicDescription,
)

__all__ = ["Admin", "AdminClient", "KafkaAdminClient"]

ApiKey = header_pb2.ApiKey


class Admin:
    def __init__(self, bootstrap: str | Sequence[str] | None = None, *,
                 client_id: str | None = None, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, bootstrap_servers: str | Sequence[str] | None = None,
                 _channel_factory: Callable | None = None):
        if bootstrap is None:
            bootstrap = bootstrap_servers
        self.client_id = client_id or f"riverbed-admin-{os.getpid()}"
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._conn = GatewayConnection(bootstrap, client_id=self.client_id,
                                       request_timeout_ms=request_timeout_ms,
                                       channel_factory=_channel_factory)

    # -- plumbing ---------------------------------------------------------------------------------
    def _call(self, api: int, body):
        """Call with retries of retriable envelope errors until request_timeout_ms."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        while True:
            try:
                return self._conn.call(api, body, timeout_ms=self.request_timeout_ms).body
            except errors.KafkaError as e:
                if not e.retriable or time.monotonic() >= deadline:
                    raise
            time.sleep(self.retry_backoff_ms / 1000.0)

    def _check_results(self, results, *, retry_codes: Iterable[int] = ()) -> list[str]:
        """Raise the first non-retriable per-topic error; return names to retry."""
        retry = []
        for r in results:
            if r.error_code == 0:
                continue
            err = errors.for_code(r.error_code, r.error_message, topic=r.name)
            if err.retriable:
                retry.append(r.name)
                continue
            raise err
        return retry

    # -- topics -----------------------------------------------------------------------------------
    def create_topics(self, new_topics: Sequence[NewTopic], timeout_ms: int | None = None,
                      validate_only: bool = False) -> None:
        """Create topics; raises e.g. TopicAlreadyExistsError / InvalidReplicationFactorError
        naming the topic."""
        req = controller_pb2.CreateTopicsRequest(
            timeout_ms=timeout_ms if timeout_ms is not None else self.request_timeout_ms,
            validate_only=validate_only)
        for nt in new_topics:
            t = req.topics.add(name=nt.name, num_partitions=nt.num_partitions,
                               replication_factor=nt.replication_factor)
            t.configs.update({k: str(v) for k, v in (nt.configs or {}).items()})
            for p, replicas in (nt.replica_assignment or {}).items():
                t.assignment[int(p)].replicas.extend(replicas)
        resp = self._call(ApiKey.CREATE_TOPICS, req)
        retry = self._check_results(resp.topics)
        if retry:
            raise errors.for_code(next(r.error_code for r in resp.topics if r.name == retry[0]),
                                  "", topic=retry[0])

    def delete_topics(self, topics: Sequence[str], timeout_ms: int | None = None) -> None:
        req = controller_pb2.DeleteTopicsRequest(
            names=list(topics),
            timeout_ms=timeout_ms if timeout_ms is not None else self.request_timeout_ms)
        resp = self._call(ApiKey.DELETE_TOPICS, req)
        self._check_results(resp.topics)

    def create_partitions(self, topic: str, new_total: int, *,
                          assignment: Sequence[Sequence[int]] | None = None,
                          validate_only: bool = False) -> None:
        """Grow `topic` to new_total partitions (only increases: InvalidPartitionsError)."""
        req = controller_pb2.CreatePartitionsRequest(timeout_ms=self.request_timeout_ms,
                                                     validate_only=validate_only)
        t = req.topics.add(name=topic, count=new_total)
        for replicas in assignment or ():
            t.assignment.add(replicas=list(replicas))
        resp = self._call(ApiKey.CREATE_PARTITIONS, req)
        self._check_results(resp.topics)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        self._conn.fetch_metadata(None)
        meta = self._conn.metadata
        return sorted(t for t in meta.topics()
                      if include_internal or not meta.describe(t).is_internal)  # type: ignore[union-attr]

    def describe_topics(self, topics: Sequence[str] | None = None) -> list[TopicDescription]:
        """Partitions (leader, replicas, isr) and config overrides. Unknown topics raise
        UnknownTopicOrPartitionError naming the topic."""
        req = metadata_pb2.MetadataRequest(topics=list(topics or ()),
                                           allow_auto_topic_creation=False)
        resp = self._call(ApiKey.METADATA, req)
        self._conn.metadata.update(resp, full=not topics)
        out = []
        by_name = {t.name: t for t in resp.topics}
        names = list(topics) if topics else sorted(by_name)
        for name in names:
            t = by_name.get(name)
            if t is None:
                raise errors.UnknownTopicOrPartitionError("not in metadata", topic=name)
            if t.error_code != 0 and not t.partitions:
                raise errors.for_code(t.error_code, t.error_message, topic=name)
            out.append(self._conn.metadata.describe(name))
        return out

    def describe_configs(self, topic: str, include_defaults: bool = True) -> dict[str, ConfigEntry]:
        req = controller_pb2.DescribeConfigsRequest(topics=[topic], include_defaults=include_defaults)
        resp = self._call(ApiKey.DESCRIBE_CONFIGS, req)
        for r in resp.results:
            if r.topic == topic:
                if r.error_code != 0:
                    raise errors.for_code(r.error_code, r.error_message, topic=topic)
                return {e.name: ConfigEntry(e.name, e.value, e.is_default) for e in r.entries}
        raise errors.UnknownTopicOrPartitionError("no configs returned", topic=topic)

    def alter_configs(self, topic: str, set: dict[str, str] | None = None,  # noqa: A002
                      delete: Iterable[str] = (), validate_only: bool = False) -> None:
        req = controller_pb2.AlterConfigsRequest(validate_only=validate_only)
        t = req.topics.add(name=topic)
        t.set.update({k: str(v) for k, v in (set or {}).items()})
        t.delete.extend(delete)
        resp = self._call(ApiKey.ALTER_CONFIGS, req)
        self._check_results(resp.topics)

    def describe_cluster(self) -> ClusterDescription:
        resp = self._call(ApiKey.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest())
        if resp.error_code != 0:
            raise errors.for_code(resp.error_code, resp.error_message)
        return ClusterDescription(
            resp.cluster_id, resp.controller_id,
            tuple(BrokerInfo(b.node_id, b.host, b.port, b.endpoint, b.rack or None)
                  for b in resp.brokers),
            tuple(GatewayInfo(g.gateway_id, g.endpoint) for g in resp.gateways))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


AdminClient = Admin
KafkaAdminClient = Admin
