"""Every znode Riverbed uses: its path, whether it is ephemeral, and its payload codec.

After Kafka's `ZkData.scala`: one place names each node and owns its bytes. All paths are
relative to the chroot in `zookeeper.connect` (`127.0.0.1:2181/riverbed`). Payloads are JSON
objects carrying a `version` (Kafka's layouts, so Kafka's tools could read most of them);
`/controller_epoch` is a decimal integer as text, as in Kafka.

Encoders take typed values and return bytes. Decoders accept extra fields (a newer writer may
add some) and raise `ZnodeDataError` on anything else they cannot read: bad UTF-8, bad JSON, a
missing or mistyped field, a version below 1.

| path                                                  | eph | payload                        |
|-------------------------------------------------------|-----|--------------------------------|
| /brokers/ids/<id>                                     | yes | BrokerInfo                     |
| /brokers/topics/<topic>                               | no  | TopicAssignment                |
| /brokers/topics/<topic>/partitions/<p>/state          | no  | PartitionState                 |
| /controller                                           | yes | ControllerInfo                 |
| /controller_epoch                                     | no  | int as text                    |
| /config/topics/<topic>                                | no  | TopicConfig                    |
| /admin/delete_topics/<topic>                          | no  | empty                          |
| /admin/reassign_partitions                            | no  | list[PartitionReassignment]    |
| /admin/preferred_replica_election                     | no  | list[TopicPartition]           |
| /riverbed/gateways/<id>                               | yes | GatewayInfo                    |
| /riverbed/group_coordinators/ids/<id>                 | yes | CoordinatorInstance            |
| /riverbed/group_coordinators/shards/<shard>           | yes | ShardOwner                     |
| /riverbed/offset_managers/ids/<id>                    | yes | CoordinatorInstance            |
| /riverbed/offset_managers/shards/<shard>              | yes | ShardOwner                     |
| /riverbed/transaction_coordinators/ids/<id>           | yes | CoordinatorInstance            |
| /riverbed/transaction_coordinators/shards/<shard>     | yes | ShardOwner                     |
| /riverbed/transaction_coordinators/epochs/<shard>     | no  | empty; its version is the epoch|
| /cluster/id                                           | no  | cluster id string              |
| /latest_producer_id_block                             | no  | ProducerIdBlockInfo            |

Shard ownership (group coordinators and offset managers alike; a shard is a partition of
`__consumer_offsets`): every live instance of the role registers `<root>/ids/<id>`; the instance
that serves shard s holds the ephemeral `<root>/shards/<s>`, created when it takes the shard and
deleted when it gives it up (or gone with its session). Gateways read `<root>/shards/*` to route.
Transaction coordinators shard `__transaction_state` the same way, and each time one takes a
shard it sets `<root>/epochs/<shard>`: the znode's new version is its coordinator epoch for that
shard (stamped on its transaction markers; storage nodes refuse markers of older epochs).

ACLs and client-quota configs keep Kafka's own layout; their paths and codecs live beside the
authorizer in `services/common/acl/layout.py`: `/kafka-acl/<ResourceType>/<name>`,
`/kafka-acl-extended/prefixed/<ResourceType>/<name>`, `/kafka-acl-changes/acl_changes_<seq>`,
`/kafka-acl-extended-changes/acl_changes_<seq>`, `/config/users/<user>`,
`/config/clients/<client-id>`, `/config/changes/config_change_<seq>` (all persistent).

The paths themselves live in `znode_paths.py` and the JSON primitives the codecs share in
`znode_json.py`; this module re-exports both, so import everything from here.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.common.znode_json import (
    ZnodeDataError, _dump, _field, _int_list, _load, _timestamp)
from services.common.znode_paths import (
    ADMIN, BROKER_IDS, BROKER_TOPICS, BROKERS, CLUSTER, CLUSTER_ID, CONFIG, CONFIG_TOPICS,
    CONTROLLER, CONTROLLER_EPOCH, DELETE_TOPICS, GATEWAYS, GROUP_COORDINATORS,
    LATEST_PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION, LOG_DIR_EVENT_PREFIX, OFFSET_MANAGERS,
    PERSISTENT_PATHS, PREFERRED_REPLICA_ELECTION, REASSIGN_PARTITIONS, SHARD_ROLE_ROOTS,
    TRANSACTION_COORDINATORS, _int_id, broker_path, delete_topic_path, gateway_path,
    partition_path, partition_state_path, partitions_path, shard_epoch_path, shard_epochs_path,
    shard_instance_path, shard_instances_path, shard_owner_path, shard_owners_path,
    topic_config_path, topic_path)

__all__ = [
    "ZnodeDataError", "ZNODES", "ZnodeSpec", "PERSISTENT_PATHS",
    "BROKERS", "BROKER_IDS", "BROKER_TOPICS", "LOG_DIR_EVENT_NOTIFICATION", "LOG_DIR_EVENT_PREFIX",
    "CONTROLLER", "CONTROLLER_EPOCH", "CONFIG",
    "CONFIG_TOPICS", "ADMIN", "DELETE_TOPICS", "REASSIGN_PARTITIONS", "PREFERRED_REPLICA_ELECTION",
    "GATEWAYS", "CLUSTER", "CLUSTER_ID", "GROUP_COORDINATORS", "OFFSET_MANAGERS",
    "TRANSACTION_COORDINATORS", "SHARD_ROLE_ROOTS", "shard_epochs_path", "shard_epoch_path",
    "broker_path", "topic_path", "partitions_path", "partition_path", "partition_state_path",
    "topic_config_path", "delete_topic_path", "gateway_path",
    "shard_instances_path", "shard_instance_path", "shard_owners_path", "shard_owner_path",
    "CoordinatorInstance", "encode_coordinator_instance", "decode_coordinator_instance",
    "ShardOwner", "encode_shard_owner", "decode_shard_owner",
    "BrokerInfo", "encode_broker", "decode_broker",
    "encode_topic_assignment", "decode_topic_assignment",
    "PartitionState", "encode_partition_state", "decode_partition_state",
    "ControllerInfo", "encode_controller", "decode_controller",
    "encode_controller_epoch", "decode_controller_epoch",
    "encode_topic_config", "decode_topic_config",
    "encode_delete_topic", "decode_delete_topic",
    "TopicPartition", "PartitionReassignment",
    "encode_reassign_partitions", "decode_reassign_partitions",
    "encode_preferred_replica_election", "decode_preferred_replica_election",
    "GatewayInfo", "encode_gateway", "decode_gateway",
    "encode_cluster_id", "decode_cluster_id",
    "LATEST_PRODUCER_ID_BLOCK", "ProducerIdBlockInfo", "encode_producer_id_block",
    "decode_producer_id_block", "encode_log_dir_event", "decode_log_dir_event",
]


# --- /brokers/ids/<id> (ephemeral) ------------------------------------------------------------

BROKER_VERSION = 1


@dataclasses.dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    endpoints: tuple[str, ...]        # ZeroMQ endpoints, e.g. ("tcp://127.0.0.1:9101",)
    rack: str | None = None
    timestamp_ms: int = 0
    # Replicas in log dirs that failed on this node (KIP-112): the controller treats them as
    # offline until the node registers again without them.
    offline_partitions: tuple[tuple[str, int], ...] = ()
    # The process found a log dir without its clean-shutdown marker when it started: it may
    # have lost what the page cache held (KIP-966: such a node leaves every ELR). Written only
    # when true.
    unclean_shutdown: bool = False


def encode_broker(info: BrokerInfo) -> bytes:
    obj = {"version": BROKER_VERSION, "host": info.host, "port": info.port,
           "endpoints": list(info.endpoints), "rack": info.rack,
           "timestamp": str(info.timestamp_ms)}
    if info.offline_partitions:
        obj["offline_partitions"] = [[t, p] for t, p in info.offline_partitions]
    if info.unclean_shutdown:
        obj["unclean_shutdown"] = True
    return _dump(obj)


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    w = "broker"
    obj = _load(w, data)
    endpoints = _field(w, obj, "endpoints", list, data, optional=True, default=[])
    if not all(isinstance(e, str) for e in endpoints):
        raise ZnodeDataError(w, "field 'endpoints' must be a list of strings", data)
    offline = _field(w, obj, "offline_partitions", list, data, optional=True, default=[])
    if not all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)
               and isinstance(x[1], int) for x in offline):
        raise ZnodeDataError(w, "field 'offline_partitions' must be a list of [topic, partition]",
                             data)
    return BrokerInfo(broker_id=broker_id, host=_field(w, obj, "host", str, data),
                      port=_field(w, obj, "port", int, data), endpoints=tuple(endpoints),
                      rack=_field(w, obj, "rack", str, data, optional=True),
                      timestamp_ms=_timestamp(w, obj, data),
                      offline_partitions=tuple((t, p) for t, p in offline),
                      unclean_shutdown=_field(w, obj, "unclean_shutdown", bool, data,
                                              optional=True, default=False))


# --- /log_dir_event_notification/log_dir_event_<seq> --------------------------------------------

LOG_DIR_EVENT_VERSION = 1
LOG_DIR_FAILURE = 1          # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent


def encode_log_dir_event(broker_id: int) -> bytes:
    """Kafka's {"version":1,"broker":<id>,"event":1}: a log dir of that node failed."""
    return _dump({"version": LOG_DIR_EVENT_VERSION, "broker": int(broker_id),
                  "event": LOG_DIR_FAILURE})


