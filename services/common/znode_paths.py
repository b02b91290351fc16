"""Every znode path Riverbed uses: the fixed paths and the functions that build the others.

After Kafka's `ZkData.scala` paths. Path functions check the names and ids they are given
(`ValueError` for an empty name, one with a '/', or a negative id). `services.common.znodes`
re-exports all of them beside their payload codecs; import them from there.
"""
from __future__ import annotations

# --- paths ------------------------------------------------------------------------------------

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
# Kafka's log-dir failure channel (KIP-112): a storage node whose log dir failed creates a
# sequential child here; the controller re-reads /brokers/ids (whose data now names the node's
# offline partitions) and deletes the child.
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
GATEWAYS = "/riverbed/gateways"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# Roots of the sharded roles (each has ids/ and shards/ below it; transaction coordinators also
# epochs/).
GROUP_COORDINATORS = "/riverbed/group_coordinators"
OFFSET_MANAGERS = "/riverbed/offset_managers"
TRANSACTION_COORDINATORS = "/riverbed/transaction_coordinators"
SHARD_ROLE_ROOTS = (GROUP_COORDINATORS, OFFSET_MANAGERS, TRANSACTION_COORDINATORS)

# Parents that should exist before anyone watches their children (Kafka's PersistentZkPaths).
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, CONFIG_TOPICS, DELETE_TOPICS, GATEWAYS, CLUSTER,
                    LOG_DIR_EVENT_NOTIFICATION)


def _name(kind: str, value: str) -> str:
    if not value or "/" in value or value in (".", ".."):
        raise ValueError(f"invalid {kind} {value!r} for a znode path")
    return value


def _int_id(kind: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"invalid {kind} {value!r}")
    return value


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{_int_id('broker id', broker_id)}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{_name('topic', topic)}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{_int_id('partition', partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{_name('topic', topic)}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{_name('topic', topic)}"


def gateway_path(gateway_id: int) -> str:
    return f"{GATEWAYS}/{_int_id('gateway id', gateway_id)}"


def _role_root(root: str) -> str:
    if root not in SHARD_ROLE_ROOTS:
        raise ValueError(f"{root!r} is not a sharded role's root")
    return root


def shard_instances_path(root: str) -> str:
    """`<root>/ids`: the live instances of a sharded role (GROUP_COORDINATORS, OFFSET_MANAGERS)."""
    return f"{_role_root(root)}/ids"


def shard_instance_path(root: str, instance_id: int) -> str:
    return f"{shard_instances_path(root)}/{_int_id('instance id', instance_id)}"


def shard_owners_path(root: str) -> str:
    """`<root>/shards`: one ephemeral child per owned shard."""
    return f"{_role_root(root)}/shards"


def shard_owner_path(root: str, shard: int) -> str:
    return f"{shard_owners_path(root)}/{_int_id('shard', shard)}"


def shard_epochs_path(root: str) -> str:
    """`<root>/epochs`: one persistent child per shard whose version is the shard's coordinator
    epoch (set by each instance that takes the shard)."""
    return f"{_role_root(root)}/epochs"


def shard_epoch_path(root: str, shard: int) -> str:
    return f"{shard_epochs_path(root)}/{_int_id('shard', shard)}"
