"""The configuration reference, generated from the code: every setting of the clients
(Producer, Consumer, Admin: their signatures) and every key of every service role (the roles'
config dataclasses, which are the keys the services read: `services.common.config.build` refuses
any other), the security keys every role reads, the topic-level configs and the quota configs.

Defaults come from the code. Meanings come from the comment above (or beside) a config field in
its dataclass, else from MEANINGS below (Kafka's documentation, in Riverbed's terms); the clients'
meanings are the tables below. The docs build (docs/hooks.py) renders `pages()` into
reference/configuration/; tests/unit/sdk/test_config_reference.py fails when a client setting or
a service key has no meaning here, or a key the services read is missing from the pages.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import math
import sys
import textwrap
import typing

# -- the clients --------------------------------------------------------------------------------
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


# kafka-python's constructors' own settings (riverbed.KafkaProducer, KafkaConsumer,
# KafkaAdminClient, after kafka-python 3.0): not settings of Producer, Consumer or Admin
KAFKA_PYTHON = {
    "bootstrap_timeout_ms": ("30000", "kafka-python 3.0's: the constructor waits this long for "
                             "a bootstrap address to answer and raises `KafkaTimeoutError` "
                             "(also a `NoBrokersAvailable`) when none does"),
    "api_version_auto_timeout_ms": ("—", "kafka-python 2.x's name of `bootstrap_timeout_ms` "
                                    "(taken instead of it)"),
    "api_version": ("`None`", "kafka-python's: taken and ignored (Riverbed has one protocol "
                    "version)"),
    "`ssl_*`, `sasl_*`, `reconnect_backoff_ms`, `connections_max_idle_ms`, ...":
        ("—", "kafka-python's settings for Kafka's TCP connections, TLS, SASL, proxies and "
         "metric reporters: taken and ignored (riverbed.kafka_python_types); "
         "`security_protocol='PLAINTEXT'` means as the environment says"),
}
# kafka-python 3.0's defaults where they are not the Riverbed client's
KAFKA_PYTHON_DEFAULTS = [("KafkaProducer", "acks", "'all'", "1"),
                         ("KafkaProducer", "retries", "2147483647 (unbounded)", "3"),
                         ("KafkaConsumer", "session_timeout_ms", "45000", "10000")]


def render_clients() -> str:
    import riverbed

    lines = ["# Client settings", "",
             GENERATED.format(what="the clients' signatures"), "",
             "Every setting of `riverbed.Producer`, `riverbed.Consumer` and `riverbed.Admin` "
             "(and of `riverbed.aio`'s clients, which take the same) is a keyword argument "
             "spelled as Kafka's key with `_` for `.` (`linger.ms` → `linger_ms`). A Kafka name "
             "of — means Kafka has no such key.", ""]
    for title, table in TABLES.items():
        cls = getattr(riverbed, title)
        lines += [f"## {title}", "", "| setting | Kafka name | default | meaning |",
                  "|---|---|---|---|"]
        for name, default in settings(cls):
            kafka, meaning = table[name]
            lines.append(f"| `{name}` | {'`' + kafka + '`' if kafka else '—'} | "
                         f"{_default(default)} | {meaning} |")
        lines.append("")
    lines += ["## kafka-python's names", "",
              "`KafkaProducer` and `KafkaConsumer` take every setting of `Producer` and "
              "`Consumer`; `KafkaAdminClient` takes kafka-python 3.0's admin settings "
              "(`client_id`, `request_timeout_ms`, `retry_backoff_ms` and the security ones "
              "mean what they mean for `Admin`). All three also take:", "",
              "| setting | default | meaning |", "|---|---|---|"]
    lines += [f"| {k if k.startswith('`') else '`' + k + '`'} | {d} | {m} |"
              for k, (d, m) in KAFKA_PYTHON.items()]
    lines += ["", "and have kafka-python 3.0's defaults where they differ from Riverbed's "
              "clients':", "", "| client | setting | kafka-python 3.0 | Riverbed's client |",
              "|---|---|---|---|"]
    lines += [f"| `{c}` | `{k}` | `{d}` | `{r}` |" for c, k, d, r in KAFKA_PYTHON_DEFAULTS]
    return "\n".join(lines) + "\n"


def render() -> str:
    """The clients' page (kept for callers of the first version of this module)."""
    return render_clients()


# -- the services ------------------------------------------------------------------------------

