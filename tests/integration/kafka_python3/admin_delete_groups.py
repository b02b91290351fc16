"""kafka-python 3.0 admin, deleting groups: delete_groups gives each group 'OK' or its error's
name (a group with a member: NonEmptyGroupError; an unknown one: GroupIdNotFoundError), and a
deleted group's offsets are gone. Usage: python admin_delete_groups.py BOOTSTRAP PREFIX"""
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata, TopicPartition

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC = PREFIX + "-gone"
EMPTY, BUSY = PREFIX + "-idle", PREFIX + "-busy"
tp0 = TopicPartition(TOPIC, 0)

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 1, "replication_factor": 1}},
                        wait_for_metadata=True)
    admin.alter_group_offsets(EMPTY, {tp0: OffsetAndMetadata(0, "", -1)})
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id=BUSY,
                             enable_auto_commit=False)
    while not consumer.assignment():        # joined
        consumer.poll(timeout_ms=500)
    print(admin.delete_groups([EMPTY, BUSY, PREFIX + "-never"]))
    consumer.close()
    print(admin.list_group_offsets({EMPTY: None}))
    print(sorted(g["group_id"] for g in admin.list_groups() if g["group_id"].startswith(PREFIX)))
    for _ in range(300):    # Riverbed: the offset manager learns of the leave a moment later
        result = admin.delete_groups([BUSY])
        if result[BUSY] != "NonEmptyGroupError":
            break
        time.sleep(0.1)
    print(result)
    admin.delete_topics([TOPIC])
print("admin_delete_groups: OK")