def decode_log_dir_event(data: bytes) -> int:
    """The node id of a log-dir event."""
    obj = _load("log_dir_event", data)
    return _field("log_dir_event", obj, "broker", int, data)


# --- /brokers/topics/<topic> ------------------------------------------------------------------

TOPIC_VERSION = 1


def encode_topic_assignment(partitions: Mapping[int, Sequence[int]]) -> bytes:
    """{partition: replicas} -> {"version":1,"partitions":{"0":[1,2,3]}} (replica order matters:
    the first is the preferred leader)."""
    return _dump({"version": TOPIC_VERSION,
                  "partitions": {str(p): list(r) for p, r in sorted(partitions.items())}})


def decode_topic_assignment(data: bytes) -> dict[int, tuple[int, ...]]:
    w = "topic assignment"
    obj = _load(w, data)
    parts = _field(w, obj, "partitions", dict, data)
    out: dict[int, tuple[int, ...]] = {}
    for key, replicas in parts.items():
        try:
            p = int(key)
        except ValueError:
            raise ZnodeDataError(w, f"partition key {key!r} is not an integer", data) from None
        if p < 0:
            raise ZnodeDataError(w, f"negative partition {p}", data)
        out[p] = _int_list(w, replicas, f"partitions.{key}", data)
    return dict(sorted(out.items()))


