"""kafka-python 3.0's KafkaAdminClient: a facade over Riverbed's Admin.

kafka-python 3.0 reshaped its admin client (plain dicts for results, `list_groups()` /
`describe_groups()` / `list_group_offsets({group: None})` / `delete_groups()` /
`alter_group_offsets()` / `reset_group_offsets()` / `delete_group_offsets()` for 2.x's
`*_consumer_group*` calls, `create_topics({name: {...}})`, `create_partitions({name: count})`,
`describe_configs()` -> {resource type: {name: {key: {...}}}}, incremental `alter_configs()`).
`KafkaAdminClient` answers those calls with those shapes: each one is a composition of calls
of `riverbed.admin.Admin` (kept as `.riverbed_admin`, whose own API is unchanged), shaped
as kafka-python 3.0.12 shapes what a Kafka broker answers. The oracle is kafka-python itself
talking to a Riverbed gateway's Kafka listener (tests/integration/test_kafka_python3.py): the
same program gives the same output both ways.

kafka-python 2.x's names that 3.0 dropped and that collide with nothing in 3.0 keep their 2.x
shapes (`list_consumer_groups`, `describe_consumer_groups`, `list_consumer_group_offsets`,
`alter_consumer_group_offsets`; riverbed.kafka_python_v2).

Riverbed differs where its cluster does (docs/sdk/coming-from-kafka-clients.md has the table):
brokers are the storage nodes (their ids lead partitions), topics have no ids (topic_id None),
configs are per topic, and the calls this facade does not serve (transactions, producers,
features, SCRAM users, the KRaft quorum, list_config_resources) raise
IncompatibleBrokerVersion, as kafka-python does against a broker without that API.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from riverbed import errors, kafka_python_v2
from riverbed._proto.v1 import group_pb2, header_pb2
from riverbed.admin.riverbed_admin import Admin
from riverbed.cluster import bootstrap_timeout, require_gateway
from riverbed.consumer_groups import normalize_offsets, offsets_to_commit_request
from riverbed.coordinator.consumer_protocol import group_by_topic
from riverbed.kafka_python_types import (
    ACL,
    ACLFilter,
    AlterConfigOp,
    ConfigFilterType,
    ConfigSourceType,
    GroupState,
    IsolationLevel,
    OffsetSpec,
    OffsetTimestamp,
    kafka_python_security,
)
from riverbed.structs import (
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
    TopicPartitionReplica,
)

__all__ = ["KafkaAdminClient", "ProtocolStruct", "KAFKA_PYTHON_CONFIGS"]

ApiKey = header_pb2.ApiKey

# kafka-python 3.0's KafkaAdminClient settings. Those Riverbed uses: bootstrap_servers,
# client_id, request_timeout_ms, retry_backoff_ms, security_protocol ('PLAINTEXT' = whatever
# the environment says; Riverbed's NONE / CURVE), bootstrap_timeout_ms. The others tune Kafka
# TCP connections, SSL, SASL and metrics, which Riverbed's ZeroMQ connections do not have: they
# are accepted and ignored. Any other name is a KafkaConfigurationError, as in kafka-python.
KAFKA_PYTHON_CONFIGS = frozenset({
    "bootstrap_servers", "client_id", "request_timeout_ms", "connections_max_idle_ms",
    "reconnect_backoff_ms", "reconnect_backoff_max_ms", "max_in_flight_requests_per_connection",
    "receive_message_max_bytes", "receive_buffer_bytes", "send_buffer_bytes", "socket_options",
    "retry_backoff_ms", "metadata_max_age_ms", "client_dns_lookup", "security_protocol",
    "ssl_context", "ssl_check_hostname", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
    "ssl_password", "ssl_crlfile", "api_version", "bootstrap_timeout_ms", "selector",
    "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "sasl_kerberos_name",
    "sasl_kerberos_service_name", "sasl_kerberos_domain_name", "sasl_oauth_token_provider",
    "proxy_url", "socks5_proxy", "metric_reporters", "metrics_num_samples",
    "metrics_sample_window_ms", "kafka_client",
    # kafka-python 2.x's name of bootstrap_timeout_ms (default 2000 there)
    "api_version_auto_timeout_ms",
})
# Riverbed's own settings, taken too
_RIVERBED_CONFIGS = frozenset({"bootstrap", "curve_secret_key_file", "curve_server_public_key",
                               "curve_server_keys_dir", "_channel_factory"})
_ADMIN_CONFIGS = ("client_id", "request_timeout_ms", "retry_backoff_ms", "bootstrap",
                  "curve_secret_key_file", "curve_server_public_key", "curve_server_keys_dir",
                  "_channel_factory")


class ProtocolStruct:
    """A Kafka response as kafka-python 3.0 returns it raw from some admin calls
    (create_partitions, elect_leaders): fields as attributes, `to_dict()`, and kafka-python's
    repr (`CreatePartitionsResponse(version=3, throttle_time_ms=0, results=[...])`)."""

    def __init__(self, _type: str, _version: int, **fields: Any):
        self._type = _type
        self._version = _version
        self._fields = list(fields)
        for k, v in fields.items():
            setattr(self, k, v)

    @property
    def API_VERSION(self) -> int:  # noqa: N802 - kafka-python's name
        return self._version

    def to_dict(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            if isinstance(v, ProtocolStruct):
                return v.to_dict()
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v
        return {k: plain(getattr(self, k)) for k in self._fields}

    def __repr__(self) -> str:
        vals = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{self._type}(version={self._version}, {vals})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProtocolStruct) and (self._type, self.to_dict()) == (
            other._type, other.to_dict())

    __hash__ = None  # type: ignore[assignment]


def _error_text(e: errors.KafkaError) -> str:
    """An error as kafka-python 3.0 prints a broker's error in admin results:
    '[Error 40] InvalidConfigurationError: <the broker's message>'."""
    return f"[Error {e.code}] {type(e).__name__}: {e.message or None}"


def _unsupported(api: str, instead: str = "") -> errors.KafkaError:
    return errors.IncompatibleBrokerVersion(
        f"Riverbed's gateway does not serve the {api!r} Kafka protocol to the SDK yet"
        + (f" ({instead})" if instead else ""))


