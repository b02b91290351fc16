"""Generates docs/configuration.md: every Producer, Consumer and Admin setting with its Kafka
name and default. The settings and defaults come from the clients' signatures (the code is the
definition); the meanings are the table below.

    .venv/bin/python docs/config_reference.py > docs/configuration.md    (make docs does it)

tests/unit/sdk/test_config_reference.py fails when a client gains a setting that is not
described here, or when docs/configuration.md is stale.
"""
from __future__ import annotations

import inspect
import math
import sys

# setting -> (Kafka's name, or None where Kafka has none; what it means)
PRODUCER = {
    "bootstrap_servers": ("bootstrap.servers", "gateway endpoints (`host:port`, `tcp://host:port`, a comma-separated string or a list); the client learns the other live gateways from them. Default: `$RIVERBED_BOOTSTRAP`, else `tcp://127.0.0.1:9092`"),
    "bootstrap": (None, "alias of `bootstrap_servers` (both given and different is an error)"),
    "client_id": ("client.id", "name sent with every request (logs, quotas); default `riverbed-producer-<pid>-<id>`"),
    "acks": ("acks", "`0` (no answer), `1` (the leader appended) or `\"all\"`/`-1` (every in-sync replica has it)"),
    "batch_size": ("batch.size", "bytes of records per partition batch before it is sent"),
    "linger_ms": ("linger.ms", "how long a batch that is not full waits for more records"),
    "buffer_memory": ("buffer.memory", "bytes of records buffered in the producer in total; `send()` blocks (up to `max_block_ms`) when it is full"),
    "max_block_ms": ("max.block.ms", "longest `send()` and `partitions_for()` wait for metadata or buffer space"),
    "compression_type": ("compression.type", "`None`/`\"none\"`, `\"gzip\"`, `\"snappy\"`, `\"lz4\"` or `\"zstd\"` (per batch)"),
    "max_request_size": ("max.request.size", "largest record (and request) accepted, in bytes"),
    "retries": ("retries", "how often a batch is retried after a retriable error (bounded by `delivery_timeout_ms` too)"),
    "retry_backoff_ms": ("retry.backoff.ms", "wait before retrying a failed request or metadata refresh"),
    "request_timeout_ms": ("request.timeout.ms", "longest wait for one request's answer (a lost gateway is noticed sooner: within about a second)"),
    "delivery_timeout_ms": ("delivery.timeout.ms", "upper bound from `send()` to success or failure; default `max(120000, linger_ms + request_timeout_ms)`"),
    "max_in_flight_requests_per_connection": ("max.in.flight.requests.per.connection", "requests sent without an answer yet (at most 5 with idempotence)"),
    "enable_idempotence": ("enable.idempotence", "producer id + sequence numbers so retries never duplicate; default on with `acks=\"all\"`"),
    "partitioner": ("partitioner.class", "callable `(key_bytes, all_partitions, available_partitions) -> partition`; default Kafka's murmur2 for keys, sticky batches without"),
    "key_serializer": ("key.serializer", "callable turning a key into bytes"),
    "value_serializer": ("value.serializer", "callable turning a value into bytes"),
    "metadata_max_age_ms": ("metadata.max.age.ms", "metadata is refreshed at least this often"),
    "close_timeout_ms": (None, "Riverbed: how long the producer flushes at interpreter exit when the program did not close it"),
    "transactional_id": ("transactional.id", "makes the producer transactional (init_transactions, begin/commit/abort_transaction, send_offsets_to_transaction): the id its transaction coordinator keys it by; a new producer with the same id fences the old one. Implies idempotence and `acks=\"all\"`. See the transactions guide"),
    "transaction_timeout_ms": ("transaction.timeout.ms", "the coordinator aborts a transaction open longer than this (and fences its producer); at most the coordinators' `transaction.max.timeout.ms`"),
    "batch_size_max": (None, "Riverbed: a partition's batch grows past `batch_size` (doubling when a batch fills before it is sent) up to this many bytes, and halves when one is sent unfilled; default `min(512 KiB, max_request_size, buffer_memory / 8)`; `batch_size_max=batch_size` gives Kafka's fixed batches"),
    "security_protocol": ("security.protocol", "`\"CURVE\"` (CurveZMQ: encrypted, the client authenticated by its key) or `\"NONE\"`; default `$RIVERBED_SECURITY_PROTOCOL`, the properties file in `$RIVERBED_CLIENT_PROPERTIES`, else NONE"),
    "curve_secret_key_file": (None, "Riverbed: the client's `zmq.auth` secret key file (its principal is `User:<name>` of the certificate)"),
    "curve_server_public_key": (None, "Riverbed: the gateways' public key (Z85), when all share one"),
    "curve_server_keys_dir": (None, "Riverbed: a directory of servers' public certificates, each naming its endpoints; a gateway's key is looked up by its endpoint"),
}
CONSUMER = {
    "topics": (None, "positional: topics to subscribe to at once (with `group_id`) or later with `subscribe()`/`assign()`"),
    "bootstrap_servers": PRODUCER["bootstrap_servers"],
    "bootstrap": PRODUCER["bootstrap"],
    "client_id": ("client.id", "name sent with every request; default `riverbed-consumer-<pid>-<id>`"),
    "group_id": ("group.id", "consumer group to join (subscriptions, committed offsets); `None`: no group, `assign()` only"),
    "fetch_min_bytes": ("fetch.min.bytes", "a fetch waits until this many bytes are ready (or `fetch_max_wait_ms`)"),
    "fetch_max_wait_ms": ("fetch.max.wait.ms", "longest a fetch waits on the storage node for `fetch_min_bytes`"),
    "max_partition_fetch_bytes": ("max.partition.fetch.bytes", "bytes per partition per fetch"),
    "fetch_max_bytes": ("fetch.max.bytes", "bytes per fetch in total"),
    "auto_offset_reset": ("auto.offset.reset", "where to start without a committed offset, or out of range: `\"earliest\"`, `\"latest\"` or `\"none\"` (raise)"),
    "consumer_timeout_ms": (None, "kafka-python's: iteration (`for record in consumer`) stops after this long without a record"),
    "max_poll_records": ("max.poll.records", "records returned by one `poll()` at most"),
    "request_timeout_ms": PRODUCER["request_timeout_ms"],
    "retry_backoff_ms": PRODUCER["retry_backoff_ms"],
    "check_crcs": ("check.crcs", "verify each batch's CRC-32C"),
    "isolation_level": ("isolation.level", "`\"read_uncommitted\"` (every record below the high watermark) or `\"read_committed\"` (only below the last stable offset, never records of aborted transactions; committed offsets read with require_stable)"),
    "key_deserializer": ("key.deserializer", "callable turning key bytes into a key"),
    "value_deserializer": ("value.deserializer", "callable turning value bytes into a value"),
    "enable_auto_commit": ("enable.auto.commit", "commit positions every `auto_commit_interval_ms` from `poll()`, and on close"),
    "auto_commit_interval_ms": ("auto.commit.interval.ms", "interval of the automatic commits"),
    "session_timeout_ms": ("session.timeout.ms", "a member without heartbeats for this long leaves the group"),
    "heartbeat_interval_ms": ("heartbeat.interval.ms", "interval of the heartbeats (sent from `poll()`); with `heartbeat_long_poll`, also how long the coordinator may hold one (at most a third of `session_timeout_ms`)"),
    "max_poll_interval_ms": ("max.poll.interval.ms", "a member that does not call `poll()` for this long leaves the group"),
    "heartbeat_long_poll": (None, "Riverbed: each heartbeat asks the coordinator to hold it up to `heartbeat_interval_ms` and answer at once when the group starts rebalancing, so the member rejoins the moment a rebalance begins instead of at its next heartbeat (the next heartbeat follows the answer, never sooner than `heartbeat_interval_ms` after the previous one); `False`: Kafka's heartbeats, answered at once"),
    "partition_assignment_strategy": ("partition.assignment.strategy", "assignors in order of preference: `\"range\"`, `\"roundrobin\"`, `\"sticky\"`"),
    "security_protocol": PRODUCER["security_protocol"],
    "curve_secret_key_file": PRODUCER["curve_secret_key_file"],
    "curve_server_public_key": PRODUCER["curve_server_public_key"],
    "curve_server_keys_dir": PRODUCER["curve_server_keys_dir"],
}
ADMIN = {
    "bootstrap_servers": PRODUCER["bootstrap_servers"],
    "bootstrap": PRODUCER["bootstrap"],
    "client_id": ("client.id", "name sent with every request; default `riverbed-admin-<pid>`"),
    "request_timeout_ms": PRODUCER["request_timeout_ms"],
    "retry_backoff_ms": PRODUCER["retry_backoff_ms"],
    "security_protocol": PRODUCER["security_protocol"],
    "curve_secret_key_file": PRODUCER["curve_secret_key_file"],
    "curve_server_public_key": PRODUCER["curve_server_public_key"],
    "curve_server_keys_dir": PRODUCER["curve_server_keys_dir"],
}
TABLES = {"Producer": PRODUCER, "Consumer": CONSUMER, "Admin": ADMIN}


