"""kafka-python 3.0 consumer without a group: assign(), seek_to_beginning/seek/seek_to_end,
position, poll with max_records, pause/resume/paused, highwater, a topic's partitions,
offsets_for_times, and the IllegalStateError of commit() without a group_id.
Usage: python consumer_assign.py BOOTSTRAP PREFIX"""
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import IllegalStateError, KafkaError

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC = PREFIX + "-log"

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 2, "replication_factor": 1}},
                        wait_for_metadata=True)
with KafkaProducer(bootstrap_servers=BOOTSTRAP) as producer:
    for i in range(40):
        producer.send(TOPIC, value=b"v%d" % i, key=b"k", partition=i % 2,
                      timestamp_ms=1_700_000_000_000 + 1000 * i)
    producer.flush()

tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
consumer = KafkaConsumer(bootstrap_servers=BOOTSTRAP, enable_auto_commit=False)
print("topic known", TOPIC in consumer.topics(), sorted(consumer.partitions_for_topic(TOPIC)))
consumer.assign([tp0, tp1])
print("assignment", sorted(consumer.assignment()), "subscription", consumer.subscription())
consumer.seek_to_beginning(tp0)
consumer.seek(tp1, 15)
print("positions", consumer.position(tp0), consumer.position(tp1))


def drain(c, want):
    out = []
    for _ in range(60):
        for tp, records in c.poll(timeout_ms=1000, max_records=7).items():
            assert len(records) <= 7
            out.extend((tp.partition, r.offset, r.value) for r in records)
        if len(out) >= want:
            break
    return sorted(out)


got = drain(consumer, 20 + 5)
print("read", len(got), got[:2], got[-2:])
print("highwater", consumer.highwater(tp0), consumer.highwater(tp1))
consumer.pause(tp1)
print("paused", consumer.paused())
consumer.seek(tp0, 18)
consumer.seek(tp1, 0)
print("while paused", drain(consumer, 2))
consumer.resume(tp1)
print("paused", consumer.paused())
consumer.seek_to_end(tp0)
print("at end", consumer.position(tp0))
found = consumer.offsets_for_times({tp0: 1_700_000_000_000 + 10_500, tp1: 1_700_000_000_000 + 99_000})
print("for times", {tp.partition: None if o is None else (o.offset, o.timestamp)
                    for tp, o in sorted(found.items())})
try:
    consumer.commit()
except IllegalStateError as e:
    print("commit without group:", type(e).__name__, isinstance(e, KafkaError))
consumer.close()
print("consumer_assign: OK")