# the kafka-python transaction calls whose answers Riverbed's own Admin has
_TXN_INSTEAD = ("riverbed.admin.Admin's list_transactions / describe_transactions answer it "
                "with Riverbed's TransactionListing / TransactionDescription")
_SCRAM_INSTEAD = "`riverbed configs --entity-type users` manages SCRAM credentials"


class KafkaAdminClient:
    """kafka-python 3.0's `KafkaAdminClient` over Riverbed's `Admin` (see the module doc).

    Takes kafka-python's settings (keyword arguments; `bootstrap_servers` may also come first)
    and Riverbed's security settings. Like kafka-python 3.0 its constructor checks that the
    cluster is there: it waits up to `bootstrap_timeout_ms` (30000; kafka-python 2.x's
    `api_version_auto_timeout_ms` is taken too) for a bootstrap address to answer and raises
    `riverbed.errors.NoBrokersAvailable` (a `KafkaTimeoutError`, what kafka-python 3.0 raises)
    naming each address and why. Synchronous; one thread at a time, as Admin."""

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **configs: Any):
        unknown = set(configs) - KAFKA_PYTHON_CONFIGS - _RIVERBED_CONFIGS
        if unknown:
            raise errors.KafkaConfigurationError(f"Unrecognized configs: {unknown}")
        if bootstrap_servers is not None:
            configs["bootstrap_servers"] = bootstrap_servers
        timeout_ms, setting = bootstrap_timeout(configs)
        self.config: dict[str, Any] = dict(configs, bootstrap_timeout_ms=timeout_ms)
        args = {k: configs[k] for k in _ADMIN_CONFIGS if k in configs}
        self._admin = Admin(configs.get("bootstrap_servers"),
                            security_protocol=kafka_python_security(
                                configs.get("security_protocol")), **args)
        self.config.setdefault("client_id", self._admin.client_id)
        self.config.setdefault("request_timeout_ms", self._admin.request_timeout_ms)
        self.config.setdefault("retry_backoff_ms", self._admin.retry_backoff_ms)
        self._closed = False
        try:
            require_gateway(self._admin._conn, timeout_ms, setting)
        except BaseException:
            self.close()
            raise

    @property
    def riverbed_admin(self) -> Admin:
        """The Riverbed `Admin` this facade calls: Riverbed's own API on the same connection."""
        return self._admin

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._admin.close()

    def __enter__(self) -> "KafkaAdminClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _timeout_ms(self, timeout_ms: int | None) -> int:
        return timeout_ms or self.config["request_timeout_ms"]

    # -- topics --------------------------------------------------------------------------------
    def list_topics(self) -> list[str]:
        """Every topic's name, the internal ones (`__consumer_offsets`) included."""
        return self._admin.list_topics(include_internal=True)

    def describe_topics(self, topics: Sequence[str | uuid.UUID] | None = None
                        ) -> list[dict[str, Any]]:
        """One dict per topic: error_code, name, topic_id (None: Riverbed's topics have no
        ids), is_internal, partitions (error_code, partition_index, leader_id, leader_epoch,
        replica_nodes, isr_nodes, offline_replicas; node ids are storage nodes'),
        authorized_operations. An unknown topic is a dict with its error_code, not raised."""
        if topics is not None:
            ids = [t for t in topics if isinstance(t, uuid.UUID)]
            if ids:
                raise errors.UnknownTopicIdError(f"Riverbed's topics have no ids: {ids[0]}")
        names = None if topics is None else [str(t) for t in topics]
        if names is None:
            described = {d.name: d for d in self._admin.describe_topics(None)}
        else:
            try:
                described = {d.name: d for d in self._admin.describe_topics(names)}
            except errors.UnknownTopicOrPartitionError:
                described = {}      # one unknown: the others each alone (Kafka's answer has all)
                for n in names:
                    try:
                        described.update((d.name, d) for d in self._admin.describe_topics([n]))
                    except errors.UnknownTopicOrPartitionError:
                        pass
        out = []
        for name in names if names is not None else sorted(described):
            d = described.get(name)
            if d is None:
                out.append({"error_code": errors.UnknownTopicOrPartitionError.code, "name": name,
                            "topic_id": None, "is_internal": False, "partitions": [],
                            "authorized_operations": None})
                continue
            out.append({"error_code": 0, "name": d.name, "topic_id": None,
                        "is_internal": d.is_internal, "partitions": [
                            {"error_code": p.error_code, "partition_index": p.partition,
                             "leader_id": p.leader, "leader_epoch": p.leader_epoch,
                             "replica_nodes": list(p.replicas), "isr_nodes": list(p.isr),
                             "offline_replicas": list(p.offline_replicas)}
                            for p in sorted(d.partitions, key=lambda p: p.partition)],
                        "authorized_operations": None})
        return out

    @staticmethod
    def _new_topics(new_topics: Any) -> list[NewTopic]:
        """create_topics' three forms: [name], {name: {num_partitions, replication_factor,
        assignments, configs}} and (deprecated in 3.0) [NewTopic]."""
        out = []
        if isinstance(new_topics, Mapping):
            for name, spec in new_topics.items():
                out.append(NewTopic(name, spec.get("num_partitions", -1),
                                    spec.get("replication_factor", -1),
                                    {k: str(v) for k, v in spec.get("configs", {}).items()},
                                    dict(spec.get("assignments", {}))))
        elif all(isinstance(t, str) for t in new_topics):
            out = [NewTopic(t) for t in new_topics]
        elif all(isinstance(t, NewTopic) for t in new_topics):
            out = list(new_topics)
        if not out:
            raise ValueError(f"No valid topics found in new_topics: {new_topics}")
        return out

    def create_topics(self, new_topics: Any, timeout_ms: int | None = None,
                      validate_only: bool = False, raise_errors: bool = True,
                      wait_for_metadata: bool = False) -> dict[str, list[dict[str, Any]]]:
        """Create topics given as [name], {name: {num_partitions, replication_factor,
        assignments, configs}} or [NewTopic]. Returns {'topics': [{name, topic_id,
        error_code, error_message, topic_config_error_code, num_partitions,
        replication_factor}]}; the first error is raised unless raise_errors=False;
        wait_for_metadata waits for every partition to have a leader."""
        if validate_only and wait_for_metadata:
            raise ValueError("validate_only and wait_for_metadata are mutually exclusive")
        wanted = self._new_topics(new_topics)
        timeout_ms = self._timeout_ms(timeout_ms)
        results: dict[str, tuple[NewTopic | None, errors.KafkaError | None]] = {}
        if raise_errors:            # one request; its first error raised
            created = self._admin.create_topics(wanted, timeout_ms, validate_only)
            results = {nt.name: (created.get(nt.name), None) for nt in wanted}
        else:                       # each topic alone, for each one's answer
            for nt in wanted:
                try:
                    one = self._admin.create_topics([nt], timeout_ms, validate_only)
                    results[nt.name] = (one.get(nt.name), None)
                except errors.KafkaError as e:
                    results[nt.name] = (None, e)
        if wait_for_metadata:
            self.wait_for_topics([nt.name for nt in wanted])
        topics = []
        for nt in wanted:
            done, err = results[nt.name]
            topics.append({"name": nt.name, "topic_id": None,
                           "error_code": err.code if err else 0,
                           "error_message": (err.message or None) if err else None,
                           "topic_config_error_code": 0,
                           "num_partitions": done.num_partitions if done else -1,
                           "replication_factor": done.replication_factor if done else -1})
        return {"topics": topics}

    def wait_for_topics(self, topic_names: Iterable[str], timeout_ms: int = 10000) -> None:
        """Block until every topic is described with a leader for each partition;
        KafkaTimeoutError after timeout_ms."""
        names = list(topic_names)
        if not names:
            return
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            try:
                described = {t["name"]: t for t in self.describe_topics(names)}
            except errors.KafkaError:
                described = {}
            pending = {}
            for n in names:
                t = described.get(n)
                if t is None or t["error_code"] != 0:
                    pending[n] = "missing from metadata response" if t is None else \
                        errors.error_class(t["error_code"]).__name__
                elif not t["partitions"]:
                    pending[n] = "no partitions reported"
                else:
                    bad = [f"p{p['partition_index']}=no leader" for p in t["partitions"]
                           if p["leader_id"] < 0]
                    if bad:
                        pending[n] = ",".join(bad)
            if not pending:
                return
            if time.monotonic() >= deadline:
                raise errors.KafkaTimeoutError(f"Topics not ready after {timeout_ms}ms: {pending}")
            time.sleep(0.1)

    def delete_topics(self, topics: Sequence[str | uuid.UUID], timeout_ms: int | None = None,
                      raise_errors: bool = True) -> dict[str, list[dict[str, Any]]]:
        """Delete topics by name. Returns {'topics': [{name, topic_id, error_code,
        error_message}]}; the first error is raised unless raise_errors=False. Topics named by
        id get UNKNOWN_TOPIC_ID (Riverbed's topics have no ids)."""
        timeout_ms = self._timeout_ms(timeout_ms)
        results: dict[Any, errors.KafkaError | None] = {}
        for t in topics:
            if isinstance(t, uuid.UUID):
                results[t] = errors.UnknownTopicIdError("topics have no ids in Riverbed")
        names = [t for t in topics if not isinstance(t, uuid.UUID)]
        if raise_errors and names:      # one request; its first error raised
            self._admin.delete_topics(names, timeout_ms)
            results.update((n, None) for n in names)
        for n in names if not raise_errors else ():     # each topic alone, for its answer
            try:
                self._admin.delete_topics([n], timeout_ms)
                results[n] = None
            except errors.KafkaError as e:
                results[n] = e
        if raise_errors:
            first = next((e for e in results.values() if e is not None), None)
            if first is not None:
                raise first
        out = []
        for t in topics:
            err = results[t]
            out.append({"name": None if isinstance(t, uuid.UUID) else t,
                        "topic_id": t if isinstance(t, uuid.UUID) else None,
                        "error_code": err.code if err else 0,
                        "error_message": (err.message or None) if err else None})
        return {"topics": out}

    # -- configs -------------------------------------------------------------------------------
    @staticmethod
    def _resource_type(r: ConfigResource) -> ConfigResourceType:
        return ConfigResourceType(r.resource_type)  # type: ignore[arg-type]  # normalised

    def _configs(self, r: ConfigResource) -> dict[str, dict[str, Any]]:
        """A resource's configs as kafka-python 3.0 describes them (all of them), {} for one
        Riverbed does not have (an unknown topic, a broker: kafka-python leaves its error)."""
        rtype = self._resource_type(r)
        if rtype in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
            try:
                int(r.name)
            except ValueError:
                raise ValueError("Broker resource names must be an integer or a string "
                                 "represented integer") from None
        if rtype is not ConfigResourceType.TOPIC:
            return {}
        try:
            entries = self._admin.describe_configs(r.name, include_defaults=True)
        except errors.KafkaError:
            return {}
        keys = None if r.configs is None else set(r.configs)
        return {e.name: {"value": e.value, "read_only": False,
                         "config_source": (ConfigSourceType.DEFAULT_CONFIG if e.is_default else
                                           ConfigSourceType.DYNAMIC_TOPIC_CONFIG).name,
                         "is_sensitive": False, "synonyms": [], "config_type": "UNKNOWN",
                         "documentation": None}
                for e in entries.values() if keys is None or e.name in keys}

    def describe_configs(self, config_resources: Sequence[ConfigResource],
                         include_synonyms: bool = False, config_filter: Any = "modified"
                         ) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
        """{resource type ('topic'): {name: {key: {value, read_only, config_source,
        is_sensitive, synonyms, config_type, documentation}}}}. config_filter: 'modified' (the
        default: overrides only), 'dynamic' or 'all' (every key), 'default', 'static' (none:
        Riverbed's topic configs are all dynamic). A resource's `configs` (names) narrows it."""
        flt = ConfigFilterType.build_from(config_filter)
        out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        for r in config_resources:
            shown = {k: v for k, v in self._configs(r).items()
                     if not flt.should_skip(ConfigSourceType[v["config_source"]])}
            out.setdefault(self._resource_type(r).name.lower(), {})[r.name] = shown
        return out

    def _alter(self, r: ConfigResource, ops: dict[str, tuple[int, Any]],
               validate_only: bool) -> str:
        """One resource's SET/DELETE/APPEND/SUBTRACT ops -> 'OK' or kafka-python's error text."""
        if self._resource_type(r) is not ConfigResourceType.TOPIC:
            return _error_text(errors.InvalidRequestError(
                "Riverbed's configs are per topic"))
        sets: dict[str, str] = {}
        deletes: list[str] = []
        try:
            current = None
            for key, (op, value) in ops.items():
                if op == AlterConfigOp.DELETE:
                    deletes.append(key)
                elif op == AlterConfigOp.SET:
                    sets[key] = str(value)
                else:       # APPEND / SUBTRACT on a list config (comma-separated)
                    if current is None:
                        current = self._admin.describe_configs(r.name)
                    items = [x for x in (current[key].value if key in current else "").split(",")
                             if x]
                    values = [x for x in str(value).split(",") if x]
                    if op == AlterConfigOp.APPEND:
                        items += [v for v in values if v not in items]
                    else:
                        items = [x for x in items if x not in values]
                    sets[key] = ",".join(items)
            self._admin.alter_configs(r.name, set=sets, delete=deletes,
                                      validate_only=validate_only)
        except errors.KafkaError as e:
            return _error_text(e)
        return "OK"

    def _check_known(self, resources: Sequence[ConfigResource]) -> None:
        for r in resources:
            unknown = set(r.configs or []) - set(self._configs(ConfigResource(
                r.resource_type, r.name)))
            if unknown:
                raise ValueError(f"Unrecognized configs: {unknown}")

    def alter_configs(self, config_resources: Sequence[ConfigResource],
                      validate_only: bool = False, raise_on_unknown: bool = True,
                      incremental: bool | None = None) -> dict[str, dict[str, str]]:
        """Each resource's `configs`: {key: value} (SET) or {key: (AlterConfigOp, value)} (SET,
        DELETE, APPEND, SUBTRACT); only the keys given change (Riverbed's AlterConfigs is
        incremental; incremental=False gives the same result, as kafka-python makes legacy
        AlterConfigs keep the other overrides). raise_on_unknown: a key the topic does not
        have is a ValueError. Returns {resource type: {name: 'OK' or the error}}."""
        if raise_on_unknown:
            self._check_known(config_resources)
        out: dict[str, dict[str, str]] = {}
        for r in config_resources:
            if r.configs and not isinstance(r.configs, Mapping):
                raise TypeError("alter_configs requires configs as a dict of {key: (op, value)} "
                                "or {key: value} (interpreted as SET)")
            ops: dict[str, tuple[int, Any]] = {}
            configs: Mapping[str, Any] = r.configs or {}  # type: ignore[assignment]
            for key, v in configs.items():
                op, value = v if isinstance(v, tuple) else (AlterConfigOp.SET, v)
                op = AlterConfigOp.build_from(op)
                if incremental is False and op is not AlterConfigOp.SET:
                    raise ValueError(f"Non-incremental AlterConfigsRequest does not support "
                                     f"operation {op} (SET only)")
                ops[key] = (op, value)
            out.setdefault(self._resource_type(r).name.lower(), {})[r.name] = self._alter(
                r, ops, validate_only)
        return out

    def reset_configs(self, config_resources: Sequence[ConfigResource],
                      validate_only: bool = False, raise_on_unknown: bool = True,
                      incremental: bool | None = None) -> dict[str, dict[str, str]]:
        """Back to the defaults: each resource's `configs` (names; none: every override)."""
        if raise_on_unknown:
            self._check_known(config_resources)
        out: dict[str, dict[str, str]] = {}
        for r in config_resources:
            keys = list(r.configs or ())
            if not keys:
                keys = list(self.describe_configs([ConfigResource(r.resource_type, r.name)])
                            .get(self._resource_type(r).name.lower(), {}).get(r.name, {}))
            out.setdefault(self._resource_type(r).name.lower(), {})[r.name] = self._alter(
                r, {k: (AlterConfigOp.DELETE, None) for k in keys}, validate_only)
        return out

    def list_config_resources(self, resource_types: Any = None) -> Any:
        raise _unsupported("ListConfigResourcesRequest")

    # -- partitions ----------------------------------------------------------------------------
    def create_partitions(self, topic_partitions: Mapping[str, Any],
                          timeout_ms: int | None = None, validate_only: bool = False,
                          raise_errors: bool = True) -> ProtocolStruct:
        """Grow topics: {topic: total count}, {topic: {'count': n, 'assignments': [[node ids]]}}
        or (deprecated in 3.0) {topic: NewPartitions}. Returns the CreatePartitionsResponse
        (results: name, error_code, error_message); the first error is raised unless
        raise_errors=False."""
        results = []
        first: errors.KafkaError | None = None
        for topic, count in topic_partitions.items():
            if isinstance(count, int):
                total, assignment = count, None
            elif isinstance(count, Mapping):
                total, assignment = count["count"], count.get("assignments")
            elif isinstance(count, NewPartitions):
                total, assignment = count.total_count, count.new_assignments
            else:
                raise TypeError(f"create_partitions: {topic}: expected a count, a dict or "
                                f"NewPartitions, got {count!r}")
            try:
                self._admin.create_partitions(topic, total, assignment=assignment,
                                              validate_only=validate_only)
                code, msg = 0, None
            except errors.KafkaError as e:
                first = first or e
                code, msg = e.code, e.message or None
            results.append(ProtocolStruct("CreatePartitionsTopicResult", 3, name=topic,
                                          error_code=code, error_message=msg))
        if raise_errors and first is not None:
            raise first
        return ProtocolStruct("CreatePartitionsResponse", 3, throttle_time_ms=0, results=results)

    def delete_records(self, records_to_delete: Mapping[TopicPartition, int],
                       timeout_ms: int | None = None, partition_leader_id: int | None = None
                       ) -> dict[TopicPartition, dict[str, int]]:
        """Delete the records before each offset (-1: the high watermark) -> {TopicPartition:
        {'partition_index', 'low_watermark', 'error_code'}}, the partition's log start offset
        now. Partitions the cluster does not have: UnknownTopicOrPartitionError before anything
        is deleted. A partition's error is raised after the others are done: its class for
        one (OffsetOutOfRangeError past the high watermark), BrokerResponseError naming each
        for several. A leader moving is retried until timeout_ms (request_timeout_ms).
        partition_leader_id is ignored: the gateway sends each partition to its leader."""
        timeout_ms = self._timeout_ms(timeout_ms)
        wanted = {TopicPartition(*tp): offset for tp, offset in records_to_delete.items()}
        if not wanted:
            return {}
        known = set(self._all_partitions({tp.topic for tp in wanted}))
        unknown = [tp for tp in wanted if tuple(tp) not in known]
        if unknown:
            raise errors.UnknownTopicOrPartitionError(
                "The following partitions are not known: " + ", ".join(str(tp) for tp in unknown))
        results = self._admin._delete_records_results(wanted, timeout_ms)
        failed = {tp: r for tp, r in results.items() if isinstance(r, errors.KafkaError)}
        if len(failed) == 1:
            ((tp, err),) = failed.items()
            raise type(err)(f"Error deleting records from topic {tp.topic} partition "
                            f"{tp.partition}")
        if failed:
            raise errors.BrokerResponseError(
                "The following errors occured when trying to delete records: " + ", ".join(
                    f"{tp.topic}(partition={tp.partition}): {type(e).__name__}"
                    for tp, e in failed.items()))
        return {tp: {"partition_index": tp.partition, "low_watermark": low, "error_code": 0}
                for tp, low in results.items()}

    def _all_partitions(self, topics: Iterable[str] | None) -> list[tuple[str, int]]:
        return [(t["name"], p["partition_index"]) for t in self.describe_topics(
            None if topics is None else list(topics)) for p in t["partitions"]]

    def elect_leaders(self, election_type: int, topic_partitions: Any = None,
                      timeout_ms: int | None = None, raise_errors: bool = True) -> ProtocolStruct:
        """Preferred-leader election (election_type 0) for {topic: [partitions]}, [topic] (all
        its partitions) or None (every partition). Returns the ElectLeadersResponse
        (replica_election_results: topic, partition_result: partition_id, error_code,
        error_message); errors other than ELECTION_NOT_NEEDED are raised unless
        raise_errors=False. Unclean elections (1) are not served."""
        if int(election_type) != 0:
            raise _unsupported("ElectLeadersRequest(election_type=UNCLEAN)")
        if topic_partitions is None:
            parts = None
        elif isinstance(topic_partitions, Mapping):
            parts = [(t, p) for t, ps in topic_partitions.items() for p in ps]
        else:
            parts = self._all_partitions(topic_partitions)
        answers = self._admin.elect_leaders(parts)
        by_topic: dict[str, list[ProtocolStruct]] = {}
        first = None
        for (t, p), err in answers.items():
            if err is not None and not isinstance(err, errors.ElectionNotNeededError):
                first = first or err
            by_topic.setdefault(t, []).append(ProtocolStruct(
                "PartitionResult", 2, partition_id=p, error_code=err.code if err else 0,
                error_message=(err.message or None) if err else None))
        if raise_errors and first is not None:
            raise first
        return ProtocolStruct("ElectLeadersResponse", 2, throttle_time_ms=0, error_code=0,
                              replica_election_results=[
                                  ProtocolStruct("ReplicaElectionResult", 2, topic=t,
                                                 partition_result=rs)
                                  for t, rs in by_topic.items()])

    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, Any],
                                      timeout_ms: int | None = None
                                      ) -> dict[TopicPartition, type[errors.KafkaError] | None]:
        """{TopicPartition: [node ids]} -> {TopicPartition: None (accepted) or the error
        class}. Cancelling (None) is not served: NoReassignmentInProgressError."""
        out: dict[TopicPartition, type[errors.KafkaError] | None] = {}
        for tp, replicas in reassignments.items():
            tp = TopicPartition(*tp)
            if replicas is not None:
                replicas = list(replicas)
                if not replicas:
                    raise ValueError(f"Replica list for {tp} must be non-empty; use None to "
                                     "cancel a reassignment.")
                if not all(isinstance(r, int) for r in replicas):
                    raise ValueError(f"Replica list for {tp} must be int broker_ids.")
        for tp, replicas in reassignments.items():
            tp = TopicPartition(*tp)
            if replicas is None:
                out[tp] = errors.NoReassignmentInProgressError
                continue
            try:
                self._admin.alter_partition_reassignments(
                    {(tp.topic, tp.partition): list(replicas)})
                out[tp] = None
            except errors.KafkaError as e:
                out[tp] = type(e)
        return out

    def list_partition_reassignments(self, topic_partitions: Any = None,
                                     timeout_ms: int | None = None
                                     ) -> dict[TopicPartition, dict[str, list[int]]]:
        """{TopicPartition: {'replicas', 'adding_replicas', 'removing_replicas'}} of the
        reassignments in progress ({topic: [partitions]}, [TopicPartition] or None: all)."""
        if topic_partitions is None:
            parts = None
        elif isinstance(topic_partitions, Mapping):
            parts = [(t, p) for t, ps in topic_partitions.items() for p in ps]
        else:
            parts = [tuple(tp) for tp in topic_partitions]
        return {TopicPartition(*tp): {"replicas": list(r["replicas"]),
                                      "adding_replicas": list(r["adding_replicas"]),
                                      "removing_replicas": list(r["removing_replicas"])}
                for tp, r in self._admin.list_partition_reassignments(parts).items()}

    def describe_topic_partitions(self, topics: Sequence[str],
                                  response_partition_limit: int = 2000,
                                  cursor: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """kafka-python's DescribeTopicPartitions (KIP-966) shape, from Riverbed's metadata:
        {'topics': [...], 'next_cursor': None or {'topic_name', 'partition_index'}}."""
        topics_out: list[dict[str, Any]] = []
        left = response_partition_limit
        next_cursor = None
        started = cursor is None
        for t in self.describe_topics(sorted(topics)):
            if not started and t["name"] != cursor["topic_name"]:  # type: ignore[index]
                continue
            first = 0 if started else cursor["partition_index"]  # type: ignore[index]
            started = True
            parts = []
            for p in t["partitions"]:
                if p["partition_index"] < first:
                    continue
                if left <= 0:
                    next_cursor = {"topic_name": t["name"],
                                   "partition_index": p["partition_index"]}
                    break
                left -= 1
                parts.append({"error_code": p["error_code"],
                              "partition_index": p["partition_index"],
                              "leader_id": p["leader_id"], "leader_epoch": p["leader_epoch"],
                              "replica_nodes": p["replica_nodes"], "isr_nodes": p["isr_nodes"],
                              "eligible_leader_replicas": None, "last_known_elr": None,
                              "offline_replicas": p["offline_replicas"]})
            topics_out.append({"error_code": t["error_code"], "name": t["name"], "topic_id": None,
                               "is_internal": t["is_internal"], "partitions": parts,
                               "topic_authorized_operations": None})
            if next_cursor is not None:
                break
        return {"topics": topics_out, "next_cursor": next_cursor}

    def list_partition_offsets(self, topic_partition_specs: Mapping[TopicPartition, Any],
                               isolation_level: Any = IsolationLevel.READ_UNCOMMITTED,
                               timeout_ms: int | None = None
                               ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """{TopicPartition: OffsetSpec or a timestamp (ms)} -> {TopicPartition:
        OffsetAndTimestamp(offset, timestamp, leader_epoch)}. A partition the cluster does not
        have raises UnknownTopicOrPartitionError at once."""
        IsolationLevel.build_from(isolation_level)
        specs: dict[TopicPartition, int] = {}
        for tp, spec in topic_partition_specs.items():
            if not isinstance(spec, int):
                raise TypeError(f"Unsupported ts type {type(spec)}, expected int or OffsetSpec")
            specs[TopicPartition(*tp)] = int(spec)
        if not specs:
            return {}
        known = set(self._all_partitions({tp.topic for tp in specs}))
        unknown = [tp for tp in specs if tuple(tp) not in known]
        if unknown:
            raise errors.UnknownTopicOrPartitionError(
                "The following partitions are not known: "
                + ", ".join(str(tp) for tp in unknown))
        return self._admin.list_offsets(specs)

    # -- cluster -------------------------------------------------------------------------------
    def describe_cluster(self) -> dict[str, Any]:
        """{cluster_id, controller_id, brokers: [{broker_id, host, port, rack}],
        authorized_operations}: the brokers are Riverbed's storage nodes."""
        c = self._admin.describe_cluster()
        return {"cluster_id": c.cluster_id, "controller_id": c.controller_id,
                "brokers": [{"broker_id": b.node_id, "host": b.host, "port": b.port,
                             "rack": b.rack} for b in c.brokers],
                "authorized_operations": None}

    def describe_log_dirs(self, topic_partitions: Any = None,
                          brokers: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """Per storage node: {'broker': id, 'log_dirs': [{error_code, log_dir, topics: [{name,
        partitions: [{partition_index, partition_size, offset_lag, is_future_key}]}],
        total_bytes, usable_bytes}]}."""
        wanted: set[tuple[str, int]] | None = None
        topics = None if topic_partitions is None else list(topic_partitions)
        if isinstance(topic_partitions, Mapping):
            wanted = {(t, p) for t, ps in topic_partitions.items() for p in ps}
        out = []
        for node in self._admin.describe_log_dirs(brokers, topics):
            dirs = []
            for d in node.log_dirs:
                by_topic: dict[str, list[dict[str, Any]]] = {}
                for r in d.replicas:
                    if wanted is None or (r.topic, r.partition) in wanted:
                        by_topic.setdefault(r.topic, []).append({
                            "partition_index": r.partition, "partition_size": r.size_bytes,
                            "offset_lag": r.offset_lag, "is_future_key": r.is_future})
                code = errors.KafkaStorageError.code if d.error else 0
                dirs.append({"error_code": code, "log_dir": d.path,
                             "topics": [{"name": t, "partitions": ps}
                                        for t, ps in by_topic.items()],
                             "total_bytes": d.total_bytes, "usable_bytes": d.free_bytes})
            out.append({"broker": node.node_id, "log_dirs": dirs})
        return out

    def alter_replica_log_dirs(self, replica_assignments: Mapping[Any, str]
                               ) -> dict[TopicPartitionReplica, type[errors.KafkaError]]:
        """{TopicPartitionReplica (or (topic, partition, broker_id)): log dir} ->
        {TopicPartitionReplica: NoError or the error class}."""
        out: dict[TopicPartitionReplica, type[errors.KafkaError]] = {}
        for tpr, path in replica_assignments.items():
            tpr = TopicPartitionReplica(*tpr)
            try:
                self._admin.alter_replica_log_dirs(
                    {(tpr.topic, tpr.partition, tpr.broker_id): path})
                out[tpr] = errors.NoError
            except errors.KafkaError as e:
                out[tpr] = type(e)
        return out

    def describe_metadata_quorum(self) -> Any:
        raise _unsupported("DescribeQuorumRequest")

    def describe_features(self, send_request_to_controller: bool = False) -> Any:
        raise _unsupported("ApiVersionsRequest(features)")

    def update_features(self, feature_updates: Any, validate_only: bool = False,
                        timeout_ms: int = 60000) -> Any:
        raise _unsupported("UpdateFeaturesRequest")

    # -- groups --------------------------------------------------------------------------------
    def list_groups(self, broker_ids: Sequence[int] | None = None, states_filter: Any = None,
                    types_filter: Any = None) -> list[dict[str, str]]:
        """[{'group_id', 'protocol_type', 'group_state'}] of every group, or only those in
        `states_filter` (GroupState members or names). broker_ids is ignored: the gateway asks
        every coordinator. types_filter (KIP-848) is not served."""
        if types_filter:
            raise errors.IncompatibleBrokerVersion(
                "No version of the 'ListGroupsRequest' Kafka protocol with types_filter is "
                "served by Riverbed (its groups are all classic)")
        states = [GroupState.value_for(s) for s in states_filter or ()]
        return [{"group_id": g.group_id, "protocol_type": g.protocol_type,
                 "group_state": g.state} for g in self._admin.list_groups(states)]

    def describe_groups(self, group_ids: Sequence[str], group_coordinator_id: int | None = None,
                        include_authorized_operations: bool = False
                        ) -> dict[str, dict[str, Any]]:
        """{group_id: {group_id, group_state, protocol_type, protocol_data, members: [{member_id,
        group_instance_id, client_id, client_host, member_metadata: {topics, user_data},
        member_assignment: {assigned_partitions: [{topic, partitions}], user_data}}],
        authorized_operations, error}}; an unknown group is 'Dead' with no members. An SDK
        member's metadata and assignment carry no user data: `user_data` is '', as kafka-python
        3.0 decodes the metadata of its own consumers (range, roundrobin: b'')."""
        out = {}
        for d in self._admin.describe_groups(list(group_ids)):
            members = []
            for m in d.members:
                members.append({
                    "member_id": m.member_id, "group_instance_id": None,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "member_metadata": {"topics": list(m.subscribed_topics), "user_data": ""},
                    "member_assignment": {"assigned_partitions": [
                        {"topic": t, "partitions": ps} for t, ps in group_by_topic(m.assignment)],
                        "user_data": ""}})
            out[d.group_id] = {"group_id": d.group_id, "group_state": d.state,
                               "protocol_type": d.protocol_type, "protocol_data": d.protocol,
                               "members": members, "authorized_operations": None,
                               "error": None}
        return out

    def list_group_offsets(self, group_specs: Any
                           ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """{group_id: [TopicPartition] or None (all)} (or a group id, or a list of them) ->
        {group_id: {TopicPartition: OffsetAndMetadata}}. A partition asked for without a
        commit is there with offset -1, as Kafka answers."""
        if isinstance(group_specs, str):
            group_specs = {group_specs: None}
        elif isinstance(group_specs, list):
            group_specs = {g: None for g in group_specs}
        if not group_specs:
            raise ValueError("Empty group_specs!")
        out = {}
        for group_id, partitions in group_specs.items():
            wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
            committed = self._admin.list_group_offsets(group_id, wanted)
            if wanted is not None:
                committed = {tp: committed.get(tp, OffsetAndMetadata(-1, "", -1))
                             for tp in dict.fromkeys(wanted)}
            out[group_id] = committed
        return out

    def delete_groups(self, group_ids: Sequence[str], group_coordinator_id: int | None = None
                      ) -> dict[str, str]:
        """Delete groups without members, with their committed offsets -> {group_id: 'OK' or
        the error's class name} ('NonEmptyGroupError' while it has members,
        'GroupIdNotFoundError' for one with neither metadata nor offsets).
        group_coordinator_id is ignored: the gateway asks each group's coordinator."""
        return {gid: "OK" if err is None else type(err).__name__
                for gid, err in self._admin._delete_groups_results(list(group_ids)).items()}

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, Any],
                            group_coordinator_id: int | None = None
                            ) -> dict[TopicPartition, type[errors.KafkaError]]:
        """Commit {TopicPartition: OffsetAndMetadata} for a group without members ->
        {TopicPartition: NoError or the error class} (UnknownMemberIdError for all of them
        when the group has members)."""
        if not offsets:
            return {}
        oms = normalize_offsets(offsets)
        req = offsets_to_commit_request(group_id, -1, "", oms)
        try:
            resp = self._admin._group_call(ApiKey.OFFSET_COMMIT, req)
        except errors.KafkaError as e:      # the whole request: every partition
            return {tp: type(e) for tp in oms}
        codes = {TopicPartition(t.name, p.partition_index): p.error_code
                 for t in resp.topics for p in t.partitions}
        return {tp: errors.error_class(codes.get(tp, errors.UnknownServerError.code)) for tp in oms}

    def reset_group_offsets(self, group_id: str, offset_specs: Mapping[TopicPartition, Any],
                            group_coordinator_id: int | None = None
                            ) -> dict[TopicPartition, dict[str, Any]]:
        """Commit, for a group without members, per partition: an OffsetSpec (EARLIEST,
        LATEST, ...), an OffsetTimestamp (the first offset at or after it) or an offset; each
        clamped into [earliest, latest] (a spec that finds nothing: latest), the committed
        metadata kept. -> {TopicPartition: {'error': NoError or the error class, 'offset'}}."""
        if not offset_specs:
            return {}
        tps = [TopicPartition(*tp) for tp in offset_specs]
        lookups = {}
        for tp, val in zip(tps, offset_specs.values()):
            if isinstance(val, (OffsetSpec, OffsetTimestamp)):
                lookups[tp] = int(val)
            elif not isinstance(val, int):
                raise TypeError(f"Unsupported reset target for {tp}: {val!r} (expected "
                                "OffsetSpec, OffsetTimestamp, or int offset)")
        current = self.list_group_offsets({group_id: tps})[group_id]
        earliest = self._admin.list_offsets({tp: "earliest" for tp in tps})
        latest = self._admin.list_offsets({tp: "latest" for tp in tps})
        found = self._admin.list_offsets(lookups) if lookups else {}
        to_reset = {}
        for tp, val in zip(tps, offset_specs.values()):
            raw = found[tp].offset if tp in found else int(val)
            lo, hi = earliest[tp].offset, latest[tp].offset
            offset = hi if raw < 0 or raw > hi else lo if raw < lo else raw
            was = current.get(tp)
            to_reset[tp] = was._replace(offset=offset) if was is not None and was.offset >= 0 \
                else OffsetAndMetadata(offset, "", -1)
        results = self.alter_group_offsets(group_id, to_reset)
        return {tp: {"error": results[tp], "offset": to_reset[tp].offset} for tp in tps}

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                             group_coordinator_id: int | None = None
                             ) -> dict[TopicPartition, type[errors.KafkaError]]:
        """Forget a group's committed offsets of these partitions -> {TopicPartition: NoError
        or the error class}; an error of the whole request (NonEmptyGroupError,
        GroupIdNotFoundError) is raised."""
        parts = [TopicPartition(*tp) for tp in partitions]
        if not parts:
            return {}
        resp = self._admin._delete_group_offsets_answers(group_id, parts)
        return {TopicPartition(t.name, p.partition_index): errors.error_class(p.error_code)
                for t in resp.topics for p in t.partitions}

    def remove_group_members(self, group_id: str, members: Iterable[Any],
                             group_coordinator_id: int | None = None
                             ) -> dict[str, type[errors.KafkaError]]:
        """Remove members (MemberToRemove with a member_id) from a group -> {member_id: NoError
        or the error class}. Static members (group_instance_id only) are not served."""
        out: dict[str, type[errors.KafkaError]] = {}
        for m in members:
            if not m.member_id:
                if m.group_instance_id is not None:
                    raise errors.UnsupportedVersionError(
                        "Riverbed's groups have no static members (group.instance.id)")
                raise ValueError("MemberToRemove.member_id is required")
            try:
                resp = self._admin._call(ApiKey.LEAVE_GROUP, group_pb2.LeaveGroupRequest(
                    group_id=group_id, member_id=m.member_id))
                out[m.member_id] = errors.error_class(resp.error_code)
            except errors.KafkaError as e:
                out[m.member_id] = type(e)
        return out

    # -- ACLs --------------------------------------------------------------------------------
    def describe_acls(self, acl_filter: ACLFilter) -> tuple[list[ACL], type[errors.KafkaError]]:
        """The ACLs an ACLFilter matches -> ([ACL], NoError); an error is raised
        (ClusterAuthorizationFailedError without Describe on the cluster)."""
        if not isinstance(acl_filter, ACLFilter):
            raise errors.IllegalArgumentError("acl_filter must be an ACLFilter object")
        return self._admin.describe_acls(acl_filter), errors.NoError

    def create_acls(self, acls: Sequence[ACL]) -> dict[str, list[Any]]:
        """Add ACLs -> {'succeeded': [ACL], 'failed': [error class]} (an ACL that exists
        succeeds; one Riverbed cannot keep: InvalidRequestError; without Alter on the cluster
        every one fails with ClusterAuthorizationFailedError)."""
        for acl in acls:
            if not isinstance(acl, ACL):
                raise errors.IllegalArgumentError("acls must contain ACL objects")
        out: dict[str, list[Any]] = {"succeeded": [], "failed": []}
        try:
            results = self._admin._create_acls_results(acls)
        except errors.KafkaError as e:      # the whole request: every ACL
            out["failed"] = [type(e)] * len(acls)
            return out
        for acl, err in results:
            if err is None:
                out["succeeded"].append(acl)
            else:
                out["failed"].append(type(err))
        return out

    def delete_acls(self, acl_filters: Sequence[ACLFilter]
                    ) -> list[tuple[ACLFilter, list[ACL], type[errors.KafkaError]]]:
        """Remove the ACLs each ACLFilter matches -> [(filter, [ACL removed], NoError or the
        error class)] in the filters' order."""
        for f in acl_filters:
            if not isinstance(f, ACLFilter):
                raise errors.IllegalArgumentError(
                    "acl_filters must contain ACLFilter type objects")
        try:
            results = self._admin._delete_acls_results(acl_filters)
        except errors.KafkaError as e:      # the whole request: every filter
            return [(f, [], type(e)) for f in acl_filters]
        return [(f, matched, errors.NoError if err is None else type(err))
                for f, matched, err in results]

    # -- what Riverbed's SDK does not serve yet ----------------------------------------------
    def list_transactions(self, *args: Any, **kwargs: Any) -> Any:
        raise _unsupported("ListTransactionsRequest", _TXN_INSTEAD)

    def describe_transactions(self, transactional_ids: Any) -> Any:
        raise _unsupported("DescribeTransactionsRequest", _TXN_INSTEAD)

    def describe_producers(self, partitions: Any, broker_id: int | None = None) -> Any:
        raise _unsupported("DescribeProducersRequest")

    def abort_transaction(self, spec: Any) -> Any:
        raise _unsupported("WriteTxnMarkersRequest")

    def find_hanging_transactions(self, *args: Any, **kwargs: Any) -> Any:
        raise _unsupported("ListTransactionsRequest")

    def alter_user_scram_credentials(self, alterations: Any) -> Any:
        raise _unsupported("AlterUserScramCredentialsRequest", _SCRAM_INSTEAD)

    def describe_user_scram_credentials(self, users: Any = None) -> Any:
        raise _unsupported("DescribeUserScramCredentialsRequest", _SCRAM_INSTEAD)

    # -- kafka-python 2.x's names whose 3.0 names differ: their 2.x shapes --------------------
    def list_consumer_groups(self, broker_ids: Sequence[int] | None = None
                             ) -> list[tuple[str, str]]:
        """kafka-python 2.x's: [(group_id, protocol_type)] (3.0: list_groups)."""
        return kafka_python_v2.list_consumer_groups(self._admin, broker_ids)

    def describe_consumer_groups(self, group_ids: Sequence[str],
                                 group_coordinator_id: int | None = None,
                                 include_authorized_operations: bool = False
                                 ) -> list[kafka_python_v2.GroupInformation]:
        """kafka-python 2.x's: [GroupInformation] (3.0: describe_groups)."""
        return kafka_python_v2.describe_consumer_groups(self._admin, group_ids)

    def list_consumer_group_offsets(self, group_id: str, group_coordinator_id: int | None = None,
                                    partitions: Iterable[TopicPartition] | None = None
                                    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """kafka-python 2.x's: {TopicPartition: OffsetAndMetadata} of one group (3.0:
        list_group_offsets)."""
        return kafka_python_v2.list_consumer_group_offsets(self._admin, group_id,
                                                           partitions=partitions)

    def alter_consumer_group_offsets(self, group_id: str,
                                     offsets: Mapping[TopicPartition, Any],
                                     group_coordinator_id: int | None = None) -> None:
        """kafka-python 2.x's: commit offsets for a group without members, errors raised (3.0:
        alter_group_offsets)."""
        kafka_python_v2.alter_consumer_group_offsets(self._admin, group_id, offsets)

    def delete_consumer_groups(self, group_ids: Sequence[str],
                               group_coordinator_id: int | None = None
                               ) -> list[tuple[str, type[errors.KafkaError]]]:
        """kafka-python 2.x's: [(group_id, NoError or the error class)] (3.0: delete_groups)."""
        return [(gid, errors.NoError if err is None else type(err))
                for gid, err in self._admin._delete_groups_results(list(group_ids)).items()]
