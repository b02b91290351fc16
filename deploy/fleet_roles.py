"""The fleet's roles: what each service is, where its ports are, and its .properties template.

`ROLES` (one `RoleSpec` per role, in start order: controllers, storage nodes, group
coordinators, offset managers, transaction coordinators, gateways) names each role's program,
its process-name prefix, its ports as offsets from the fleet's base port, and the function that
writes its config from a `ConfigContext`. The local fleet (deploy/fleet.py) and Ansible's filter
plugin (ansible/filter_plugins/riverbed.py) both build configs from it; deploy.fleet re-exports
these names, and the port plan's span (`PORT_SPAN`, `free_base_port`).
"""
from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Mapping

from deploy.process import free_port_block

SESSION_TIMEOUT_MS = 6000


@dataclasses.dataclass(frozen=True)
class ConfigContext:
    """What a config template may use."""
    index: int                 # 1-based within the role; also the service's id
    host: str
    ports: Mapping[str, int]   # "port" plus any extra ports of the role (e.g. "pub.port")
    workdir: pathlib.Path      # D/<name>
    zk_connect: str            # with the chroot
    role_counts: Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class RoleSpec:
    role: str                                    # "storage_node" (also `services.<role>`)
    prefix: str                                  # process names are f"{prefix}-{index}"
    module: str                                  # run as `python -m module --config FILE`
    port_offsets: Callable[[int], Mapping[str, int]]  # index -> {"port": off, ...} from base
    config: Callable[[ConfigContext], dict[str, str]]  # the .properties template
    default_count: int
    max_count: int


def _zk_keys(ctx: ConfigContext) -> dict[str, str]:
    return {"zookeeper.connect": ctx.zk_connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}


def _metrics_keys(ctx: ConfigContext) -> dict[str, str]:
    port = ctx.ports.get("metrics.port")
    return {} if port is None else {"metrics.port": str(port)}


def _controller_config(ctx: ConfigContext) -> dict[str, str]:
    storage = ctx.role_counts.get("storage_node", 0)
    return {"controller.id": str(ctx.index), "host.name": ctx.host,
            "port": str(ctx.ports["port"]), "pub.port": str(ctx.ports["pub.port"]),
            **_metrics_keys(ctx),
            **_zk_keys(ctx),
            "num.partitions": "1",
            # As many replicas as the fleet has storage nodes, at most 3 (Kafka's usual choice).
            "default.replication.factor": str(max(1, min(3, storage))),
            "auto.create.topics.enable": "true", "delete.topic.enable": "true"}


def _storage_config(ctx: ConfigContext) -> dict[str, str]:
    return {"broker.id": str(ctx.index), "host.name": ctx.host, "port": str(ctx.ports["port"]),
            **_metrics_keys(ctx), "log.dirs": str(ctx.workdir / "logs"), **_zk_keys(ctx),
            # `fleet down` stops every storage node at once, so controlled shutdown cannot move
            # leaderships anywhere and each node retries controlled.shutdown.max.retries times;
            # Kafka's 5000 ms backoff would outlast the launcher's stop grace. 1000 ms keeps a
            # rolling `fleet stop NAME` meaningful and `down` quick.
            "controlled.shutdown.retry.backoff.ms": "1000"}


# The gateways' Kafka listeners by port key: (security protocol, its port in ctx.ports).
KAFKA_LISTENER_PORTS = (("PLAINTEXT", "kafka.port"), ("SASL_SSL", "kafka.sasl_ssl.port"))


def kafka_listeners(host: str, ports: Mapping[str, int]) -> list[str]:
    """The Kafka listeners planned by a gateway's ports: `PROTOCOL://host:port`."""
    return [f"{proto}://{host}:{ports[key]}" for proto, key in KAFKA_LISTENER_PORTS
            if key in ports]


