"""What each client API needs from the ACLs, and the answers for what is denied (pure).

The gateway is where client principals are seen (it forwards to storage nodes, the controller
and the coordinators under its own service principal), so every client-facing check is made
here, before anything is forwarded: a denied part of a request is never sent anywhere and
changes nothing. `may(operation, resource_type, name) -> bool` is the caller's principal and
host bound to the current Authorizer.

| API | needs (Kafka's) | when denied |
|---|---|---|
| PRODUCE | Write topic; with a transactional id (Kafka clients') Write on it | TOPIC_AUTHORIZATION_FAILED per partition, the rest is written; TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition |
| FETCH | Read topic | same, per partition |
| LIST_OFFSETS | Describe topic | same |
| OFFSET_FOR_LEADER_EPOCH | Describe topic | same |
| DELETE_RECORDS | Delete topic | same |
| METADATA | Describe topic; auto-creation: Create cluster or topic | unlisted (all topics) or TOPIC_AUTHORIZATION_FAILED (named); no auto-creation |
| CREATE_TOPICS | Create cluster or Create topic | TOPIC_AUTHORIZATION_FAILED per topic |
| DELETE_TOPICS / CREATE_PARTITIONS | Delete / Alter topic | per topic |
| DESCRIBE_CONFIGS / ALTER_CONFIGS | DescribeConfigs / AlterConfigs topic | per topic |
| ELECT_LEADERS, ALTER/LIST_PARTITION_REASSIGNMENTS | Alter / Alter / Describe cluster | CLUSTER_AUTHORIZATION_FAILED (whole request) |
| DESCRIBE_LOG_DIRS, ALTER_REPLICA_LOG_DIRS | Describe / Alter cluster | CLUSTER_AUTHORIZATION_FAILED (whole request) |
| DESCRIBE_ACLS, CREATE_ACLS / DELETE_ACLS | Describe / Alter cluster | CLUSTER_AUTHORIZATION_FAILED (whole request) |
| INIT_PRODUCER_ID | IdempotentWrite cluster, or Write on some topic (KIP-679); with a transactional id Write on it | CLUSTER_AUTHORIZATION_FAILED / TRANSACTIONAL_ID_AUTHORIZATION_FAILED |
| ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT, DESCRIBE/LIST_TRANSACTIONS | see core/txn_routing.py (Kafka's) | TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ... |
| FIND_COORDINATOR, JOIN/SYNC/HEARTBEAT/LEAVE_GROUP | Describe / Read group | GROUP_AUTHORIZATION_FAILED |
| OFFSET_COMMIT | Read group, Read topic | GROUP_… whole; TOPIC_… per partition (the rest commits) |
| OFFSET_FETCH | Describe group, Describe topic | GROUP_… whole; topics: per partition (named) or unlisted (all) |
| OFFSET_DELETE | Delete group, Read topic | as OFFSET_COMMIT |
| DELETE_GROUPS | Delete group | GROUP_AUTHORIZATION_FAILED per group |
| DESCRIBE_GROUPS | Describe group | GROUP_AUTHORIZATION_FAILED per group |
| LIST_GROUPS | Describe cluster, else Describe group | only the groups the principal may describe |

DESCRIBE_CLUSTER answers what METADATA's header already tells anyone (nodes, gateways) and is
not checked.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from riverbed._proto.v1 import (
    controller_pb2,
    errors_pb2,
    group_pb2,
    header_pb2,
    metadata_pb2,
    offset_pb2,
    producer_id_pb2,
)
from services.common.acl.authorizer import CLUSTER_NAME, Operation, ResourceType

ApiKey = header_pb2.ApiKey
E = errors_pb2.ErrorCode
O = Operation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TOPIC_DENIED = E.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = E.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = E.CLUSTER_AUTHORIZATION_FAILED

May = Callable[[Operation, ResourceType, str], bool]
MayAny = Callable[[Operation, ResourceType], bool]

ROUTED_TOPIC_OPS = {ApiKey.PRODUCE: O.WRITE, ApiKey.FETCH: O.READ, ApiKey.LIST_OFFSETS: O.DESCRIBE,
                    ApiKey.OFFSET_FOR_LEADER_EPOCH: O.DESCRIBE, ApiKey.DELETE_RECORDS: O.DELETE}
# admin api -> (operation on each topic, the request's repeated field, is it a list of names)
ADMIN_TOPIC_OPS = {
    ApiKey.CREATE_TOPICS: (O.CREATE, "topics", False),
    ApiKey.DELETE_TOPICS: (O.DELETE, "names", True),
    ApiKey.CREATE_PARTITIONS: (O.ALTER, "topics", False),
    ApiKey.ALTER_CONFIGS: (O.ALTER_CONFIGS, "topics", False),
    ApiKey.DESCRIBE_CONFIGS: (O.DESCRIBE_CONFIGS, "topics", True),
}
CLUSTER_OPS = {ApiKey.ELECT_LEADERS: O.ALTER, ApiKey.ALTER_PARTITION_REASSIGNMENTS: O.ALTER,
               ApiKey.LIST_PARTITION_REASSIGNMENTS: O.DESCRIBE,
               # KIP-113, as Kafka: describing log dirs is Describe, moving replicas Alter
               ApiKey.DESCRIBE_LOG_DIRS: O.DESCRIBE, ApiKey.ALTER_REPLICA_LOG_DIRS: O.ALTER,
               # Kafka's: describing ACLs is Describe on the cluster, changing them Alter
               ApiKey.DESCRIBE_ACLS: O.DESCRIBE, ApiKey.CREATE_ACLS: O.ALTER,
               ApiKey.DELETE_ACLS: O.ALTER}
GROUP_OPS = {ApiKey.JOIN_GROUP: O.READ, ApiKey.SYNC_GROUP: O.READ, ApiKey.HEARTBEAT: O.READ,
             ApiKey.LEAVE_GROUP: O.READ, ApiKey.OFFSET_COMMIT: O.READ,
             ApiKey.OFFSET_FETCH: O.DESCRIBE, ApiKey.OFFSET_DELETE: O.DELETE}
# offset api -> the operation needed on each topic named
OFFSET_TOPIC_OPS = {ApiKey.OFFSET_COMMIT: O.READ, ApiKey.OFFSET_FETCH: O.DESCRIBE,
                    ApiKey.OFFSET_DELETE: O.READ}


def denied_message(what: str, name: str, operation: Operation) -> str:
    return f"not authorized to {operation.value} {what} {name!r}"


# --- PRODUCE / FETCH / LIST_OFFSETS ------------------------------------------------------------

def denied_routed_topics(api: int, body, may: May) -> frozenset[str]:
    op = ROUTED_TOPIC_OPS[api]
    return frozenset(t.name for t in body.topics if not may(op, TOPIC, t.name))


def routed_request_denied(api: int, body, may: May) -> tuple[int, str] | None:
    """The error every partition gets when the request as a whole is refused: a PRODUCE naming
    a transactional id needs Write on it (Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    tid = getattr(body, "transactional_id", "") if api == ApiKey.PRODUCE else ""
    if tid and not may(O.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                denied_message("transactional id", tid, O.WRITE))
    return None


# --- METADATA ----------------------------------------------------------------------------------

def may_create_topic(may: May, name: str) -> bool:
    return may(O.CREATE, CLUSTER, CLUSTER_NAME) or may(O.CREATE, TOPIC, name)


def metadata_request(body: metadata_pb2.MetadataRequest, may: May,
                     missing: Iterable[str]) -> metadata_pb2.MetadataRequest:
    """The request to forward: without auto-creation unless the principal may create (and
    describe) every missing topic."""
    if not body.allow_auto_topic_creation:
        return body
    if all(may_create_topic(may, t) and may(O.DESCRIBE, TOPIC, t) for t in missing):
        return body
    out = metadata_pb2.MetadataRequest()
    out.CopyFrom(body)
    out.allow_auto_topic_creation = False
    return out


def filter_metadata(resp: metadata_pb2.MetadataResponse, body: metadata_pb2.MetadataRequest,
                    may: May) -> metadata_pb2.MetadataResponse:
    """Hide topics the principal may not Describe (all topics) or answer them
    TOPIC_AUTHORIZATION_FAILED (named topics, whether or not they exist: Kafka never tells an
    unauthorized client which topics exist)."""
    if all(may(O.DESCRIBE, TOPIC, t.name) for t in resp.topics):
        return resp
    out = metadata_pb2.MetadataResponse()
    out.CopyFrom(resp)
    del out.topics[:]
    for t in resp.topics:
        if may(O.DESCRIBE, TOPIC, t.name):
            out.topics.append(t)
        elif body.topics:
            out.topics.add(name=t.name, error_code=TOPIC_DENIED,
                           error_message=denied_message("topic", t.name, O.DESCRIBE))
    return out


# --- admin ------------------------------------------------------------------------------------

def cluster_denied(api: int, may: May) -> str | None:
    op = CLUSTER_OPS.get(api)
    if op is not None and not may(op, CLUSTER, CLUSTER_NAME):
        return denied_message("the cluster", CLUSTER_NAME, op)
    return None


def _may_admin(api: int, op: Operation, may: May, name: str) -> bool:
    if api == ApiKey.CREATE_TOPICS:
        return may_create_topic(may, name)
    return may(op, TOPIC, name)


def split_admin(api: int, body, may: May):
    """(the request to forward, or None when nothing is left; the denied topic names in request
    order). DESCRIBE_CONFIGS with no topics means every topic: forwarded whole, filtered after."""
    op, field, names_only = ADMIN_TOPIC_OPS[api]
    items = getattr(body, field)
    names = [x if names_only else x.name for x in items]
    denied = [n for n in dict.fromkeys(names) if not _may_admin(api, op, may, n)]
    if not denied:
        return body, []
    out = type(body)()
    out.CopyFrom(body)
    kept = [x for x, n in zip(items, names) if n not in denied]
    del getattr(out, field)[:]
    if names_only:
        getattr(out, field).extend(kept)
    else:
        for x in kept:
            getattr(out, field).add().CopyFrom(x)
    return (out if kept else None), denied


def admin_response(api: int, forwarded, denied: list[str], may: May):
    """The client's answer: the controller's (or an empty one) plus a denial per denied topic;
    DESCRIBE_CONFIGS of every topic keeps only what the principal may describe."""
    op = ADMIN_TOPIC_OPS[api][0]
    if api == ApiKey.DESCRIBE_CONFIGS:
        resp = controller_pb2.DescribeConfigsResponse()
        if forwarded is not None:
            resp.results.extend(r for r in forwarded.results if may(op, TOPIC, r.topic))
        for name in denied:
            resp.results.add(topic=name, error_code=TOPIC_DENIED,
                             error_message=denied_message("topic", name, op))
        return resp
    resp = type(forwarded)() if forwarded is not None else _ADMIN_RESPONSES[api]()
    if forwarded is not None:
        resp.CopyFrom(forwarded)
    for name in denied:
        resp.topics.add(name=name, error_code=TOPIC_DENIED,
                        error_message=denied_message("topic", name, op))
    return resp


_ADMIN_RESPONSES = {ApiKey.CREATE_TOPICS: controller_pb2.CreateTopicsResponse,
                    ApiKey.DELETE_TOPICS: controller_pb2.DeleteTopicsResponse,
                    ApiKey.CREATE_PARTITIONS: controller_pb2.CreatePartitionsResponse,
                    ApiKey.ALTER_CONFIGS: controller_pb2.AlterConfigsResponse}


def init_producer_id_denied(body: producer_id_pb2.InitProducerIdRequest, may: May,
                            may_any: MayAny) -> producer_id_pb2.InitProducerIdResponse | None:
    if body.transactional_id:
        if may(O.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            return None
        what = f"transactional id {body.transactional_id!r}"
    elif may(O.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME) or may_any(O.WRITE, TOPIC):
        return None
    else:
        what = "an idempotent producer id (IdempotentWrite on the cluster or Write on a topic)"
    return producer_id_pb2.InitProducerIdResponse(
        error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if body.transactional_id
        else CLUSTER_DENIED, error_message=f"not authorized to get {what}",
        producer_id=-1, producer_epoch=-1)


# --- groups and offsets --------------------------------------------------------------------------

def group_denied(api: int, body, may: May) -> str | None:
    """The message when the group itself is denied (the whole request), else None."""
    if api == ApiKey.FIND_COORDINATOR:      # GROUP and OFFSETS keys are both group ids
        if body.key and not may(O.DESCRIBE, GROUP, body.key):
            return denied_message("group", body.key, O.DESCRIBE)
        return None
    op = GROUP_OPS[api]
    if body.group_id and not may(op, GROUP, body.group_id):
        return denied_message("group", body.group_id, op)
    return None


def split_offsets(api: int, body, may: May):
    """(the request to forward, or None when every named topic is denied; denied topic names).
    An OFFSET_FETCH naming no topic (all of the group's) is forwarded whole and filtered after."""
    op = OFFSET_TOPIC_OPS[api]
    denied = [n for n in dict.fromkeys(t.name for t in body.topics) if not may(op, TOPIC, n)]
    if not denied:
        return body, []
    out = type(body)()
    out.CopyFrom(body)
    del out.topics[:]
    for t in body.topics:
        if t.name not in denied:
            out.topics.add().CopyFrom(t)
    return (out if out.topics else None), denied


def offsets_response(api: int, request, forwarded, denied: list[str], may: May):
    """The forwarded answer (or an empty one) plus TOPIC_AUTHORIZATION_FAILED for every partition
    of a denied topic; an OFFSET_FETCH of all topics keeps only those the principal may describe."""
    op = OFFSET_TOPIC_OPS[api]
    resp = _OFFSET_RESPONSES[api]()
    if forwarded is not None:
        resp.CopyFrom(forwarded)
    if api == ApiKey.OFFSET_FETCH and not request.topics:
        kept = [t for t in resp.topics if may(op, TOPIC, t.name)]
        del resp.topics[:]
        for t in kept:
            resp.topics.add().CopyFrom(t)
        return resp
    for t in request.topics:
        if t.name not in denied:
            continue
        tr = resp.topics.add(name=t.name)
        msg = denied_message("topic", t.name, op)
        if api == ApiKey.OFFSET_COMMIT:
            for p in t.partitions:
                tr.partitions.add(partition_index=p.partition_index, error_code=TOPIC_DENIED,
                                  error_message=msg)
        elif api == ApiKey.OFFSET_FETCH:
            for p in t.partition_indexes:
                tr.partitions.add(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                  error_code=TOPIC_DENIED, error_message=msg)
        else:
            for p in t.partition_indexes:
                tr.partitions.add(partition_index=p, error_code=TOPIC_DENIED, error_message=msg)
    return resp


_OFFSET_RESPONSES = {ApiKey.OFFSET_COMMIT: offset_pb2.OffsetCommitResponse,
                     ApiKey.OFFSET_FETCH: offset_pb2.OffsetFetchResponse,
                     ApiKey.OFFSET_DELETE: offset_pb2.OffsetDeleteResponse}


def split_described(groups: Iterable[str], may: May) -> tuple[list[str], list[str]]:
    allowed: list[str] = []
    denied: list[str] = []
    for g in groups:
        (allowed if may(O.DESCRIBE, GROUP, g) else denied).append(g)
    return allowed, denied


def filter_listed(resp: group_pb2.ListGroupsResponse, may: May) -> group_pb2.ListGroupsResponse:
    if may(O.DESCRIBE, CLUSTER, CLUSTER_NAME):
        return resp
    out = group_pb2.ListGroupsResponse(error_code=resp.error_code, error_message=resp.error_message)
    out.groups.extend(g for g in resp.groups if may(O.DESCRIBE, GROUP, g.group_id))
    return out


__all__ = ["denied_routed_topics", "metadata_request", "filter_metadata", "cluster_denied",
           "split_admin", "admin_response", "init_producer_id_denied", "group_denied",
           "split_offsets", "offsets_response", "split_described", "filter_listed"]
