"""Kafka requests -> the Riverbed requests the gateway already serves, and their answers back
(pure: no sockets, no clock, no asyncio).

    step = plan(request, view)            # Plan(calls, finish) or Done(response)
    while isinstance(step, Plan):
        outcomes = [perform(call) for call in step.calls]     # the shell: the SDK handlers
        step = step.finish(outcomes)
    response = step.response               # a kio entity, or None (acks=0 produce)

A call is a Riverbed request (its ApiKey, protobuf body and payload frames) handed to the same
handler an SDK client's request reaches (routing to leaders and coordinators, ACLs, quotas); its
outcome is the handler's answer or the error it raised. Kafka's error numbers are Riverbed's, so
codes pass unchanged both ways.

Record batches are never decoded: a Produce partition's `records` bytes become that partition's
payload frame, and a Fetch answer's payload frames become the `records` of its partitions.

Bad input changes nothing and is never forwarded: per-partition problems get their Kafka error
here (CORRUPT_MESSAGE for a partition without a record batch, INVALID_REPLICA_ASSIGNMENT for
replica ids, UNKNOWN_TOPIC_ID for topics named by id); the SDK handlers validate the rest as for
SDK clients (topic names, partitions, acks...).

What is not Riverbed's model, and what a Kafka client sees (docs/kafka-protocol.md):
- transactions: InitProducerId / Produce with a transactional id and FindCoordinator for a
  transaction coordinator answer INVALID_REQUEST;
- groups: Kafka's classic protocol, the group's leader assigns (JoinGroup/SyncGroup v1 of
  Riverbed's, "client assignment" in proto/riverbed/v1/group.proto): any protocol type and
  strategy, metadata and assignments passed as opaque bytes; such a group cannot also have SDK
  members (INCONSISTENT_GROUP_PROTOCOL), whose groups the coordinator assigns;
- static membership (group.instance.id) is accepted but not kept: a member that restarts joins
  as a new member;
- topic ids: every topic id is zero; requests naming topics by id get UNKNOWN_TOPIC_ID.
"""
from __future__ import annotations

import datetime
import importlib
import io
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from kio.index import load_response_schema
from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from riverbed._proto.v1 import (
    acl_pb2,
    admin_ops_pb2,
    common_pb2,
    controller_pb2,
    delete_records_pb2,
    fetch_pb2,
    group_pb2,
    header_pb2,
    list_offsets_pb2,
    metadata_pb2,
    offset_pb2,
    produce_pb2,
    producer_id_pb2,
)
from riverbed.coordinator.offsets_topic import partition_for
from services.gateway.kafka import brokers as bk
from services.gateway.kafka import fast
from services.gateway.kafka import protocol as kp
from services.gateway.kafka.brokers import KafkaBroker

R = header_pb2.ApiKey                      # Riverbed's API numbers
NONE = 0
INT32_MIN = -(2 ** 31)
UINT32_MAX = 2 ** 32 - 1
ZERO_MS = datetime.timedelta(0)
RECORD_BATCH_OVERHEAD = 61                 # the smallest v2 record batch (its header)
TOPIC_TYPE, BROKER_TYPE = 2, 4             # DescribeConfigs resource types
CONFIG_SOURCE_DYNAMIC_TOPIC, CONFIG_SOURCE_DEFAULT = 1, 5
COORDINATOR_ERRORS = frozenset({ErrorCode.not_coordinator.value,
                                ErrorCode.coordinator_not_available.value,
                                ErrorCode.coordinator_load_in_progress.value,
                                ErrorCode.group_authorization_failed.value,
                                ErrorCode.invalid_group_id.value})


# ---------------------------------------------------------------------------------------------
# what the shell hands in and gets back

class EncodedCache:
    """Encoded answers kept for reuse, keyed by everything they are made of (so never stale,
    only evicted: least recently used first past `max_entries`). The shell owns one per
    listener and hands it in with the ClusterView."""

    def __init__(self, max_entries: int = 256):
        self.max_entries = max_entries
        self._entries: dict[Any, fast.EncodedResponse] = {}
        self.hits = self.misses = 0

    def get(self, key: Any) -> fast.EncodedResponse | None:
        got = self._entries.pop(key, None)
        if got is None:
            self.misses += 1
            return None
        self._entries[key] = got                # most recently used last
        self.hits += 1
        return got

    def put(self, key: Any, value: fast.EncodedResponse) -> None:
        if len(self._entries) >= self.max_entries:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = value


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the core needs to know of the world: the brokers this client sees (the live
    gateways advertising its listener), this gateway's id and the client's address; and where
    encoded answers may be kept (None: nowhere). offsets_partitions: how many partitions
    __consumer_offsets has in this gateway's metadata (0: not known yet), which says each
    group's shard (so its coordinator) as FindCoordinator's answer does."""
    brokers: tuple[KafkaBroker, ...]
    gateway_id: int
    client_host: str = ""
    encoded: EncodedCache | None = field(default=None, compare=False)
    offsets_partitions: int = 0

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(b.node_id for b in self.brokers)

    def broker(self, node_id: int) -> KafkaBroker | None:
        for b in self.brokers:
            if b.node_id == node_id:
                return b
        return None


@dataclass(frozen=True, slots=True)
class Call:
    api: int                               # Riverbed ApiKey
    body: Any                              # its protobuf request
    payloads: tuple = ()                   # record-batch frames (PRODUCE)
    api_version: int = 0                   # Riverbed's version of that API (riverbed.wire.apis)


@dataclass(frozen=True, slots=True)
class Outcome:
    body: Any = None                       # the handler's response body
    payloads: Sequence[Any] = ()
    error_code: int = NONE                 # a whole-request failure (the handler raised it)
    error_message: str = ""

    @property
    def ok(self) -> bool:
        return self.error_code == NONE and self.body is not None


@dataclass(frozen=True, slots=True)
class Done:
    response: Any                          # kio response entity; None: send nothing


@dataclass(frozen=True, slots=True)
class Plan:
    calls: tuple[Call, ...]
    finish: Callable[[list[Outcome]], "Plan | Done"]


Step = Plan | Done


# ---------------------------------------------------------------------------------------------
# building kio entities of any version

def _module(api_key: int, version: int):
    return sys.modules[load_response_schema(api_key, version).__module__]


def _mk(cls: type, **kw: Any) -> Any:
    """An entity of `cls` from the keyword arguments it has (versions differ in fields)."""
    names = cls.__dataclass_fields__
    return cls(**{k: v for k, v in kw.items() if k in names})


class _Resp:
    """Builds one API version's response entities by class name (one per API version:
    `_Resp(key, version)` returns the same object each time)."""
    _made: dict[tuple[int, int], "_Resp"] = {}

    def __new__(cls, api_key: int, version: int):
        made = cls._made.get((api_key, version))
        if made is None:
            made = cls._made[(api_key, version)] = super().__new__(cls)
            made.mod = _module(api_key, version)
            made.top = load_response_schema(api_key, version)
        return made

    def has(self, cls_name: str) -> bool:
        return hasattr(self.mod, cls_name)

    def __call__(self, cls_name: str, **kw: Any) -> Any:
        return _mk(getattr(self.mod, cls_name), **kw)

    def response(self, **kw: Any) -> Any:
        return _mk(self.top, **kw)

    def fields(self, cls_name: str | None = None) -> frozenset[str]:
        cls = self.top if cls_name is None else getattr(self.mod, cls_name)
        return frozenset(f.name for f in fields(cls))


def ec(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.unknown_server_error


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=max(0, int(value)))


def to_ms(td: datetime.timedelta | None, default: int = 0) -> int:
    if td is None:
        return default
    return int(td.total_seconds() * 1000)


def _u32(value: int) -> int:
    return max(0, min(UINT32_MAX, int(value)))


def _throttle(o: Outcome) -> datetime.timedelta:
    return ms(_throttle_ms(o))


def _throttle_ms(o: Outcome) -> int:
    return max(0, getattr(o.body, "throttle_time_ms", 0)) if o.body is not None else 0


def _code(code: int) -> int:
    """A Riverbed error code as Kafka's number (the same numbers; one Kafka does not know is
    UNKNOWN_SERVER_ERROR, as `ec` makes it)."""
    return code if code == NONE else ec(code).value


def _payload_buffer(frame: Any) -> Any:
    """A payload frame's bytes without copying them (zmq.Frame -> its memoryview)."""
    return getattr(frame, "buffer", frame)


def _one(call: Call, finish: Callable[[Outcome], Step]) -> Plan:
    return Plan((call,), lambda outs: finish(outs[0]))


# ---------------------------------------------------------------------------------------------
# entry point

