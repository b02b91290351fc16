"""kafka-python 3.0's admin and client value types: the enums and small classes a kafka-python
program passes to KafkaAdminClient / KafkaConsumer (OffsetSpec, IsolationLevel, AlterConfigOp,
ConfigFilterType, GroupState, the ACL types, ...). Riverbed's own Admin takes the ACL types too
(riverbed.acl_bindings puts them on the wire); it has no use for the others.

Same names, members and numbers as kafka-python 3.0.12's (Kafka's numbers), so that `from
kafka.admin import ACL, OffsetSpec` becomes `from riverbed.admin import ACL, OffsetSpec` and
nothing else changes. Also how kafka-python's client settings map onto Riverbed's clients
(kafka_python_settings). Pure values and functions: no I/O.
"""
from __future__ import annotations

import enum
from typing import Any, TypeVar

from riverbed import errors

__all__ = ["EnumHelper", "OffsetSpec", "OffsetTimestamp", "IsolationLevel", "AlterConfigOp",
           "ConfigFilterType", "ConfigType", "ConfigSourceType", "GroupState", "GroupType",
           "MemberToRemove", "UpdateFeatureType", "ResourceType", "ACLOperation",
           "ACLPermissionType", "ACLResourcePatternType", "ResourcePatternFilter",
           "ResourcePattern", "ACLFilter", "ACL", "valid_acl_operations",
           "CONNECTION_SETTINGS", "kafka_python_settings", "kafka_python_security"]

_E = TypeVar("_E", bound=enum.Enum)


class EnumHelper:
    """kafka-python's lookups: by member, value or name (any case, '-' for '_')."""

    @classmethod
    def build_from(cls: type[_E], val: Any) -> _E:  # type: ignore[misc]
        if isinstance(val, cls):
            return val
        try:
            return cls(val)
        except ValueError:
            pass
        try:
            return cls[str(val).strip().upper().replace("-", "_")]
        except KeyError:
            raise ValueError(f"Unrecognized {cls.__name__}: {val}") from None

    @classmethod
    def value_for(cls, val: Any) -> Any:
        return cls.build_from(val).value  # type: ignore[attr-defined,misc]


class OffsetSpec(EnumHelper, enum.IntEnum):
    """What to look up in ListOffsets besides a timestamp (>= 0)."""
    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3
    EARLIEST_LOCAL = -4
    LATEST_TIERED = -5


