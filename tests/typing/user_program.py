"""A user's program, checked by `mypy --strict` (tests/unit/sdk/test_typing.py, make typecheck):
the SDK's public API must type-check for its users. Not run."""
from __future__ import annotations

import json

from riverbed import (
    Admin,
    Consumer,
    ConsumerRecord,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    RecordMetadata,
    TopicPartition,
)
from riverbed.errors import KafkaTimeoutError, RiverbedError, TopicAlreadyExistsError


def main(bootstrap: str) -> int:
    with Admin(bootstrap_servers=bootstrap) as admin:
        try:
            admin.create_topics([NewTopic("orders", 3, 1, topic_configs={"retention.ms": "1000"})])
        except TopicAlreadyExistsError:
            pass
        configs = admin.describe_configs("orders")
        retention: str = configs["retention.ms"].value
        print(retention, admin.list_topics())

    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as producer:
        future = producer.send("orders", json.dumps({"n": 1}).encode(), key=b"customer-1")
        try:
            md: RecordMetadata = future.get(timeout=10)
        except KafkaTimeoutError:
            return 1
        print(md.partition, md.offset)
        producer.flush(timeout=10)

    consumer = Consumer("orders", bootstrap_servers=bootstrap, group_id="billing",
                        auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        batches = consumer.poll(timeout_ms=1000)
        for tp, records in batches.items():
            for r in records:
                rec: ConsumerRecord = r
                print(tp.topic, rec.offset, rec.key, rec.value)
        tp0 = TopicPartition("orders", 0)
        consumer.commit({tp0: OffsetAndMetadata(1)})
        ends: dict[TopicPartition, int] = consumer.end_offsets([tp0])
        print(ends[tp0], consumer.metrics()["records_consumed"])
    except RiverbedError as e:
        print(e)
        return 1
    finally:
        consumer.close()
    return 0
