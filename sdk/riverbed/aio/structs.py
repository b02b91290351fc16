"""aiokafka.structs' names, from riverbed.structs."""
from riverbed.structs import (  # noqa: F401
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)
