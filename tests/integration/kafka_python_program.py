"""A program written for kafka-python 2.x (producer, consumer in a group, admin). The test
test_dropin.py runs it against a Riverbed fleet after replacing `kafka` by
`riverbed` in its import lines and nothing else. Riverbed's kafka-python names follow 3.0 and
keep 2.x's where 3.0 has no call of that name (list_consumer_groups, describe_consumer_groups,
list_consumer_group_offsets, NoBrokersAvailable); describe_configs, a name both have, is used
with 3.0's result shape. (kafka_python3/ holds programs written for 3.0, run against kafka-python
itself too: test_kafka_python3.py.) Usage: python PROGRAM BOOTSTRAP"""
import json
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import CommitFailedError, KafkaTimeoutError, NoBrokersAvailable, TopicAlreadyExistsError

BOOTSTRAP = sys.argv[1]
TOPIC = "kp-orders"
GROUP = "kp-billing"
N = 300

admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP, client_id="kp-admin")
admin.create_topics([NewTopic(name=TOPIC, num_partitions=2, replication_factor=1,
                              topic_configs={"retention.ms": "3600000"})])
try:
    admin.create_topics([NewTopic(name=TOPIC, num_partitions=2, replication_factor=1)])
    sys.exit("expected TopicAlreadyExistsError")
except TopicAlreadyExistsError:
    pass
assert TOPIC in admin.list_topics()
admin.create_partitions({TOPIC: NewPartitions(total_count=3)})
described = admin.describe_configs(config_resources=[ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
assert described["topic"][TOPIC]["retention.ms"]["value"] == "3600000", described

producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all", linger_ms=5,
                         key_serializer=str.encode,
                         value_serializer=lambda v: json.dumps(v).encode("utf-8"))
futures = [producer.send(TOPIC, key="customer-%d" % (i % 17), value={"n": i}) for i in range(N)]
producer.flush()
metadata = futures[0].get(timeout=10)
assert metadata.topic == TOPIC and metadata.offset >= 0, metadata
assert len(producer.partitions_for(TOPIC)) == 3
producer.close()

consumer = KafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         key_deserializer=bytes.decode,
                         value_deserializer=lambda b: json.loads(b.decode("utf-8")),
                         consumer_timeout_ms=30000)
seen = set()
for message in consumer:
    assert message.key.startswith("customer-")
    seen.add(message.value["n"])
    if len(seen) == N:
        break
assert len(seen) == N, len(seen)
consumer.commit()
partitions = [TopicPartition(TOPIC, p) for p in sorted(consumer.partitions_for_topic(TOPIC))]
assert consumer.assignment() == set(partitions)
end = consumer.end_offsets(partitions)
begin = consumer.beginning_offsets(partitions)
assert sum(end.values()) - sum(begin.values()) == N
busy = next(tp for tp in partitions if end[tp] > 0)
found = consumer.offsets_for_times({busy: 0})
assert found[busy].offset == 0, found
assert consumer.committed(busy) == end[busy]
assert consumer.metrics()
consumer.commit({busy: OffsetAndMetadata(end[busy], "")})
consumer.close()

assert (GROUP, "consumer") in admin.list_consumer_groups()
(group,) = admin.describe_consumer_groups([GROUP])
assert group.group == GROUP and group.members == [], group
offsets = admin.list_consumer_group_offsets(GROUP)
assert sum(om.offset for om in offsets.values()) == N, offsets
admin.delete_topics([TOPIC])
admin.close()
assert issubclass(KafkaTimeoutError, Exception) and issubclass(CommitFailedError, Exception)
assert issubclass(NoBrokersAvailable, Exception)
print("kafka-python program: OK")
