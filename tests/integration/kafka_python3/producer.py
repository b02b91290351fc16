"""kafka-python 3.0 producer: 3.0's defaults (acks='all', idempotence), a JsonSerializer and a
plain key serializer, keyed records (kafka-python's murmur2 partitioner), headers and an explicit
partition in 3.0's argument order, futures with get() and callbacks, flush, partitions_for,
the errors send() raises. Usage: python producer.py BOOTSTRAP PREFIX"""
import sys

from kafka import JsonSerializer, KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC = PREFIX + "-orders"

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 3, "replication_factor": 1}},
                        wait_for_metadata=True)

producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, linger_ms=5,
                         key_serializer=str.encode, value_serializer=JsonSerializer())
print("acks", producer.config["acks"])
print("partitions", sorted(producer.partitions_for(TOPIC)))
futures = [producer.send(TOPIC, {"n": i}, "customer-%d" % (i % 7)) for i in range(60)]
acked = []
tail = producer.send(TOPIC, value={"n": "tail"}, key="tail", headers=[("source", b"kp3")])
tail.add_callback(lambda md: acked.append((md.topic == TOPIC, md.partition)))
tail.add_errback(lambda e: acked.append(("error", type(e).__name__)))
pinned = producer.send(TOPIC, {"n": "pinned"}, "k", [("h", b"1")], 2)    # headers, partition
producer.flush()
offsets = {}
for f in futures:
    md = f.get(timeout=30)
    offsets.setdefault(md.partition, []).append(md.offset)
for partition in sorted(offsets):
    got = offsets[partition]
    print("partition", partition, "records", len(got), "offsets 0..n-1", sorted(got) == list(range(len(got))))
md = pinned.get(timeout=30)
print("pinned", md.topic == TOPIC, md.partition, md.offset >= 0, md.timestamp > 0)
print("callback", acked)

try:
    producer.send(TOPIC)
except (ValueError, KafkaError) as e:
    print("no key, no value:", type(e).__name__)
try:
    producer.send(TOPIC, {"n": 1}, "k", partition=99).get(timeout=30)
except (ValueError, KafkaError) as e:
    print("partition 99:", type(e).__name__)
print("metrics", isinstance(producer.metrics(), dict))
producer.close()
try:
    KafkaProducer(bootstrap_servers="127.0.0.1:1", bootstrap_timeout_ms=1000)
except KafkaTimeoutError as e:
    print("no cluster:", isinstance(e, KafkaError), e.retriable)
print("producer: OK")
