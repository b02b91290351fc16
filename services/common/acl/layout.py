"""Where ACLs and quota configs live in ZooKeeper, and their payloads: pure paths and codecs.

Kafka's own layout (`ZkData.scala`: `AclZNode`, `ExtendedAclZNode`, `AclChangeNotificationZNode`,
`ConfigEntityZNode`, `ConfigEntityChangeNotificationZNode`), under the fleet's chroot:

| path                                                     | payload                                   |
|----------------------------------------------------------|-------------------------------------------|
| /kafka-acl/<ResourceType>/<name>                         | {"version":1,"acls":[{principal, permissionType, operation, host}]} (LITERAL) |
| /kafka-acl-extended/prefixed/<ResourceType>/<name>       | same, for PREFIXED patterns               |
| /kafka-acl-changes/acl_changes_<seq>                     | b"<ResourceType>:<name>" (a LITERAL pattern changed)  |
| /kafka-acl-extended-changes/acl_changes_<seq>            | {"version":1,"resourceType","name","patternType"}    |
| /config/users/<user>, /config/users/<default>            | {"version":1,"config":{"producer_byte_rate":"1024",...}} |
| /config/clients/<client-id>, /config/clients/<default>   | same                                      |
| /config/changes/config_change_<seq>                      | {"version":2,"entity_path":"users/alice"} |

Writers update a resource's znode with a version check (retrying on a concurrent change), then
create a sequential change notification naming it; every enforcing process watches the change
directories and reloads only the resources named (Kafka's `ZkNodeChangeNotificationListener`).
Writers delete notifications older than 15 minutes (Kafka's `changeExpirationMs`).
Entity names in config paths are URL-encoded as Kafka's `Sanitizer` does (`User:CN=a,O=b` safe).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote

from services.common.acl.authorizer import (
    AclEntry,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

ACL_ROOT = "/kafka-acl"
ACL_EXTENDED_ROOT = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_VERSION = 1
ACL_CHANGE_VERSION = 1

CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONFIG_VERSION = 1
CONFIG_CHANGE_VERSION = 2
DEFAULT_ENTITY = "<default>"          # Kafka's name for the default quota entity
ENTITY_TYPES = ("users", "clients")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class LayoutError(ValueError):
    """A znode payload this code cannot read (wrong version, malformed JSON...)."""


# --- ACLs ---------------------------------------------------------------------------------------

def acl_path(pattern: ResourcePattern) -> str:
    root = ACL_ROOT if pattern.pattern_type is PatternType.LITERAL else ACL_EXTENDED_ROOT
    return f"{root}/{pattern.resource_type.value}/{pattern.name}"


def acl_type_dirs() -> list[tuple[str, ResourceType, PatternType]]:
    """Every directory holding ACL znodes: (path, resource type, pattern type)."""
    return [(f"{root}/{rt.value}", rt, pt)
            for root, pt in ((ACL_ROOT, PatternType.LITERAL), (ACL_EXTENDED_ROOT, PatternType.PREFIXED))
            for rt in ResourceType]


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    return json.dumps({"version": ACL_VERSION, "acls": [
        {"principal": e.principal, "permissionType": e.permission.value,
         "operation": e.operation.value, "host": e.host} for e in sorted(entries, key=AclEntry.sort_key)]},
        separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> frozenset[AclEntry]:
    if not data:
        return frozenset()
    try:
        obj = json.loads(data)
        if obj.get("version") != ACL_VERSION:
            raise LayoutError(f"ACL znode version {obj.get('version')!r}, expected {ACL_VERSION}")
        return frozenset(AclEntry(a["principal"], a["host"], Operation.parse(a["operation"]),
                                  Permission.parse(a["permissionType"])) for a in obj["acls"])
    except (ValueError, KeyError, TypeError, AttributeError, AclError) as e:
        raise LayoutError(f"unreadable ACL znode: {e}") from None


def encode_acl_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(the change directory, the notification payload) for a changed pattern."""
    if pattern.pattern_type is PatternType.LITERAL:
        return ACL_CHANGES, f"{pattern.resource_type.value}:{pattern.name}".encode()
    return ACL_EXTENDED_CHANGES, json.dumps(
        {"version": ACL_CHANGE_VERSION, "resourceType": pattern.resource_type.value,
         "name": pattern.name, "patternType": pattern.pattern_type.value},
        separators=(",", ":")).encode()


def decode_acl_change(directory: str, data: bytes) -> ResourcePattern:
    try:
        if directory == ACL_CHANGES:
            rt, sep, name = data.decode().partition(":")
            if not sep:
                raise LayoutError(f"ACL change {data!r}: expected <ResourceType>:<name>")
            return ResourcePattern(ResourceType.parse(rt), name, PatternType.LITERAL)
        obj = json.loads(data)
        return ResourcePattern(ResourceType.parse(obj["resourceType"]), obj["name"],
                               PatternType.parse(obj["patternType"]))
    except (ValueError, KeyError, TypeError, AclError) as e:
        raise LayoutError(f"unreadable ACL change notification: {e}") from None


# --- quota configs ------------------------------------------------------------------------------

def sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize`: URL-encode so any principal or client id is one znode name."""
    return quote(name, safe="") if name != DEFAULT_ENTITY else name


def desanitize(name: str) -> str:
    return unquote(name) if name != DEFAULT_ENTITY else name


def entity_path(entity_type: str, name: str) -> str:
    """'users', 'alice' -> 'users/alice' (the notification's entity_path, relative to /config)."""
    if entity_type not in ENTITY_TYPES:
        raise LayoutError(f"entity type {entity_type!r}: expected users or clients")
    if not name:
        raise LayoutError("an entity name must not be empty (use <default> for the default)")
    return f"{entity_type}/{sanitize(name)}"


def config_path(entity_type: str, name: str) -> str:
    return f"/config/{entity_path(entity_type, name)}"


def encode_config(config: Mapping[str, str]) -> bytes:
    return json.dumps({"version": CONFIG_VERSION, "config": {str(k): str(v) for k, v in
                                                             sorted(config.items())}},
                      separators=(",", ":")).encode()


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    try:
        obj = json.loads(data)
        cfg = obj["config"]
        if not isinstance(cfg, dict) or not all(isinstance(v, str) for v in cfg.values()):
            raise LayoutError("config values must be strings")
        return dict(cfg)
    except (ValueError, KeyError, TypeError) as e:
        raise LayoutError(f"unreadable config znode: {e}") from None


def encode_config_change(entity_type: str, name: str) -> bytes:
    return json.dumps({"version": CONFIG_CHANGE_VERSION, "entity_path": entity_path(entity_type, name)},
                      separators=(",", ":")).encode()


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) named by a notification; only users/ and clients/ entities."""
    try:
        path = json.loads(data)["entity_path"]
    except (ValueError, KeyError, TypeError) as e:
        raise LayoutError(f"unreadable config change notification: {e}") from None
    entity_type, sep, name = str(path).partition("/")
    if not sep or entity_type not in ENTITY_TYPES or not name or "/" in name:
        raise LayoutError(f"config change for {path!r}: not a users/ or clients/ entity")
    return entity_type, desanitize(name)
