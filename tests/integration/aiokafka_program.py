"""An aiokafka program (written against aiokafka's documented API), run by
test_dropin.py against a Riverbed fleet with only `aiokafka` replaced by `riverbed.aio`
in its import lines.

    python aiokafka_program.py BOOTSTRAP

Produces (send + await, send_and_wait, a batch), consumes with a group and commits, stays in
the group while idle longer than its session timeout, checks committed offsets and positions,
seeks back, reads from the end offsets, uses the admin client;
prints "aiokafka program: OK" at the end.
"""
import asyncio
import sys
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata

N = 30


def leaders(description):
    """aiokafka describes topics as dicts; accept objects with the same fields too."""
    field = (lambda o, k: o[k]) if isinstance(description, dict) else getattr
    return [field(p, "leader") for p in field(description, "partitions")]


async def wait_for_leaders(admin, topic, partitions):
    for _ in range(600):
        try:
            described = await admin.describe_topics([topic])
            found = leaders(described[0]) if described else []
            if len(found) == partitions and all(leader >= 0 for leader in found):
                return
        except KafkaError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit(f"{topic}: no leaders")


async def main(bootstrap):
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    group = f"aio-group-{uuid.uuid4().hex[:8]}"

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(name=topic, num_partitions=2, replication_factor=1)])
    await wait_for_leaders(admin, topic, 2)
    assert topic in await admin.list_topics()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                value_serializer=lambda v: v.encode("utf-8"))
    await producer.start()
    try:
        assert await producer.partitions_for(topic) == {0, 1}
        futures = [await producer.send(topic, f"value-{i}", key=b"k%d" % i, partition=i % 2)
                   for i in range(N)]
        metadata = [await f for f in futures]
        assert sorted(m.offset for m in metadata if m.partition == 0) == list(range(N // 2))
        md = await producer.send_and_wait(topic, "last", partition=0)
        assert md.topic == topic and md.partition == 0 and md.offset == N // 2
        batch = producer.create_batch()
        for i in range(3):
            batch.append(key=None, value=b"batched-%d" % i, timestamp=None)
        fut = await producer.send_batch(batch, topic, partition=1)
        assert (await fut).offset == N // 2 + 2
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=6000, heartbeat_interval_ms=1000)
    await consumer.start()
    try:
        seen = []
        async for msg in consumer:
            seen.append((msg.partition, msg.offset, msg.value))
            if len(seen) == N + 4:
                break
        assert sorted(v for _, _, v in seen if v.startswith(b"value-")) == \
            sorted(f"value-{i}".encode() for i in range(N))
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        assert consumer.assignment() == {tp0, tp1}
        # idle longer than the session timeout: the consumer stays in the group (heartbeats)
        await asyncio.sleep(8)
        await consumer.commit()
        assert await consumer.committed(tp0) == N // 2 + 1
        assert await consumer.committed(tp1) == N // 2 + 3
        await consumer.commit({tp0: OffsetAndMetadata(5, "")})
        assert await consumer.committed(tp0) == 5
        # seek back and read again
        consumer.seek(tp0, 3)
        assert await consumer.position(tp0) == 3
        again = await consumer.getmany(tp0, timeout_ms=5000)
        assert again[tp0][0].offset == 3
        ends = await consumer.end_offsets([tp0, tp1])
        assert ends == {tp0: N // 2 + 1, tp1: N // 2 + 3}
        assert await consumer.beginning_offsets([tp0]) == {tp0: 0}
        assert consumer.highwater(tp1) == N // 2 + 3
        await consumer.seek_to_beginning(tp1)
        first = await consumer.getone(tp1)
        assert first.partition == 1 and first.offset == 0
        consumer.pause(tp1)
        assert consumer.paused() == {tp1}
        consumer.resume(tp1)
        assert consumer.partitions_for_topic(topic) == {0, 1}
    finally:
        await consumer.stop()

    # a second member of the group starts from the committed offsets
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        first = None
        while first is None:
            for tp, records in (await consumer.getmany(timeout_ms=1000)).items():
                if tp.partition == 0:
                    first = records[0].offset
        assert first == 5, first
    finally:
        await consumer.stop()

    await admin.delete_topics([topic])
    await admin.close()
    print("aiokafka program: OK")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
