"""ACLs between the SDK's types and the wire (acl.proto), pure.

The SDK's ACL types are kafka-python 3.0's (riverbed.kafka_python_types: `ACL`, `ACLFilter`,
`ResourcePattern`, `ResourcePatternFilter` and their enums, Kafka's numbers), and acl.proto
carries Kafka's numbers too, so a value passes unchanged both ways. A number this SDK does not
know (a newer gateway's) reads as UNKNOWN rather than failing the whole answer.
"""
from __future__ import annotations

import enum
from typing import TypeVar

from riverbed._proto.v1 import acl_pb2
from riverbed.kafka_python_types import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

__all__ = ["acl_to_pb", "acl_from_pb", "filter_to_pb", "MATCH_EVERY_ACL"]

_E = TypeVar("_E", bound=enum.IntEnum)

# Every ACL (kafka-acls.sh --list with no resource): ANY of each, no name, principal or host.
MATCH_EVERY_ACL = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                            ResourcePatternFilter(ResourceType.ANY, None,
                                                  ACLResourcePatternType.ANY))


def _member(cls: type[_E], value: int) -> _E:
    try:
        return cls(value)
    except ValueError:
        return cls(0)           # UNKNOWN in each of these enums


def acl_to_pb(acl: ACL) -> acl_pb2.AclBinding:
    p = acl.resource_pattern
    return acl_pb2.AclBinding(resource_type=int(p.resource_type),
                              resource_name=p.resource_name or "",
                              pattern_type=int(p.pattern_type), principal=acl.principal or "",
                              host=acl.host or "", operation=int(acl.operation),
                              permission_type=int(acl.permission_type))


def acl_from_pb(b: acl_pb2.AclBinding) -> ACL:
    return ACL(b.principal, b.host, _member(ACLOperation, b.operation),
               _member(ACLPermissionType, b.permission_type),
               ResourcePattern(_member(ResourceType, b.resource_type), b.resource_name,
                               _member(ACLResourcePatternType, b.pattern_type)))


def filter_to_pb(f: ACLFilter) -> acl_pb2.AclBindingFilter:
    """None (a name, principal or host) stays unset: it matches every value."""
    p = f.resource_pattern
    out = acl_pb2.AclBindingFilter(resource_type=int(p.resource_type),
                                   pattern_type=int(p.pattern_type), operation=int(f.operation),
                                   permission_type=int(f.permission_type))
    if p.resource_name is not None:
        out.resource_name = p.resource_name
    if f.principal is not None:
        out.principal = f.principal
    if f.host is not None:
        out.host = f.host
    return out
