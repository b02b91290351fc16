"""Shared, pure formats and algorithms of consumer groups.

- `offsets_topic`: the key/value schemas of `__consumer_offsets` (Kafka's GroupMetadataManager),
  the shard rule (`partition_for`, Java's String.hashCode), and the storage-error mapping.
- `consumer_protocol`: Kafka's ConsumerProtocol subscription/assignment bytes.
- `assignors`: range, roundrobin, sticky and cooperative-sticky (KIP-429) partition assignment
  (pure functions).

Imported by the group coordinator, the offset manager and tools; imports nothing from services/.
"""
