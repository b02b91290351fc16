"""`riverbed acls` and `riverbed configs` (users/clients quotas): Kafka's kafka-acls and
kafka-configs, writing ZooKeeper directly as those tools did with `--authorizer-properties
zookeeper.connect=...` / `--zookeeper` (docs/operations/acls.md, "Not yet", says why not through
a gateway yet). Registered as `riverbed.cli_plugins` entry points (the SDK never imports services).

    riverbed acls --zookeeper 127.0.0.1:2181/riverbed --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders
    riverbed acls --zookeeper ... --add --deny-principal User:mallory --operation All \\
        --topic etl- --resource-pattern-type prefixed
    riverbed acls --zookeeper ... --list [--topic orders]
    riverbed acls --zookeeper ... --remove --allow-principal User:alice --operation Read --topic orders
    riverbed configs --zookeeper ... --entity-type users --entity-name alice --alter \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    riverbed configs --zookeeper ... --entity-type clients --entity-default --describe
    riverbed configs --zookeeper ... --alter --entity-type users --entity-name alice \
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    riverbed configs --zookeeper ... --alter --entity-type users --entity-name alice \
        --delete-config SCRAM-SHA-256
"""
from __future__ import annotations

import argparse
import os
import secrets
import sys

from services.common.acl import layout, scram, store
from services.common.acl.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclEntry,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from services.common.acl.quotas import QuotaConfigError, check_quota_config

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
ZK_CREDENTIALS_ENV = "RIVERBED_ZOOKEEPER_CREDENTIALS"


def _zk_connect(args: argparse.Namespace) -> str:
    if args.zookeeper:
        return args.zookeeper
    for prop in getattr(args, "authorizer_properties", None) or ():
        k, sep, v = prop.partition("=")
        if sep and k.strip() == "zookeeper.connect":
            return v.strip()
    raise AclError("give --zookeeper HOST:PORT[/chroot] (or --authorizer-properties "
                   "zookeeper.connect=...): the fleet's zookeeper.connect")


def _connect(args):
    from services.common import zk
    path = getattr(args, "zookeeper_credentials_file", "")
    for prop in getattr(args, "authorizer_properties", None) or ():
        k, sep, v = prop.partition("=")
        if sep and k.strip() == "zookeeper.credentials.file":
            path = v.strip()
    try:
        auth = zk.ZkAuth.from_file(path, set_acl=bool(path))
    except (OSError, ValueError) as e:
        raise AclError(f"ZooKeeper credentials: {e}") from None
    return zk.connect(_zk_connect(args), timeout_s=args.timeout_ms / 1000.0, auth=auth)


# --- acls --------------------------------------------------------------------------------------

def add_acl_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "acls", help="add, remove or list ACLs (Kafka's kafka-acls)",
        description="Kafka's kafka-acls: ACL bindings in ZooKeeper, read by every gateway within "
                    "moments (they watch /kafka-acl-changes). Exactly one of --add, --remove, "
                    "--list.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add the ACLs described")
    action.add_argument("--remove", action="store_true",
                        help="remove the ACLs described; with no principal, every ACL of the "
                             "resource (needs --force)")
    action.add_argument("--list", action="store_true",
                        help="list ACLs (of the resources given, else all)")
    p.add_argument("--zookeeper", default="", help="zookeeper.connect of the fleet (with chroot)")
    p.add_argument("--zookeeper-credentials-file", default=os.environ.get(ZK_CREDENTIALS_ENV, ""),
                   metavar="FILE",
                   help="user:password for ZooKeeper's digest auth when the fleet's znodes are "
                        "closed (zookeeper.set.acl; the local fleet's is security/"
                        f"zookeeper.credentials; default ${ZK_CREDENTIALS_ENV})")
    p.add_argument("--authorizer-properties", nargs="*", metavar="KEY=VALUE",
                   help="Kafka's spelling: zookeeper.connect=HOST:PORT/chroot")
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="User:<name>, or User:* for everyone (repeatable)")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="host (IP address) the allow applies from; default * (every host)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                        "DescribeConfigs, AlterConfigs, IdempotentWrite, All (default All)")
    p.add_argument("--topic", action="append", default=[], help="topic name, or * (repeatable)")
    p.add_argument("--group", action="append", default=[], help="consumer group, or *")
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", default="literal",
                   help="literal or prefixed (--list also: any, match)")
    p.add_argument("--producer", action="store_true",
                   help="convenience: Write, Describe and Create on the topics")
    p.add_argument("--consumer", action="store_true",
                   help="convenience: Read and Describe on the topics, Read on the groups")
    p.add_argument("--principal", action="append", default=[],
                   help="--list: only the ACLs of this principal (repeatable)")
    p.add_argument("--force", action="store_true", help="remove without principal filters")
    p.add_argument("--timeout-ms", type=int, default=15000, help="ZooKeeper connect timeout")
    p.set_defaults(func=run_acls)