GENERATED = ("<!-- generated from {what} by docs/config_reference.py when the site is built: "
             "edit the code, not this page -->")


class Role(typing.NamedTuple):
    slug: str                   # the page: reference/configuration/<slug>.md
    title: str
    module: str
    config_class: str
    command: str                # how it is started
    intro: str


ROLES = (
    Role("storage-node", "Storage node", "services.storage_node.config", "StorageNodeConfig",
         "`riverbed-storage-node --config FILE` (or `python -m services.storage_node`)",
         "Kafka's broker keys: the node's partition logs, replication, controlled shutdown and "
         "idempotent producers' state. The `log.*` keys are the node's defaults for every "
         "partition; a topic's own configs (the topic-level names below) win."),
    Role("controller", "Controller", "services.controller.config", "ControllerConfig",
         "`riverbed-controller --config FILE` (or `python -m services.controller`)",
         "Cluster metadata: topics, assignments, leaders and ISRs, failure detection, "
         "preferred-leader balancing. One controller is active, the others stand by."),
    Role("gateway", "Gateway", "services.gateway.config", "GatewayConfig",
         "`riverbed-gateway --config FILE` (or `python -m services.gateway`)",
         "The client-facing router: metadata cache, forwarding, ACLs and quotas."),
    Role("group-coordinator", "Group coordinator", "services.group_coordinator.config",
         "GroupCoordinatorConfig",
         "`riverbed-group-coordinator --config FILE` (or `python -m services.group_coordinator`)",
         "Consumer-group membership, generations and assignments, sharded over "
         "`__consumer_offsets` (the keys it shares with the offset manager are Kafka's "
         "`offsets.*`)."),
    Role("offset-manager", "Offset manager", "services.offset_manager.config",
         "OffsetManagerConfig",
         "`riverbed-offset-manager --config FILE` (or `python -m services.offset_manager`)",
         "Committed offsets, cached in memory and durable in the compacted "
         "`__consumer_offsets`."),
    Role("transaction-coordinator", "Transaction coordinator",
         "services.transaction_coordinator.config", "TransactionCoordinatorConfig",
         "`riverbed-transaction-coordinator --config FILE` (or "
         "`python -m services.transaction_coordinator`)",
         "Transactions (KIP-98): producer ids and epochs of transactional ids, the state of "
         "each transaction, its markers to the partition leaders, sharded over the compacted "
         "`__transaction_state` (Kafka's `transaction.*` keys)."),
)
SECURITY = Role("security", "Security (every role)", "services.common.rpc.security",
                "SecurityConfig", "",
                "Every role reads these from the same `.properties` file and `--override` "
                "pairs (services.common.service_main), before it starts: CurveZMQ on its "
                "sockets, connection limits, ZeroMQ I/O threads and ZooKeeper authentication. "
                "SIGHUP re-reads the trusted keys directory.")

