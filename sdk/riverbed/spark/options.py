"""The `riverbed` data source's options, parsed and checked on the driver before any task runs.

Pure: no Spark, no network. The names are those of Spark's Kafka source, so a Spark user
recognises them (Spark hands them over case-insensitively, lower-cased):

    bootstrap.servers                  the gateways, comma-separated (tcp://host:port)
    subscribe | subscribePattern | assign
                                       topics (comma-separated) | a regex (full match) |
                                       Spark's JSON {"topicA":[0,1],"topicB":[2]}: exactly one
    startingOffsets                    earliest | latest | {"topic":{"0":23,"1":-2}}
                                       (-2 earliest, -1 latest); batch default earliest,
                                       streaming default latest
    endingOffsets                      latest | JSON (batch only; default latest)
    startingTimestamp / endingTimestamp
                                       ms since the epoch, every partition (ending: batch only)
    startingOffsetsByTimestamp / endingOffsetsByTimestamp
                                       JSON {"topic":{"0":1700000000000}}
    startingOffsetsByTimestampStrategy error (default) | latest: what a starting timestamp with
                                       no record at or after it means
    maxOffsetsPerTrigger               records per micro-batch, all partitions together
    minPartitions                      split offset ranges into at least this many tasks
    failOnDataLoss                     true (default) | false
    pollTimeoutMs                      how long an executor waits for a range's records (120000)
    maxRecordsPerBatch                 rows per Arrow batch handed to Spark (20000)
    topic                              (write) the topic for rows without a topic column
    exactlyOnce                        (streaming write) true: each micro-batch's rows are
                                       written in transactions committed with the batch, once
                                       through task retries and driver restarts
                                       (riverbed.spark.exactly_once); default false
                                       (at-least-once)
    transactional.id.prefix            (with exactlyOnce) the writers' transactional ids are
                                       <prefix>-<partition>, and <prefix> names the group that
                                       records each partition's last committed batch: one
                                       prefix per query, kept across its restarts
    riverbed.<setting>                 an SDK client setting in Kafka's spelling
                                       (riverbed.fetch.max.wait.ms=100, riverbed.linger.ms=5)

Precedence as in Spark: a timestamp option wins over the by-timestamp JSON, which wins over
startingOffsets / endingOffsets.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from riverbed.structs import TopicPartition

__all__ = ["OptionError", "Subscription", "OffsetSpec", "ReadOptions", "WriteOptions",
           "parse_read_options", "parse_write_options", "parse_partition_offsets",
           "CONSUMER_SETTINGS", "PRODUCER_SETTINGS", "EARLIEST", "LATEST"]

EARLIEST = -2          # in Spark's JSON offsets (and in LIST_OFFSETS)
LATEST = -1

DEFAULT_POLL_TIMEOUT_MS = 120_000      # Spark's kafkaConsumer.pollTimeoutMs (spark.network.timeout)
DEFAULT_MAX_RECORDS_PER_BATCH = 20_000  # ~2 MB of 100 B records per Arrow batch


class OptionError(ValueError):
    """A bad option of the riverbed data source; the message names the option."""


# -- SDK settings (riverbed.-prefixed options) --------------------------------------------------

def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise ValueError(f"{text!r} is not true or false")


def _acks(text: str) -> int | str:
    t = text.strip().lower()
    if t in ("all", "-1"):
        return "all"
    if t in ("0", "1"):
        return int(t)
    raise ValueError(f"{text!r}: expected all, -1, 0 or 1")


def _none_or_str(text: str) -> str | None:
    return None if text.strip().lower() in ("", "none") else text.strip()


# Kafka's key -> the SDK keyword and a converter. The tests check these against the clients'
# signatures, so a renamed keyword fails there rather than in a user's job.
CONSUMER_SETTINGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "client.id": ("client_id", str),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.poll.records": ("max_poll_records", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "check.crcs": ("check_crcs", _bool),
}
PRODUCER_SETTINGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "client.id": ("client_id", str),
    "acks": ("acks", _acks),
    "batch.size": ("batch_size", int),
    "linger.ms": ("linger_ms", float),
    "buffer.memory": ("buffer_memory", int),
    "max.block.ms": ("max_block_ms", int),
    "compression.type": ("compression_type", _none_or_str),
    "max.request.size": ("max_request_size", int),
    "retries": ("retries", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", int),
    "enable.idempotence": ("enable_idempotence", _bool),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "transaction.timeout.ms": ("transaction_timeout_ms", int),
}
# Settings the source manages itself, as Spark's Kafka source refuses kafka.group.id & co.
MANAGED_SETTINGS = {
    "bootstrap.servers": "use the option bootstrap.servers",
    "group.id": "the source assigns partitions and seeks itself; offsets live in Spark's checkpoint",
    "enable.auto.commit": "the source commits nothing to the cluster; offsets live in Spark's checkpoint",
    "auto.offset.reset": "use startingOffsets (and failOnDataLoss for missing offsets)",
    "key.deserializer": "the source returns bytes: cast or decode with Spark functions",
    "value.deserializer": "the source returns bytes: cast or decode with Spark functions",
    "key.serializer": "the sink takes binary or string key and value columns",
    "value.serializer": "the sink takes binary or string key and value columns",
    "partitioner": "give a partition column to choose partitions",
    "transactional.id": "use exactlyOnce=true with transactional.id.prefix: the sink makes one "
                        "transactional id per partition writer",
}
# Defaults of the sink's producer: acks=all (so idempotent by default), as the issue asks.
PRODUCER_DEFAULTS: dict[str, Any] = {"acks": "all"}
# exactlyOnce: a task's transaction stays open from its first record until the driver commits
# the micro-batch, i.e. for as long as the batch's slowest task (and its retries) takes. Kafka's
# producer default (60 s) would abort the transactions of a long batch under the driver; 15 min
# is the coordinator's transaction.max.timeout.ms default (Flink's Kafka sink asks an hour and a
# raised broker maximum). The cost: a query that dies and is not restarted holds read_committed
# readers of its output partitions back until then (a restart aborts what it left at once).
EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS = 900_000


def _sdk_settings(options: Mapping[str, str], mine: Mapping[str, tuple[str, Callable]],
                  other: Mapping[str, tuple[str, Callable]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in options.items():
        if not key.startswith("riverbed."):
            continue
        name = key[len("riverbed."):].replace("_", ".")
        option = f"riverbed.{name}"
        if name in MANAGED_SETTINGS:
            raise OptionError(f"option {option} is not supported: {MANAGED_SETTINGS[name]}")
        if name in mine:
            kw, convert = mine[name]
            try:
                out[kw] = convert(raw)
            except ValueError as e:
                raise OptionError(f"option {option}={raw!r}: {e}") from None
        elif name not in other:
            known = ", ".join(sorted(set(mine) | set(other)))
            raise OptionError(f"option {option}: unknown SDK setting (known: {known})")
        # a setting of the other client (a producer setting on a read) is ignored
    return out


# -- subscriptions and offsets ------------------------------------------------------------------

@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: topics by name, by pattern (re.fullmatch, internal topics left
    out as Kafka's consumers do), or given partitions (Spark's assign)."""
    mode: str                                   # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.mode == "subscribePattern":
            assert self.pattern is not None
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        if self.mode == "subscribe":
            return topic in self.topics
        return any(tp.topic == topic for tp in self.partitions)

    def describe(self) -> str:
        if self.mode == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        if self.mode == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        return f"assign={json.dumps(_group_partitions(self.partitions))}"


