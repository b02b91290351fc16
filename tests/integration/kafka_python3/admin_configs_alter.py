"""kafka-python 3.0 admin, changing configs: alter_configs with plain values (SET) and
(AlterConfigOp, value) pairs (SET, DELETE, APPEND, SUBTRACT), a bad value reported in the
result, an unknown key refused (ValueError), validate_only, reset_configs.
Usage: python admin_configs_alter.py BOOTSTRAP PREFIX"""
import sys

from kafka import KafkaAdminClient
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC = PREFIX + "-alter"


def overrides(admin):
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    return {k: v["value"] for k, v in described["topic"][TOPIC].items()}


with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 1, "replication_factor": 1,
                                 "configs": {"retention.ms": "3600000"}}},
                        wait_for_metadata=True)
    print(admin.alter_configs([ConfigResource("TOPIC", TOPIC, {"segment.ms": "600000"})]))
    print(overrides(admin))
    print(admin.alter_configs([ConfigResource("TOPIC", TOPIC, {
        "retention.ms": (AlterConfigOp.DELETE, None),
        "cleanup.policy": (AlterConfigOp.SET, "compact"),
        "max.message.bytes": ("SET", 2000000)})]))
    print(overrides(admin))
    print(admin.alter_configs([ConfigResource("TOPIC", TOPIC, {
        "cleanup.policy": (AlterConfigOp.APPEND, "delete")})]))
    print(overrides(admin)["cleanup.policy"])
    print(admin.alter_configs([ConfigResource("TOPIC", TOPIC, {
        "cleanup.policy": (AlterConfigOp.SUBTRACT, "compact")})]))
    print(overrides(admin)["cleanup.policy"])
    print(admin.alter_configs([ConfigResource("TOPIC", TOPIC, {"segment.ms": "1"})],
                              validate_only=True))
    print(overrides(admin)["segment.ms"])
    print(admin.alter_configs([ConfigResource("TOPIC", TOPIC, {"retention.ms": "not-a-number"})]))
    try:
        admin.alter_configs([ConfigResource("TOPIC", TOPIC, {"no.such.key": "1"})])
    except ValueError as e:
        print("unknown key:", e)
    print(admin.reset_configs([ConfigResource("TOPIC", TOPIC, ["segment.ms"])]))
    print(overrides(admin))
    # every key back to its default: configs={} (kafka-python 3.0.12's reset_configs fails on a
    # resource whose configs is None when the topic has modified keys, against any broker)
    print(admin.reset_configs([ConfigResource("TOPIC", TOPIC, {})]))
    print(overrides(admin))
    admin.delete_topics([TOPIC])
print("admin_configs_alter: OK")