# --- /brokers/topics/<topic>/partitions/<p>/state ---------------------------------------------

PARTITION_STATE_VERSION = 1
NO_LEADER = -1


@dataclasses.dataclass(frozen=True)
class PartitionState:
    """Kafka's LeaderIsrAndControllerEpoch. `leader` is NO_LEADER (-1) when there is none.

    Eligible leader replicas (KIP-966, since issue 24): `elr`, replicas that left the ISR while
    it was below min.insync.replicas and may still be elected cleanly, and `last_known_elr`,
    those that were and no longer are (an unclean shutdown). Written only when non-empty
    (`eligible_leader_replicas`, `last_known_elr`), so a state without them is byte for byte
    what older writers wrote, and older readers skip them (extra fields are allowed)."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


def encode_partition_state(state: PartitionState) -> bytes:
    obj: dict[str, Any] = {"version": PARTITION_STATE_VERSION,
                           "controller_epoch": state.controller_epoch, "leader": state.leader,
                           "leader_epoch": state.leader_epoch, "isr": list(state.isr)}
    if state.elr:
        obj["eligible_leader_replicas"] = list(state.elr)
    if state.last_known_elr:
        obj["last_known_elr"] = list(state.last_known_elr)
    return _dump(obj)


def decode_partition_state(data: bytes) -> PartitionState:
    w = "partition state"
    obj = _load(w, data)
    elr = _field(w, obj, "eligible_leader_replicas", list, data, optional=True, default=[])
    last = _field(w, obj, "last_known_elr", list, data, optional=True, default=[])
    return PartitionState(leader=_field(w, obj, "leader", int, data),
                          leader_epoch=_field(w, obj, "leader_epoch", int, data),
                          isr=_int_list(w, _field(w, obj, "isr", list, data), "isr", data),
                          controller_epoch=_field(w, obj, "controller_epoch", int, data),
                          elr=_int_list(w, elr, "eligible_leader_replicas", data),
                          last_known_elr=_int_list(w, last, "last_known_elr", data))


# --- /controller (ephemeral) and /controller_epoch --------------------------------------------

CONTROLLER_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ControllerInfo:
    controller_id: int
    endpoint: str              # the controller's ROUTER, tcp://host:port
    pub_endpoint: str          # its PUB socket for metadata fan-out
    timestamp_ms: int = 0


def encode_controller(info: ControllerInfo) -> bytes:
    return _dump({"version": CONTROLLER_VERSION, "brokerid": info.controller_id,
                  "timestamp": str(info.timestamp_ms), "endpoint": info.endpoint,
                  "pub_endpoint": info.pub_endpoint})


def decode_controller(data: bytes) -> ControllerInfo:
    w = "controller"
    obj = _load(w, data)
    return ControllerInfo(controller_id=_field(w, obj, "brokerid", int, data),
                          endpoint=_field(w, obj, "endpoint", str, data, optional=True, default=""),
                          pub_endpoint=_field(w, obj, "pub_endpoint", str, data, optional=True,
                                              default=""),
                          timestamp_ms=_timestamp(w, obj, data))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(_int_id("controller epoch", epoch)).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        text = bytes(data).decode("ascii").strip()
        if not text.isdigit():
            raise ValueError
        return int(text)
    except (UnicodeDecodeError, ValueError, TypeError):
        raise ZnodeDataError("controller epoch", "not a non-negative integer",
                             data if isinstance(data, bytes) else None) from None


# --- /config/topics/<topic> -------------------------------------------------------------------

TOPIC_CONFIG_VERSION = 1


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    """Topic-level overrides with Kafka's keys (`retention.ms`, `cleanup.policy`, ...)."""
    return _dump({"version": TOPIC_CONFIG_VERSION, "config": {str(k): str(v) for k, v in config.items()}})


