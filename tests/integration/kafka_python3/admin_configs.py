"""kafka-python 3.0 admin, describing configs: describe_configs' result shape with the
'modified' (default), 'all' and 'dynamic' filters and a resource's key list, an unknown topic
and a BROKER resource (both described empty). Usage: python admin_configs.py BOOTSTRAP PREFIX"""
import sys

from kafka import KafkaAdminClient
from kafka.admin import ConfigFilterType, ConfigResource, ConfigResourceType

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC = PREFIX + "-configs"

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 1, "replication_factor": 1,
                                 "configs": {"retention.ms": "3600000",
                                             "cleanup.policy": "compact"}}},
                        wait_for_metadata=True)
    print(admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)]))
    every = admin.describe_configs([ConfigResource("TOPIC", TOPIC)], config_filter="all")
    configs = every["topic"][TOPIC]
    print(len(configs) > 10, configs["segment.bytes"]["config_source"],
          configs["retention.ms"]["value"], configs["cleanup.policy"]["config_source"])
    print(sorted(admin.describe_configs([ConfigResource("topic", TOPIC)],
                                        config_filter=ConfigFilterType.DYNAMIC)["topic"][TOPIC])
          == sorted(configs))
    print(admin.describe_configs([ConfigResource("TOPIC", TOPIC, ["retention.ms", "segment.ms"])],
                                 config_filter="all"))
    print(admin.describe_configs([ConfigResource("TOPIC", TOPIC, {"cleanup.policy": None})]))
    print(admin.describe_configs([ConfigResource("TOPIC", PREFIX + "-nope")]))
    print(admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")]))
    admin.delete_topics([TOPIC])
print("admin_configs: OK")