def _group_partitions(tps) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends. kind: earliest | latest | offsets (per partition, -2
    earliest, -1 latest) | timestamp (one time for every partition) | timestamps (per
    partition). `option` names the option it came from, for error messages."""
    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    option: str = ""


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: tuple[str, ...]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None                   # None in streaming queries
    starting_by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH
    consumer_config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: tuple[str, ...]
    topic: str | None
    producer_config: Mapping[str, Any] = field(default_factory=dict)
    exactly_once: bool = False
    transactional_id_prefix: str | None = None


READ_OPTIONS = ("bootstrap.servers", "subscribe", "subscribePattern", "assign", "startingOffsets",
                "endingOffsets", "startingTimestamp", "endingTimestamp",
                "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
                "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger", "minPartitions",
                "failOnDataLoss", "pollTimeoutMs", "maxRecordsPerBatch")
WRITE_OPTIONS = ("bootstrap.servers", "topic", "exactlyOnce", "transactional.id.prefix")
# Spark passes these to sinks and sources on its own.
SPARK_OPTIONS = ("path", "checkpointlocation", "queryname")
_JSON_FORM = '{"topic":{"0":23,"1":-2}}'


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _check_known(opts: Mapping[str, str], known: tuple[str, ...], what: str) -> None:
    """Other options are ignored, as Spark's Kafka source ignores them (Spark passes some of its
    own, e.g. queryName); one that looks like a misspelt option of ours is an error."""
    names = {k.lower(): k for k in known}
    for key in opts:
        if key in names or key in SPARK_OPTIONS or key.startswith("riverbed."):
            continue
        close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.85)
        if close:
            raise OptionError(f"unknown option {key!r} for a riverbed {what}: did you mean "
                              f"{names[close[0]]}?")


def _bootstrap(opts: Mapping[str, str]) -> tuple[str, ...]:
    raw = opts.get("bootstrap.servers", "")
    servers = tuple(s.strip() for s in raw.split(",") if s.strip())
    if not servers:
        raise OptionError("option bootstrap.servers must be given: the gateways, e.g. "
                          "tcp://127.0.0.1:9092")
    return servers


def _positive_int(opts: Mapping[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name}={raw!r}: expected a positive integer") from None
    if value <= 0:
        raise OptionError(f"option {name}={raw!r}: expected a positive integer")
    return value


def _timestamp(opts: Mapping[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name}={raw!r}: expected a time in ms since the epoch") from None
    if value < 0:
        raise OptionError(f"option {name}={raw!r}: expected a time in ms since the epoch")
    return value


def _load_json(raw: str, name: str, form: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name}: malformed JSON ({e.msg} at column {e.colno}) in "
                          f"{raw!r}; expected Spark's form {form}") from None


def parse_partition_offsets(raw: str, name: str, *, timestamps: bool = False
                            ) -> dict[TopicPartition, int]:
    """Spark's JSON {"topic":{"0":23,"1":-2}} -> {TopicPartition: int}. Offsets may be -2
    (earliest) or -1 (latest); timestamps must be >= 0."""
    form = '{"topic":{"0":1700000000000}}' if timestamps else _JSON_FORM
    obj = _load_json(raw, name, form)
    if not isinstance(obj, dict) or not obj:
        raise OptionError(f"option {name}: expected a JSON object of topics, e.g. {form}, "
                          f"not {raw!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict) or not parts:
            raise OptionError(f"option {name}: topic {topic!r} needs an object of partitions, "
                              f"e.g. {form}")
        for p, value in parts.items():
            try:
                partition = int(p)
            except (TypeError, ValueError):
                raise OptionError(f"option {name}: partition {p!r} of topic {topic!r} is not "
                                  "a number") from None
            if partition < 0 or isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(f"option {name}: {topic}-{p}: {value!r} is not "
                                  + ("a timestamp in ms" if timestamps else "an offset"))
            if timestamps and value < 0:
                raise OptionError(f"option {name}: {topic}-{p}: timestamp {value} is negative")
            if not timestamps and value < EARLIEST:
                raise OptionError(f"option {name}: {topic}-{p}: offset {value} (use -2 for "
                                  "earliest, -1 for latest, or an offset >= 0)")
            out[TopicPartition(topic, partition)] = value
    return out


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("assign", "subscribe", "subscribepattern") if k in opts]
    names = {"assign": "assign", "subscribe": "subscribe", "subscribepattern": "subscribePattern"}
    if len(given) != 1:
        if not given:
            raise OptionError("one of the options subscribe, subscribePattern or assign must be "
                              "given")
        raise OptionError("only one of the options subscribe, subscribePattern and assign may be "
                          f"given, not {' and '.join(names[g] for g in given)}")
    mode = given[0]
    raw = opts[mode]
    if mode == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise OptionError(f"option subscribe={raw!r}: no topics to subscribe to")
        return Subscription("subscribe", topics=topics)
    if mode == "subscribepattern":
        if not raw.strip():
            raise OptionError("option subscribePattern is empty")
        try:
            re.compile(raw)
        except re.error as e:
            raise OptionError(f"option subscribePattern={raw!r}: not a regular expression ({e})") \
                from None
        return Subscription("subscribePattern", pattern=raw)
    obj = _load_json(raw, "assign", '{"topicA":[0,1],"topicB":[2,4]}')
    if not isinstance(obj, dict) or not obj or not all(
            isinstance(ps, list) and ps and all(isinstance(p, int) and not isinstance(p, bool)
                                                and p >= 0 for p in ps)
            for ps in obj.values()):
        raise OptionError(f"option assign={raw!r}: expected Spark's form "
                          '{"topicA":[0,1],"topicB":[2,4]}')
    tps = tuple(sorted({TopicPartition(t, p) for t, ps in obj.items() for p in ps}))
    return Subscription("assign", partitions=tps)


def _offset_spec(opts: Mapping[str, str], which: str, default: str, streaming: bool) -> OffsetSpec:
    ts_key, by_ts_key, off_key = (f"{which}timestamp", f"{which}offsetsbytimestamp",
                                  f"{which}offsets")
    ts_name, by_ts_name, off_name = (f"{which}Timestamp", f"{which}OffsetsByTimestamp",
                                     f"{which}Offsets")
    ts = _timestamp(opts, ts_key, ts_name)
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=ts, option=ts_name)
    if by_ts_key in opts:
        return OffsetSpec("timestamps", parse_partition_offsets(opts[by_ts_key], by_ts_name,
                                                                timestamps=True),
                          option=by_ts_name)
    raw = opts.get(off_key, default).strip()
    low = raw.lower()
    if low in ("earliest", "latest"):
        return OffsetSpec(low, option=off_name)
    if not raw.startswith("{"):
        raise OptionError(f"option {off_name}={raw!r}: expected earliest, latest or Spark's "
                          f"JSON {_JSON_FORM}")
    return OffsetSpec("offsets", parse_partition_offsets(raw, off_name), option=off_name)


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check every read option (no network); raises OptionError naming the bad one."""
    opts = _lower(options)
    _check_known(opts, READ_OPTIONS, "streaming read" if streaming else "read")
    bootstrap = _bootstrap(opts)
    subscription = _subscription(opts)
    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming)
    ending: OffsetSpec | None = None
    if streaming:
        for key, name in (("endingoffsets", "endingOffsets"), ("endingtimestamp", "endingTimestamp"),
                          ("endingoffsetsbytimestamp", "endingOffsetsByTimestamp")):
            if key in opts:
                raise OptionError(f"option {name} is not valid in streaming queries (a stream "
                                  "has no end; use it with spark.read)")
    else:
        if starting.kind == "latest":
            raise OptionError("option startingOffsets=latest is not valid for batch queries "
                              "(nothing would be read); use earliest, JSON offsets or a timestamp")
        if starting.kind == "offsets":
            bad = sorted(tp for tp, o in starting.offsets.items() if o == LATEST)
            if bad:
                raise OptionError(f"option startingOffsets: {bad[0].topic}-{bad[0].partition} "
                                  "starts at latest (-1), which is not valid for batch queries")
        ending = _offset_spec(opts, "ending", "latest", streaming)
        if ending.kind == "earliest":
            raise OptionError("option endingOffsets=earliest is not valid for batch queries "
                              "(nothing would be read); use latest, JSON offsets or a timestamp")
        if ending.kind == "offsets":
            bad = sorted(tp for tp, o in ending.offsets.items() if o == EARLIEST)
            if bad:
                raise OptionError(f"option endingOffsets: {bad[0].topic}-{bad[0].partition} "
                                  "ends at earliest (-2), which is not valid for batch queries")
    for spec in (starting, ending):
        if spec is not None and spec.kind in ("offsets", "timestamps") \
                and subscription.mode != "subscribePattern":
            extra = sorted({tp.topic for tp in spec.offsets} - set(
                subscription.topics or (tp.topic for tp in subscription.partitions)))
            if extra:
                raise OptionError(f"option {spec.option} names topic {extra[0]!r}, which is not "
                                  f"in {subscription.describe()}")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy={strategy!r}: expected "
                          "error or latest")
    fail_raw = opts.get("failondataloss", "true")
    try:
        fail_on_data_loss = _bool(fail_raw)
    except ValueError:
        raise OptionError(f"option failOnDataLoss={fail_raw!r}: expected true or false") from None
    return ReadOptions(
        bootstrap=bootstrap, subscription=subscription, starting=starting, ending=ending,
        starting_by_timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(opts, "minpartitions", "minPartitions"),
        fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=_positive_int(opts, "polltimeoutms", "pollTimeoutMs")
        or DEFAULT_POLL_TIMEOUT_MS,
        max_records_per_batch=_positive_int(opts, "maxrecordsperbatch", "maxRecordsPerBatch")
        or DEFAULT_MAX_RECORDS_PER_BATCH,
        consumer_config=_sdk_settings(opts, CONSUMER_SETTINGS, PRODUCER_SETTINGS))


