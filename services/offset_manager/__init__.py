"""The offset manager: committed offsets, cached in memory, durable in __consumer_offsets."""