def decode_topic_config(data: bytes) -> dict[str, str]:
    w = "topic config"
    obj = _load(w, data)
    cfg = _field(w, obj, "config", dict, data)
    if not all(isinstance(v, str) for v in cfg.values()):
        raise ZnodeDataError(w, "config values must be strings", data)
    return dict(cfg)


# --- /admin/delete_topics/<topic> (a marker: the path is the payload) --------------------------

def encode_delete_topic() -> bytes:
    return b""


def decode_delete_topic(data: bytes) -> None:
    return None  # Kafka writes no data here; anything present is ignored


# --- /admin/reassign_partitions, /admin/preferred_replica_election ----------------------------

ADMIN_VERSION = 1


@dataclasses.dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True)
class PartitionReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]


def _partition_list(w: str, data: bytes) -> list[dict[str, Any]]:
    obj = _load(w, data)
    items = _field(w, obj, "partitions", list, data)
    for item in items:
        if not isinstance(item, dict):
            raise ZnodeDataError(w, "each partition must be a JSON object", data)
        _field(w, item, "topic", str, data)
        if _field(w, item, "partition", int, data) < 0:
            raise ZnodeDataError(w, "negative partition", data)
    return items


def encode_reassign_partitions(items: Iterable[PartitionReassignment]) -> bytes:
    return _dump({"version": ADMIN_VERSION, "partitions": [
        {"topic": i.topic, "partition": i.partition, "replicas": list(i.replicas)} for i in items]})


def decode_reassign_partitions(data: bytes) -> list[PartitionReassignment]:
    w = "reassign partitions"
    return [PartitionReassignment(i["topic"], i["partition"],
                                  _int_list(w, _field(w, i, "replicas", list, data), "replicas", data))
            for i in _partition_list(w, data)]


def encode_preferred_replica_election(items: Iterable[TopicPartition]) -> bytes:
    return _dump({"version": ADMIN_VERSION,
                  "partitions": [{"topic": i.topic, "partition": i.partition} for i in items]})


def decode_preferred_replica_election(data: bytes) -> list[TopicPartition]:
    w = "preferred replica election"
    return [TopicPartition(i["topic"], i["partition"]) for i in _partition_list(w, data)]


# --- /riverbed/gateways/<id> (ephemeral) ------------------------------------------------------

GATEWAY_VERSION = 1


@dataclasses.dataclass(frozen=True)
class GatewayInfo:
    gateway_id: int
    endpoint: str                # tcp://host:port of its ROUTER
    timestamp_ms: int = 0
    # Its Kafka listeners as advertised (NAME://host:port, like the "endpoints" of Kafka's
    # /brokers/ids/<id>); absent from the znode when it has none (and in older gateways').
    kafka_endpoints: tuple[str, ...] = ()