def _resources(args, pattern_type: PatternType) -> list[ResourcePattern]:
    out = [ResourcePattern(ResourceType.TOPIC, t, pattern_type) for t in args.topic]
    out += [ResourcePattern(ResourceType.GROUP, g, pattern_type) for g in args.group]
    out += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pattern_type)
            for t in args.transactional_id]
    if args.cluster:
        out.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _entries(args, ops: list[Operation]) -> list[AclEntry]:
    out = []
    for principal in args.allow_principal:
        for host in args.allow_host or ["*"]:
            out += [AclEntry(principal, host, op, Permission.ALLOW) for op in ops]
    for principal in args.deny_principal:
        for host in args.deny_host or ["*"]:
            out += [AclEntry(principal, host, op, Permission.DENY) for op in ops]
    return out


def _bindings(args) -> dict[ResourcePattern, list[AclEntry]]:
    """resource -> entries for --add / --remove (with Kafka's --producer/--consumer sets)."""
    pattern_type = PatternType.parse(args.resource_pattern_type)
    resources = _resources(args, pattern_type)
    if not resources:
        raise AclError("name a resource: --topic, --group, --transactional-id or --cluster")
    if args.producer or args.consumer:
        if not args.topic:
            raise AclError("--producer/--consumer need --topic")
        if args.consumer and not args.group:
            raise AclError("--consumer needs --group")
        out: dict[ResourcePattern, list[AclEntry]] = {}
        for r in resources:
            if r.resource_type is ResourceType.TOPIC:
                ops = []
                if args.producer:
                    ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
                if args.consumer:
                    ops += [Operation.READ, Operation.DESCRIBE]
                out[r] = _entries(args, list(dict.fromkeys(ops)))
            elif r.resource_type is ResourceType.GROUP and args.consumer:
                out[r] = _entries(args, [Operation.READ])
        return out
    ops = [Operation.parse(o) for o in args.operation] or [Operation.ALL]
    out = {}
    for r in resources:
        entries = _entries(args, ops)
        for e in entries:
            AclBinding(r, e)          # AclError when the operation does not fit the resource
        out[r] = entries
    return out


def _print_resource(pattern: ResourcePattern, entries) -> None:
    print(f"Current ACLs for resource `ResourcePattern(resourceType={pattern.resource_type.value}, "
          f"name={pattern.name}, patternType={pattern.pattern_type.value})`:")
    for e in sorted(entries, key=AclEntry.sort_key):
        print(f" \t{AclBinding(pattern, e).describe()}")
    print()


def run_acls(args: argparse.Namespace) -> int:
    try:
        if args.list:
            pt = args.resource_pattern_type.lower()
            wanted = None
            if args.topic or args.group or args.transactional_id or args.cluster:
                wanted = _resources(args, PatternType.PREFIXED if pt == "prefixed"
                                    else PatternType.LITERAL)
            client = _connect(args)
            try:
                acls = store.read_acls(client)
            finally:
                _close(client)
            for pattern in sorted(acls, key=ResourcePattern.sort_key):
                if wanted is not None and not _listed(pattern, wanted, pt):
                    continue
                entries = [e for e in acls[pattern]
                           if not args.principal or e.principal in args.principal]
                if entries:
                    _print_resource(pattern, entries)
            return EXIT_OK
        bindings = _bindings(args)
        if args.add and not any(bindings.values()):
            raise AclError("--add needs --allow-principal or --deny-principal")
        if args.remove and not any(bindings.values()) and not args.force:
            raise AclError("--remove without principals removes every ACL of the resources: "
                           "add --force to confirm")
        client = _connect(args)
        try:
            for pattern, entries in bindings.items():
                if args.add:
                    store.add_acls(client, pattern, entries)
                    print(f"Adding ACLs for resource `{pattern.resource_type.value}:"
                          f"{pattern.pattern_type.value}:{pattern.name}`:")
                    for e in entries:
                        print(f" \t{AclBinding(pattern, e).describe()}")
                else:
                    store.remove_acls(client, pattern, entries or None)
                    print(f"Removed ACLs for resource `{pattern.resource_type.value}:"
                          f"{pattern.pattern_type.value}:{pattern.name}`")
            acls = store.read_acls(client)
        finally:
            _close(client)
        print()
        for pattern in bindings:
            _print_resource(pattern, acls.get(pattern, ()))
        return EXIT_OK
    except (AclError, layout.LayoutError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ConnectionError as e:
        print(f"Error: ZooKeeper: {e}", file=sys.stderr)
        return EXIT_ERROR


def _listed(pattern: ResourcePattern, wanted: list[ResourcePattern], pattern_type: str) -> bool:
    for w in wanted:
        if pattern_type in ("match",):
            if pattern.matches(w.resource_type, w.name):
                return True
        elif pattern_type == "any":
            if pattern.resource_type is w.resource_type and pattern.name == w.name:
                return True
        elif pattern == w:
            return True
    return False


def _close(client) -> None:
    from services.common import zk
    zk.close(client)


# --- configs ----------------------------------------------------------------------------------

ENTITY_WORDS = {"users": "user-principal", "clients": "client-id"}


def add_config_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "configs", help="quotas and SCRAM credentials of users and client ids (Kafka's "
                        "kafka-configs)",
        description="Kafka's kafka-configs for users and client ids: quotas (producer_byte_rate, "
                    "consumer_byte_rate in bytes/s, request_percentage in percent of one "
                    "thread's time) per user principal name or client id, or their <default>; "
                    "and users' SCRAM credentials for the Kafka listener's SASL "
                    "(SCRAM-SHA-256=[password=...], SCRAM-SHA-512=[iterations=N,password=...]: "
                    "stored salted and hashed as Kafka stores them, never the password). "
                    "Gateways watch /config/changes and apply changes within moments. With the "
                    "fleet's ZooKeeper credentials a user's znode is readable by them only.")
    p.add_argument("--zookeeper", required=True, help="zookeeper.connect of the fleet (with chroot)")
    p.add_argument("--zookeeper-credentials-file", default=os.environ.get(ZK_CREDENTIALS_ENV, ""),
                   metavar="FILE",
                   help="user:password for ZooKeeper's digest auth when the fleet's znodes are "
                        "closed (zookeeper.set.acl; the local fleet's is security/"
                        f"zookeeper.credentials; default ${ZK_CREDENTIALS_ENV})")
    p.add_argument("--entity-type", required=True, choices=("users", "clients"))
    who = p.add_mutually_exclusive_group()
    who.add_argument("--entity-name", help="user principal name (alice for User:alice) or client id")
    who.add_argument("--entity-default", action="store_true", help="the <default> entity")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true")
    action.add_argument("--describe", action="store_true")
    p.add_argument("--add-config", default="", metavar="K=V,K=V",
                   help="quota keys, and for users SCRAM-SHA-256=[iterations=N,password=P] / "
                        "SCRAM-SHA-512=[password=P] (iterations 4096..16384, default 4096)")
    p.add_argument("--delete-config", default="", metavar="K,K",
                   help="keys to remove (SCRAM-SHA-512 removes that credential)")
    p.add_argument("--timeout-ms", type=int, default=15000, help="ZooKeeper connect timeout")
    p.set_defaults(func=run_configs)


