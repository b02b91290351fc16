"""ACL administration (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS; acl.proto) over the ACL store's
snapshot (pure): Kafka's numbers <-> the authorizer's types, Kafka's filter matching, and what to
write. The gateway's shell reads and writes the znodes (services/common/acl/store.py, the store
`riverbed acls` uses).

Filters match as Kafka's AclBindingFilter does: ANY (and an unset name, principal or host)
matches everything; pattern type MATCH matches every pattern that applies to the name given (the
LITERAL name, the LITERAL '*', PREFIXED prefixes of it); LITERAL / PREFIXED match that pattern
type (and name, when given). A filter with an UNKNOWN type, or a binding that cannot be stored
(bad principal, an operation that does not apply to the resource, a type Riverbed does not keep:
delegation tokens, users), is answered INVALID_REQUEST and changes nothing.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from riverbed._proto.v1 import acl_pb2, errors_pb2
from services.common.acl.authorizer import (
    AclBinding,
    AclEntry,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    WILDCARD,
)

E = errors_pb2.ErrorCode
Snapshot = Mapping[ResourcePattern, frozenset[AclEntry]]

# Kafka's numbers (ResourceType, PatternType, AclOperation, AclPermissionType).
ANY, MATCH = 1, 2
RESOURCE_TYPES = {2: ResourceType.TOPIC, 3: ResourceType.GROUP, 4: ResourceType.CLUSTER,
                  5: ResourceType.TRANSACTIONAL_ID}
PATTERN_TYPES = {3: PatternType.LITERAL, 4: PatternType.PREFIXED}
OPERATIONS = {2: Operation.ALL, 3: Operation.READ, 4: Operation.WRITE, 5: Operation.CREATE,
              6: Operation.DELETE, 7: Operation.ALTER, 8: Operation.DESCRIBE,
              9: Operation.CLUSTER_ACTION, 10: Operation.DESCRIBE_CONFIGS,
              11: Operation.ALTER_CONFIGS, 12: Operation.IDEMPOTENT_WRITE}
PERMISSIONS = {2: Permission.DENY, 3: Permission.ALLOW}
_NUMBER = {**{v: k for k, v in RESOURCE_TYPES.items()}, **{v: k for k, v in PATTERN_TYPES.items()},
           **{v: k for k, v in OPERATIONS.items()}, **{v: k for k, v in PERMISSIONS.items()}}
# Kafka types Riverbed does not keep ACLs for: a filter naming them matches nothing.
UNKEPT_RESOURCE_TYPES = {6: "delegation tokens", 7: "users"}
UNKEPT_OPERATIONS = {13: "CreateTokens", 14: "DescribeTokens"}


def _known(table: Mapping[int, object], value: int, what: str, unkept: Mapping[int, str] = {}):
    if value in table:
        return table[value]
    if value in unkept:
        raise AclError(f"Riverbed keeps no ACLs for {unkept[value]}")
    raise AclError(f"{what} {value} is not one an ACL can have")


def binding_from_pb(b: acl_pb2.AclBinding) -> AclBinding:
    """A binding to store; AclError when it cannot be (Kafka: INVALID_REQUEST)."""
    pattern = ResourcePattern(
        _known(RESOURCE_TYPES, b.resource_type, "resource type", UNKEPT_RESOURCE_TYPES),
        b.resource_name, _known(PATTERN_TYPES, b.pattern_type, "pattern type"))
    entry = AclEntry(b.principal, b.host, _known(OPERATIONS, b.operation, "operation",
                                                 UNKEPT_OPERATIONS),
                     _known(PERMISSIONS, b.permission_type, "permission type"))
    return AclBinding(pattern, entry)


def binding_to_pb(pattern: ResourcePattern, entry: AclEntry) -> acl_pb2.AclBinding:
    return acl_pb2.AclBinding(
        resource_type=_NUMBER[pattern.resource_type], resource_name=pattern.name,
        pattern_type=_NUMBER[pattern.pattern_type], principal=entry.principal, host=entry.host,
        operation=_NUMBER[entry.operation], permission_type=_NUMBER[entry.permission])


def _check_filter_value(value: int, table: Mapping[int, object], what: str,
                        also: Iterable[int] = ()) -> None:
    if value != ANY and value not in table and value not in also:
        raise AclError(f"a filter's {what} must be ANY or a known one, not {value}")


@dataclass(frozen=True, slots=True)
class Filter:
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int
    unkept: bool = False        # names a type Riverbed keeps no ACLs for: matches nothing

    @classmethod
    def from_pb(cls, f: acl_pb2.AclBindingFilter) -> "Filter":
        """AclError for a filter with an UNKNOWN (0) or out-of-range value."""
        unkept = f.resource_type in UNKEPT_RESOURCE_TYPES or f.operation in UNKEPT_OPERATIONS
        _check_filter_value(f.resource_type, RESOURCE_TYPES, "resource type", UNKEPT_RESOURCE_TYPES)
        _check_filter_value(f.pattern_type, PATTERN_TYPES, "pattern type", (MATCH,))
        _check_filter_value(f.operation, OPERATIONS, "operation", UNKEPT_OPERATIONS)
        _check_filter_value(f.permission_type, PERMISSIONS, "permission type")
        return cls(f.resource_type, f.resource_name if f.HasField("resource_name") else None,
                   f.pattern_type, f.principal if f.HasField("principal") else None,
                   f.host if f.HasField("host") else None, f.operation, f.permission_type, unkept)

    def matches_pattern(self, p: ResourcePattern) -> bool:
        if self.unkept:
            return False
        if self.resource_type != ANY and RESOURCE_TYPES[self.resource_type] is not p.resource_type:
            return False
        if self.pattern_type == MATCH:
            if self.resource_name is None:
                return True
            if p.pattern_type is PatternType.PREFIXED:
                return self.resource_name.startswith(p.name)
            return p.name == self.resource_name or p.name == WILDCARD
        if self.pattern_type != ANY and PATTERN_TYPES[self.pattern_type] is not p.pattern_type:
            return False
        return self.resource_name is None or p.name == self.resource_name

    def matches_entry(self, e: AclEntry) -> bool:
        return ((self.principal is None or e.principal == self.principal)
                and (self.host is None or e.host == self.host)
                and (self.operation == ANY or OPERATIONS[self.operation] is e.operation)
                and (self.permission_type == ANY
                     or PERMISSIONS[self.permission_type] is e.permission))


def _matching(snapshot: Snapshot, f: Filter) -> list[tuple[ResourcePattern, AclEntry]]:
    out = []
    for p in sorted(snapshot, key=ResourcePattern.sort_key):
        if f.matches_pattern(p):
            out.extend((p, e) for e in sorted(snapshot[p], key=AclEntry.sort_key)
                       if f.matches_entry(e))
    return out


def describe(snapshot: Snapshot, f: acl_pb2.AclBindingFilter) -> acl_pb2.DescribeAclsResponse:
    try:
        flt = Filter.from_pb(f)
    except AclError as e:
        return acl_pb2.DescribeAclsResponse(error_code=E.INVALID_REQUEST, error_message=str(e))
    return acl_pb2.DescribeAclsResponse(bindings=[binding_to_pb(p, e)
                                                  for p, e in _matching(snapshot, flt)])


@dataclass(frozen=True, slots=True)
class CreatePlan:
    response: acl_pb2.CreateAclsResponse                  # INVALID_REQUEST set already
    adds: dict[ResourcePattern, tuple[list[AclEntry], list[int]]]   # entries, result indexes


def plan_create(creations: Sequence[acl_pb2.AclBinding]) -> CreatePlan:
    resp = acl_pb2.CreateAclsResponse()
    adds: dict[ResourcePattern, tuple[list[AclEntry], list[int]]] = {}
    for i, c in enumerate(creations):
        r = resp.results.add()
        try:
            b = binding_from_pb(c)
        except AclError as e:
            r.error_code, r.error_message = E.INVALID_REQUEST, str(e)
            continue
        entries, indexes = adds.setdefault(b.pattern, ([], []))
        entries.append(b.entry)
        indexes.append(i)
    return CreatePlan(resp, adds)


@dataclass(frozen=True, slots=True)
class DeletePlan:
    response: acl_pb2.DeleteAclsResponse                  # each filter's result, matches filled
    removes: dict[ResourcePattern, tuple[frozenset[AclEntry], list[int]]]  # entries, filters


def plan_delete(snapshot: Snapshot, filters: Iterable[acl_pb2.AclBindingFilter]) -> DeletePlan:
    resp = acl_pb2.DeleteAclsResponse()
    removes: dict[ResourcePattern, tuple[set[AclEntry], list[int]]] = {}
    for i, f in enumerate(filters):
        r = resp.results.add()
        try:
            flt = Filter.from_pb(f)
        except AclError as e:
            r.error_code, r.error_message = E.INVALID_REQUEST, str(e)
            continue
        for p, e in _matching(snapshot, flt):
            r.matching.append(binding_to_pb(p, e))
            entries, idx = removes.setdefault(p, (set(), []))
            entries.add(e)
            if i not in idx:
                idx.append(i)
    return DeletePlan(resp, {p: (frozenset(es), idx) for p, (es, idx) in removes.items()})


__all__ = ["binding_from_pb", "binding_to_pb", "describe", "plan_create", "plan_delete",
           "Filter", "CreatePlan", "DeletePlan"]
