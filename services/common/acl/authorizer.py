"""Kafka's authorization model as a pure core: ACL bindings in, allow/deny decisions out.

No I/O here (no ZooKeeper, sockets, clocks): `services/common/acl/store.py` feeds bindings in
from ZooKeeper; the gateway asks `Authorizer.authorize(...)` before any side effect.

A binding (Kafka's `AclBinding`) is a resource pattern and an entry:

    ResourcePattern(resource_type, name, pattern_type)     Topic "orders" LITERAL, Group "etl-" PREFIXED
    AclEntry(principal, host, operation, permission)       User:alice  *  Read  ALLOW

Decisions (Kafka's `AclAuthorizer.authorize`, kept rule for rule):
1. a principal named in `super.users` is allowed everything;
2. the ACLs that apply to a resource are the LITERAL ones with its name, the LITERAL ones with the
   wildcard name `*`, and the PREFIXED ones whose name is a prefix of its name;
3. if none apply at all (for anyone), the answer is `allow.everyone.if.no.acl.found`;
4. a matching DENY wins over any ALLOW; an entry matches when its principal is the caller's or
   `User:*`, its host is the caller's or `*`, and its operation is the one asked or `All`;
5. otherwise a matching ALLOW for the operation, or for one that implies it, allows: Read, Write,
   Delete and Alter imply Describe; AlterConfigs implies DescribeConfigs;
6. otherwise deny.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

WILDCARD = "*"                       # a LITERAL name or host that matches every name / host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"       # Kafka's one cluster resource name
ANONYMOUS = "User:ANONYMOUS"
# Decisions memoized per snapshot (a gateway asks the same few questions on every request).
MEMO_MAX = 100_000


class AclError(ValueError):
    """A binding or filter that cannot be stored or applied (bad name, type or principal)."""


class ResourceType(enum.Enum):
    TOPIC = "Topic"
    GROUP = "Group"
    CLUSTER = "Cluster"
    TRANSACTIONAL_ID = "TransactionalId"

    @classmethod
    def parse(cls, s: str) -> "ResourceType":
        return _parse(cls, s, "resource type")


class PatternType(enum.Enum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"

    @classmethod
    def parse(cls, s: str) -> "PatternType":
        return _parse(cls, s, "resource pattern type")


class Operation(enum.Enum):
    ALL = "All"
    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"

    @classmethod
    def parse(cls, s: str) -> "Operation":
        return _parse(cls, s, "operation")


class Permission(enum.Enum):
    ALLOW = "Allow"
    DENY = "Deny"

    @classmethod
    def parse(cls, s: str) -> "Permission":
        return _parse(cls, s, "permission type")


def _parse(cls, s: str, what: str):
    """Kafka's tools accept names in any case and with or without underscores."""
    key = str(s).replace("_", "").replace("-", "").lower()
    for member in cls:
        if member.value.lower() == key or member.name.replace("_", "").lower() == key:
            return member
    raise AclError(f"unknown {what} {s!r}; expected one of {', '.join(m.value for m in cls)}")


# The operations an ALLOW for the key also grants (Kafka's implicit Describe / DescribeConfigs).
IMPLIED_BY: Mapping[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                   Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}

# Which operations make sense on which resource (Kafka's `AclEntry.supportedOperations`).
SUPPORTED: Mapping[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.ALL, Operation.READ, Operation.WRITE, Operation.CREATE,
                                   Operation.DELETE, Operation.ALTER, Operation.DESCRIBE,
                                   Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.ALL, Operation.READ, Operation.DESCRIBE,
                                   Operation.DELETE}),
    ResourceType.CLUSTER: frozenset({Operation.ALL, Operation.CREATE, Operation.CLUSTER_ACTION,
                                     Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                                     Operation.IDEMPOTENT_WRITE, Operation.ALTER,
                                     Operation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.ALL, Operation.DESCRIBE, Operation.WRITE}),
}


def check_principal(principal: str) -> str:
    """'User:alice' (Kafka's `KafkaPrincipal` string: type, colon, name)."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"principal {principal!r}: expected <type>:<name>, e.g. User:alice")
    return principal


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if not self.name:
            raise AclError("a resource name must not be empty")
        if self.pattern_type is PatternType.PREFIXED and self.name == WILDCARD:
            raise AclError("a PREFIXED pattern cannot be '*' (use LITERAL '*' for every name)")
        if self.resource_type is ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}, not {self.name!r}")
        if "/" in self.name:
            raise AclError(f"resource name {self.name!r} must not contain '/'")

    def sort_key(self) -> tuple[str, str, str]:
        return (self.resource_type.value, self.pattern_type.value, self.name)

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == WILDCARD or self.name == name


@dataclass(frozen=True, slots=True)
class AclEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def __post_init__(self) -> None:
        check_principal(self.principal)
        if not self.host:
            raise AclError("host must be an address or '*'")

    def sort_key(self) -> tuple[str, str, str, str]:
        return (self.principal, self.permission.value, self.operation.value, self.host)

    def matches(self, principal: str, host: str, operation: Operation) -> bool:
        return ((self.principal == principal or self.principal == WILDCARD_PRINCIPAL)
                and (self.host == host or self.host == WILDCARD)
                and (self.operation is operation or self.operation is Operation.ALL))


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry

    def __post_init__(self) -> None:
        if self.entry.operation not in SUPPORTED[self.pattern.resource_type]:
            raise AclError(f"operation {self.entry.operation.value} does not apply to a "
                           f"{self.pattern.resource_type.value} resource")

    def describe(self) -> str:
        """kafka-acls' listing line."""
        e = self.entry
        return (f"(principal={e.principal}, host={e.host}, operation={e.operation.value}, "
                f"permissionType={e.permission.value})")


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str           # for logs and error messages: "super user", "denied by ...", ...