def _gateway_config(ctx: ConfigContext) -> dict[str, str]:
    # The Kafka listeners (services/gateway/kafka) on the gateway's host, one per planned port:
    # a local fleet has PLAINTEXT and SASL_SSL, Ansible's hosts SASL_SSL unless told otherwise.
    # The SASL_SSL listener's TLS files come with the security keys (FleetSecurity).
    return {"gateway.id": str(ctx.index), "host.name": ctx.host, "port": str(ctx.ports["port"]),
            "listeners": ",".join(kafka_listeners(ctx.host, ctx.ports)),
            **_metrics_keys(ctx), **_zk_keys(ctx)}


# __consumer_offsets partitions (shards) in a local fleet: Kafka's default is 50; 10 keeps the
# first start quick (fewer partitions to create, elect and load) and still spreads groups over
# several coordinator instances. Both sharded roles must agree on it (same template below).
OFFSETS_TOPIC_NUM_PARTITIONS = 10


def _offsets_topic_keys(ctx: ConfigContext) -> dict[str, str]:
    storage = ctx.role_counts.get("storage_node", 0)
    return {"offsets.topic.num.partitions": str(OFFSETS_TOPIC_NUM_PARTITIONS),
            "offsets.topic.replication.factor": str(max(1, min(3, storage)))}


def _group_coordinator_config(ctx: ConfigContext) -> dict[str, str]:
    return {"group.coordinator.id": str(ctx.index), "host.name": ctx.host,
            "port": str(ctx.ports["port"]), **_metrics_keys(ctx), **_zk_keys(ctx), **_offsets_topic_keys(ctx)}


def _offset_manager_config(ctx: ConfigContext) -> dict[str, str]:
    return {"offset.manager.id": str(ctx.index), "host.name": ctx.host,
            "port": str(ctx.ports["port"]), **_metrics_keys(ctx), **_zk_keys(ctx), **_offsets_topic_keys(ctx)}


# __transaction_state partitions in a local fleet: Kafka's default is 50; 10 for the same reason
# as __consumer_offsets above. Replication as many as the fleet's storage nodes, at most 3, and
# min.insync.replicas 2 (Kafka's transaction.state.log.min.isr) when there are 3.
TRANSACTION_STATE_NUM_PARTITIONS = 10


def _transaction_coordinator_config(ctx: ConfigContext) -> dict[str, str]:
    storage = ctx.role_counts.get("storage_node", 0)
    rf = max(1, min(3, storage))
    return {"transaction.coordinator.id": str(ctx.index), "host.name": ctx.host,
            "port": str(ctx.ports["port"]), **_metrics_keys(ctx), **_zk_keys(ctx),
            "transaction.state.log.num.partitions": str(TRANSACTION_STATE_NUM_PARTITIONS),
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(min(2, rf))}


# Start order is this order; stop order is the reverse (gateways first, controllers last),
# with ZooKeeper before all of them and after all of them.
ROLES: dict[str, RoleSpec] = {spec.role: spec for spec in (
    RoleSpec("controller", "controller", "services.controller",
             lambda i: {"port": 9 + i, "pub.port": 19 + i}, _controller_config, 2, 10),
    RoleSpec("storage_node", "storage", "services.storage_node",
             lambda i: {"port": 100 + i}, _storage_config, 3, 99),
    RoleSpec("group_coordinator", "group-coordinator", "services.group_coordinator",
             lambda i: {"port": 29 + i}, _group_coordinator_config, 1, 10),
    RoleSpec("offset_manager", "offset-manager", "services.offset_manager",
             lambda i: {"port": 39 + i}, _offset_manager_config, 1, 10),
    RoleSpec("transaction_coordinator", "transaction-coordinator",
             "services.transaction_coordinator", lambda i: {"port": 69 + i},
             _transaction_coordinator_config, 1, 10),
    RoleSpec("gateway", "gateway", "services.gateway",
             lambda i: {"port": 0 if i == 1 else i, "kafka.port": 49 + i,
                        "kafka.sasl_ssl.port": 59 + i}, _gateway_config, 1, 9),
)}


METRICS_PORT_OFFSET = 200   # a service's metrics.port is its port + 200
PORT_SPAN = 400  # P .. P+399 hold every planned port


def free_base_port(host: str = "127.0.0.1") -> int:
    """A base port whose whole plan (P .. P+399) is free now: for tests."""
    return free_port_block(PORT_SPAN, host)