def parse_write_options(options: Mapping[str, str], *, streaming: bool = False) -> WriteOptions:
    """Check every write option (no network); raises OptionError naming the bad one."""
    opts = _lower(options)
    _check_known(opts, WRITE_OPTIONS, "streaming write" if streaming else "write")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic is empty")
    config = dict(PRODUCER_DEFAULTS)
    config.update(_sdk_settings(opts, PRODUCER_SETTINGS, CONSUMER_SETTINGS))
    raw = opts.get("exactlyonce", "false")
    try:
        exactly_once = _bool(raw)
    except ValueError:
        raise OptionError(f"option exactlyOnce={raw!r}: expected true or false") from None
    prefix = opts.get("transactional.id.prefix")
    if prefix is not None:
        prefix = prefix.strip()
        if not exactly_once:
            raise OptionError("option transactional.id.prefix is only used with exactlyOnce=true")
    if exactly_once:
        if not streaming:
            raise OptionError("option exactlyOnce applies to streaming writes (writeStream): a "
                              "batch write has no micro-batch id to make a re-run skip what "
                              "it already committed")
        if not prefix:
            raise OptionError("option exactlyOnce=true needs transactional.id.prefix: a name "
                              "for this query, kept across its restarts (e.g. its checkpoint "
                              "folder's name); the writers' transactional ids are "
                              "<prefix>-<partition>")
        _check_prefix(prefix)
        if config.get("acks") != "all" or config.get("enable_idempotence") is False:
            raise OptionError("option exactlyOnce=true writes with transactions, which need "
                              "riverbed.acks=all and riverbed.enable.idempotence=true")
        config.setdefault("transaction_timeout_ms", EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS)
    elif "transaction_timeout_ms" in config:
        raise OptionError("option riverbed.transaction.timeout.ms is only used with "
                          "exactlyOnce=true")
    return WriteOptions(bootstrap=_bootstrap(opts), topic=topic.strip() if topic else None,
                        producer_config=config, exactly_once=exactly_once,
                        transactional_id_prefix=prefix if exactly_once else None)


# A transactional id's partition suffix ("-" + up to 10 digits) and Kafka's group id rules leave
# the prefix free but for control characters; keep it printable and of a sane length.
_PREFIX = re.compile(r"[A-Za-z0-9._\-]{1,200}")


def _check_prefix(prefix: str) -> None:
    if not _PREFIX.fullmatch(prefix):
        raise OptionError(f"option transactional.id.prefix={prefix!r}: use 1..200 characters "
                          "from [A-Za-z0-9._-]")