def plan(req: kp.KafkaRequest, view: ClusterView) -> Step:
    """The first step for a decoded request (protocol.decode_request)."""
    handler = _HANDLERS[req.api_key]
    return handler(req, view)


def error_response(req: kp.KafkaRequest, view: ClusterView, code: int, message: str) -> Any:
    """The response to `req` failing as a whole with `code` (a handler's error, a timeout)."""
    step = _HANDLERS[req.api_key](req, view)
    while isinstance(step, Plan):
        step = step.finish([Outcome(error_code=code, error_message=message)
                            for _ in step.calls])
    return step.response


# ---------------------------------------------------------------------------------------------
# ApiVersions

def api_versions(req: kp.KafkaRequest, view: ClusterView) -> Step:
    if not kp.is_served(req.api_key, req.api_version):
        # KIP-511: an ApiVersions version we do not know gets a v0 answer with
        # UNSUPPORTED_VERSION and our ApiVersions range, so the client retries with one.
        r = _Resp(kp.API_VERSIONS, 0)
        lo, hi = kp.SERVED[kp.API_VERSIONS]
        return Done(r.response(error_code=ErrorCode.unsupported_version, api_keys=(
            r("ApiVersion", api_key=kp.API_VERSIONS, min_version=lo, max_version=hi),)))
    r = _Resp(kp.API_VERSIONS, req.api_version)
    keys = tuple(r("ApiVersion", api_key=k, min_version=kp.ADVERTISED_MIN.get(k, lo),
                   max_version=hi) for k, (lo, hi) in sorted(kp.SERVED.items()))
    return Done(r.response(error_code=ErrorCode.none, api_keys=keys, throttle_time=ZERO_MS))


# ---------------------------------------------------------------------------------------------
# Metadata, DescribeCluster

def metadata(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.METADATA, v)
    by_id: list[Any] = []
    names: list[str] | None
    if b.topics is None or (v == 0 and not b.topics):
        names = None                                     # every topic
    else:
        names = []
        for t in b.topics:
            if getattr(t, "name", None) is None:
                by_id.append(t.topic_id)
            elif t.name not in names:
                names.append(t.name)
    auto_create = getattr(b, "allow_auto_topic_creation", True)
    if names == []:
        # Only brokers (and the topics named by id): the cluster id is all we ask for.
        call = Call(R.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest())
    else:
        call = Call(R.METADATA, metadata_pb2.MetadataRequest(
            topics=names or [], allow_auto_topic_creation=bool(auto_create)))

    def finish(o: Outcome) -> Step:
        # Encoding a Metadata answer costs ~20 µs per partition (kio): the same answer is kept
        # and reused while what it is made of (version, brokers, the question, Riverbed's
        # answer) stays the same.
        key = None
        if view.encoded is not None:
            key = ("metadata", v, view.brokers, view.gateway_id,
                   None if names is None else tuple(names), tuple(by_id),
                   o.body.SerializeToString(deterministic=True) if o.ok else
                   (o.error_code, o.error_message))
            cached = view.encoded.get(key)
            if cached is not None:
                return Done(cached)
        done = build(o)
        if key is not None:
            encoded = kp.encode_body(done.response)
            view.encoded.put(key, encoded)
            return Done(encoded)
        return done

    def build(o: Outcome) -> Done:
        ids = view.broker_ids
        brokers = tuple(r("MetadataResponseBroker", node_id=x.node_id, host=x.host, port=x.port,
                          rack=x.rack) for x in view.brokers)
        topics = []
        cluster_id = None
        if o.ok:
            cluster_id = o.body.cluster_id or None
            if names != []:
                for t in o.body.topics:
                    topics.append(_metadata_topic(r, t, ids))
        else:
            for n in names or []:
                topics.append(r("MetadataResponseTopic", error_code=ec(o.error_code), name=n,
                                topic_id=None, is_internal=False, partitions=()))
        for tid in by_id:
            topics.append(r("MetadataResponseTopic", error_code=ErrorCode.unknown_topic_id,
                            name=None, topic_id=tid, is_internal=False, partitions=()))
        return Done(r.response(throttle_time=_throttle(o), brokers=brokers, cluster_id=cluster_id,
                               controller_id=bk.controller(ids), topics=tuple(topics),
                               cluster_authorized_operations=INT32_MIN))
    return _one(call, finish)


def _metadata_topic(r: _Resp, t: metadata_pb2.TopicMetadata, ids: Sequence[int]) -> Any:
    parts = []
    for p in sorted(t.partitions, key=lambda p: p.partition):
        leader, replicas = bk.placement(t.name, p.partition, ids, len(p.replicas) or 1)
        code = p.error_code
        if p.leader < 0 or not ids:
            leader = -1
            code = code or ErrorCode.leader_not_available.value
        isr = replicas[:max(1, min(len(p.isr), len(replicas)))] if replicas else ()
        parts.append(r("MetadataResponsePartition", error_code=ec(code),
                       partition_index=p.partition, leader_id=leader,
                       leader_epoch=p.leader_epoch, replica_nodes=replicas, isr_nodes=isr,
                       offline_replicas=()))
    return r("MetadataResponseTopic", error_code=ec(t.error_code), name=t.name, topic_id=None,
             is_internal=t.is_internal, partitions=tuple(parts),
             topic_authorized_operations=INT32_MIN)


def describe_cluster(req: kp.KafkaRequest, view: ClusterView) -> Step:
    r = _Resp(kp.DESCRIBE_CLUSTER, req.api_version)
    endpoint_type = getattr(req.body, "endpoint_type", 1)

    def finish(o: Outcome) -> Step:
        ids = view.broker_ids
        if endpoint_type != 1:
            code, msg = ErrorCode.unsupported_endpoint_type, "only brokers (the gateways) are described"
        elif not o.ok:
            code, msg = ec(o.error_code), o.error_message or None
        else:
            code, msg = ec(o.body.error_code), o.body.error_message or None
        return Done(r.response(
            throttle_time=_throttle(o), error_code=code, error_message=msg,
            endpoint_type=endpoint_type, cluster_id=(o.body.cluster_id if o.ok else ""),
            controller_id=bk.controller(ids), cluster_authorized_operations=INT32_MIN,
            brokers=tuple(r("DescribeClusterBroker", broker_id=x.node_id, host=x.host,
                            port=x.port, rack=x.rack) for x in view.brokers)))
    return _one(Call(R.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest()), finish)


# ---------------------------------------------------------------------------------------------
# Produce