def encode_gateway(info: GatewayInfo) -> bytes:
    obj: dict[str, Any] = {"version": GATEWAY_VERSION, "endpoint": info.endpoint,
                           "timestamp": str(info.timestamp_ms)}
    if info.kafka_endpoints:
        obj["kafka_endpoints"] = list(info.kafka_endpoints)
    return _dump(obj)


def decode_gateway(gateway_id: int, data: bytes) -> GatewayInfo:
    w = "gateway"
    obj = _load(w, data)
    kafka = obj.get("kafka_endpoints", [])
    if not isinstance(kafka, list) or not all(isinstance(e, str) for e in kafka):
        raise ZnodeDataError(w, "kafka_endpoints must be a list of strings", data)
    return GatewayInfo(gateway_id=gateway_id, endpoint=_field(w, obj, "endpoint", str, data),
                       timestamp_ms=_timestamp(w, obj, data), kafka_endpoints=tuple(kafka))


# --- <root>/ids/<id> and <root>/shards/<shard> (ephemeral) ------------------------------------

SHARD_ZNODE_VERSION = 1


@dataclasses.dataclass(frozen=True)
class CoordinatorInstance:
    """A live group coordinator or offset manager."""
    instance_id: int
    endpoint: str                # tcp://host:port of its ROUTER
    timestamp_ms: int = 0


def encode_coordinator_instance(info: CoordinatorInstance) -> bytes:
    return _dump({"version": SHARD_ZNODE_VERSION, "endpoint": info.endpoint,
                  "timestamp": str(info.timestamp_ms)})


def decode_coordinator_instance(instance_id: int, data: bytes) -> CoordinatorInstance:
    w = "coordinator instance"
    obj = _load(w, data)
    return CoordinatorInstance(instance_id, _field(w, obj, "endpoint", str, data),
                               _timestamp(w, obj, data))


@dataclasses.dataclass(frozen=True)
class ShardOwner:
    """Who serves a shard (partition of __consumer_offsets) of a sharded role."""
    shard: int
    owner_id: int
    endpoint: str
    timestamp_ms: int = 0


def encode_shard_owner(owner: ShardOwner) -> bytes:
    return _dump({"version": SHARD_ZNODE_VERSION, "owner": owner.owner_id,
                  "endpoint": owner.endpoint, "timestamp": str(owner.timestamp_ms)})


def encode_shard_epoch(_: None = None) -> bytes:
    """The epoch is the znode's version, not its data: always empty."""
    return b""


def decode_shard_epoch(data: bytes) -> None:
    return None


def decode_shard_owner(shard: int, data: bytes) -> ShardOwner:
    w = "shard owner"
    obj = _load(w, data)
    return ShardOwner(shard, _field(w, obj, "owner", int, data),
                      _field(w, obj, "endpoint", str, data), _timestamp(w, obj, data))


# --- /cluster/id ------------------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})  # Kafka writes the version as a string


def decode_cluster_id(data: bytes) -> str:
    w = "cluster id"
    obj = _load(w, data)
    cid = _field(w, obj, "id", str, data)
    if not cid:
        raise ZnodeDataError(w, "empty id", data)
    return cid


# --- /latest_producer_id_block ----------------------------------------------------------------

PRODUCER_ID_BLOCK_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ProducerIdBlockInfo:
    """The last block of producer ids handed out (Kafka's ProducerIdBlockZNode): ids
    block_start..block_end inclusive, claimed by controller `broker_id`."""
    broker_id: int
    block_start: int
    block_end: int


def encode_producer_id_block(info: ProducerIdBlockInfo) -> bytes:
    # Kafka writes the bounds as strings of decimal digits (they are int64s).
    return _dump({"version": PRODUCER_ID_BLOCK_VERSION, "broker": info.broker_id,
                  "block_start": str(info.block_start), "block_end": str(info.block_end)})


