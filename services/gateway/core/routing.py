"""Splitting PRODUCE / FETCH / LIST_OFFSETS / OFFSET_FOR_LEADER_EPOCH / DELETE_RECORDS by
partition leader, and merging the answers back.

    plan = split(api, body, payloads, cache)       # validates; raises InvalidRequestError
    for sub in plan.sub_requests:                  # one per leader, in first-use order
        forward(sub.endpoint, api, sub.body, sub.payloads)
    merged = merge(plan, {node_id: NodeReply(...)})  # the client's response + payload frames

Frames (header.proto): a PRODUCE request carries one payload frame per partition entry and a
FETCH response one per partition response, in order flattened over topic entries. A sub-request
keeps the client's entry order (a new topic entry whenever the topic changes), so the payloads
of a sub-request are the client's payload frames for its partitions, in the same order, as the
same objects (never copied or decoded). The client's response has one topic entry per request
topic entry and one partition entry per request partition entry, in request order; FETCH payload
frames follow that order (an empty frame for a partition answered with an error).

Bad input changes nothing and is never forwarded:
- request-level (frame count not matching the partitions, a FETCH/LIST_OFFSETS replica_id other
  than -1: followers talk to leaders directly): InvalidRequestError, an envelope error;
- per partition: an illegal topic name INVALID_TOPIC_EXCEPTION, a negative partition or a
  partition named twice INVALID_REQUEST, a negative fetch offset OFFSET_OUT_OF_RANGE, a
  LIST_OFFSETS timestamp below -2 INVALID_REQUEST, PRODUCE acks not in {-1, 0, 1}
  INVALID_REQUIRED_ACKS (every partition).
Partitions the cache cannot route get UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE, and
`plan.unknown_topics` names the topics worth a metadata refresh before trying again.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from riverbed import errors
from riverbed._proto.v1 import (
    delete_records_pb2, errors_pb2, fetch_pb2, header_pb2, list_offsets_pb2, produce_pb2,
)

from services.gateway.core.metadata_cache import MetadataCache, NoLeader
from services.gateway.core.topic_names import topic_name_error

E = errors_pb2.ErrorCode
ApiKey = header_pb2.ApiKey
CONSUMER_REPLICA_ID = -1
EARLIEST_TIMESTAMP = -2
EMPTY_PAYLOAD = b""


@dataclass(frozen=True, slots=True)
class Slot:
    """One partition entry of the client's request, in flattened request order."""
    topic_index: int          # which of the client's topic entries
    topic: str
    partition: int
    node_id: int              # the leader it is forwarded to; -1 when answered by the gateway
    error_code: int = E.NONE  # set when answered by the gateway
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class SubRequest:
    node_id: int
    endpoint: str
    body: Message
    payloads: tuple = ()      # the client's payload frames for these partitions, in order


@dataclass(frozen=True, slots=True)
class Plan:
    api: int
    topic_names: tuple[str, ...]        # the client's topic entries, in order
    slots: tuple[Slot, ...]
    sub_requests: tuple[SubRequest, ...]
    unknown_topics: tuple[str, ...]     # valid topics (or partitions) the cache does not know
    expects_response: bool              # False for acks=0 produce

    @property
    def forwarded_partitions(self) -> int:
        return sum(1 for s in self.slots if s.node_id >= 0)


@dataclass(frozen=True, slots=True)
class NodeReply:
    """A leader's answer: its response body and payload frames, or an error for all of its
    partitions (REQUEST_TIMED_OUT when it did not answer in time, an envelope error...)."""
    body: Message | None
    payloads: Sequence[Any] = ()
    error_code: int = E.NONE
    error_message: str = ""

    @classmethod
    def failed(cls, code: int, message: str) -> "NodeReply":
        return cls(None, (), code, message)


@dataclass(frozen=True, slots=True)
class Merged:
    body: Message
    payloads: list = field(default_factory=list)
    refresh_metadata: bool = False      # a node said the gateway's metadata is stale


# ---------------------------------------------------------------------------------------------
# per-API shapes

class _Shape:
    api: int
    request_type: type[Message]
    response_type: type[Message]
    request_payloads = False            # one request payload frame per partition entry
    response_payloads = False           # one response payload frame per partition response

    def check_request(self, body: Any, n_partitions: int, n_payloads: int) -> None:
        want = n_partitions if self.request_payloads else 0
        if n_payloads != want:
            raise errors.InvalidRequestError(
                f"{ApiKey.Name(self.api)} with {n_partitions} partition entries carries "
                f"{n_payloads} payload frames; expected {want}")

    def request_error(self, body: Any) -> tuple[int, str] | None:
        return None

    def partition_error(self, body: Any, part: Any) -> tuple[int, str] | None:
        return None

    def new_sub(self, body: Any) -> Any:
        raise NotImplementedError

    def finish(self, sub: Any, n_subs: int) -> None:
        pass

    def error_partition(self, partition: int, code: int, message: str) -> Any:
        raise NotImplementedError

    def expects_response(self, body: Any) -> bool:
        return True