# Meanings of keys whose field has no comment in its dataclass (a comment, when there is one,
# is used instead). Kafka's documentation, in Riverbed's terms.
MEANINGS = {
    # identity and endpoints
    "broker.id": "this storage node's id (Kafka's broker id): required, unique in the cluster; "
                 "replica lists name nodes by it",
    "controller.id": "this controller's id, unique among the controllers",
    "gateway.id": "this gateway's id: required, unique among the gateways",
    "group.coordinator.id": "this group coordinator's id, unique among the group coordinators",
    "offset.manager.id": "this offset manager's id, unique among the offset managers",
    "transaction.coordinator.id": "this transaction coordinator's id, unique among the "
                                  "transaction coordinators",
    "transaction.state.log.replication.factor": "the replication factor `__transaction_state` is "
                                                "created with (capped at the live storage nodes, "
                                                "with a warning)",
    "transaction.state.log.min.isr": "`min.insync.replicas` of `__transaction_state` (capped at "
                                     "its replication factor): a transaction's state is written "
                                     "with acks=all",
    "transaction.state.log.segment.bytes": "`segment.bytes` of `__transaction_state` (small, so "
                                           "compaction and loading stay quick)",
    "transaction.state.log.load.buffer.size": "bytes read per fetch while a coordinator loads a "
                                              "`__transaction_state` partition it took over",
    "transaction.remove.expired.transaction.cleanup.interval.ms":
        "how often transactional ids idle longer than `transactional.id.expiration.ms` are "
        "removed (a tombstone in `__transaction_state`)",
    "transaction.max.parked.requests": "AddPartitionsToTxn/AddOffsetsToTxn requests waiting at "
                                       "once for their id's previous transaction to complete "
                                       "(`transaction.concurrent.request.max.wait.ms`); past "
                                       "it they are answered CONCURRENT_TRANSACTIONS at once",
    "host.name": "the address this process binds and advertises: its endpoint is "
                 "`tcp://<host.name>:<port>` (and its metrics endpoint binds it too)",
    "port": "the TCP port of this process's ROUTER socket, where requests come in",
    "pub.port": "the TCP port of the controller's PUB socket, where it publishes metadata "
                "updates to the gateways",
    # ZooKeeper
    "zookeeper.connect": "ZooKeeper's `host:port[,host:port...]` and the cluster's chroot "
                         "(`/riverbed`)",
    "zookeeper.session.timeout.ms": "the ZooKeeper session timeout: a process whose session "
                                    "expires loses its ephemeral znodes (a storage node leaves "
                                    "the live set, a controller its office)",
    "zookeeper.connection.timeout.ms": "how long the process waits for its ZooKeeper "
                                       "connection when it starts",
    # limits
    "socket.request.max.bytes": "the largest request accepted (ZMQ_MAXMSGSIZE on the "
                                "process's sockets): a larger frame drops the peer before it "
                                "is buffered; Kafka's default, 100 MiB",
    "message.max.bytes": "the largest record batch accepted (Kafka's default: 1 MB plus the "
                         "12 bytes of log overhead)",
    # logs
    "log.dirs": "the log directories, comma-separated: one per data disk; each partition "
                "replica lives in one of them",
    "log.segment.bytes": "a partition's active segment is rolled once it reaches this size "
                         "(topic: `segment.bytes`)",
    "log.roll.ms": "roll the active segment once it is this old, full or not (unset: "
                   "`log.roll.hours`; topic: `segment.ms`)",
    "log.roll.hours": "the same in hours, used while `log.roll.ms` is unset",
    "log.roll.jitter.ms": "a random amount up to this is taken off each segment's roll time, "
                          "so partitions created together do not all roll at once (topic: "
                          "`segment.jitter.ms`)",
    "log.index.size.max.bytes": "the size of a segment's offset and time index files "
                                "(preallocated; the segment rolls when one is full; topic: "
                                "`segment.index.bytes`)",
    "log.index.interval.bytes": "bytes of log between two entries of the sparse offset index "
                                "(topic: `index.interval.bytes`)",
    "log.flush.interval.messages": "fsync a partition's log after this many records (default: "
                                   "never; durability comes from replication, flushing is "
                                   "left to the OS; topic: `flush.messages`)",
    "log.flush.interval.ms": "fsync a partition's log at least this often (unset: never; "
                             "topic: `flush.ms`)",
    "log.retention.ms": "delete a partition's segments once their newest record is this old "
                        "(unset: `log.retention.hours`; -1: keep forever; topic: "
                        "`retention.ms`)",
    "log.retention.hours": "the same in hours, used while `log.retention.ms` is unset",
    "log.retention.bytes": "delete a partition's oldest segments while its log is larger than "
                           "this (-1: no size limit; topic: `retention.bytes`)",
    "log.cleanup.policy": "`delete` (retention), `compact` (keep the latest value of each key) "
                          "or `compact,delete` (topic: `cleanup.policy`)",
    "log.segment.delete.delay.ms": "how long a deleted segment's files stay (renamed "
                                   "`.deleted`) before they are unlinked (topic: "
                                   "`file.delete.delay.ms`)",
    "log.cleaner.enable": "compact the logs of compacted topics (such as `__consumer_offsets`); "
                          "the node's worker thread does it, off the request loop",
    "log.cleaner.threads": "accepted for Kafka's sake and not used: the node compacts on its "
                           "one log-maintenance worker thread",
    "log.cleaner.min.cleanable.ratio": "a compacted log is cleaned once this share of it has "
                                       "not been compacted yet (topic: "
                                       "`min.cleanable.dirty.ratio`)",
    "log.cleaner.delete.retention.ms": "how long a tombstone (a null value) is kept once "
                                       "compaction has reached it (topic: "
                                       "`delete.retention.ms`)",
    "log.cleaner.backoff.ms": "accepted for Kafka's sake and not used: the cleaner looks for "
                              "work at every log-maintenance tick",
    "log.retention.check.interval.ms": "accepted for Kafka's sake and not used: retention runs "
                                       "at every log-maintenance tick (once a second)",
    # replication
    "num.replica.fetchers": "replica fetchers per leader a node follows; a partition goes to "
                            "one of them by hash",
    "replica.fetch.max.bytes": "bytes asked per partition in a follower's fetch (at least one "
                               "batch is always returned)",
    "replica.fetch.wait.max.ms": "how long a follower's fetch may wait at the leader for "
                                 "`replica.fetch.min.bytes` (a long poll)",
    "replica.fetch.min.bytes": "bytes a follower's fetch waits for at the leader",
    "replica.lag.time.max.ms": "a follower that has not caught up with the leader's log end "
                               "for this long leaves the ISR (and rejoins once caught up)",
    # controlled shutdown
    "controlled.shutdown.enable": "on SIGTERM, ask the controller to move this node's "
                                  "leaderships elsewhere before stopping",
    "controlled.shutdown.max.retries": "controlled-shutdown attempts before the node stops "
                                       "anyway",
    "controlled.shutdown.retry.backoff.ms": "the pause between two controlled-shutdown attempts",
    # controller
    "num.partitions": "partitions of an auto-created topic, and of a CREATE_TOPICS that gives "
                      "no count",
    "default.replication.factor": "the replication factor of an auto-created topic, and of a "
                                  "CREATE_TOPICS that gives none",
    "auto.create.topics.enable": "create a topic when a client asks for its metadata and it "
                                 "does not exist (the Create ACL applies)",
    "delete.topic.enable": "allow DELETE_TOPICS",
    "offsets.topic.num.partitions": "the partitions of `__consumer_offsets` (the local fleet "
                                    "uses 10 so that it starts quickly); the group "
                                    "coordinators and offset managers shard over them, so every "
                                    "role must agree",
    "offsets.topic.replication.factor": "the replication factor `__consumer_offsets` is "
                                        "created with (capped at the live storage nodes)",
    "leader.imbalance.per.broker.percentage": "the share of a node's preferred leaderships "
                                              "it may lack before the automatic rebalance "
                                              "moves them back",
    "leader.imbalance.check.interval.seconds": "how often the controller checks the leadership "
                                               "balance",
    # sharded roles
    "offsets.retention.check.interval.ms": "how often expired offsets and long-empty groups "
                                           "are looked for",
    "offsets.topic.segment.bytes": "the segment size `__consumer_offsets` is created with "
                                   "(Kafka's default, 100 MiB)",
    "group.max.session.timeout.ms": "the longest `session.timeout.ms` a member may ask for "
                                    "(INVALID_SESSION_TIMEOUT above it): it bounds how long a "
                                    "dead consumer holds its partitions",
    # security (every role)
    "security.protocol": "`NONE` (Kafka's PLAINTEXT) or `CURVE`: CurveZMQ on every socket of "
                         "the process, encrypted, each side authenticated by its long-term key",
    "curve.secret.key.file": "this process's secret key (a `zmq.auth` `.key_secret` file): its "
                             "ROUTER, its metadata PUB and every socket it connects with use it",
    "curve.trusted.keys.dir": "the public certificates (`*.key`) admitted: a peer whose key is "
                              "not there gets no connection",
    "curve.trusted.keys.reload.ms": "how often the trusted keys directory is re-read (SIGHUP "
                                    "re-reads it at once)",
    "socket.handshake.timeout.ms": "a connection that has not finished its handshake by then "
                                   "is dropped (ZMQ_HANDSHAKE_IVL)",
    "super.users": "`User:a;User:b`: principals allowed every operation, ClusterAction "
                   "included",
    "max.connections.per.ip": "connections one IP may hold to this process; one more is "
                              "refused at its handshake",
    "num.network.threads": "ZeroMQ I/O threads of the process: they frame, encrypt and decrypt "
                           "every message. With two or more, the connections the process "
                           "accepts use the first half and the ones it makes the rest "
                           "(ZMQ_AFFINITY), so a gateway decrypts a client's batch and "
                           "encrypts it towards the leader on two cores",
    "zookeeper.set.acl": "authenticate to ZooKeeper with the digest credentials and create "
                         "every znode with `digest:<user>` ALL + `world:anyone` READ",
    "zookeeper.credentials.file": "a file holding `user:password` for ZooKeeper's digest "
                                  "authentication, shared by the fleet's services",
}