class OffsetTimestamp(int):
    """A timestamp (ms) spec, told apart from a bare offset: "the first offset whose record's
    timestamp is >= N"."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"OffsetTimestamp({int(self)})"


class IsolationLevel(EnumHelper, enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class AlterConfigOp(EnumHelper, enum.IntEnum):
    """IncrementalAlterConfigs' operations."""
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSourceType(EnumHelper, enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8

    def is_modified(self) -> bool:
        return self.value not in (3, 4, 5)


class ConfigFilterType(EnumHelper, enum.IntEnum):
    """Which configs describe_configs returns: ALL, DYNAMIC (alterable), MODIFIED (overrides:
    the default), DEFAULT, STATIC."""
    ALL = 0
    DYNAMIC = 1
    MODIFIED = 2
    DEFAULT = 3
    STATIC = 4

    def should_skip(self, source: ConfigSourceType) -> bool:
        if self is ConfigFilterType.MODIFIED:
            return not source.is_modified()
        if self is ConfigFilterType.DEFAULT:
            return source.is_modified()
        if self is ConfigFilterType.STATIC:
            return source is not ConfigSourceType.STATIC_BROKER_CONFIG
        return False


class ConfigType(EnumHelper, enum.IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class GroupState(EnumHelper, str, enum.Enum):
    """Consumer group states as the coordinator reports them (KIP-518, KIP-848)."""
    UNKNOWN = "Unknown"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"


class GroupType(EnumHelper, str, enum.Enum):
    """Group protocol types (KIP-848). Riverbed's groups are all `classic`."""
    UNKNOWN = "Unknown"
    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"


class UpdateFeatureType(EnumHelper, enum.IntEnum):
    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


class MemberToRemove:
    """A group member for KafkaAdminClient.remove_group_members: its member id (dynamic
    member) or group instance id (static member), and a reason."""
    __slots__ = ("member_id", "group_instance_id", "reason")

    def __init__(self, member_id: str | None = None, group_instance_id: str | None = None,
                 reason: str | None = None):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.reason = reason

    def __repr__(self) -> str:
        return (f"<MemberToRemove member_id={self.member_id}, "
                f"group_instance_id={self.group_instance_id}, reason={self.reason}>")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemberToRemove) and (
            self.member_id, self.group_instance_id, self.reason) == (
            other.member_id, other.group_instance_id, other.reason)

    def __hash__(self) -> int:
        return hash((self.member_id, self.group_instance_id, self.reason))


# -- ACLs (Kafka's numbers) --------------------------------------------------------------------
class ResourceType(enum.IntEnum):
    """What an ACL is about. ANY only in a filter."""
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class ACLOperation(enum.IntEnum):
    """What an ACL allows or denies. ANY only in a filter."""
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ACLPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ACLResourcePatternType(enum.IntEnum):
    """How a resource name matches (KIP-290). ANY and MATCH only in a filter."""
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class ResourcePatternFilter:
    def __init__(self, resource_type: ResourceType, resource_name: str | None,
                 pattern_type: ACLResourcePatternType):
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.pattern_type = pattern_type
        self.validate()

    def validate(self) -> None:
        if not isinstance(self.resource_type, ResourceType):
            raise errors.IllegalArgumentError("resource_type must be a ResourceType object")
        if not isinstance(self.pattern_type, ACLResourcePatternType):
            raise errors.IllegalArgumentError(
                "pattern_type must be an ACLResourcePatternType object")

    def __repr__(self) -> str:
        return (f"<ResourcePattern type={self.resource_type.name}, name={self.resource_name}, "
                f"pattern={self.pattern_type.name}>")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResourcePatternFilter) and (
            self.resource_type, self.resource_name, self.pattern_type) == (
            other.resource_type, other.resource_name, other.pattern_type)

    def __hash__(self) -> int:
        return hash((self.resource_type, self.resource_name, self.pattern_type))


class ResourcePattern(ResourcePatternFilter):
    """A concrete resource pattern an ACL applies to."""

    def __init__(self, resource_type: ResourceType, resource_name: str,
                 pattern_type: ACLResourcePatternType = ACLResourcePatternType.LITERAL):
        super().__init__(resource_type, resource_name, pattern_type)

    def validate(self) -> None:
        super().validate()
        if self.resource_type == ResourceType.ANY:
            raise errors.IllegalArgumentError("resource_type cannot be ANY")
        if self.pattern_type in (ACLResourcePatternType.ANY, ACLResourcePatternType.MATCH):
            raise errors.IllegalArgumentError(
                f"pattern_type cannot be {self.pattern_type.name} on a concrete ResourcePattern")


class ACLFilter:
    """A filter for describing and deleting ACLs (None principal/host: any)."""

    def __init__(self, principal: str | None, host: str | None, operation: ACLOperation,
                 permission_type: ACLPermissionType, resource_pattern: ResourcePatternFilter):
        self.principal = principal
        self.host = host
        self.operation = operation
        self.permission_type = permission_type
        self.resource_pattern = resource_pattern
        self.validate()

    def validate(self) -> None:
        if not isinstance(self.operation, ACLOperation):
            raise errors.IllegalArgumentError("operation must be an ACLOperation object")
        if not isinstance(self.permission_type, ACLPermissionType):
            raise errors.IllegalArgumentError("permission_type must be an ACLPermissionType object")
        if not isinstance(self.resource_pattern, ResourcePatternFilter):
            raise errors.IllegalArgumentError(
                "resource_pattern must be a ResourcePatternFilter object")

    def __repr__(self) -> str:
        return (f"<ACL principal={self.principal}, resource={self.resource_pattern}, "
                f"operation={self.operation.name}, type={self.permission_type.name}, "
                f"host={self.host}>")

    def _key(self) -> tuple:
        return (self.principal, self.host, self.operation, self.permission_type,
                self.resource_pattern)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ACLFilter) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


