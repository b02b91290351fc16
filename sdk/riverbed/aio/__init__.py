"""Riverbed's asyncio clients: producer, consumer and admin on zmq.asyncio, no thread per call.

    from riverbed.aio import Producer, Consumer, Admin            # Riverbed's names
    from riverbed.aio import AIOKafkaProducer, AIOKafkaConsumer   # aiokafka's, the same classes
    from riverbed.aio.admin import AIOKafkaAdminClient, NewTopic

Shaped like aiokafka, so that an aiokafka program runs after `aiokafka` is replaced by
`riverbed.aio` in its imports (riverbed.aio.admin, .errors and .structs mirror aiokafka's
modules). The clients are the sync clients' logic (accumulator, sender, partitioner, record
codec, consumer, group membership with eager and cooperative rebalancing, offsets, admin calls)
driven on the asyncio loop: riverbed.aio.bridge runs it in greenlets and awaits its waits on
zmq.asyncio sockets (riverbed.aio.channel). The sync Producer's sender thread is never started.
"""
from riverbed.aio.admin import AIOKafkaAdminClient, Admin
from riverbed.aio.consumer import AIOKafkaConsumer, Consumer
from riverbed.aio.producer import AIOKafkaProducer, BatchBuilder, Producer
from riverbed.consumer_groups import ConsumerRebalanceListener
from riverbed.structs import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = ["Admin", "AIOKafkaAdminClient", "AIOKafkaConsumer", "AIOKafkaProducer",
           "BatchBuilder", "Consumer", "ConsumerRebalanceListener", "ConsumerRecord",
           "OffsetAndMetadata", "OffsetAndTimestamp", "Producer", "RecordMetadata",
           "TopicPartition"]
