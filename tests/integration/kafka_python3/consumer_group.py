"""kafka-python 3.0 consumer in a group: subscribe by the constructor, iterate with
consumer_timeout_ms, a Deserializer object and a plain key deserializer, commit(), committed(),
position(), assignment(), end/beginning offsets, offsets_for_times (OffsetAndTimestamp with its
leader_epoch), a second member that resumes from the committed offsets, poll() batches, commit
with explicit OffsetAndMetadata. Usage: python consumer_group.py BOOTSTRAP PREFIX"""
import sys

from kafka import (JsonSerializer, KafkaAdminClient, KafkaConsumer, KafkaProducer,
                   OffsetAndMetadata, TopicPartition)
from kafka.errors import IllegalStateError, KafkaError

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC, GROUP = PREFIX + "-events", PREFIX + "-billing"
N = 120

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 3, "replication_factor": 1}},
                        wait_for_metadata=True)
with KafkaProducer(bootstrap_servers=BOOTSTRAP, key_serializer=str.encode,
                   value_serializer=JsonSerializer()) as producer:
    for i in range(N):
        producer.send(TOPIC, {"n": i}, "user-%d" % (i % 11), timestamp_ms=1_700_000_000_000 + i)
    producer.flush()

consumer = KafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         key_deserializer=bytes.decode, value_deserializer=JsonSerializer(),
                         consumer_timeout_ms=30000)
seen, per_partition = set(), {}
for message in consumer:
    seen.add(message.value["n"])
    per_partition.setdefault(message.partition, []).append(message.offset)
    assert message.key.startswith("user-") and message.timestamp >= 1_700_000_000_000
    if len(seen) == N:
        break
print("consumed", len(seen), "in order per partition",
      all(offs == sorted(offs) for offs in per_partition.values()))
print("records per partition", {p: len(o) for p, o in sorted(per_partition.items())})
print("subscription", consumer.subscription())
parts = sorted(consumer.assignment())
print("assignment", parts)
consumer.commit()
print("committed", [consumer.committed(tp) for tp in parts])
print("committed with metadata", consumer.committed(parts[0], metadata=True))
print("positions", [consumer.position(tp) for tp in parts])
end = consumer.end_offsets(parts)
print("end", sorted(end.items()))
print("beginning", sorted(consumer.beginning_offsets(parts).items()))
found = consumer.offsets_for_times({tp: 1_700_000_000_000 + 60 for tp in parts})
print("for times", sorted((tp.partition, None if o is None else (o.offset, o.timestamp))
                          for tp, o in found.items()))
print("leader epochs known", all(o is None or o.leader_epoch is not None for o in found.values()))
try:
    consumer.assign([TopicPartition(TOPIC, 0)])
except IllegalStateError as e:
    print("assign while subscribed:", type(e).__name__, isinstance(e, KafkaError))
consumer.commit({parts[0]: OffsetAndMetadata(1, "by hand", -1)})
print("committed by hand", consumer.committed(parts[0], metadata=True))
consumer.close()

again = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=GROUP,
                      auto_offset_reset="earliest", enable_auto_commit=False)
again.subscribe([TOPIC])
got = []
for _ in range(60):        # only parts[0] has records left: from its committed offset 1
    for tp, records in again.poll(timeout_ms=1000).items():
        got.extend((tp.partition, r.offset) for r in records)
    if len(got) >= end[parts[0]] - 1:
        break
print("resumed", sorted(got)[:2], len(got), len(got) == end[parts[0]] - 1)
again.close()
print("consumer_group: OK")