# topic-level configs (services.controller.core.topic_config): meaning and the broker key that
# sets the default on the storage nodes
TOPIC_MEANINGS = {
    "segment.bytes": ("log.segment.bytes", "roll the active segment at this size"),
    "segment.ms": ("log.roll.ms", "roll the active segment once it is this old"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "random jitter taken off the roll time"),
    "segment.index.bytes": ("log.index.size.max.bytes", "the size of a segment's index files"),
    "index.interval.bytes": ("log.index.interval.bytes", "bytes between offset index entries"),
    "flush.messages": ("log.flush.interval.messages", "fsync after this many records"),
    "flush.ms": ("log.flush.interval.ms", "fsync at least this often"),
    "retention.ms": ("log.retention.ms", "delete segments whose newest record is this old "
                                         "(-1: never)"),
    "retention.bytes": ("log.retention.bytes", "delete the oldest segments while a partition "
                                               "is larger than this (-1: no limit)"),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms", "how long deleted segments' files "
                                                            "stay before they are unlinked"),
    "cleanup.policy": ("log.cleanup.policy", "`delete`, `compact` or `compact,delete`"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", "how long compaction keeps "
                                                               "tombstones"),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", "compact once this share "
                                                                      "of the log is dirty"),
    "max.message.bytes": ("message.max.bytes", "the largest record batch the topic takes"),
    "min.insync.replicas": ("min.insync.replicas", "acks=all needs an ISR of at least this "
                                                   "many (NOT_ENOUGH_REPLICAS otherwise)"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",
                                       "may a replica outside the ISR become leader when no "
                                       "ISR member is alive (losing committed records)"),
    "message.timestamp.type": (None, "`CreateTime` (the producer's timestamp) or "
                                     "`LogAppendTime` (the leader's clock at append)"),
    "min.compaction.lag.ms": (None, "a record stays uncompacted at least this long"),
}

