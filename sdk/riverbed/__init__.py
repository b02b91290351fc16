"""Riverbed's client SDK: the wire format (record batches, protobuf schemas, framing) and the
Producer, Consumer and Admin clients. Services import the codec and schemas from here, never the
other way round.

Riverbed's names (Producer, Consumer, Admin) are the primary API. kafka-python 3.0's public
names are exported too (KafkaProducer, KafkaConsumer, KafkaAdminClient, OffsetAndMetadata,
TopicPartitionReplica, ConsumerRebalanceListener, OffsetSpec, IsolationLevel, the serializer
classes; riverbed.admin has kafka.admin's names, riverbed.errors kafka.errors' and
riverbed.structs kafka.structs'), so that a kafka-python program runs after `kafka` is replaced
by `riverbed` in its imports (docs/sdk/coming-from-kafka-clients.md has the comparison).
"""

__version__ = "0.1.0"

from riverbed.admin import Admin, AdminClient, KafkaAdminClient  # noqa: E402
from riverbed.consumer import Consumer, ConsumerRebalanceListener, KafkaConsumer  # noqa: E402
from riverbed.kafka_python_types import IsolationLevel, OffsetSpec  # noqa: E402
from riverbed.producer import KafkaProducer, Producer  # noqa: E402
from riverbed.serializer import (  # noqa: E402
    DefaultSerializer,
    Deserializer,
    JsonSerializer,
    Serializer,
)
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
    TopicPartitionReplica,
)
from riverbed.transactions import ConsumerGroupMetadata, PreparedTxnState  # noqa: E402

__all__ = ["Admin", "AdminClient", "ConfigResource", "ConfigResourceType", "Consumer",
           "ConsumerGroupMetadata",
           "ConsumerRebalanceListener", "ConsumerRecord", "DefaultSerializer", "Deserializer",
           "IsolationLevel", "JsonSerializer", "KafkaAdminClient", "KafkaConsumer",
           "KafkaProducer", "NewPartitions", "NewTopic", "OffsetAndMetadata",
           "OffsetAndTimestamp", "OffsetSpec", "PreparedTxnState", "Producer", "RecordMetadata",
           "Serializer",
           "TopicPartition", "TopicPartitionReplica", "__version__"]
