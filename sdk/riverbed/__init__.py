"""Riverbed's client SDK: the wire format (record batches, protobuf schemas, framing) and the
Producer, Consumer and Admin clients. Services import the codec and schemas from here, never the
other way round.

Riverbed's names (Producer, Consumer, Admin) are the primary API. kafka-python's public names
are exported too (KafkaProducer, KafkaConsumer, KafkaAdminClient, OffsetAndMetadata,
ConsumerRebalanceListener; riverbed.admin has NewTopic, NewPartitions, ConfigResource and
ConfigResourceType; riverbed.errors kafka-python's exception names), so that a kafka-python
program runs after `kafka` is replaced by `riverbed` in its imports.
"""

__version__ = "0.1.0"

from riverbed.admin import Admin, AdminClient, KafkaAdminClient  # noqa: E402
from riverbed.consumer import Consumer, ConsumerRebalanceListener, KafkaConsumer  # noqa: E402
from riverbed.producer import KafkaProducer, Producer  # noqa: E402
from riverbed.structs import (  # noqa: E402
    ConfigResource,
    ConfigResourceType,
    ConsumerRecord,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)
from riverbed.transactions import ConsumerGroupMetadata  # noqa: E402

__all__ = ["Admin", "AdminClient", "ConfigResource", "ConfigResourceType", "Consumer",
           "ConsumerGroupMetadata",
           "ConsumerRebalanceListener", "ConsumerRecord", "KafkaAdminClient", "KafkaConsumer",
           "KafkaProducer", "NewPartitions", "NewTopic", "OffsetAndMetadata",
           "OffsetAndTimestamp", "Producer", "RecordMetadata", "TopicPartition", "__version__"]