QUOTA_MEANINGS = {
    "producer_byte_rate": "bytes/s the user or client id may produce",
    "consumer_byte_rate": "bytes/s the user or client id may fetch",
    "request_percentage": "percent of one thread's time the gateway may spend on the client's "
                          "requests (waits on storage nodes excluded)",
}


def config_class(role: Role) -> type:
    return getattr(importlib.import_module(role.module), role.config_class)


def field_comments(cls: type) -> dict[str, str]:
    """The comment above each field of a config dataclass (and of its dataclass bases), or the
    one beside it: `# ...` lines right above, not a `# -- section --` line."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        lines, _ = inspect.getsourcelines(klass)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        for node in tree.body[0].body:       # type: ignore[attr-defined]
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            i = node.lineno - 1
            above: list[str] = []
            j = i - 1
            while j >= 0 and lines[j].strip().startswith("#") and \
                    not lines[j].strip().startswith("# --"):
                above.insert(0, lines[j].strip()[1:].strip())
                j -= 1
            beside = lines[i].split("#", 1)[1].strip() if "#" in lines[i] else ""
            text = " ".join(above + ([beside] if beside else []))
            if text:
                out[node.target.id] = text
    return out


def _key(field_name: str) -> str:
    return field_name.replace("_", ".")


def role_keys(role: Role) -> list[tuple[str, str, object, str]]:
    """(key, type, default, meaning) of every key the role reads, in the dataclass's order."""
    cls = config_class(role)
    comments = field_comments(cls)
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = _key(f.name)
        meaning = comments.get(f.name) or MEANINGS.get(key, "")
        out.append((key, _type(hints[f.name]), f.default, meaning))
    return out


def _type(t: object) -> str:
    names = {int: "int", str: "string", bool: "boolean", float: "float"}
    if t in names:
        return names[t]          # type: ignore[index]
    args = [a for a in typing.get_args(t) if a is not type(None)]
    if len(args) == 1 and args[0] in names:
        return names[args[0]] + " or unset"
    return str(t)


_SIZES = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
_TIMES = ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1000, "s"))


