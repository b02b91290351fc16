"""Riverbed's Admin client: topics, configs, partitions, records, groups, transactions, ACLs
and the cluster.

Import it as `riverbed.admin.Admin` (or `riverbed.Admin`). kafka-python 3.0's KafkaAdminClient
is a facade over it (riverbed.admin.kafka_python); this module never imports that one.

Every call is synchronous over one gateway (which forwards topic admin to the active
controller). Per-topic errors raise the matching riverbed.errors class naming the topic (the
first one; UNKNOWN_TOPIC_OR_PARTITION for a topic that is not there too); retriable errors of
a whole request (NOT_CONTROLLER during a controller move, timeouts) are retried with a
metadata refresh and backoff until request_timeout_ms.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterable, Mapping, Sequence, overload

from riverbed import errors
from riverbed._proto.v1 import (
    acl_pb2,
    admin_ops_pb2,
    common_pb2,
    controller_pb2,
    delete_records_pb2,
    group_pb2,
    header_pb2,
    list_offsets_pb2,
    metadata_pb2,
    offset_pb2,
    transaction_pb2,
)
from riverbed import list_offsets, log_dirs
from riverbed.acl_bindings import MATCH_EVERY_ACL, acl_from_pb, acl_to_pb, filter_to_pb
from riverbed.cluster import GatewayConnection, resolve_bootstrap
from riverbed.log_dirs import NodeLogDirs
from riverbed.transactions import RETRIABLE, PreparedTxnState, classify, error_for
from riverbed.wire.client import secure_channel_factory
from riverbed.coordinator.consumer_protocol import group_by_topic
from riverbed.group_membership import (
    GroupDescription,
    GroupListing,
    MemberDescription,
    PartitionLag,
    commit_response_error,
    normalize_offsets,
    offsets_to_commit_request,
)
from riverbed import kafka_python_v2
from riverbed.kafka_python_types import ACL, ACLFilter
from riverbed.kafka_python_v2 import AlterConfigsResponse, DescribeConfigsResponse
from riverbed.structs import (
    BrokerInfo,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    GatewayInfo,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
    TransactionListing,
)

__all__ = ["Admin", "AdminClient"]

ApiKey = header_pb2.ApiKey

# list_offsets(): the specs Kafka's ListOffsets takes besides a timestamp (ms)
OFFSET_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3}


class Admin:
    """Topics, configs, partitions, records, consumer groups, transactions, ACLs and the
    cluster. describe_configs, alter_configs and create_partitions also take kafka-python 2.x's
    (and aiokafka's) forms (`[ConfigResource]`, `{topic: NewPartitions}`) with their result
    shapes (riverbed.kafka_python_v2); kafka-python 3.0's KafkaAdminClient is a facade over this
    class (riverbed.admin.kafka_python). Synchronous; one thread at a time. It belongs to the
    process that created it: after os.fork() the child's copy raises errors.ForkedClientError
    from every call."""

    # How the admin client waits between retries (riverbed.aio awaits instead).
    _sleep = staticmethod(time.sleep)

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, *,
                 client_id: str | None = None, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, bootstrap: str | Sequence[str] | None = None,
                 security_protocol: str | None = None, curve_secret_key_file: str | None = None,
                 curve_server_public_key: str | None = None,
                 curve_server_keys_dir: str | None = None,
                 _channel_factory: Callable | None = None):
        bootstrap = resolve_bootstrap(bootstrap_servers, bootstrap)
        _channel_factory = secure_channel_factory(
            _channel_factory, security_protocol=security_protocol,
            curve_secret_key_file=curve_secret_key_file,
            curve_server_public_key=curve_server_public_key,
            curve_server_keys_dir=curve_server_keys_dir)
        self.client_id = client_id or f"riverbed-admin-{os.getpid()}"
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._conn = GatewayConnection(bootstrap, client_id=self.client_id,
                                       request_timeout_ms=request_timeout_ms,
                                       channel_factory=_channel_factory)

    # -- plumbing ---------------------------------------------------------------------------------
    def _call(self, api: int, body, api_version: int = 0):
        """Call with retries of retriable envelope errors until request_timeout_ms."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        while True:
            try:
                return self._conn.call(api, body, timeout_ms=self.request_timeout_ms,
                                       api_version=api_version).body
            except errors.KafkaError as e:
                if not e.retriable or time.monotonic() >= deadline:
                    raise
            self._sleep(self.retry_backoff_ms / 1000.0)

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

    def _raise_first(self, results) -> None:
        """Raise the first per-topic error, the non-retriable ones first (a retriable one, e.g.
        UNKNOWN_TOPIC_OR_PARTITION for a topic that is not there, is raised too)."""
        retry = self._check_results(results)
        if retry:
            r = next(r for r in results if r.name == retry[0])
            raise errors.for_code(r.error_code, r.error_message, topic=r.name)

    # -- topics -----------------------------------------------------------------------------------
    def create_topics(self, new_topics: Sequence[NewTopic], timeout_ms: int | None = None,
                      validate_only: bool = False) -> dict[str, NewTopic]:
        """Create topics; raises e.g. TopicAlreadyExistsError / InvalidReplicationFactorError
        naming the topic. Returns each topic as created (validate_only: as it would be): its
        num_partitions and replication_factor with the cluster's defaults applied."""
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
        self._raise_first(resp.topics)
        asked = {nt.name: nt for nt in new_topics}
        return {r.name: NewTopic(r.name, r.num_partitions, r.replication_factor,
                                 dict(asked[r.name].configs),
                                 dict(asked[r.name].replica_assignment))
                for r in resp.topics if r.name in asked}

    def delete_topics(self, topics: Sequence[str], timeout_ms: int | None = None) -> None:
        req = controller_pb2.DeleteTopicsRequest(
            names=list(topics),
            timeout_ms=timeout_ms if timeout_ms is not None else self.request_timeout_ms)
        resp = self._call(ApiKey.DELETE_TOPICS, req)
        self._raise_first(resp.topics)

    @overload
    def create_partitions(self, topic: str, new_total: int, *,
                          assignment: Sequence[Sequence[int]] | None = None,
                          validate_only: bool = False) -> None: ...

    @overload
    def create_partitions(self, topic: Mapping[str, NewPartitions | int],
                          new_total: None = None, *, timeout_ms: int | None = None,
                          validate_only: bool = False) -> None: ...

    @overload
    def create_partitions(self, *, topic_partitions: Mapping[str, NewPartitions | int],
                          timeout_ms: int | None = None, validate_only: bool = False) -> None: ...

    def create_partitions(self, topic: str | Mapping[str, NewPartitions | int] | None = None,
                          new_total: int | None = None, *,
                          assignment: Sequence[Sequence[int]] | None = None,
                          timeout_ms: int | None = None, validate_only: bool = False,
                          topic_partitions: Mapping[str, NewPartitions | int] | None = None
                          ) -> None:
        """Grow `topic` to new_total partitions (only increases: InvalidPartitionsError).
        kafka-python's form: create_partitions({topic: NewPartitions(total_count)}) (or
        topic_partitions={...})."""
        if topic_partitions is not None:
            if topic is not None:
                raise TypeError("create_partitions: give a topic or topic_partitions, not both")
            topic = topic_partitions
        if topic is None:
            raise TypeError("create_partitions: a topic or topic_partitions is required")
        if isinstance(topic, Mapping):
            kafka_python_v2.create_partitions_map(self, topic, validate_only=validate_only)
            return
        if new_total is None:
            raise TypeError("create_partitions(topic, new_total): new_total is missing")
        req = controller_pb2.CreatePartitionsRequest(timeout_ms=self.request_timeout_ms,
                                                     validate_only=validate_only)
        t = req.topics.add(name=topic, count=new_total)
        for replicas in assignment or ():
            t.assignment.add(replicas=list(replicas))
        resp = self._call(ApiKey.CREATE_PARTITIONS, req)
        self._raise_first(resp.topics)

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

    @overload
    def describe_configs(self, topic: str, include_defaults: bool = True) -> dict[str, ConfigEntry]:
        ...

    @overload
    def describe_configs(self, topic: Sequence[ConfigResource], include_defaults: bool = True,
                         include_synonyms: bool = False) -> list[DescribeConfigsResponse]: ...

    @overload
    def describe_configs(self, *, config_resources: Sequence[ConfigResource],
                         include_synonyms: bool = False) -> list[DescribeConfigsResponse]: ...

    def describe_configs(self, topic: str | Sequence[ConfigResource] | None = None,
                         include_defaults: bool = True, include_synonyms: bool = False, *,
                         config_resources: Sequence[ConfigResource] | None = None
                         ) -> dict[str, ConfigEntry] | list[DescribeConfigsResponse]:
        """A topic's configs: name -> ConfigEntry (overrides and, with include_defaults, the
        defaults). kafka-python's form: describe_configs([ConfigResource(ConfigResourceType.TOPIC,
        "t")]) (or config_resources=[...]) -> [response with .resources]."""
        if config_resources is not None:
            if topic is not None:
                raise TypeError("describe_configs: give a topic or config_resources, not both")
            topic = config_resources
        if topic is None:
            raise TypeError("describe_configs: a topic name or config_resources is required")
        if not isinstance(topic, str):
            return kafka_python_v2.describe_config_resources(self, list(topic), include_synonyms)
        req = controller_pb2.DescribeConfigsRequest(topics=[topic], include_defaults=include_defaults)
        resp = self._call(ApiKey.DESCRIBE_CONFIGS, req)
        for r in resp.results:
            if r.topic == topic:
                if r.error_code != 0:
                    raise errors.for_code(r.error_code, r.error_message, topic=topic)
                return {e.name: ConfigEntry(e.name, e.value, e.is_default) for e in r.entries}
        raise errors.UnknownTopicOrPartitionError("no configs returned", topic=topic)

    @overload
    def alter_configs(self, topic: str, set: Mapping[str, str] | None = None,  # noqa: A002
                      delete: Iterable[str] = (), validate_only: bool = False) -> None: ...

    @overload
    def alter_configs(self, topic: Sequence[ConfigResource], set: None = None,  # noqa: A002
                      delete: Iterable[str] = (), validate_only: bool = False
                      ) -> AlterConfigsResponse: ...

    @overload
    def alter_configs(self, *, config_resources: Sequence[ConfigResource],
                      validate_only: bool = False) -> AlterConfigsResponse: ...

    def alter_configs(self, topic: str | Sequence[ConfigResource] | None = None,
                      set: Mapping[str, str] | None = None,  # noqa: A002
                      delete: Iterable[str] = (), validate_only: bool = False, *,
                      config_resources: Sequence[ConfigResource] | None = None
                      ) -> AlterConfigsResponse | None:
        """Set and delete a topic's config overrides (incremental). kafka-python's form:
        alter_configs([ConfigResource(TOPIC, "t", configs={...})]) (or config_resources=[...])
        replaces the overrides."""
        if config_resources is not None:
            if topic is not None:
                raise TypeError("alter_configs: give a topic or config_resources, not both")
            topic = config_resources
        if topic is None:
            raise TypeError("alter_configs: a topic name or config_resources is required")
        if not isinstance(topic, str):
            return kafka_python_v2.alter_config_resources(self, list(topic), validate_only)
        req = controller_pb2.AlterConfigsRequest(validate_only=validate_only)
        t = req.topics.add(name=topic)
        t.set.update({k: str(v) for k, v in (set or {}).items()})
        t.delete.extend(delete)
        resp = self._call(ApiKey.ALTER_CONFIGS, req)
        self._raise_first(resp.topics)
        return None

    def describe_cluster(self) -> ClusterDescription:
        resp = self._call(ApiKey.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest())
        if resp.error_code != 0:
            raise errors.for_code(resp.error_code, resp.error_message)
        return ClusterDescription(
            resp.cluster_id, resp.controller_id,
            tuple(BrokerInfo(b.node_id, b.host, b.port, b.endpoint, b.rack or None)
                  for b in resp.brokers),
            tuple(GatewayInfo(g.gateway_id, g.endpoint) for g in resp.gateways))

    # -- partitions: preferred leaders and reassignment ------------------------------------------
    def elect_leaders(self, partitions: Iterable[tuple[str, int]] | None = None
                      ) -> dict[tuple[str, int], errors.KafkaError | None]:
        """Preferred-leader election (Kafka's electLeaders(PREFERRED, ...)); None = every
        partition. Per partition: None when the preferred replica now leads, else the error
        (ElectionNotNeeded..., PreferredLeaderNotAvailable..., UnknownTopicOrPartition...)."""
        req = admin_ops_pb2.ElectLeadersRequest(timeout_ms=self.request_timeout_ms)
        for topic, partition in partitions or ():
            req.partitions.append(common_pb2.TopicPartition(topic=topic, partition=partition))
        resp = self._call(ApiKey.ELECT_LEADERS, req)
        if resp.error_code != 0:
            raise errors.for_code(resp.error_code, resp.error_message)
        return {(r.topic, r.partition): None if r.error_code == 0 else errors.for_code(
            r.error_code, r.error_message, topic=r.topic, partition=r.partition)
            for r in resp.results}

    def alter_partition_reassignments(self, reassignments: dict[tuple[str, int], Sequence[int]]
                                      ) -> None:
        """Start moving partitions to new replica lists (first = preferred leader); returns
        once the controller accepted them (list_partition_reassignments shows progress).
        Raises the first per-partition error (e.g. ReassignmentInProgressError)."""
        req = admin_ops_pb2.AlterPartitionReassignmentsRequest(timeout_ms=self.request_timeout_ms)
        for (topic, partition), replicas in reassignments.items():
            req.partitions.add(topic=topic, partition=partition, replicas=list(replicas))
        resp = self._call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, req)
        if resp.error_code != 0:
            raise errors.for_code(resp.error_code, resp.error_message)
        for r in resp.results:
            if r.error_code != 0:
                raise errors.for_code(r.error_code, r.error_message, topic=r.topic,
                                      partition=r.partition)

    def list_partition_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None
                                     ) -> dict[tuple[str, int], dict[str, tuple[int, ...]]]:
        """Reassignments in progress: (topic, partition) -> {"replicas", "target_replicas",
        "adding_replicas", "removing_replicas"}."""
        req = admin_ops_pb2.ListPartitionReassignmentsRequest()
        for topic, partition in partitions or ():
            req.partitions.append(common_pb2.TopicPartition(topic=topic, partition=partition))
        resp = self._call(ApiKey.LIST_PARTITION_REASSIGNMENTS, req)
        if resp.error_code != 0:
            raise errors.for_code(resp.error_code, resp.error_message)
        return {(r.topic, r.partition): {
            "replicas": tuple(r.replicas), "target_replicas": tuple(r.target_replicas),
            "adding_replicas": tuple(r.adding_replicas),
            "removing_replicas": tuple(r.removing_replicas)} for r in resp.reassignments}

    # -- log dirs (kafka-log-dirs.sh, KIP-113) ---------------------------------------------------
    def describe_log_dirs(self, broker_ids: Iterable[int] | None = None,
                          topics: Iterable[str] | None = None) -> list[NodeLogDirs]:
        """Each storage node's log dirs (all live nodes unless `broker_ids`): path, state
        (online / offline / low-space), file-system size and free bytes, and its replicas
        (only those of `topics` if given) with their sizes and lag."""
        req = admin_ops_pb2.DescribeLogDirsRequest(broker_ids=list(broker_ids or ()),
                                                   topics=list(topics or ()))
        resp = self._call(ApiKey.DESCRIBE_LOG_DIRS, req)
        if resp.error_code != 0:
            raise errors.for_code(resp.error_code, resp.error_message)
        return log_dirs.from_response(resp)

    def alter_replica_log_dirs(self, moves: Mapping[tuple[str, int, int], str]) -> None:
        """Move replicas between the log dirs of their nodes: {(topic, partition, node id):
        absolute log dir}. The node copies the replica while it keeps serving, then swaps;
        returns once every move is done. A replica the node does not host yet is created
        there later. Raises the first failure (LogDirNotFoundError, KafkaStorageError, ...)."""
        req = admin_ops_pb2.AlterReplicaLogDirsRequest()
        for (topic, partition, node), path in moves.items():
            req.moves.add(broker_id=node, topic=topic, partition=partition, log_dir=path)
        resp = self._call(ApiKey.ALTER_REPLICA_LOG_DIRS, req)
        if resp.error_code != 0:
            raise errors.for_code(resp.error_code, resp.error_message)
        for r in resp.results:
            if r.error_code != 0:
                raise errors.for_code(r.error_code, f"node {r.broker_id}: {r.error_message}",
                                      topic=r.topic, partition=r.partition)

    # -- consumer groups (kafka-consumer-groups.sh) ------------------------------------------------
    def _group_call(self, api: int, body, error_of: Callable = lambda r: (r.error_code, r.error_message),
                    api_version: int = 0):
        """A group/offset call; whole-request retriable errors in the body (coordinator loading or
        moving) are retried like envelope ones until request_timeout_ms."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        while True:
            resp = self._call(api, body, api_version=api_version)
            code, msg = error_of(resp)
            if code == 0:
                return resp
            err = errors.for_code(code, msg)
            if not err.retriable or time.monotonic() >= deadline:
                raise err
            self._sleep(self.retry_backoff_ms / 1000.0)

    def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """Every group the coordinators know (optionally only those in `states`, e.g. "Empty")."""
        resp = self._group_call(ApiKey.LIST_GROUPS, group_pb2.ListGroupsRequest(states_filter=list(states)))
        return sorted((GroupListing(g.group_id, g.protocol_type, g.group_state) for g in resp.groups),
                      key=lambda g: g.group_id)

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """State, strategy, generation and members (with their assignments) of each group. An
        unknown group is described as state "Dead" with no members (Kafka's answer)."""
        out = []
        for gid in group_ids:
            resp = self._group_call(
                ApiKey.DESCRIBE_GROUPS, group_pb2.DescribeGroupsRequest(groups=[gid]),
                lambda r: next(((g.error_code, g.error_message) for g in r.groups if g.error_code), (0, "")))
            for g in resp.groups:
                if g.group_id != gid:
                    continue
                members = tuple(MemberDescription(
                    m.member_id, m.client_id, m.client_host,
                    tuple(TopicPartition(tp.topic, p) for tp in m.assignment.partitions for p in tp.partitions),
                    tuple(m.subscription.topics), m.subscription.topic_pattern) for m in g.members)
                out.append(GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                                            g.generation_id, g.leader, members))
        return out

    # -- transactions (KIP-664; kafka-transactions.sh) --------------------------------------------
    def list_transactions(self, states: Iterable[str] = (),
                          producer_ids: Iterable[int] = ()) -> list[TransactionListing]:
        """Every transactional id the transaction coordinators know, optionally only those in
        `states` (Kafka's names: Ongoing, PrepareCommit, ...) or of `producer_ids`. Raises
        InvalidRequestError for a state name no coordinator knows."""
        resp = self._call(ApiKey.LIST_TRANSACTIONS, transaction_pb2.ListTransactionsRequest(
            state_filters=list(states), producer_id_filters=list(producer_ids)))
        if resp.unknown_state_filters:
            raise errors.InvalidRequestError(
                f"unknown transaction states: {', '.join(resp.unknown_state_filters)}")
        if resp.error_code and not resp.transaction_states:
            raise errors.for_code(resp.error_code, resp.error_message)
        return [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state,
                                   t.coordinator_id) for t in resp.transaction_states]

    def describe_transactions(self, transactional_ids: Sequence[str]
                              ) -> list[TransactionDescription]:
        """State, producer id and epoch, timeout and open partitions of each transactional id
        (TransactionalIdNotFoundError for one no coordinator has)."""
        out = []
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        for tid in transactional_ids:
            while True:
                resp = self._call(ApiKey.DESCRIBE_TRANSACTIONS,
                                  transaction_pb2.DescribeTransactionsRequest(
                                      transactional_ids=[tid]))
                (d,) = resp.transaction_states
                if d.error_code == 0:
                    break
                err = errors.for_code(d.error_code, d.error_message)
                if not err.retriable or time.monotonic() >= deadline:
                    raise err
                self._sleep(self.retry_backoff_ms / 1000.0)
            out.append(TransactionDescription(
                d.transactional_id, d.coordinator_id, d.transaction_state, d.producer_id,
                d.producer_epoch, d.transaction_timeout_ms, d.transaction_start_time_ms,
                tuple(TopicPartition(t.name, p) for t in d.topics for p in t.partitions)))
        return out

    def complete_transaction(self, state: PreparedTxnState, commit: bool = True,
                             timeout_ms: int | None = None) -> None:
        """Commit (or abort) a transaction another process prepared (`Producer.
        prepare_transaction()`, KIP-939's two-phase commit): EndTxn at its producer id and
        epoch, retried while the coordinator is moving or busy (at most timeout_ms, default
        request_timeout_ms). Safe to repeat: once the commit is decided, a repeat answers
        success. Raises ProducerFencedError when a newer instance of the transactional id took
        over (its init_transactions aborted this transaction) or the coordinator aborted it
        after transaction.timeout.ms, and InvalidTxnStateError when it was already ended the
        other way."""
        limit_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + limit_ms / 1000.0
        req = transaction_pb2.EndTxnRequest(
            transactional_id=state.transactional_id, producer_id=state.producer_id,
            producer_epoch=state.producer_epoch, committed=commit)
        while True:
            resp = self._call(ApiKey.END_TXN, req)
            code = resp.error_code
            if code == 0:
                return
            err = error_for(code, resp.error_message)
            if classify(code) != RETRIABLE or time.monotonic() >= deadline:
                raise err
            self._sleep(self.retry_backoff_ms / 1000.0)

    def list_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None,
                           *, require_stable: bool = False
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all of them, or these partitions; those without a
        commit are left out). require_stable (Kafka's ListConsumerGroupOffsetsOptions): a
        partition whose offset a transaction is still committing raises
        UnstableOffsetCommitError (retriable) instead of answering the offset before it."""
        req = offset_pb2.OffsetFetchRequest(group_id=group_id, require_stable=require_stable)
        for topic, parts in group_by_topic(TopicPartition(*tp) for tp in partitions or ()):
            req.topics.add(name=topic, partition_indexes=parts)
        resp = self._group_call(ApiKey.OFFSET_FETCH, req, api_version=1 if require_stable else 0)
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != 0:
                    raise errors.for_code(p.error_code, p.error_message, topic=t.name,
                                          partition=p.partition_index)
                if p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata, p.committed_leader_epoch)
        return out

    def alter_group_offsets(self, group_id: str, offsets: dict) -> None:
        """Commit offsets for a group without members (generation -1, empty member id): what
        reset-offsets does. A group with members answers UNKNOWN_MEMBER_ID."""
        req = offsets_to_commit_request(group_id, -1, "", normalize_offsets(offsets))
        resp = self._group_call(ApiKey.OFFSET_COMMIT, req)
        err = commit_response_error(resp)
        if err is not None:
            raise err

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """OFFSET_DELETE: forget committed offsets of a group without members (NonEmptyGroupError
        otherwise)."""
        resp = self._delete_group_offsets_answers(group_id, partitions)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != 0:
                    raise errors.for_code(p.error_code, p.error_message, topic=t.name,
                                          partition=p.partition_index)

    def delete_groups(self, group_ids: Sequence[str]) -> None:
        """Kafka's DeleteGroups (kafka-consumer-groups.sh --delete): each group without members
        is deleted with its committed offsets (so are the offsets of a group id no coordinator
        knows, e.g. a standalone consumer's commits). Each group is deleted or refused on its
        own; the first refusal is raised naming the group: NonEmptyGroupError while it has
        members, GroupIdNotFoundError for one with neither metadata nor offsets,
        GroupAuthorizationFailedError (Delete on the group), InvalidGroupIdError. Coordinators
        loading or moving are retried until request_timeout_ms."""
        for err in self._delete_groups_results(group_ids).values():
            if err is not None:
                raise err

    def _delete_groups_results(self, group_ids: Sequence[str]
                               ) -> dict[str, errors.KafkaError | None]:
        """DELETE_GROUPS with retries of retriable per-group errors: each group (in the order
        given, once) -> None (deleted) or its error."""
        if isinstance(group_ids, str):
            raise TypeError("delete_groups takes a list of group ids, not one string")
        wanted = list(dict.fromkeys(group_ids))
        out: dict[str, errors.KafkaError | None] = {}
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        todo = wanted
        while todo:
            resp = self._call(ApiKey.DELETE_GROUPS, group_pb2.DeleteGroupsRequest(group_ids=todo))
            answers = {r.group_id: r for r in resp.results}
            retry = []
            for gid in todo:
                r = answers.get(gid)
                if r is None:
                    code = resp.error_code or errors.UnknownServerError.code
                    msg = resp.error_message or "the gateway did not answer for it"
                else:
                    code, msg = r.error_code, r.error_message
                if code == 0:
                    out[gid] = None
                    continue
                err = errors.for_code(code, f"group {gid!r}" + (f": {msg}" if msg else ""))
                if err.retriable and time.monotonic() < deadline:
                    retry.append(gid)
                else:
                    out[gid] = err
            todo = retry
            if todo:
                self._sleep(self.retry_backoff_ms / 1000.0)
        return {gid: out[gid] for gid in wanted}

    def _delete_group_offsets_answers(self, group_id: str, partitions: Iterable[TopicPartition]):
        """The OFFSET_DELETE answer; its whole-request error raised."""
        req = offset_pb2.OffsetDeleteRequest(group_id=group_id)
        for topic, parts in group_by_topic(TopicPartition(*tp) for tp in partitions):
            req.topics.add(name=topic, partition_indexes=parts)
        return self._group_call(ApiKey.OFFSET_DELETE, req)

    def list_offsets(self, specs: Mapping[TopicPartition, int | str]
                     ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Kafka's ListOffsets (Java's Admin.listOffsets): per partition, "earliest" (-2, the log
        start offset), "latest" (-1, the high watermark), "max_timestamp" (-3, the record with
        the largest timestamp) or a timestamp in ms (the first offset whose record's timestamp
        is >= it; offset -1 when there is none). Each answer is an OffsetAndTimestamp (offset,
        timestamp or -1, leader epoch or None). Retriable errors are retried until
        request_timeout_ms; any other is raised."""
        want: dict[TopicPartition, int] = {}
        for tp, spec in specs.items():
            if isinstance(spec, str):
                if spec not in OFFSET_SPECS:
                    raise ValueError(f"list_offsets: {tp}: {spec!r} is not one of "
                                     f"{sorted(OFFSET_SPECS)} or a timestamp")
                spec = OFFSET_SPECS[spec]
            want[TopicPartition(*tp)] = int(spec)
        found = list_offsets.list_offsets(self._conn, want, with_timestamps=True,
                                          request_timeout_ms=self.request_timeout_ms,
                                          retry_backoff_ms=self.retry_backoff_ms,
                                          sleep=self._sleep)
        return {tp: OffsetAndTimestamp(*found[tp]) for tp in want}

    def _list_offsets(self, want: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """LIST_OFFSETS (-2 earliest, -1 latest/high watermark, else by timestamp); None for a
        partition that answered an error or no offset."""
        if not want:
            return {}
        req = list_offsets_pb2.ListOffsetsRequest(replica_id=-1)
        for topic, parts in group_by_topic(want):
            t = req.topics.add(name=topic)
            for p in parts:
                t.partitions.add(partition=p, timestamp=want[TopicPartition(topic, p)],
                                 current_leader_epoch=-1)
        resp = self._call(ApiKey.LIST_OFFSETS, req)
        out: dict[TopicPartition, int | None] = {tp: None for tp in want}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                if tp in out and p.error_code == 0 and p.offset >= 0:
                    out[tp] = p.offset
        return out

    # -- records (kafka-delete-records.sh) -------------------------------------------------------
    def delete_records(self, records_to_delete: Mapping[TopicPartition, int],
                       timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """Kafka's DeleteRecords (kafka-delete-records.sh, Java's Admin.deleteRecords): per
        partition, the records before the offset given (-1: the high watermark, i.e. every
        committed record) are deleted: the log start offset moves up to it, consumers start
        there, and whole segments below it go at the next retention pass. Returns each
        partition's low watermark (its log start offset now). A leader moving is retried
        (metadata refresh, backoff) until request_timeout_ms; any other error is raised naming
        its partition: OffsetOutOfRangeError past the high watermark,
        UnknownTopicOrPartitionError, TopicAuthorizationFailedError (Delete on the topic).
        timeout_ms: how long the leaders may take (request_timeout_ms by default). An offset
        may also be given as aiokafka's RecordsToDelete (its before_offset)."""
        results = self._delete_records_results(records_to_delete, timeout_ms)
        for r in results.values():
            if isinstance(r, errors.KafkaError):
                raise r
        return results      # type: ignore[return-value]  # no errors left

    def _delete_records_results(self, records_to_delete: Mapping[TopicPartition, int],
                                timeout_ms: int | None = None
                                ) -> dict[TopicPartition, int | errors.KafkaError]:
        """DELETE_RECORDS with retries of a moving leader: per partition (in the order given)
        its low watermark or its error."""
        todo: dict[TopicPartition, int] = {}
        for tp, offset in records_to_delete.items():
            offset = getattr(offset, "before_offset", offset)     # aiokafka's RecordsToDelete
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise TypeError(f"delete_records: {tp}: the offset must be an int (-1: the high "
                                f"watermark), not {offset!r}")
            todo[TopicPartition(*tp)] = offset
        order = list(todo)
        out: dict[TopicPartition, int | errors.KafkaError] = {}
        wait_ms = timeout_ms if timeout_ms is not None else self.request_timeout_ms
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        while todo:
            req = delete_records_pb2.DeleteRecordsRequest(timeout_ms=wait_ms)
            for topic, parts in group_by_topic(todo):
                t = req.topics.add(name=topic)
                for p in parts:
                    t.partitions.add(partition=p, offset=todo[TopicPartition(topic, p)])
            resp = self._call(ApiKey.DELETE_RECORDS, req)
            retry: dict[TopicPartition, errors.KafkaError] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition)
                    if tp not in todo or tp in out:
                        continue
                    if p.error_code == 0:
                        out[tp] = p.low_watermark
                        continue
                    err = errors.for_code(p.error_code, p.error_message, topic=t.name,
                                          partition=p.partition)
                    # the gateway has refreshed its metadata before answering an unknown topic
                    if err.retriable and not isinstance(err, errors.UnknownTopicOrPartitionError):
                        retry[tp] = err
                    else:
                        out[tp] = err
            for tp in todo:
                if tp not in out and tp not in retry:
                    retry[tp] = errors.UnknownServerError("the gateway did not answer for it",
                                                          topic=tp.topic, partition=tp.partition)
            todo = {tp: todo[tp] for tp in retry}
            if not todo:
                break
            if time.monotonic() >= deadline:
                out.update(retry)
                break
            if any(e.refresh_metadata for e in retry.values()):
                self._conn.fetch_metadata({tp.topic for tp in todo})
            self._sleep(self.retry_backoff_ms / 1000.0)
        return {tp: out[tp] for tp in order}

    def describe_group_offsets(self, group_id: str) -> tuple[GroupDescription, list[PartitionLag]]:
        """`riverbed groups describe`: per partition the group committed to or a member owns,
        the committed offset, the log end offset (high watermark), lag and owner."""
        (desc,) = self.describe_groups([group_id]) or (GroupDescription(group_id, "Dead", "", "", -1, ""),)
        committed = self.list_group_offsets(group_id)
        owner: dict[TopicPartition, MemberDescription] = {}
        for m in desc.members:
            for tp in m.assignment:
                owner[tp] = m
        tps = sorted(set(committed) | set(owner))
        ends = self._list_offsets({tp: -1 for tp in tps})
        rows = []
        for tp in tps:
            om, m = committed.get(tp), owner.get(tp)
            rows.append(PartitionLag(tp.topic, tp.partition, om.offset if om else None, ends.get(tp),
                                     m.member_id if m else "", m.client_host if m else "",
                                     m.client_id if m else ""))
        return desc, rows

    def plan_reset_offsets(self, group_id: str, topic: str, to: str | int | float,
                           partitions: Iterable[int] | None = None
                           ) -> dict[TopicPartition, tuple[int | None, int]]:
        """What reset-offsets would commit: tp -> (current committed or None, new offset).
        to = "earliest" | "latest" | an offset (int, clamped into [earliest, latest]) |
        ("datetime", ms since the epoch): the first offset with a timestamp >= it (latest if none) |
        "current": the committed offset (latest where none) | ("shift", n): the committed offset
        plus n (n < 0 goes back), clamped into [earliest, latest] (from latest where none)."""
        meta = self.describe_topics([topic])[0]
        parts = sorted(partitions) if partitions is not None else [p.partition for p in meta.partitions]
        tps = [TopicPartition(topic, p) for p in parts]
        earliest = self._list_offsets({tp: -2 for tp in tps})
        latest = self._list_offsets({tp: -1 for tp in tps})
        if to == "earliest":
            new = dict(earliest)
        elif to == "latest":
            new = dict(latest)
        elif isinstance(to, tuple) and to[0] == "datetime":
            by_time = self._list_offsets({tp: int(to[1]) for tp in tps})
            new = {tp: by_time[tp] if by_time[tp] is not None else latest[tp] for tp in tps}
        elif isinstance(to, int) and not isinstance(to, bool):
            new = {tp: min(max(to, earliest[tp] or 0), latest[tp] if latest[tp] is not None else to)
                   for tp in tps}
        elif to == "current" or isinstance(to, tuple) and to[0] == "shift":
            committed = self.list_group_offsets(group_id, tps)
            shift = 0 if to == "current" else int(to[1])  # type: ignore[index]
            new = {}
            for tp in tps:
                base = committed[tp].offset if tp in committed else latest[tp]
                if base is None or latest[tp] is None:
                    new[tp] = None
                else:
                    new[tp] = min(max(base + shift, earliest[tp] or 0), latest[tp])
        else:
            raise ValueError(f"reset to {to!r}: expected earliest, latest, current, an offset, "
                             "('datetime', ms) or ('shift', n)")
        missing = [tp for tp in tps if new.get(tp) is None]
        if missing:
            raise errors.LeaderNotAvailableError("no offsets answered", topic=missing[0].topic,
                                                 partition=missing[0].partition)
        current = self.list_group_offsets(group_id, tps)
        return {tp: (current[tp].offset if tp in current else None, int(new[tp])) for tp in tps}

    def reset_offsets(self, group_id: str, topic: str, to: str | int | tuple,
                      partitions: Iterable[int] | None = None, execute: bool = False
                      ) -> dict[TopicPartition, tuple[int | None, int]]:
        """Kafka's `kafka-consumer-groups.sh --reset-offsets`: only for an inactive (Empty) group
        (NonEmptyGroupError otherwise); a dry run unless execute. Returns the plan."""
        (desc,) = self.describe_groups([group_id]) or (GroupDescription(group_id, "Dead", "", "", -1, ""),)
        if desc.state not in ("Empty", "Dead") or desc.members:
            raise errors.NonEmptyGroupError(
                f"offsets can only be reset if the group {group_id!r} is inactive, but its current "
                f"state is {desc.state} with {len(desc.members)} member(s)")
        plan = self.plan_reset_offsets(group_id, topic, to, partitions)
        if execute:
            self.alter_group_offsets(group_id, {tp: new for tp, (_, new) in plan.items()})
        return plan

    # -- ACLs (kafka-acls.sh; Java's Admin.describeAcls / createAcls / deleteAcls) ---------------
    # The gateway reads and writes the ACLs in ZooKeeper (the store `riverbed acls` writes);
    # every gateway and coordinator applies a change within moments (they watch it). The types
    # are kafka-python 3.0's (riverbed.admin.ACL, ACLFilter, ResourcePattern, ...).
    def describe_acls(self, acl_filter: ACLFilter | None = None) -> list[ACL]:
        """The ACLs the filter matches (None: every ACL), sorted by resource, then principal,
        host, operation and permission. Filters match as Kafka's AclBindingFilter: ANY, or a
        name / principal / host of None, matches every value; pattern type MATCH matches every
        pattern that applies to the name given (the literal name, '*', prefixes of it). Needs
        Describe on the cluster (ClusterAuthorizationFailedError); a filter with an UNKNOWN
        value: InvalidRequestError."""
        if acl_filter is not None and not isinstance(acl_filter, ACLFilter):
            raise errors.IllegalArgumentError("acl_filter must be an ACLFilter")
        resp = self._call(ApiKey.DESCRIBE_ACLS, acl_pb2.DescribeAclsRequest(
            filter=filter_to_pb(acl_filter or MATCH_EVERY_ACL)))
        if resp.error_code != 0:
            raise errors.for_code(resp.error_code, resp.error_message)
        return [acl_from_pb(b) for b in resp.bindings]

    def create_acls(self, acls: Sequence[ACL]) -> None:
        """Add ACLs; adding one that exists changes nothing. Needs Alter on the cluster
        (ClusterAuthorizationFailedError, nothing added). Each ACL is added or refused on its
        own; the first refusal is raised: InvalidRequestError for one Riverbed cannot keep (a
        principal not 'Type:name', an operation its resource type does not have, delegation
        tokens and users)."""
        for _, err in self._create_acls_results(acls):
            if err is not None:
                raise err

    def _create_acls_results(self, acls: Sequence[ACL]
                             ) -> list[tuple[ACL, errors.KafkaError | None]]:
        """CREATE_ACLS: each ACL with None (added) or its error."""
        acls = list(acls)
        for a in acls:
            if not isinstance(a, ACL):
                raise errors.IllegalArgumentError("acls must contain ACL objects")
        if not acls:
            return []
        resp = self._call(ApiKey.CREATE_ACLS, acl_pb2.CreateAclsRequest(
            creations=[acl_to_pb(a) for a in acls]))
        out: list[tuple[ACL, errors.KafkaError | None]] = []
        for i, a in enumerate(acls):
            r = resp.results[i] if i < len(resp.results) else None
            if r is None:
                out.append((a, errors.UnknownServerError(f"no answer for {a!r}")))
            elif r.error_code != 0:
                out.append((a, errors.for_code(r.error_code, f"{a!r}: {r.error_message}")))
            else:
                out.append((a, None))
        return out

    def delete_acls(self, acl_filters: Sequence[ACLFilter]) -> list[ACL]:
        """Remove every ACL each filter matches (matching as describe_acls); returns the ACLs
        removed, once each. Needs Alter on the cluster (ClusterAuthorizationFailedError,
        nothing removed). Each filter is applied on its own; the first one refused is raised
        (InvalidRequestError for a filter with an UNKNOWN value) after the others' removals."""
        removed: list[ACL] = []
        first: errors.KafkaError | None = None
        for _, matched, err in self._delete_acls_results(acl_filters):
            if err is not None:
                first = first or err
                continue
            removed.extend(a for a in matched if a not in removed)
        if first is not None:
            raise first
        return removed

    def _delete_acls_results(self, acl_filters: Sequence[ACLFilter]
                             ) -> list[tuple[ACLFilter, list[ACL], errors.KafkaError | None]]:
        """DELETE_ACLS: each filter with the ACLs it removed and None, or [] and its error."""
        filters = list(acl_filters)
        for f in filters:
            if not isinstance(f, ACLFilter):
                raise errors.IllegalArgumentError("acl_filters must contain ACLFilter objects")
        if not filters:
            return []
        resp = self._call(ApiKey.DELETE_ACLS, acl_pb2.DeleteAclsRequest(
            filters=[filter_to_pb(f) for f in filters]))
        out: list[tuple[ACLFilter, list[ACL], errors.KafkaError | None]] = []
        for i, f in enumerate(filters):
            r = resp.results[i] if i < len(resp.results) else None
            if r is None:
                out.append((f, [], errors.UnknownServerError(f"no answer for {f!r}")))
            elif r.error_code != 0:
                out.append((f, [], errors.for_code(r.error_code, f"{f!r}: {r.error_message}")))
            else:
                out.append((f, [acl_from_pb(b) for b in r.matching], None))
        return out

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


AdminClient = Admin
