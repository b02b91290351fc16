"""kafka-python 3.0 admin, deleting records: delete_records moves a partition's log start
offset (the result per partition: its low watermark), the consumer's beginning follows, and an
offset past the end is OffsetOutOfRangeError. Usage: python admin_delete_records.py BOOTSTRAP PREFIX"""
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import OffsetSpec
from kafka.errors import OffsetOutOfRangeError

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC = PREFIX + "-trim"
tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 2, "replication_factor": 1}},
                        wait_for_metadata=True)
    with KafkaProducer(bootstrap_servers=BOOTSTRAP) as producer:
        for i in range(20):
            producer.send(TOPIC, b"v%d" % i, b"k", partition=i % 2)
        producer.flush()
    result = admin.delete_records({tp0: 4, tp1: 10})
    print({tp.partition: (r["low_watermark"], r["error_code"]) for tp, r in sorted(result.items())})
    print(admin.list_partition_offsets({tp0: OffsetSpec.EARLIEST, tp1: OffsetSpec.EARLIEST}))
    consumer = KafkaConsumer(bootstrap_servers=BOOTSTRAP)
    print(sorted(consumer.beginning_offsets([tp0, tp1]).items()))
    consumer.assign([tp0])
    consumer.seek_to_beginning(tp0)
    print([r.offset for records in consumer.poll(timeout_ms=5000).values() for r in records][:2])
    consumer.close()
    try:
        admin.delete_records({tp0: 99})
    except OffsetOutOfRangeError as e:
        print("past the end:", type(e).__name__)
    admin.delete_topics([TOPIC])
print("admin_delete_records: OK")