def settings(cls) -> list[tuple[str, object]]:
    """(name, default) of each public setting of a client class, in signature order."""
    out = []
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or name.startswith("_"):
            continue
        out.append((name, p.default))
    return out


def _default(value: object) -> str:
    if value is inspect.Parameter.empty:
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "no limit"
    return f"`{value!r}`"


def render() -> str:
    import riverbed

    lines = ["# Configuration reference", "",
             "<!-- generated by docs/config_reference.py from the clients' signatures: do not "
             "edit; run `make docs` -->", "",
             "Every setting of `riverbed.Producer`, `riverbed.Consumer` and `riverbed.Admin` "
             "(kafka-python's names: `KafkaProducer`, `KafkaConsumer`, `KafkaAdminClient`) is a "
             "keyword argument spelled as Kafka's key with `_` for `.` "
             "(`linger.ms` → `linger_ms`). A Kafka name of — means Kafka has no such key.", ""]
    for title, table in TABLES.items():
        cls = getattr(riverbed, title)
        lines += [f"## {title}", "", "| setting | Kafka name | default | meaning |",
                  "|---|---|---|---|"]
        for name, default in settings(cls):
            kafka, meaning = table[name]
            lines.append(f"| `{name}` | {'`' + kafka + '`' if kafka else '—'} | "
                         f"{_default(default)} | {meaning} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