class ACL(ACLFilter):
    """A concrete ACL: principal, host, operation, ALLOW/DENY, on a ResourcePattern."""

    def validate(self) -> None:
        super().validate()
        if self.operation == ACLOperation.ANY:
            raise errors.IllegalArgumentError("operation cannot be ANY")
        if self.permission_type == ACLPermissionType.ANY:
            raise errors.IllegalArgumentError("permission_type cannot be ANY")
        if not isinstance(self.resource_pattern, ResourcePattern):
            raise errors.IllegalArgumentError("resource_pattern must be a ResourcePattern object")


def valid_acl_operations(values: Any) -> set[ACLOperation]:
    """The concrete operations in a bit set's members (UNKNOWN, ANY and ALL left out)."""
    return {ACLOperation(v) for v in values if v not in (0, 1, 2)}


# -- kafka-python's client settings on Riverbed ----------------------------------------------
# Settings of kafka-python 3.0's clients that tune Kafka's TCP connections, TLS, SASL, DNS,
# proxies and its metrics reporters: Riverbed's clients talk ZeroMQ to gateways and have none
# of these, so the kafka-python names take them and drop them.
CONNECTION_SETTINGS = frozenset({
    "api_version", "client_dns_lookup", "connections_max_idle_ms", "kafka_client",
    "metric_reporters", "metrics_enabled", "metrics_num_samples", "metrics_sample_window_ms",
    "metric_group_prefix", "proxy_url", "socks5_proxy", "receive_buffer_bytes",
    "send_buffer_bytes", "receive_message_max_bytes", "reconnect_backoff_ms",
    "reconnect_backoff_max_ms", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
    "sasl_kerberos_name", "sasl_kerberos_service_name", "sasl_kerberos_domain_name",
    "sasl_oauth_token_provider", "selector", "socket_options", "ssl_context",
    "ssl_check_hostname", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password",
    "ssl_crlfile", "ssl_ciphers", "enable_incremental_fetch_sessions",
})
# kafka-python settings whose default is what Riverbed's clients do anyway: dropped when they
# have that value; another value is passed on (and refused if the client has no such setting).
DEFAULT_SETTINGS = {"allow_auto_create_topics": True, "exclude_internal_topics": True,
                    "client_rack": "", "group_instance_id": None}


def kafka_python_settings(configs: dict[str, Any]) -> dict[str, Any]:
    """A kafka-python client's keyword arguments for the Riverbed client under it: the
    connection settings above dropped, security_protocol mapped (kafka_python_security)."""
    out = {k: v for k, v in configs.items() if k not in CONNECTION_SETTINGS
           and not (k in DEFAULT_SETTINGS and v == DEFAULT_SETTINGS[k])}
    if "security_protocol" in out:
        out["security_protocol"] = kafka_python_security(out["security_protocol"])
    return out


def kafka_python_security(protocol: str | None) -> str | None:
    """kafka-python's security_protocol -> Riverbed's: PLAINTEXT (kafka-python's default) leaves
    the choice to the environment (RIVERBED_SECURITY_PROTOCOL, the fleet's client settings);
    Riverbed's NONE and CURVE pass; Kafka's SSL and SASL protocols are for the Kafka listener."""
    if protocol is None or protocol.upper() == "PLAINTEXT":
        return None
    if protocol.upper() in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise errors.KafkaConfigurationError(
            f"security_protocol={protocol!r}: Riverbed's SDK secures its connections with "
            "CurveZMQ (security_protocol='CURVE'); SSL and SASL are served by the gateways' "
            "Kafka listeners, to Kafka's own clients")
    return protocol
