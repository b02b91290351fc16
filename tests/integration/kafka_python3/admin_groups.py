"""kafka-python 3.0 admin, consumer groups and their offsets: list_groups (a dict per group,
states_filter), describe_groups (a live member's subscription and assignment; an empty and an
unknown group), list_group_offsets ({group: None} and {group: [partitions]}),
alter_group_offsets (refused while the group has a member), reset_group_offsets (OffsetSpec,
OffsetTimestamp and a plain offset, clamped) and list_partition_offsets. Usage: python admin_groups.py BOOTSTRAP PREFIX"""
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import GroupState, OffsetSpec, OffsetTimestamp

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC, GROUP = PREFIX + "-pay", PREFIX + "-ledger"
T0 = 1_700_000_000_000
tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)

admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
admin.create_topics({TOPIC: {"num_partitions": 2, "replication_factor": 1}}, wait_for_metadata=True)
with KafkaProducer(bootstrap_servers=BOOTSTRAP) as producer:
    for i in range(30):
        producer.send(TOPIC, b"v%d" % i, b"k", partition=i % 2, timestamp_ms=T0 + 1000 * i)
    producer.flush()

consumer = KafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP, client_id="kp3-c",
                         auto_offset_reset="earliest", enable_auto_commit=False)
n = 0
while n < 30:
    n += sum(len(r) for r in consumer.poll(timeout_ms=1000).values())
consumer.commit({tp0: OffsetAndMetadata(10, "ten", -1)})


def mine(groups):
    return sorted((g for g in groups if g["group_id"].startswith(PREFIX)), key=lambda g: g["group_id"])


for _ in range(100):                        # the join is done once the group is Stable
    if mine(admin.list_groups()) and mine(admin.list_groups())[0]["group_state"] == "Stable":
        break
    time.sleep(0.1)
print("groups", mine(admin.list_groups()))
print("stable", mine(admin.list_groups(states_filter=[GroupState.STABLE])),
      "empty", mine(admin.list_groups(states_filter=["Empty"])))
live = admin.describe_groups([GROUP])[GROUP]
(member,) = live["members"]
print("live", live["group_state"], live["protocol_type"], live["protocol_data"], live["error"],
      member["client_id"], member["group_instance_id"], member["member_metadata"],
      member["member_assignment"])
print("alter while live", {tp.partition: e.__name__ for tp, e in
                           admin.alter_group_offsets(GROUP, {tp1: OffsetAndMetadata(3, "", -1)}).items()})
consumer.close()

print("described", admin.describe_groups([GROUP, PREFIX + "-nobody"]))
print("offsets", admin.list_group_offsets({GROUP: None}))
print("some offsets", admin.list_group_offsets({GROUP: [tp0, tp1], PREFIX + "-nobody": None}))
print("by id", admin.list_group_offsets(GROUP) == admin.list_group_offsets([GROUP]))
print("altered", {tp.partition: e.__name__ for tp, e in admin.alter_group_offsets(
    GROUP, {tp0: OffsetAndMetadata(4, "four", -1), tp1: OffsetAndMetadata(5, "", -1)}).items()})
print("offsets", admin.list_group_offsets({GROUP: None})[GROUP])
print("partition offsets", admin.list_partition_offsets({
    tp0: OffsetSpec.EARLIEST, tp1: OffsetSpec.LATEST}))
print("by time", {tp.partition: (o.offset, o.timestamp) for tp, o in admin.list_partition_offsets(
    {tp0: T0 + 4500, tp1: T0 + 99_000}).items()})
reset = admin.reset_group_offsets(GROUP, {tp0: OffsetSpec.LATEST, tp1: OffsetTimestamp(T0 + 6500)})
print("reset", {tp.partition: (r["error"].__name__, r["offset"]) for tp, r in sorted(reset.items())})
reset = admin.reset_group_offsets(GROUP, {tp0: 2, tp1: 99})
print("reset", {tp.partition: (r["error"].__name__, r["offset"]) for tp, r in sorted(reset.items())})
print("offsets", admin.list_group_offsets({GROUP: None})[GROUP])
admin.delete_topics([TOPIC])
admin.close()
print("admin_groups: OK")
