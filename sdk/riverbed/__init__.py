"""Riverbed's client SDK: the wire format (record batches, protobuf schemas, framing) and the
Producer, Consumer and Admin clients. Services import the codec and schemas from here, never the
other way round."""

__version__ = "0.1.0"

from riverbed.admin import Admin, AdminClient  # noqa: E402
from riverbed.consumer import Consumer  # noqa: E402
from riverbed.producer import Producer  # noqa: E402
from riverbed.structs import ConsumerRecord, NewTopic, RecordMetadata, TopicPartition  # noqa: E402

__all__ = ["Admin", "AdminClient", "Consumer", "ConsumerRecord", "NewTopic", "Producer",
           "RecordMetadata", "TopicPartition", "__version__"]