def produce(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    # Per flattened partition: None (forwarded) or (code, message) answered here.
    local: list[tuple[int, str] | None] = []
    layout: list[tuple[str, list[int]]] = []
    body = produce_pb2.ProduceRequest(acks=b.acks, timeout_ms=_u32(to_ms(b.timeout)))
    payloads: list[bytes] = []
    for t in b.topic_data:
        layout.append((t.name, [p.index for p in t.partition_data]))
        out_topic = None
        for p in t.partition_data:
            err = None
            if b.transactional_id is not None:
                err = (ErrorCode.invalid_request.value,
                       "transactions are not served by Riverbed yet")
            elif p.records is None or len(p.records) < RECORD_BATCH_OVERHEAD:
                err = (ErrorCode.corrupt_message.value,
                       f"partition {p.index} carries no whole record batch")
            local.append(err)
            if err is None:
                if out_topic is None or out_topic.name != t.name:
                    out_topic = body.topics.add(name=t.name)
                out_topic.partitions.add(partition=p.index)
                payloads.append(p.records)

    def finish(outs: list[Outcome]) -> Step:
        if b.acks == 0:
            return Done(None)
        o = outs[0] if outs else Outcome()
        answers = _flat(o.body) if o.ok else []
        it = iter(answers)
        topics = []
        flat = 0
        for name, parts in layout:
            prs = []
            for index in parts:
                err = local[flat]
                flat += 1
                if err is None and not o.ok:
                    err = (o.error_code, o.error_message)
                if err is None:
                    a = next(it, None)
                    if a is None:
                        err = (ErrorCode.unknown_server_error.value, "no answer for partition")
                if err is not None:
                    prs.append((index, _code(err[0]), -1, -1, -1, err[1] or None))
                    continue
                code = a.error_code
                prs.append((index, _code(code), a.base_offset if code == NONE else -1,
                            a.log_append_time_ms if a.log_append_time_ms >= 0 else -1,
                            a.log_start_offset, a.error_message or None))
            topics.append((name, prs))
        return Done(fast.produce_response(v, _throttle_ms(o), topics))

    if not payloads:
        return finish([])
    return Plan((Call(R.PRODUCE, body, tuple(payloads)),), finish)


def _flat(body: Any) -> list[Any]:
    return [p for t in body.topics for p in t.partitions]


Layout = list[tuple[str, list[int]]]       # the request's topics and partitions, in order


def _per_partition(layout: Layout, o: Outcome, answered: Callable[[int, Any, int], Any],
                   failed: Callable[[int, int], Any]) -> list[tuple[str, tuple]]:
    """(topic, entries) per topic of `layout`: each partition's entry from the routed answer
    (Riverbed answers every partition, in request order: core/routing.merge), built by
    answered(partition, its answer, flat index), or failed(partition, error code) when the
    whole request failed or the answer lacks it."""
    answers = _flat(o.body) if o.ok else []
    out, i = [], 0
    for name, parts in layout:
        entries = []
        for index in parts:
            a = answers[i] if i < len(answers) else None
            if a is None:
                code = o.error_code if not o.ok else ErrorCode.unknown_server_error.value
                entries.append(failed(index, code))
            else:
                entries.append(answered(index, a, i))
            i += 1
        out.append((name, tuple(entries)))
    return out


# ---------------------------------------------------------------------------------------------
# Fetch

def fetch(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.FETCH, v)
    session_epoch = getattr(b, "session_epoch", -1)
    session_id = getattr(b, "session_id", 0)
    if session_epoch > 0:
        # KIP-227: we never create a session (every answer says session_id 0), so an
        # incremental fetch names one we do not have; the client falls back to a full fetch.
        code = (ErrorCode.fetch_session_id_not_found if session_id
                else ErrorCode.invalid_fetch_session_epoch)
        return Done(r.response(throttle_time=ZERO_MS, error_code=code, session_id=0,
                               responses=()))
    body = fetch_pb2.FetchRequest(
        replica_id=b.replica_id, max_wait_ms=_u32(to_ms(b.max_wait)), min_bytes=_u32(b.min_bytes),
        max_bytes=_u32(getattr(b, "max_bytes", 0)), isolation_level=getattr(b, "isolation_level", 0),
        session_epoch=-1)
    layout: Layout = []
    for t in b.topics:
        ft = body.topics.add(name=t.topic)
        layout.append((t.topic, [p.partition for p in t.partitions]))
        for p in t.partitions:
            ft.partitions.add(partition=p.partition, fetch_offset=p.fetch_offset,
                              partition_max_bytes=_u32(p.partition_max_bytes),
                              current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                              log_start_offset=-1, last_fetched_epoch=-1)

    def finish(o: Outcome) -> Step:
        top = _code(o.body.error_code) if o.ok else NONE
        frames: Sequence[Any] = o.payloads if o.ok else ()

        def answered(index: int, a: Any, i: int) -> Any:
            lso = a.last_stable_offset if a.last_stable_offset >= 0 else a.high_watermark
            records = _payload_buffer(frames[i]) if i < len(frames) else b""
            return (index, _code(a.error_code), a.high_watermark, lso, a.log_start_offset,
                    records)

        def failed(index: int, code: int) -> Any:
            return (index, _code(code), -1, -1, -1, b"")
        topics = _per_partition(layout, o, answered, failed) if top == NONE else []
        return Done(fast.fetch_response(v, _throttle_ms(o), top, 0, topics))
    return _one(Call(R.FETCH, body), finish)


# ---------------------------------------------------------------------------------------------
# ListOffsets

def list_offsets(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.LIST_OFFSETS, v)
    body = list_offsets_pb2.ListOffsetsRequest(replica_id=b.replica_id)
    layout: Layout = []
    for t in b.topics:
        lt = body.topics.add(name=t.name)
        layout.append((t.name, [p.partition_index for p in t.partitions]))
        for p in t.partitions:
            lt.partitions.add(partition=p.partition_index, timestamp=p.timestamp,
                              current_leader_epoch=getattr(p, "current_leader_epoch", -1))

    def finish(o: Outcome) -> Step:
        topics = _per_partition(
            layout, o,
            lambda index, a, _i: r("ListOffsetsPartitionResponse", partition_index=index,
                                   error_code=ec(a.error_code), timestamp=a.timestamp,
                                   offset=a.offset, leader_epoch=a.leader_epoch),
            lambda index, code: r("ListOffsetsPartitionResponse", partition_index=index,
                                  error_code=ec(code), timestamp=-1, offset=-1, leader_epoch=-1))
        return Done(r.response(throttle_time=_throttle(o), topics=tuple(
            r("ListOffsetsTopicResponse", name=name, partitions=parts) for name, parts in topics)))
    return _one(Call(R.LIST_OFFSETS, body), finish)


# ---------------------------------------------------------------------------------------------
# OffsetForLeaderEpoch

def offset_for_leader_epoch(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.OFFSET_FOR_LEADER_EPOCH, v)
    replica_id = getattr(b, "replica_id", -1)
    # Consumers send -1 (or v3+'s default -2, the "debugging" id): both are consumers here.
    body = list_offsets_pb2.OffsetForLeaderEpochRequest(replica_id=-1 if replica_id < 0
                                                        else replica_id)
    layout: Layout = []
    for t in b.topics:
        lt = body.topics.add(name=t.topic)
        layout.append((t.topic, [p.partition for p in t.partitions]))
        for p in t.partitions:
            lt.partitions.add(partition=p.partition, leader_epoch=p.leader_epoch,
                              current_leader_epoch=getattr(p, "current_leader_epoch", -1))

    def finish(o: Outcome) -> Step:
        topics = _per_partition(
            layout, o,
            lambda index, a, _i: r("EpochEndOffset", error_code=ec(a.error_code),
                                   partition=index, leader_epoch=a.leader_epoch,
                                   end_offset=a.end_offset),
            lambda index, code: r("EpochEndOffset", error_code=ec(code), partition=index,
                                  leader_epoch=-1, end_offset=-1))
        return Done(r.response(throttle_time=_throttle(o), topics=tuple(
            r("OffsetForLeaderTopicResult", topic=name, partitions=parts)
            for name, parts in topics)))
    return _one(Call(R.OFFSET_FOR_LEADER_EPOCH, body), finish)


# ---------------------------------------------------------------------------------------------
# InitProducerId

def init_producer_id(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.INIT_PRODUCER_ID, req.api_version)

    def answer(code: int, pid: int = -1, epoch: int = -1, throttle=ZERO_MS) -> Done:
        return Done(r.response(throttle_time=throttle, error_code=ec(code), producer_id=pid,
                               producer_epoch=epoch))
    if b.transactional_id is not None:
        return answer(ErrorCode.invalid_request.value)   # transactions: not served yet
    body = producer_id_pb2.InitProducerIdRequest(
        producer_id=getattr(b, "producer_id", -1), producer_epoch=getattr(b, "producer_epoch", -1))

    def finish(o: Outcome) -> Step:
        if not o.ok:
            return answer(o.error_code)
        x = o.body
        if x.error_code != NONE:
            return answer(x.error_code, throttle=_throttle(o))
        return answer(NONE, x.producer_id, x.producer_epoch, _throttle(o))
    return _one(Call(R.INIT_PRODUCER_ID, body), finish)


# ---------------------------------------------------------------------------------------------
# FindCoordinator

def find_coordinator(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.FIND_COORDINATOR, v)
    key_type = getattr(b, "key_type", 0)
    keys = list(b.coordinator_keys) if v >= 4 else [b.key]

    def entry(o: Outcome | None) -> tuple[int, str | None, int, str, int]:
        """(code, message, node id, host, port) for one key's outcome."""
        if o is None:
            return (ErrorCode.invalid_request.value,
                    "transaction coordinators are not served by Riverbed yet", -1, "", -1)
        if not o.ok:
            return o.error_code, o.error_message or None, -1, "", -1
        x = o.body
        if x.error_code != NONE:
            return x.error_code, x.error_message or None, -1, "", -1
        node = view.broker(bk.coordinator(x.shard, view.broker_ids))
        if node is None:
            return (ErrorCode.coordinator_not_available.value, "no gateway advertises this "
                    "listener", -1, "", -1)
        return NONE, None, node.node_id, node.host, node.port

    calls = () if key_type != 0 else tuple(
        Call(R.FIND_COORDINATOR, group_pb2.FindCoordinatorRequest(key=k, key_type=group_pb2.GROUP))
        for k in keys)

    def finish(outs: list[Outcome]) -> Step:
        results = [entry(outs[i] if calls else None) for i in range(len(keys))]
        throttle = max((_throttle(o) for o in outs), default=ZERO_MS)
        if v >= 4:
            return Done(r.response(throttle_time=throttle, coordinators=tuple(
                r("Coordinator", key=k, node_id=n, host=h, port=p, error_code=ec(c),
                  error_message=m) for k, (c, m, n, h, p) in zip(keys, results))))
        c, m, n, h, p = results[0]
        return Done(r.response(throttle_time=throttle, error_code=ec(c), error_message=m,
                               node_id=n, host=h, port=p))
    if not calls:
        return finish([])
    return Plan(calls, finish)


# ---------------------------------------------------------------------------------------------
# the consumer protocol's embedded bytes (JoinGroup metadata, SyncGroup assignments)

SUBSCRIPTION_VERSIONS = 3                 # ConsumerProtocolSubscription v0..v3
GROUP_API_VERSION = 1                     # Riverbed's JOIN_GROUP / SYNC_GROUP v1: client assignment


def _subscription_schema(version: int):
    version = max(0, min(version, SUBSCRIPTION_VERSIONS))   # newer ones read as the newest
    return importlib.import_module(f"kio.schema.consumer_protocol_subscription.v{version}.data")


def decode_subscription(data: bytes) -> group_pb2.ConsumerSubscription | None:
    """ConsumerProtocolSubscription bytes (int16 version + body) -> Riverbed's; None when
    unreadable."""
    if data is None or len(data) < 2:
        return None
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        return None
    mod = _subscription_schema(version)
    try:
        sub, _ = entity_reader(mod.ConsumerProtocolSubscription)(data, 2)
    except Exception:  # noqa: BLE001 - malformed metadata: the protocol is skipped
        return None
    out = group_pb2.ConsumerSubscription(topics=list(sub.topics), user_data=sub.user_data or b"")
    for tp in getattr(sub, "owned_partitions", ()):
        out.owned_partitions.add(topic=tp.topic, partitions=list(tp.partitions))
    return out


def encode_subscription(sub: group_pb2.ConsumerSubscription) -> bytes:
    buf = io.BytesIO()
    if sub.owned_partitions:
        buf.write((1).to_bytes(2, "big"))
        entity_writer(subscription_v1.ConsumerProtocolSubscription)(
            buf, subscription_v1.ConsumerProtocolSubscription(
                topics=tuple(sub.topics), user_data=sub.user_data or None,
                owned_partitions=tuple(subscription_v1.TopicPartition(
                    topic=tp.topic, partitions=tuple(tp.partitions))
                    for tp in sub.owned_partitions)))
    else:
        buf.write((0).to_bytes(2, "big"))
        entity_writer(subscription_v0.ConsumerProtocolSubscription)(
            buf, subscription_v0.ConsumerProtocolSubscription(
                topics=tuple(sub.topics), user_data=sub.user_data or None))
    return buf.getvalue()


def encode_assignment(a: group_pb2.ConsumerAssignment) -> bytes:
    buf = io.BytesIO()
    buf.write((0).to_bytes(2, "big"))
    entity_writer(assignment_v0.ConsumerProtocolAssignment)(
        buf, assignment_v0.ConsumerProtocolAssignment(
            assigned_partitions=tuple(assignment_v0.TopicPartition(
                topic=tp.topic, partitions=tuple(tp.partitions)) for tp in a.partitions),
            user_data=a.user_data or None))
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# groups

def join_group(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.JOIN_GROUP, v)
    session_ms = to_ms(b.session_timeout)
    rebalance_ms = to_ms(getattr(b, "rebalance_timeout", None), session_ms)
    body = group_pb2.JoinGroupRequest(
        group_id=b.group_id, session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms if rebalance_ms > 0 else session_ms,
        member_id=b.member_id, protocol_type=b.protocol_type,
        client_host=f"/{view.client_host}" if view.client_host else "")
    body.client_assignment = True        # Kafka's classic protocol: the leader assigns
    for p in b.protocols:
        body.protocols.add(name=p.name, metadata=p.metadata)

    def finish(o: Outcome) -> Step:
        if not o.ok:
            x = group_pb2.JoinGroupResponse(error_code=o.error_code, generation_id=-1,
                                            member_id=b.member_id)
        else:
            x = o.body
        ok = x.error_code == NONE
        members = tuple(r("JoinGroupResponseMember", member_id=m.member_id,
                          group_instance_id=None, metadata=m.metadata)
                        for m in x.members) if ok else ()
        return Done(r.response(
            throttle_time=_throttle(o), error_code=ec(x.error_code),
            generation_id=x.generation_id if ok else -1,
            protocol_type=(x.protocol_type or None) if ok else None,
            protocol_name=x.protocol_name if ok else (None if v >= 7 else ""),
            leader=x.leader if ok else "", skip_assignment=False,
            member_id=x.member_id or b.member_id, members=members))
    return _one(Call(R.JOIN_GROUP, body, api_version=GROUP_API_VERSION), finish)


def sync_group(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.SYNC_GROUP, v)
    body = group_pb2.SyncGroupRequest(
        group_id=b.group_id, generation_id=b.generation_id, member_id=b.member_id,
        protocol_type=getattr(b, "protocol_type", None) or "",
        protocol_name=getattr(b, "protocol_name", None) or "",
        assignments=[group_pb2.SyncGroupAssignment(member_id=a.member_id, assignment=a.assignment)
                     for a in b.assignments])

    def finish(o: Outcome) -> Step:
        x = o.body if o.ok else group_pb2.SyncGroupResponse(error_code=o.error_code)
        ok = x.error_code == NONE
        return Done(r.response(
            throttle_time=_throttle(o), error_code=ec(x.error_code),
            protocol_type=(x.protocol_type or None) if ok else None,
            protocol_name=(x.protocol_name or None) if ok else None,
            assignment=x.assignment_data if ok else b""))
    return _one(Call(R.SYNC_GROUP, body, api_version=GROUP_API_VERSION), finish)


def heartbeat(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.HEARTBEAT, req.api_version)
    body = group_pb2.HeartbeatRequest(group_id=b.group_id, generation_id=b.generation_id,
                                      member_id=b.member_id)   # max_wait_ms 0: Kafka's at once

    def finish(o: Outcome) -> Step:
        code = o.body.error_code if o.ok else o.error_code
        return Done(r.response(throttle_time=_throttle(o), error_code=ec(code)))
    return _one(Call(R.HEARTBEAT, body), finish)


def leave_group(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.LEAVE_GROUP, v)
    members = ([(m.member_id, m.group_instance_id) for m in b.members] if v >= 3
               else [(b.member_id, None)])
    calls = tuple(Call(R.LEAVE_GROUP, group_pb2.LeaveGroupRequest(group_id=b.group_id,
                                                                  member_id=m))
                  for m, _ in members)

    def finish(outs: list[Outcome]) -> Step:
        codes = [(o.body.error_code if o.ok else o.error_code) for o in outs]
        throttle = max((_throttle(o) for o in outs), default=ZERO_MS)
        if v < 3:
            return Done(r.response(throttle_time=throttle, error_code=ec(codes[0])))
        top = NONE
        if codes and len(set(codes)) == 1 and codes[0] in COORDINATOR_ERRORS:
            top = codes[0]
        return Done(r.response(throttle_time=throttle, error_code=ec(top), members=tuple(
            r("MemberResponse", member_id=m, group_instance_id=gi, error_code=ec(c))
            for (m, gi), c in zip(members, codes))))
    if not calls:
        return finish([])
    return Plan(calls, finish)


def describe_groups(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.DESCRIBE_GROUPS, req.api_version)
    groups = list(b.groups)

    def finish(o: Outcome) -> Step:
        described = {g.group_id: g for g in o.body.groups} if o.ok else {}
        out = []
        for gid in groups:
            g = described.get(gid)
            if g is None:
                out.append(r("DescribedGroup", error_code=ec(o.error_code if not o.ok else
                                                             ErrorCode.unknown_server_error.value),
                             group_id=gid, group_state="", protocol_type="", protocol_data="",
                             members=(), authorized_operations=INT32_MIN))
                continue
            members = tuple(r("DescribedGroupMember", member_id=m.member_id,
                              group_instance_id=None, client_id=m.client_id,
                              client_host=m.client_host,
                              member_metadata=m.member_metadata or encode_subscription(
                                  m.subscription),
                              member_assignment=m.member_assignment or encode_assignment(
                                  m.assignment))
                            for m in g.members)
            out.append(r("DescribedGroup", error_code=ec(g.error_code), group_id=gid,
                         group_state=g.group_state or ("Dead" if g.error_code else ""),
                         protocol_type=g.protocol_type, protocol_data=g.protocol_data,
                         members=members, authorized_operations=INT32_MIN))
        return Done(r.response(throttle_time=_throttle(o), groups=tuple(out)))
    if not groups:
        return finish(Outcome(body=group_pb2.DescribeGroupsResponse()))
    return _one(Call(R.DESCRIBE_GROUPS, group_pb2.DescribeGroupsRequest(groups=groups)), finish)


def list_groups(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.LIST_GROUPS, req.api_version)
    body = group_pb2.ListGroupsRequest(states_filter=list(getattr(b, "states_filter", ())))

    n = view.offsets_partitions

    def here(group_id: str) -> bool:
        """Kafka's ListGroups answers the groups this broker coordinates (brokers.py)."""
        return bk.lists_group(partition_for(group_id, n) if n > 0 else None, view.broker_ids,
                              view.gateway_id)

    def finish(o: Outcome) -> Step:
        if not o.ok:
            return Done(r.response(throttle_time=ZERO_MS, error_code=ec(o.error_code), groups=()))
        return Done(r.response(throttle_time=_throttle(o), error_code=ec(o.body.error_code),
                               groups=tuple(r("ListedGroup", group_id=g.group_id,
                                              protocol_type=g.protocol_type,
                                              group_state=g.group_state)
                                            for g in o.body.groups if here(g.group_id))))
    return _one(Call(R.LIST_GROUPS, body), finish)


# ---------------------------------------------------------------------------------------------
# offsets

def offset_commit(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.OFFSET_COMMIT, v)
    retention = getattr(b, "retention_time", None)
    body = offset_pb2.OffsetCommitRequest(
        group_id=b.group_id, generation_id=b.generation_id_or_member_epoch,
        member_id=b.member_id, retention_time_ms=to_ms(retention, -1) if retention else -1)
    layout = []
    for t in b.topics:
        ct = body.topics.add(name=t.name)
        layout.append((t.name, [p.partition_index for p in t.partitions]))
        for p in t.partitions:
            ct.partitions.add(partition_index=p.partition_index, committed_offset=p.committed_offset,
                              committed_leader_epoch=getattr(p, "committed_leader_epoch", -1),
                              committed_metadata=p.committed_metadata or "")

    def finish(o: Outcome) -> Step:
        top = o.error_code if not o.ok else o.body.error_code
        answers = _flat(o.body) if o.ok else []
        topics, i = [], 0
        for name, parts in layout:
            prs = []
            for index in parts:
                a = answers[i] if i < len(answers) else None
                i += 1
                code = top if top != NONE or a is None else a.error_code
                if a is None and top == NONE:
                    code = ErrorCode.unknown_server_error.value
                prs.append(r("OffsetCommitResponsePartition", partition_index=index,
                             error_code=ec(code)))
            topics.append(r("OffsetCommitResponseTopic", name=name, partitions=tuple(prs)))
        return Done(r.response(throttle_time=_throttle(o), topics=tuple(topics)))
    return _one(Call(R.OFFSET_COMMIT, body), finish)


def offset_fetch(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.OFFSET_FETCH, v)
    if v >= 8:
        asks = [(g.group_id, g.topics) for g in b.groups]
        part_cls, topic_cls = "OffsetFetchResponsePartitions", "OffsetFetchResponseTopics"
    else:
        asks = [(b.group_id, b.topics)]
        part_cls, topic_cls = "OffsetFetchResponsePartition", "OffsetFetchResponseTopic"
    calls = []
    for gid, topics in asks:
        body = offset_pb2.OffsetFetchRequest(group_id=gid)
        for t in topics or ():
            body.topics.add(name=t.name, partition_indexes=list(t.partition_indexes))
        calls.append(Call(R.OFFSET_FETCH, body))

    def group_topics(o: Outcome, topics) -> tuple[int, tuple]:
        top = o.error_code if not o.ok else o.body.error_code
        out = []
        if o.ok and top == NONE:
            for t in o.body.topics:
                out.append(r(topic_cls, name=t.name, partitions=tuple(
                    r(part_cls, partition_index=p.partition_index,
                      committed_offset=p.committed_offset,
                      committed_leader_epoch=p.committed_leader_epoch,
                      metadata=p.metadata, error_code=ec(p.error_code)) for p in t.partitions)))
        elif topics:
            # the versions without a group-level code (v0, v1) carry it per partition
            for t in topics:
                out.append(r(topic_cls, name=t.name, partitions=tuple(
                    r(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                      metadata="", error_code=ec(top)) for p in t.partition_indexes)))
        return top, tuple(out)

    def finish(outs: list[Outcome]) -> Step:
        throttle = max((_throttle(o) for o in outs), default=ZERO_MS)
        if v >= 8:
            groups = []
            for (gid, topics), o in zip(asks, outs):
                top, ts = group_topics(o, topics)
                groups.append(r("OffsetFetchResponseGroup", group_id=gid, topics=ts,
                                error_code=ec(top)))
            return Done(r.response(throttle_time=throttle, groups=tuple(groups)))
        top, ts = group_topics(outs[0], asks[0][1])
        return Done(r.response(throttle_time=throttle, topics=ts, error_code=ec(top)))
    return Plan(tuple(calls), finish)


# ---------------------------------------------------------------------------------------------
# topics (admin)

def create_topics(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.CREATE_TOPICS, v)
    body = controller_pb2.CreateTopicsRequest(timeout_ms=_u32(to_ms(b.timeout)),
                                              validate_only=bool(getattr(b, "validate_only", False)))
    local: dict[str, tuple[int, str]] = {}
    order = []
    for t in b.topics:
        order.append(t.name)
        if t.assignments:
            local[t.name] = (ErrorCode.invalid_replica_assignment.value,
                             "replica assignments name storage nodes, which Kafka clients do "
                             "not see: leave them out")
            continue
        ct = body.topics.add(name=t.name, num_partitions=t.num_partitions,
                             replication_factor=t.replication_factor)
        for c in t.configs:
            if c.value is not None:
                ct.configs[c.name] = c.value

    def finish(outs: list[Outcome]) -> Step:
        o = outs[0] if outs else Outcome(body=controller_pb2.CreateTopicsResponse())
        theirs = {t.name: t for t in o.body.topics} if o.ok else {}
        res = []
        for name in order:
            if name in local:
                code, msg, n, rf = *local[name], -1, -1
            elif name in theirs:
                t = theirs[name]
                code, msg = t.error_code, t.error_message
                n, rf = (t.num_partitions, t.replication_factor) if code == NONE else (-1, -1)
            else:
                code, msg, n, rf = (o.error_code or ErrorCode.unknown_server_error.value,
                                    o.error_message, -1, -1)
            res.append(r("CreatableTopicResult", name=name, topic_id=None, error_code=ec(code),
                         error_message=msg or None, num_partitions=n, replication_factor=rf,
                         configs=None))
        return Done(r.response(throttle_time=_throttle(o), topics=tuple(res)))
    if not body.topics:
        return finish([])
    return Plan((Call(R.CREATE_TOPICS, body),), finish)


def delete_topics(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.DELETE_TOPICS, v)
    if v >= 6:
        wanted = [(t.name, t.topic_id) for t in b.topics]
    else:
        wanted = [(n, None) for n in b.topic_names]
    names = [n for n, _ in wanted if n is not None]
    body = controller_pb2.DeleteTopicsRequest(names=names, timeout_ms=_u32(to_ms(b.timeout)))

    def finish(outs: list[Outcome]) -> Step:
        o = outs[0] if outs else Outcome(body=controller_pb2.DeleteTopicsResponse())
        theirs = {t.name: t for t in o.body.topics} if o.ok else {}
        res = []
        for name, tid in wanted:
            if name is None:
                code, msg = ErrorCode.unknown_topic_id.value, "topics have no ids in Riverbed"
            elif name in theirs:
                code, msg = theirs[name].error_code, theirs[name].error_message
            else:
                code, msg = o.error_code or ErrorCode.unknown_server_error.value, o.error_message
            res.append(r("DeletableTopicResult", name=name, topic_id=tid, error_code=ec(code),
                         error_message=msg or None))
        return Done(r.response(throttle_time=_throttle(o), responses=tuple(res)))
    if not names:
        return finish([])
    return Plan((Call(R.DELETE_TOPICS, body),), finish)


def create_partitions(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.CREATE_PARTITIONS, v)
    body = controller_pb2.CreatePartitionsRequest(timeout_ms=_u32(to_ms(b.timeout)),
                                                  validate_only=bool(b.validate_only))
    local: dict[str, tuple[int, str]] = {}
    order = []
    for t in b.topics:
        order.append(t.name)
        if t.assignments:
            local[t.name] = (ErrorCode.invalid_replica_assignment.value,
                             "replica assignments name storage nodes, which Kafka clients do "
                             "not see: leave them out")
            continue
        body.topics.add(name=t.name, count=t.count)

    def finish(outs: list[Outcome]) -> Step:
        o = outs[0] if outs else Outcome(body=controller_pb2.CreatePartitionsResponse())
        theirs = {t.name: t for t in o.body.topics} if o.ok else {}
        res = []
        for name in order:
            if name in local:
                code, msg = local[name]
            elif name in theirs:
                code, msg = theirs[name].error_code, theirs[name].error_message
            else:
                code, msg = o.error_code or ErrorCode.unknown_server_error.value, o.error_message
            res.append(r("CreatePartitionsTopicResult", name=name, error_code=ec(code),
                         error_message=msg or None))
        return Done(r.response(throttle_time=_throttle(o), results=tuple(res)))
    if not body.topics:
        return finish([])
    return Plan((Call(R.CREATE_PARTITIONS, body),), finish)


def describe_configs(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.DESCRIBE_CONFIGS, v)
    resources = list(b.resources)
    topics = [x.resource_name for x in resources if x.resource_type == TOPIC_TYPE]
    body = controller_pb2.DescribeConfigsRequest(topics=topics, include_defaults=True)

    def finish(outs: list[Outcome]) -> Step:
        o = outs[0] if outs else Outcome(body=controller_pb2.DescribeConfigsResponse())
        theirs = {x.topic: x for x in o.body.results} if o.ok else {}
        res = []
        for x in resources:
            code, msg, entries = NONE, None, ()
            if x.resource_type != TOPIC_TYPE:
                code, msg = (ErrorCode.invalid_request.value,
                             "only topic configs are served through the Kafka listener")
            elif x.resource_name in theirs:
                t = theirs[x.resource_name]
                code, msg = t.error_code, t.error_message or None
                keys = set(x.configuration_keys) if x.configuration_keys else None
                entries = tuple(
                    r("DescribeConfigsResourceResult", name=e.name, value=e.value,
                      read_only=False, is_default=e.is_default,
                      config_source=CONFIG_SOURCE_DEFAULT if e.is_default
                      else CONFIG_SOURCE_DYNAMIC_TOPIC,
                      is_sensitive=False, synonyms=(), config_type=0, documentation=None)
                    for e in t.entries if keys is None or e.name in keys)
            else:
                code = o.error_code or ErrorCode.unknown_server_error.value
                msg = o.error_message or None
            res.append(r("DescribeConfigsResult", error_code=ec(code), error_message=msg,
                         resource_type=x.resource_type, resource_name=x.resource_name,
                         configs=entries))
        return Done(r.response(throttle_time=_throttle(o), results=tuple(res)))
    if not topics:
        return finish([])
    return Plan((Call(R.DESCRIBE_CONFIGS, body),), finish)


# ---------------------------------------------------------------------------------------------
# SaslHandshake, SaslAuthenticate: a SASL listener's connection answers them itself until it is
# authenticated (listener.py, sasl.py); here is what comes after that, or on a listener without
# SASL: ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers (no re-authentication, KIP-368).

def sasl_handshake(req: kp.KafkaRequest, view: ClusterView) -> Step:
    r = _Resp(kp.SASL_HANDSHAKE, req.api_version)
    return Done(r.response(error_code=ErrorCode.illegal_sasl_state, mechanisms=()))


def sasl_authenticate(req: kp.KafkaRequest, view: ClusterView) -> Step:
    r = _Resp(kp.SASL_AUTHENTICATE, req.api_version)
    return Done(r.response(error_code=ErrorCode.illegal_sasl_state, auth_bytes=b"",
                           error_message="SaslAuthenticate outside a SASL handshake"))


def user_scram_credentials(req: kp.KafkaRequest, view: ClusterView) -> Step:
    """Describe/AlterUserScramCredentials are answered by the listener with the gateway's
    credentials and ACLs (scram_admin.py); here only where none are wired: not authorized."""
    from services.gateway.kafka import scram_admin as sa
    if req.api_key == kp.DESCRIBE_USER_SCRAM_CREDENTIALS:
        return Done(sa.describe(req.api_version, req.body, {}, authorized=False))
    return Done(sa.alter_response(req.api_version, sa.plan_alter(req.body, {}, authorized=False)))


# ---------------------------------------------------------------------------------------------
# AlterConfigs, IncrementalAlterConfigs (topics; through the controller's ALTER_CONFIGS)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3            # IncrementalAlterConfigs' config_operation
# Topic configs whose value is a list (Kafka's ConfigDef.Type.LIST): APPEND / SUBTRACT apply.
LIST_CONFIGS = frozenset({"cleanup.policy", "leader.replication.throttled.replicas",
                          "follower.replication.throttled.replicas"})
NOT_A_TOPIC = "only topic configs are served through the Kafka listener"


@dataclass(frozen=True, slots=True)
class _Refused:
    """A resource's change answered at the gateway (nothing forwarded)."""
    code: int
    message: str


def _config_results(r: _Resp, cls: str, resources, local: dict, theirs: dict, o: Outcome):
    out = []
    for x in resources:
        key = (x.resource_type, x.resource_name)
        if key in local:
            code, msg = local[key]
        elif x.resource_name in theirs:
            t = theirs[x.resource_name]
            code, msg = t.error_code, t.error_message
        else:
            code, msg = (o.error_code or ErrorCode.unknown_server_error.value, o.error_message)
        out.append(r(cls, error_code=ec(code), error_message=msg or None,
                     resource_type=x.resource_type, resource_name=x.resource_name))
    return tuple(out)


def _alter_configs_call(changes: dict[str, tuple[dict[str, str], list[str]]],
                        validate_only: bool) -> Call:
    body = controller_pb2.AlterConfigsRequest(validate_only=validate_only)
    for name, (set_, delete) in changes.items():
        t = body.topics.add(name=name, delete=delete)
        for k, v in set_.items():
            t.set[k] = v
    return Call(R.ALTER_CONFIGS, body)


def _current_configs(o: Outcome) -> tuple[dict[str, dict[str, tuple[str, bool]]], dict]:
    """(topic -> {key: (value, is_default)}, topic -> its DescribeConfigs result) of an answer."""
    current, results = {}, {}
    if o.ok:
        for t in o.body.results:
            results[t.topic] = t
            current[t.topic] = {e.name: (e.value, e.is_default) for e in t.entries}
    return current, results


def _alter_configs_steps(req: kp.KafkaRequest, r: _Resp, result_cls: str, resources,
                         local: dict, needs_current: list[str],
                         changes_of: Callable[[dict], dict]) -> Step:
    """Describe the topics in `needs_current` first (when any), then alter what `changes_of`
    (current configs -> topic -> (set, delete)) computes; answers per resource."""
    validate_only = bool(req.body.validate_only)

    def alter(current: dict, described: dict, o_desc: Outcome) -> Step:
        changes = {}
        for name, change in changes_of(current).items():
            if isinstance(change, _Refused):
                local[(TOPIC_TYPE, name)] = (change.code, change.message)   # answered here
            else:
                changes[name] = change
        for name in needs_current:
            d = described.get(name)
            if d is not None and d.error_code != NONE:
                local[(TOPIC_TYPE, name)] = (d.error_code, d.error_message)
                changes.pop(name, None)
            elif d is None and not o_desc.ok:
                local[(TOPIC_TYPE, name)] = (o_desc.error_code, o_desc.error_message)
                changes.pop(name, None)

        def finish(outs: list[Outcome]) -> Step:
            o = outs[0] if outs else Outcome(body=controller_pb2.AlterConfigsResponse())
            theirs = {t.name: t for t in o.body.topics} if o.ok else {}
            return Done(r.response(throttle_time=_throttle(o), responses=_config_results(
                r, result_cls, resources, local, theirs, o)))
        if not changes:
            return finish([])
        return Plan((_alter_configs_call(changes, validate_only),), finish)

    if not needs_current:
        return alter({}, {}, Outcome())
    describe = Call(R.DESCRIBE_CONFIGS, controller_pb2.DescribeConfigsRequest(
        topics=needs_current, include_defaults=True))

    def described(o: Outcome) -> Step:
        current, results = _current_configs(o)
        return alter(current, results, o)
    return _one(describe, described)


def alter_configs(req: kp.KafkaRequest, view: ClusterView) -> Step:
    """Kafka's (legacy) AlterConfigs replaces a resource's whole config: the keys given are set,
    every other key set on the topic goes back to its default."""
    b = req.body
    r = _Resp(kp.ALTER_CONFIGS, req.api_version)
    resources = list(b.resources)
    local: dict = {}
    wanted: dict[str, dict[str, str | None]] = {}
    for x in resources:
        key = (x.resource_type, x.resource_name)
        if x.resource_type != TOPIC_TYPE:
            local[key] = (ErrorCode.invalid_request.value, NOT_A_TOPIC)
        elif x.resource_name in wanted:
            local[key] = (ErrorCode.invalid_request.value, "topic named twice")
        else:
            wanted[x.resource_name] = {c.name: c.value for c in x.configs}

    def changes_of(current: dict) -> dict:
        out = {}
        for name, configs in wanted.items():
            set_ = {k: v for k, v in configs.items() if v is not None}
            delete = [k for k, (_, is_default) in current.get(name, {}).items()
                      if not is_default and k not in set_]
            delete += [k for k, v in configs.items() if v is None and k not in delete]
            out[name] = (set_, delete)
        return out
    return _alter_configs_steps(req, r, "AlterConfigsResourceResponse", resources, local,
                                list(wanted), changes_of)


def incremental_alter_configs(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.INCREMENTAL_ALTER_CONFIGS, req.api_version)
    resources = list(b.resources)
    local: dict = {}
    ops: dict[str, list[tuple[str, int, str | None]]] = {}
    for x in resources:
        key = (x.resource_type, x.resource_name)
        names = [c.name for c in x.configs]
        if x.resource_type != TOPIC_TYPE:
            local[key] = (ErrorCode.invalid_request.value, NOT_A_TOPIC)
        elif x.resource_name in ops:
            local[key] = (ErrorCode.invalid_request.value, "topic named twice")
        elif len(set(names)) != len(names):
            local[key] = (ErrorCode.invalid_request.value, "a config named twice")
        elif any(c.config_operation not in (SET, DELETE, APPEND, SUBTRACT) for c in x.configs):
            local[key] = (ErrorCode.invalid_request.value, "unknown config operation")
        elif any(c.config_operation in (APPEND, SUBTRACT) and c.name not in LIST_CONFIGS
                 for c in x.configs):
            local[key] = (ErrorCode.invalid_config.value,
                          f"APPEND and SUBTRACT apply to list configs only: {sorted(LIST_CONFIGS)}")
        else:
            ops[x.resource_name] = [(c.name, c.config_operation, c.value) for c in x.configs]
    needs_current = [n for n, os_ in ops.items() if any(op in (APPEND, SUBTRACT) for _, op, _ in os_)]

    def changes_of(current: dict) -> dict:
        out = {}
        for name, os_ in ops.items():
            set_: dict[str, str] = {}
            delete: list[str] = []
            for key, op, value in os_:
                if op == SET:
                    if value is None:
                        out[name] = _Refused(ErrorCode.invalid_request.value,
                                             f"SET {key} without a value")
                        break
                    set_[key] = value
                elif op == DELETE:
                    delete.append(key)
                else:
                    now = current.get(name, {}).get(key, ("", True))[0]
                    items = [v for v in now.split(",") if v]
                    given = [v for v in (value or "").split(",") if v]
                    if op == APPEND:
                        items += [v for v in given if v not in items]
                    else:
                        items = [v for v in items if v not in given]
                    set_[key] = ",".join(items)
            else:
                out[name] = (set_, delete)
        return out
    return _alter_configs_steps(req, r, "AlterConfigsResourceResponse", resources, local,
                                needs_current, changes_of)


# ---------------------------------------------------------------------------------------------
# DeleteRecords (routed to the partitions' leaders)

def delete_records(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.DELETE_RECORDS, req.api_version)
    body = delete_records_pb2.DeleteRecordsRequest(timeout_ms=_u32(to_ms(b.timeout)))
    layout: Layout = []
    for t in b.topics:
        dt = body.topics.add(name=t.name)
        layout.append((t.name, [p.partition_index for p in t.partitions]))
        for p in t.partitions:
            dt.partitions.add(partition=p.partition_index, offset=p.offset)

    def finish(o: Outcome) -> Step:
        topics = _per_partition(
            layout, o,
            lambda index, a, _i: r("DeleteRecordsPartitionResult", partition_index=index,
                                   low_watermark=a.low_watermark, error_code=ec(a.error_code)),
            lambda index, code: r("DeleteRecordsPartitionResult", partition_index=index,
                                  low_watermark=-1, error_code=ec(code)))
        return Done(r.response(throttle_time=_throttle(o), topics=tuple(
            r("DeleteRecordsTopicResult", name=name, partitions=parts) for name, parts in topics)))
    if not layout:
        return finish(Outcome(body=delete_records_pb2.DeleteRecordsResponse()))
    return _one(Call(R.DELETE_RECORDS, body), finish)


# ---------------------------------------------------------------------------------------------
# OffsetDelete, DeleteGroups

def offset_delete(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.OFFSET_DELETE, req.api_version)
    body = offset_pb2.OffsetDeleteRequest(group_id=b.group_id)
    layout: Layout = []
    for t in b.topics:
        parts = [p.partition_index for p in t.partitions]
        body.topics.add(name=t.name, partition_indexes=parts)
        layout.append((t.name, parts))

    def finish(o: Outcome) -> Step:
        top = o.error_code if not o.ok else o.body.error_code
        topics = _per_partition(
            layout, o,
            lambda index, a, _i: r("OffsetDeleteResponsePartition", partition_index=index,
                                   error_code=ec(a.error_code if top == NONE else NONE)),
            lambda index, code: r("OffsetDeleteResponsePartition", partition_index=index,
                                  error_code=ec(NONE if top != NONE else code)))
        return Done(r.response(error_code=ec(top), throttle_time=_throttle(o), topics=tuple(
            r("OffsetDeleteResponseTopic", name=name, partitions=parts) for name, parts in topics)))
    return _one(Call(R.OFFSET_DELETE, body), finish)


def delete_groups(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.DELETE_GROUPS, req.api_version)
    groups = list(b.groups_names)

    def finish(o: Outcome) -> Step:
        theirs = {x.group_id: x for x in o.body.results} if o.ok else {}
        out = []
        for gid in dict.fromkeys(groups):
            x = theirs.get(gid)
            code = x.error_code if x is not None else (o.error_code or
                                                       ErrorCode.unknown_server_error.value)
            out.append(r("DeletableGroupResult", group_id=gid, error_code=ec(code)))
        return Done(r.response(throttle_time=_throttle(o), results=tuple(out)))
    if not groups:
        return finish(Outcome(body=group_pb2.DeleteGroupsResponse()))
    return _one(Call(R.DELETE_GROUPS, group_pb2.DeleteGroupsRequest(group_ids=groups)), finish)


# ---------------------------------------------------------------------------------------------
# ElectLeaders (preferred elections, through the controller)

PREFERRED, UNCLEAN = 0, 1


def elect_leaders(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b = req.body
    r = _Resp(kp.ELECT_LEADERS, req.api_version)
    election_type = getattr(b, "election_type", PREFERRED)
    asked = None if b.topic_partitions is None else [
        (t.topic, p) for t in b.topic_partitions for p in t.partitions]

    def answer(results: list[tuple[str, int, int, str | None]], top: int, throttle) -> Done:
        by_topic: dict[str, list] = {}
        for topic, p, code, msg in results:
            by_topic.setdefault(topic, []).append(r("PartitionResult", partition_id=p,
                                                    error_code=ec(code), error_message=msg))
        return Done(r.response(throttle_time=throttle, error_code=ec(top),
                               replica_election_results=tuple(
                                   r("ReplicaElectionResult", topic=t, partition_result=tuple(ps))
                                   for t, ps in by_topic.items())))
    if election_type != PREFERRED:
        return answer([(t, p, ErrorCode.invalid_request.value,
                        "only preferred leader elections are served (unclean ones are the "
                        "controller's, with unclean.leader.election.enable)")
                       for t, p in asked or ()], NONE, ZERO_MS)
    if asked == []:
        return answer([], NONE, ZERO_MS)
    body = admin_ops_pb2.ElectLeadersRequest(timeout_ms=_u32(to_ms(b.timeout)), partitions=[
        common_pb2.TopicPartition(topic=t, partition=p) for t, p in asked or ()])

    def failed(code: int, msg: str, throttle) -> Done:
        # v1+ has a top-level code; v0 has none, so every partition asked carries it
        if req.api_version == 0:
            return answer([(t, p, code, msg or None) for t, p in asked or ()], NONE, throttle)
        return answer([], code, throttle)

    def finish(o: Outcome) -> Step:
        if not o.ok:
            return failed(o.error_code, o.error_message, ZERO_MS)
        x = o.body
        if x.error_code != NONE:
            return failed(x.error_code, x.error_message, _throttle(o))
        return answer([(e.topic, e.partition, e.error_code, e.error_message or None)
                       for e in x.results], NONE, _throttle(o))
    return _one(Call(R.ELECT_LEADERS, body), finish)


# ---------------------------------------------------------------------------------------------
# DescribeLogDirs: a gateway describes the storage nodes spread to it

def log_dir_nodes(node_ids, view: ClusterView) -> list[int]:
    """The storage nodes whose log dirs this gateway describes: sorted nodes go round the
    gateways (as partitions do), so asking every broker describes every node once."""
    ids = sorted(view.broker_ids)
    if view.gateway_id not in ids:
        return []
    me = ids.index(view.gateway_id)
    return [n for i, n in enumerate(sorted(node_ids)) if i % len(ids) == me]


def describe_log_dirs(req: kp.KafkaRequest, view: ClusterView) -> Step:
    b, v = req.body, req.api_version
    r = _Resp(kp.DESCRIBE_LOG_DIRS, v)
    wanted = None if b.topics is None else {t.topic: set(t.partitions) for t in b.topics}

    def finish(o: Outcome) -> Step:
        if not o.ok or o.body.error_code != NONE:
            code = o.error_code if not o.ok else o.body.error_code
            return Done(r.response(throttle_time=_throttle(o), error_code=ec(code), results=()))
        by_node = {x.broker_id: x for x in o.body.brokers}
        results = []
        for node in log_dir_nodes(by_node, view):
            x = by_node[node]
            if x.error_code != NONE:
                results.append(r("DescribeLogDirsResult", error_code=ec(x.error_code),
                                 log_dir=f"storage-node-{node}", topics=(), total_bytes=-1,
                                 usable_bytes=-1, is_cordoned=False))
                continue
            for d in x.log_dirs:
                topics: dict[str, list] = {}
                for rep in d.replicas:
                    if wanted is not None and rep.partition not in wanted.get(rep.topic, ()):
                        continue
                    topics.setdefault(rep.topic, []).append(r(
                        "DescribeLogDirsPartition", partition_index=rep.partition,
                        partition_size=rep.size_bytes, offset_lag=max(0, rep.offset_lag),
                        is_future_key=rep.is_future))
                results.append(r("DescribeLogDirsResult", error_code=ec(d.error_code),
                                 log_dir=f"storage-node-{node}:{d.path}",
                                 topics=tuple(r("DescribeLogDirsTopic", name=t, partitions=tuple(ps))
                                              for t, ps in sorted(topics.items())),
                                 total_bytes=d.total_bytes, usable_bytes=d.free_bytes,
                                 is_cordoned=False))
        return Done(r.response(throttle_time=_throttle(o), error_code=ErrorCode.none,
                               results=tuple(results)))
    body = admin_ops_pb2.DescribeLogDirsRequest(topics=sorted(wanted) if wanted else [])
    if wanted == {}:
        return finish(Outcome(body=admin_ops_pb2.DescribeLogDirsResponse()))
    return _one(Call(R.DESCRIBE_LOG_DIRS, body), finish)


# ---------------------------------------------------------------------------------------------
# DescribeAcls, CreateAcls, DeleteAcls (Kafka's numbers pass unchanged: acl.proto)

def _acl_filter(x) -> acl_pb2.AclBindingFilter:
    f = acl_pb2.AclBindingFilter(resource_type=x.resource_type_filter,
                                 pattern_type=getattr(x, "pattern_type_filter", 3),
                                 operation=x.operation, permission_type=x.permission_type)
    if x.resource_name_filter is not None:
        f.resource_name = x.resource_name_filter
    if x.principal_filter is not None:
        f.principal = x.principal_filter
    if x.host_filter is not None:
        f.host = x.host_filter
    return f


def describe_acls(req: kp.KafkaRequest, view: ClusterView) -> Step:
    r = _Resp(kp.DESCRIBE_ACLS, req.api_version)

    def finish(o: Outcome) -> Step:
        if not o.ok:
            return Done(r.response(throttle_time=ZERO_MS, error_code=ec(o.error_code),
                                   error_message=o.error_message or None, resources=()))
        x = o.body
        by: dict[tuple[int, str, int], list] = {}
        for a in x.bindings:
            by.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
                r("AclDescription", principal=a.principal, host=a.host, operation=a.operation,
                  permission_type=a.permission_type))
        return Done(r.response(
            throttle_time=_throttle(o), error_code=ec(x.error_code),
            error_message=x.error_message or None,
            resources=tuple(r("DescribeAclsResource", resource_type=t, resource_name=n,
                              pattern_type=pt, acls=tuple(acls))
                            for (t, n, pt), acls in by.items())))
    return _one(Call(R.DESCRIBE_ACLS, acl_pb2.DescribeAclsRequest(filter=_acl_filter(req.body))),
                finish)


def create_acls(req: kp.KafkaRequest, view: ClusterView) -> Step:
    r = _Resp(kp.CREATE_ACLS, req.api_version)
    creations = list(req.body.creations)
    body = acl_pb2.CreateAclsRequest(creations=[acl_pb2.AclBinding(
        resource_type=c.resource_type, resource_name=c.resource_name,
        pattern_type=getattr(c, "resource_pattern_type", 3), principal=c.principal,
        host=c.host, operation=c.operation, permission_type=c.permission_type)
        for c in creations])

    def finish(o: Outcome) -> Step:
        results = list(o.body.results) if o.ok else []
        out = []
        for i in range(len(creations)):
            if i < len(results):
                code, msg = results[i].error_code, results[i].error_message
            else:
                code = o.error_code or ErrorCode.unknown_server_error.value
                msg = o.error_message
            out.append(r("AclCreationResult", error_code=ec(code), error_message=msg or None))
        return Done(r.response(throttle_time=_throttle(o), results=tuple(out)))
    if not creations:
        return finish(Outcome(body=acl_pb2.CreateAclsResponse()))
    return _one(Call(R.CREATE_ACLS, body), finish)


def delete_acls(req: kp.KafkaRequest, view: ClusterView) -> Step:
    r = _Resp(kp.DELETE_ACLS, req.api_version)
    filters = list(req.body.filters)
    body = acl_pb2.DeleteAclsRequest(filters=[_acl_filter(f) for f in filters])

    def finish(o: Outcome) -> Step:
        results = list(o.body.results) if o.ok else []
        out = []
        for i in range(len(filters)):
            if i < len(results):
                x = results[i]
                code, msg, matching = x.error_code, x.error_message or None, x.matching
            else:
                code = o.error_code or ErrorCode.unknown_server_error.value
                msg, matching = o.error_message or None, ()
            out.append(r("DeleteAclsFilterResult", error_code=ec(code), error_message=msg,
                         matching_acls=tuple(r(
                             "DeleteAclsMatchingAcl", error_code=ec(code), error_message=msg,
                             resource_type=a.resource_type, resource_name=a.resource_name,
                             pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                             operation=a.operation, permission_type=a.permission_type)
                             for a in matching)))
        return Done(r.response(throttle_time=_throttle(o), filter_results=tuple(out)))
    if not filters:
        return finish(Outcome(body=acl_pb2.DeleteAclsResponse()))
    return _one(Call(R.DELETE_ACLS, body), finish)


_HANDLERS: dict[int, Callable[[kp.KafkaRequest, ClusterView], Step]] = {
    kp.API_VERSIONS: api_versions,
    kp.METADATA: metadata,
    kp.DESCRIBE_CLUSTER: describe_cluster,
    kp.PRODUCE: produce,
    kp.FETCH: fetch,
    kp.LIST_OFFSETS: list_offsets,
    kp.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    kp.INIT_PRODUCER_ID: init_producer_id,
    kp.FIND_COORDINATOR: find_coordinator,
    kp.JOIN_GROUP: join_group,
    kp.SYNC_GROUP: sync_group,
    kp.HEARTBEAT: heartbeat,
    kp.LEAVE_GROUP: leave_group,
    kp.DESCRIBE_GROUPS: describe_groups,
    kp.LIST_GROUPS: list_groups,
    kp.OFFSET_COMMIT: offset_commit,
    kp.OFFSET_FETCH: offset_fetch,
    kp.CREATE_TOPICS: create_topics,
    kp.DELETE_TOPICS: delete_topics,
    kp.CREATE_PARTITIONS: create_partitions,
    kp.DESCRIBE_CONFIGS: describe_configs,
    kp.SASL_HANDSHAKE: sasl_handshake,
    kp.SASL_AUTHENTICATE: sasl_authenticate,
    kp.DESCRIBE_USER_SCRAM_CREDENTIALS: user_scram_credentials,
    kp.ALTER_USER_SCRAM_CREDENTIALS: user_scram_credentials,
    kp.ALTER_CONFIGS: alter_configs,
    kp.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    kp.DELETE_RECORDS: delete_records,
    kp.OFFSET_DELETE: offset_delete,
    kp.DELETE_GROUPS: delete_groups,
    kp.ELECT_LEADERS: elect_leaders,
    kp.DESCRIBE_LOG_DIRS: describe_log_dirs,
    kp.DESCRIBE_ACLS: describe_acls,
    kp.CREATE_ACLS: create_acls,
    kp.DELETE_ACLS: delete_acls,
}
