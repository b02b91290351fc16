"""Riverbed's client SDK: the wire format (record batches, protobuf schemas, framing) and the
Producer, Consumer and Admin clients. Services import the codec and schemas from here, never the
other way round."""

__version__ = "0.1.0"

from riverbed.admin import Admin, AdminClient  # noqa: E402
from riverbed.consumer import Consumer  # noqa: E402
from riverbed.producer import Producer  # noqa: E402
from riverbed.structs import (  # noqa: E402
    ConsumerRecord,
    NewTopic,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = ["Admin", "AdminClient", "Consumer", "ConsumerRecord", "NewTopic", "OffsetAndTimestamp",
           "Producer", "RecordMetadata", "TopicPartition", "__version__"]