class Authorizer:
    """Decisions over one immutable snapshot of the ACLs. Build a new one when ACLs change (the
    shell swaps the reference; readers never see a half-applied change)."""

    __slots__ = ("_acls", "super_users", "allow_everyone_if_no_acl_found", "_by_type",
                 "_literal", "_prefixed", "_memo")

    def __init__(self, acls: Mapping[ResourcePattern, Iterable[AclEntry]] | None = None, *,
                 super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False):
        items = (acls or {}).items()
        self._acls: dict[ResourcePattern, frozenset[AclEntry]] = {
            p: frozenset(es) for p, es in items if es}
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = bool(allow_everyone_if_no_acl_found)
        self._by_type: dict[ResourceType, list[tuple[ResourcePattern, frozenset[AclEntry]]]] = {}
        # Decisions of this (immutable) snapshot, memoized; cleared when it reaches MEMO_MAX.
        self._memo: dict[tuple, bool] = {}
        # Indexes for decisions: literal names (and '*') by dict lookup, prefixes by scan.
        self._literal: dict[tuple[ResourceType, str], frozenset[AclEntry]] = {}
        self._prefixed: dict[ResourceType, list[tuple[str, frozenset[AclEntry]]]] = {}
        for p, es in sorted(self._acls.items(), key=lambda kv: kv[0].sort_key()):
            self._by_type.setdefault(p.resource_type, []).append((p, es))
            if p.pattern_type is PatternType.LITERAL:
                self._literal[(p.resource_type, p.name)] = es
            else:
                self._prefixed.setdefault(p.resource_type, []).append((p.name, es))

    @property
    def acls(self) -> Mapping[ResourcePattern, frozenset[AclEntry]]:
        return self._acls

    def bindings(self) -> list[AclBinding]:
        return [AclBinding(p, e) for p, es in sorted(self._acls.items(), key=lambda kv: kv[0].sort_key())
                for e in sorted(es, key=AclEntry.sort_key)]

    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AclEntry]:
        out: list[AclEntry] = []
        literal = self._literal
        if literal:
            out.extend(literal.get((resource_type, name), ()))
            if name != WILDCARD:
                out.extend(literal.get((resource_type, WILDCARD), ()))
        for prefix, es in self._prefixed.get(resource_type, ()):
            if name.startswith(prefix):
                out.extend(es)
        return out

    def decide(self, principal: str, host: str, operation: Operation,
               resource_type: ResourceType, name: str) -> Decision:
        if principal in self.super_users:
            return Decision(True, "super user")
        acls = self.matching_acls(resource_type, name)
        if not acls:
            return Decision(self.allow_everyone_if_no_acl_found,
                            "no ACL found, allow.everyone.if.no.acl.found="
                            f"{str(self.allow_everyone_if_no_acl_found).lower()}")
        for e in acls:
            if e.permission is Permission.DENY and e.matches(principal, host, operation):
                return Decision(False, f"denied by {e.principal} Deny {e.operation.value} from "
                                       f"host {e.host}")
        wanted = IMPLIED_BY.get(operation, frozenset({operation}))
        for e in acls:
            if e.permission is Permission.ALLOW and any(e.matches(principal, host, op)
                                                        for op in wanted):
                return Decision(True, f"allowed by {e.principal} Allow {e.operation.value}")
        return Decision(False, f"no ACL allows {principal} {operation.value} on "
                               f"{resource_type.value} {name!r}")

    def authorize(self, principal: str, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        ok = self._memo.get(key)
        if ok is None:
            ok = self.decide(principal, host, operation, resource_type, name).allowed
            if len(self._memo) >= MEMO_MAX:
                self._memo.clear()
            self._memo[key] = ok
        return ok

    def authorize_any(self, principal: str, host: str, operation: Operation,
                      resource_type: ResourceType) -> bool:
        """May the principal do `operation` on at least one resource of this type? (Kafka's
        `authorizeByResourceType`, KIP-679: a producer allowed to Write some topic may ask for an
        idempotent producer id.) Super users and, with no ACL of the type at all,
        allow.everyone.if.no.acl.found answer yes; a DENY on the LITERAL '*' name answers no;
        otherwise any matching ALLOW for the operation (or All) answers yes."""
        if principal in self.super_users:
            return True
        entries = self._by_type.get(resource_type, ())
        if not entries:
            return self.allow_everyone_if_no_acl_found
        for p, es in entries:
            if p.pattern_type is PatternType.LITERAL and p.name == WILDCARD:
                if any(e.permission is Permission.DENY and e.matches(principal, host, operation)
                       for e in es):
                    return False
        return any(e.permission is Permission.ALLOW and e.matches(principal, host, operation)
                   for _p, es in entries for e in es)


def with_added(acls: Mapping[ResourcePattern, frozenset[AclEntry]],
               pattern: ResourcePattern, entries: Iterable[AclEntry]) -> frozenset[AclEntry]:
    """The entries a pattern holds after adding some (set union: adding twice is a no-op)."""
    return frozenset(acls.get(pattern, frozenset())) | frozenset(entries)


def with_removed(current: Iterable[AclEntry], entries: Iterable[AclEntry]) -> frozenset[AclEntry]:
    return frozenset(current) - frozenset(entries)