def service_default(key: str, value: object) -> str:
    """A default as it is written in a .properties file, with its size or duration."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{'true' if value else 'false'}`"
    if value == "":
        return "empty"
    text = f"`{value}`"
    if isinstance(value, int) and value > 0:
        if key.endswith(".bytes") or key.endswith(".size") or key.endswith(".min"):
            for unit, name in _SIZES:
                if value >= unit and value % unit == 0 and value < 2**62:
                    return f"{text} ({value // unit} {name})"
        if key.endswith(".ms"):
            for unit, name in _TIMES:
                if value >= unit and value % unit == 0:
                    return f"{text} ({value // unit} {name})"
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_role(role: Role) -> str:
    lines = [f"# {role.title} configuration", "",
             GENERATED.format(what=f"`{role.module}.{role.config_class}`"), "", role.intro, ""]
    if role is SECURITY:
        lines += ["Set them in each role's `.properties` file or with `--override key=value`; "
                  "on the local fleet, per role with `riverbed fleet up --config-override "
                  "ROLE:key=value` (the launcher itself sets CURVE and the keys' paths unless "
                  "`--security-protocol NONE`).", ""]
    else:
        lines += [f"Started as {role.command}. Keys come from the `.properties` file, then "
                  "`--override key=value` pairs (which win); an unknown key or a value that "
                  "does not parse stops the process before it starts, naming the key. The "
                  "local fleet sets any of them with `riverbed fleet up --config-override "
                  f"{role.slug.replace('-', '_')}:key=value`.", "",
                  "The [security keys](security.md) are read by every role too.", ""]
    lines += ["| key | default | type | meaning |", "|---|---|---|---|"]
    for key, typ, default, meaning in role_keys(role):
        lines.append(f"| `{key}` | {service_default(key, default)} | {typ} | "
                     f"{_cell(meaning)} |")
    return "\n".join(lines) + "\n"


def render_topics() -> str:
    from services.common.acl.quotas import QUOTA_KEYS
    from services.controller.core.topic_config import TOPIC_CONFIGS
    lines = ["# Topic and quota configuration", "",
             GENERATED.format(what="`services.controller.core.topic_config` and "
                                   "`services.common.acl.quotas`"), "",
             "## Topic configs", "",
             "Set per topic when it is created (`riverbed topics create --config key=value`, "
             "`NewTopic(..., configs={...})`) or later (`riverbed topics alter`, "
             "`Admin.alter_configs`). A key a topic does not set takes the storage node's "
             "broker key; the default shown is Kafka's, which DESCRIBE_CONFIGS reports.", "",
             "| key | default | broker key | meaning |", "|---|---|---|---|"]
    for key, (_, default) in TOPIC_CONFIGS.items():
        broker, meaning = TOPIC_MEANINGS[key]
        lines.append(f"| `{key}` | {service_default(key, int(default)) if default.lstrip('-').isdigit() else '`' + default + '`'} | "
                     f"{'`' + broker + '`' if broker else '—'} | {_cell(meaning)} |")
    lines += ["", "## Quota configs", "",
              "Per user principal name, per client id, or their `<default>`, with `riverbed "
              "configs --entity-type users|clients ... --alter --add-config key=value` (see "
              "[Quotas](../../operations/quotas.md)). Unset: no quota.", "",
              "| key | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {QUOTA_MEANINGS[k]} |" for k in QUOTA_KEYS]
    return "\n".join(lines) + "\n"


def render_index() -> str:
    lines = ["# Configuration", "",
             "Every setting Riverbed reads, generated from the code that reads it.", "",
             "| page | what |", "|---|---|",
             "| [Clients](clients.md) | `Producer`, `Consumer`, `Admin` (and kafka-python's "
             "names) |"]
    for role in (*ROLES, SECURITY):
        lines.append(f"| [{role.title}]({role.slug}.md) | {role.intro.split(':')[0]} |")
    lines.append("| [Topics and quotas](topics.md) | per-topic configs and client quotas |")
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Every page of reference/configuration/, by path under docs/."""
    out = {"reference/configuration/index.md": render_index(),
           "reference/configuration/clients.md": render_clients(),
           "reference/configuration/topics.md": render_topics()}
    for role in (*ROLES, SECURITY):
        out[f"reference/configuration/{role.slug}.md"] = render_role(role)
    return out


def missing_meanings() -> list[str]:
    """Keys of any role without a meaning (the test lists them)."""
    out = []
    for role in (*ROLES, SECURITY):
        out += [f"{role.slug}: {k}" for k, _, _, m in role_keys(role) if not m]
    from services.controller.core.topic_config import TOPIC_CONFIGS
    out += [f"topic: {k}" for k in TOPIC_CONFIGS if k not in TOPIC_MEANINGS]
    return out


if __name__ == "__main__":
    for path, text in pages().items():
        sys.stdout.write(f"==> {path}\n{text}\n")