def decode_producer_id_block(data: bytes) -> ProducerIdBlockInfo:
    w = "producer id block"
    obj = _load(w, data)

    def bound(key: str) -> int:
        raw = _field(w, obj, key, (str, int), data)
        if isinstance(raw, str) and not raw.isdigit():
            raise ZnodeDataError(w, f"field {key!r} is not a non-negative integer", data)
        value = int(raw)
        if value < 0:
            raise ZnodeDataError(w, f"field {key!r} is negative", data)
        return value

    start, end = bound("block_start"), bound("block_end")
    if end < start:
        raise ZnodeDataError(w, f"block_end {end} < block_start {start}", data)
    return ProducerIdBlockInfo(broker_id=_field(w, obj, "broker", int, data),
                               block_start=start, block_end=end)


# --- the registry -----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ZnodeSpec:
    name: str
    path: str                  # template; <angle> parts are filled by the path function
    ephemeral: bool
    version: int | None        # payload version written, None when the payload has none
    encode: Any
    decode: Any


ZNODES: tuple[ZnodeSpec, ...] = (
    ZnodeSpec("broker", "/brokers/ids/<id>", True, BROKER_VERSION, encode_broker, decode_broker),
    ZnodeSpec("topic", "/brokers/topics/<topic>", False, TOPIC_VERSION,
              encode_topic_assignment, decode_topic_assignment),
    ZnodeSpec("partition_state", "/brokers/topics/<topic>/partitions/<p>/state", False,
              PARTITION_STATE_VERSION, encode_partition_state, decode_partition_state),
    ZnodeSpec("controller", "/controller", True, CONTROLLER_VERSION,
              encode_controller, decode_controller),
    ZnodeSpec("controller_epoch", "/controller_epoch", False, None,
              encode_controller_epoch, decode_controller_epoch),
    ZnodeSpec("topic_config", "/config/topics/<topic>", False, TOPIC_CONFIG_VERSION,
              encode_topic_config, decode_topic_config),
    ZnodeSpec("delete_topic", "/admin/delete_topics/<topic>", False, None,
              encode_delete_topic, decode_delete_topic),
    ZnodeSpec("reassign_partitions", "/admin/reassign_partitions", False, ADMIN_VERSION,
              encode_reassign_partitions, decode_reassign_partitions),
    ZnodeSpec("preferred_replica_election", "/admin/preferred_replica_election", False,
              ADMIN_VERSION, encode_preferred_replica_election, decode_preferred_replica_election),
    ZnodeSpec("gateway", "/riverbed/gateways/<id>", True, GATEWAY_VERSION,
              encode_gateway, decode_gateway),
    ZnodeSpec("cluster_id", "/cluster/id", False, 1, encode_cluster_id, decode_cluster_id),
    ZnodeSpec("group_coordinator", "/riverbed/group_coordinators/ids/<id>", True,
              SHARD_ZNODE_VERSION, encode_coordinator_instance, decode_coordinator_instance),
    ZnodeSpec("group_coordinator_shard", "/riverbed/group_coordinators/shards/<shard>", True,
              SHARD_ZNODE_VERSION, encode_shard_owner, decode_shard_owner),
    ZnodeSpec("offset_manager", "/riverbed/offset_managers/ids/<id>", True,
              SHARD_ZNODE_VERSION, encode_coordinator_instance, decode_coordinator_instance),
    ZnodeSpec("offset_manager_shard", "/riverbed/offset_managers/shards/<shard>", True,
              SHARD_ZNODE_VERSION, encode_shard_owner, decode_shard_owner),
    ZnodeSpec("transaction_coordinator", "/riverbed/transaction_coordinators/ids/<id>", True,
              SHARD_ZNODE_VERSION, encode_coordinator_instance, decode_coordinator_instance),
    ZnodeSpec("transaction_coordinator_shard", "/riverbed/transaction_coordinators/shards/<shard>",
              True, SHARD_ZNODE_VERSION, encode_shard_owner, decode_shard_owner),
    ZnodeSpec("transaction_coordinator_epoch", "/riverbed/transaction_coordinators/epochs/<shard>",
              False, None, encode_shard_epoch, decode_shard_epoch),
    ZnodeSpec("log_dir_event", "/log_dir_event_notification/log_dir_event_<seq>", False,
              LOG_DIR_EVENT_VERSION, encode_log_dir_event, decode_log_dir_event),
    ZnodeSpec("latest_producer_id_block", "/latest_producer_id_block", False,
              PRODUCER_ID_BLOCK_VERSION, encode_producer_id_block, decode_producer_id_block),
)
