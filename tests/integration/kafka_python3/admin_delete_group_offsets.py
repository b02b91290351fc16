"""kafka-python 3.0 admin, forgetting a group's offsets: delete_group_offsets per partition
(a partition without a commit too), NonEmptyGroupError while the group has a member (and, on
Riverbed, for a moment after it left: the program retries).
Usage: python admin_delete_group_offsets.py BOOTSTRAP PREFIX"""
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.errors import GroupSubscribedToTopicError, KafkaError, NonEmptyGroupError

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC, GROUP = PREFIX + "-forget", PREFIX + "-forgetful"
tp0, tp1, tp2 = (TopicPartition(TOPIC, p) for p in range(3))

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 3, "replication_factor": 1}},
                        wait_for_metadata=True)
    print(sorted((tp.partition, e.__name__) for tp, e in admin.alter_group_offsets(
        GROUP, {tp0: OffsetAndMetadata(0, "", -1), tp1: OffsetAndMetadata(0, "", -1)}).items()))
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP,
                             enable_auto_commit=False)
    while not consumer.assignment():        # joined
        consumer.poll(timeout_ms=500)
    try:
        print(admin.delete_group_offsets(GROUP, [tp0]))
    except (NonEmptyGroupError, GroupSubscribedToTopicError) as e:
        print("while a member is subscribed:", type(e).__name__, isinstance(e, KafkaError))
    consumer.close()
    for _ in range(300):    # Riverbed: the offset manager learns of the leave a moment later
        try:
            deleted = admin.delete_group_offsets(GROUP, [tp0, tp2])
            break
        except NonEmptyGroupError:
            time.sleep(0.1)
    print(sorted((tp.partition, e.__name__) for tp, e in deleted.items()))
    print(admin.list_group_offsets({GROUP: None}))
    admin.delete_topics([TOPIC])
print("admin_delete_group_offsets: OK")