class _Produce(_Shape):
    api = ApiKey.PRODUCE
    request_type = produce_pb2.ProduceRequest
    response_type = produce_pb2.ProduceResponse
    request_payloads = True

    def request_error(self, body):
        if body.acks not in (-1, 0, 1):
            return E.INVALID_REQUIRED_ACKS, f"acks={body.acks}: expected -1, 0 or 1"
        return None

    def new_sub(self, body):
        return produce_pb2.ProduceRequest(acks=body.acks, timeout_ms=body.timeout_ms,
                                          transactional_id=body.transactional_id)

    def error_partition(self, partition, code, message):
        return produce_pb2.ProducePartitionResponse(
            partition=partition, error_code=code, error_message=message, base_offset=-1,
            log_append_time_ms=-1, log_start_offset=-1)

    def expects_response(self, body):
        return body.acks != 0


class _Fetch(_Shape):
    api = ApiKey.FETCH
    request_type = fetch_pb2.FetchRequest
    response_type = fetch_pb2.FetchResponse
    response_payloads = True

    def check_request(self, body, n_partitions, n_payloads):
        super().check_request(body, n_partitions, n_payloads)
        if body.replica_id != CONSUMER_REPLICA_ID:
            raise errors.InvalidRequestError(
                f"FETCH through a gateway must have replica_id -1, got {body.replica_id} "
                "(followers fetch from their leader directly)")

    def partition_error(self, body, part):
        if part.fetch_offset < 0:
            return E.OFFSET_OUT_OF_RANGE, f"fetch offset {part.fetch_offset} is negative"
        return None

    def new_sub(self, body):
        # Consumers fetch without a session (KIP-227's session_epoch -1): only followers'
        # replica fetches keep incremental fetch sessions with their leaders.
        return fetch_pb2.FetchRequest(replica_id=body.replica_id, max_wait_ms=body.max_wait_ms,
                                      min_bytes=body.min_bytes, max_bytes=body.max_bytes,
                                      isolation_level=body.isolation_level, session_epoch=-1)

    def finish(self, sub, n_subs):
        # max_bytes bounds the whole response: share it among the leaders (each still returns
        # at least one batch, as Kafka does, so progress is never blocked).
        if sub.max_bytes and n_subs > 1:
            sub.max_bytes = max(1, -(-sub.max_bytes // n_subs))

    def error_partition(self, partition, code, message):
        return fetch_pb2.FetchPartitionResponse(
            partition=partition, error_code=code, error_message=message, high_watermark=-1,
            last_stable_offset=-1, log_start_offset=-1, log_end_offset=-1, leader_epoch=-1,
            diverging_epoch=-1, diverging_end_offset=-1)


class _ListOffsets(_Shape):
    api = ApiKey.LIST_OFFSETS
    request_type = list_offsets_pb2.ListOffsetsRequest
    response_type = list_offsets_pb2.ListOffsetsResponse

    def check_request(self, body, n_partitions, n_payloads):
        super().check_request(body, n_partitions, n_payloads)
        if body.replica_id != CONSUMER_REPLICA_ID:
            raise errors.InvalidRequestError(
                f"LIST_OFFSETS through a gateway must have replica_id -1, got {body.replica_id}")

    def partition_error(self, body, part):
        if part.timestamp < EARLIEST_TIMESTAMP:
            return (E.INVALID_REQUEST,
                    f"timestamp {part.timestamp}: expected -2 (earliest), -1 (latest) or >= 0")
        return None

    def new_sub(self, body):
        return list_offsets_pb2.ListOffsetsRequest(replica_id=body.replica_id,
                                                   isolation_level=body.isolation_level)

    def error_partition(self, partition, code, message):
        return list_offsets_pb2.ListOffsetsPartitionResponse(
            partition=partition, error_code=code, error_message=message, timestamp=-1,
            offset=-1, leader_epoch=-1)


class _OffsetForLeaderEpoch(_Shape):
    api = ApiKey.OFFSET_FOR_LEADER_EPOCH
    request_type = list_offsets_pb2.OffsetForLeaderEpochRequest
    response_type = list_offsets_pb2.OffsetForLeaderEpochResponse

    def check_request(self, body, n_partitions, n_payloads):
        super().check_request(body, n_partitions, n_payloads)
        if body.replica_id != CONSUMER_REPLICA_ID:
            raise errors.InvalidRequestError(
                "OFFSET_FOR_LEADER_EPOCH through a gateway must have replica_id -1, got "
                f"{body.replica_id}")

    def partition_error(self, body, part):
        if part.leader_epoch < 0:
            return E.INVALID_REQUEST, f"leader epoch {part.leader_epoch} is negative"
        return None

    def new_sub(self, body):
        return list_offsets_pb2.OffsetForLeaderEpochRequest(replica_id=body.replica_id)

    def error_partition(self, partition, code, message):
        return list_offsets_pb2.OffsetForLeaderEpochPartitionResponse(
            partition=partition, error_code=code, error_message=message, leader_epoch=-1,
            end_offset=-1)


class _DeleteRecords(_Shape):
    api = ApiKey.DELETE_RECORDS
    request_type = delete_records_pb2.DeleteRecordsRequest
    response_type = delete_records_pb2.DeleteRecordsResponse

    def partition_error(self, body, part):
        if part.offset < -1:
            return (E.OFFSET_OUT_OF_RANGE,
                    f"offset {part.offset}: expected -1 (the high watermark) or an offset")
        return None

    def new_sub(self, body):
        return delete_records_pb2.DeleteRecordsRequest(timeout_ms=body.timeout_ms)

    def error_partition(self, partition, code, message):
        return delete_records_pb2.DeleteRecordsPartitionResponse(
            partition=partition, error_code=code, error_message=message, low_watermark=-1)


SHAPES: dict[int, _Shape] = {s.api: s for s in (_Produce(), _Fetch(), _ListOffsets(),
                                                  _OffsetForLeaderEpoch(), _DeleteRecords())}
ROUTED_APIS = frozenset(SHAPES)


# ---------------------------------------------------------------------------------------------
# split

class _SubBuilder:
    __slots__ = ("node_id", "endpoint", "body", "payloads", "_last_topic")

    def __init__(self, node_id: int, endpoint: str, body: Any):
        self.node_id = node_id
        self.endpoint = endpoint
        self.body = body
        self.payloads: list = []
        self._last_topic: str | None = None

    def add(self, topic: str, part: Any, payload: Any, with_payload: bool) -> None:
        if self._last_topic != topic or not self.body.topics:
            self.body.topics.add(name=topic)
            self._last_topic = topic
        self.body.topics[-1].partitions.add().CopyFrom(part)
        if with_payload:
            self.payloads.append(payload)


def split(api: int, body: Any, payloads: Sequence[Any], cache: MetadataCache,
          denied_topics: frozenset[str] = frozenset(),
          refused: tuple[int, str] | None = None) -> Plan:
    """Validate a client's request and split it per partition leader (see the module doc).
    Raises errors.InvalidRequestError for a request that cannot be answered per partition.
    Partitions of `denied_topics` (the ACLs refuse them, core/authorization.py) are answered
    TOPIC_AUTHORIZATION_FAILED and never forwarded, whether or not the topic exists; with
    `refused` (code, message) every partition is answered that and nothing is forwarded."""
    shape = SHAPES.get(api)
    if shape is None:
        raise errors.InvalidRequestError(f"api {api} is not routed to partition leaders")
    n_partitions = sum(len(t.partitions) for t in body.topics)
    shape.check_request(body, n_partitions, len(payloads))
    request_error = shape.request_error(body) or refused

    slots: list[Slot] = []
    subs: dict[int, _SubBuilder] = {}
    unknown: list[str] = []
    seen: set[tuple[str, int]] = set()
    flat = 0
    for ti, topic in enumerate(body.topics):
        name = topic.name
        name_error = topic_name_error(name)
        for part in topic.partitions:
            payload = payloads[flat] if shape.request_payloads else None
            flat += 1
            pid = part.partition
            err = request_error
            if err is None and name_error is not None:
                err = (E.INVALID_TOPIC_EXCEPTION, name_error)
            if err is None and name in denied_topics:
                err = (E.TOPIC_AUTHORIZATION_FAILED, f"not authorized to access topic {name!r}")
            if err is None and pid < 0:
                err = (E.INVALID_REQUEST, f"partition {pid} is negative")
            if err is None and (name, pid) in seen:
                err = (E.INVALID_REQUEST, f"{name}-{pid} appears more than once in the request")
            if err is None:
                err = shape.partition_error(body, part)
            seen.add((name, pid))
            route = None
            if err is None:
                route = cache.leader_for(name, pid)
                if isinstance(route, NoLeader):
                    err = (route.error_code, route.message)
                    if route.error_code == E.UNKNOWN_TOPIC_OR_PARTITION and name not in unknown:
                        unknown.append(name)
            if err is not None:
                slots.append(Slot(ti, name, pid, -1, err[0], err[1]))
                continue
            sb = subs.get(route.node_id)
            if sb is None:
                sb = subs[route.node_id] = _SubBuilder(route.node_id, route.endpoint,
                                                       shape.new_sub(body))
            sb.add(name, part, payload, shape.request_payloads)
            slots.append(Slot(ti, name, pid, route.node_id))

    for sb in subs.values():
        shape.finish(sb.body, len(subs))
    return Plan(api=api, topic_names=tuple(t.name for t in body.topics), slots=tuple(slots),
                sub_requests=tuple(SubRequest(sb.node_id, sb.endpoint, sb.body, tuple(sb.payloads))
                                   for sb in subs.values()),
                unknown_topics=tuple(unknown), expects_response=shape.expects_response(body))


# ---------------------------------------------------------------------------------------------
# merge

def _refreshes(code: int) -> bool:
    return code != E.NONE and errors.error_class(code).refresh_metadata


def _index_reply(shape: _Shape, reply: NodeReply) -> tuple[dict, str | None]:
    """(topic, partition) -> (partition response, payload) for one leader's answer, or the
    reason the answer is unusable."""
    body = reply.body
    if body is None or not isinstance(body, shape.response_type):
        return {}, "the leader's answer has no response body"
    entries = [(t.name, p) for t in body.topics for p in t.partitions]
    n_payloads = len(reply.payloads)
    want = len(entries) if shape.response_payloads else 0
    if shape.response_payloads and n_payloads != want:
        return {}, (f"the leader answered {len(entries)} partitions with {n_payloads} "
                    "payload frames")
    index: dict = {}
    for i, (name, p) in enumerate(entries):
        payload = reply.payloads[i] if shape.response_payloads else None
        index.setdefault((name, p.partition), (p, payload))
    return index, None


def merge(plan: Plan, replies: Mapping[int, NodeReply]) -> Merged:
    """The client's response from the leaders' answers; a leader missing from `replies` counts
    as REQUEST_TIMED_OUT for its partitions."""
    shape = SHAPES[plan.api]
    indexes: dict[int, dict] = {}
    failures: dict[int, tuple[int, str]] = {}
    throttle_ms = 0
    for node_id in {s.node_id for s in plan.sub_requests}:
        reply = replies.get(node_id)
        if reply is None:
            failures[node_id] = (E.REQUEST_TIMED_OUT, f"node {node_id} did not answer in time")
            continue
        if reply.error_code != E.NONE:
            failures[node_id] = (reply.error_code, reply.error_message)
            continue
        index, problem = _index_reply(shape, reply)
        if problem is not None:
            failures[node_id] = (E.UNKNOWN_SERVER_ERROR, f"node {node_id}: {problem}")
            continue
        indexes[node_id] = index
        throttle_ms = max(throttle_ms, getattr(reply.body, "throttle_time_ms", 0))

    resp = shape.response_type()
    if throttle_ms and "throttle_time_ms" in resp.DESCRIPTOR.fields_by_name:
        resp.throttle_time_ms = throttle_ms
    for name in plan.topic_names:
        resp.topics.add(name=name)
    payloads: list = []
    refresh = False
    for slot in plan.slots:
        payload: Any = EMPTY_PAYLOAD
        if slot.node_id < 0:
            pr = shape.error_partition(slot.partition, slot.error_code, slot.error_message)
            refresh |= slot.error_code == E.LEADER_NOT_AVAILABLE
        elif slot.node_id in failures:
            code, message = failures[slot.node_id]
            pr = shape.error_partition(slot.partition, code, message)
            refresh |= _refreshes(code)
        else:
            found = indexes[slot.node_id].get((slot.topic, slot.partition))
            if found is None:
                pr = shape.error_partition(
                    slot.partition, E.UNKNOWN_SERVER_ERROR,
                    f"node {slot.node_id} did not answer for {slot.topic}-{slot.partition}")
            else:
                pr, payload = found
                refresh |= _refreshes(pr.error_code)
        resp.topics[slot.topic_index].partitions.add().CopyFrom(pr)
        if shape.response_payloads:
            payloads.append(EMPTY_PAYLOAD if payload is None else payload)
    return Merged(resp, payloads, refresh)


def forward_timeout_ms(api: int, body: Any, header_timeout_ms: int, request_timeout_ms: int) -> int:
    """How long the gateway waits for a leader. The client's header timeout when it gave one,
    less a fifth so the gateway answers (per partition) before the client gives up; otherwise
    request.timeout.ms plus what the request itself may wait (FETCH and HEARTBEAT max_wait_ms,
    PRODUCE acks=-1 timeout_ms, an admin request's timeout_ms)."""
    if header_timeout_ms > 0:
        return max(1, header_timeout_ms - header_timeout_ms // 5)
    extra = 0
    if api in (ApiKey.FETCH, ApiKey.HEARTBEAT):
        extra = body.max_wait_ms
    elif api == ApiKey.PRODUCE:
        extra = body.timeout_ms if body.acks == -1 else 0
    elif "timeout_ms" in body.DESCRIPTOR.fields_by_name:   # admin: wait for leaders, at most
        extra = body.timeout_ms
    return request_timeout_ms + extra