def _config_changes(args: argparse.Namespace, name: str) -> tuple[dict[str, str], list[str]]:
    """(keys to set, keys to delete) of --alter: quota values checked, SCRAM passwords turned
    into Kafka's stored credentials (a fresh salt each time)."""
    set_: dict[str, str] = {}
    for item in scram.split_config(args.add_config):
        k, sep, v = item.partition("=")
        k = k.strip()
        if not sep:
            raise AclError(f"--add-config {k!r}: expected key=value")
        if k in scram.MECHANISMS:
            if args.entity_type != "users" or name == layout.DEFAULT_ENTITY:
                raise AclError(f"{k} credentials belong to a user: --entity-type users "
                               "--entity-name NAME")
            password, iterations = scram.parse_scram_value(k, v)
            cred = scram.make_credential(k, password, secrets.token_bytes(scram.SALT_BYTES),
                                         iterations)
            set_[k] = scram.encode_credential(cred)
        else:
            check_quota_config({k: v.strip()})
            set_[k] = v.strip()
    delete = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    for k in delete:
        if k in scram.MECHANISMS:
            if args.entity_type != "users":
                raise AclError(f"{k}: only users have SCRAM credentials")
        else:
            check_quota_config({k: "1"})
    if not set_ and not delete:
        raise AclError("--alter needs --add-config and/or --delete-config")
    return set_, delete


def run_configs(args: argparse.Namespace) -> int:
    from kazoo.exceptions import NoAuthError
    name = layout.DEFAULT_ENTITY if args.entity_default else args.entity_name
    try:
        if args.alter:
            if not name:
                raise AclError("--alter needs --entity-name or --entity-default")
            set_, delete = _config_changes(args, name)
        client = _connect(args)
        try:
            if args.alter:
                store.alter_config(client, args.entity_type, name, set_=set_, delete=delete)
                print(f"Completed updating config for entity: {ENTITY_WORDS[args.entity_type]} "
                      f"'{name}'.")
                return EXIT_OK
            configs = store.read_configs(client)
        finally:
            _close(client)
        for (etype, ename), cfg in sorted(configs.items()):
            if etype != args.entity_type or (name and ename != name):
                continue
            quotas = {k: v for k, v in cfg.items() if k not in scram.MECHANISMS}
            if quotas:
                shown = ",".join(f"{k}={v}" for k, v in sorted(quotas.items()))
                print(f"Quota configs for {ENTITY_WORDS[etype]} '{ename}' are {shown}")
            creds = scram.describe(cfg)
            if creds:
                print(f"SCRAM credential configs for {ENTITY_WORDS[etype]} '{ename}' are "
                      f"{creds.replace(',SCRAM', ', SCRAM')}")
        return EXIT_OK
    except (AclError, QuotaConfigError, scram.ScramConfigError, layout.LayoutError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except NoAuthError:
        print("Error: ZooKeeper refused to read users' configs (they may hold SCRAM "
              "credentials): give --zookeeper-credentials-file", file=sys.stderr)
        return EXIT_ERROR
    except ConnectionError as e:
        print(f"Error: ZooKeeper: {e}", file=sys.stderr)
        return EXIT_ERROR
