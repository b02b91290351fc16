"""Routing of the group and offset APIs (pure): which sharded role serves an API, the owner
table read from ZooKeeper, error answers built at the gateway, and the merges.

- JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, DESCRIBE_GROUPS: the group coordinator that
  owns shard(group) (`/riverbed/group_coordinators/shards/<s>`);
- OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE: the offset manager that owns shard(group)
  (`/riverbed/offset_managers/shards/<s>`);
- LIST_GROUPS: every live group coordinator (`/riverbed/group_coordinators/ids`), merged;
- FIND_COORDINATOR: answered by the gateway itself (clients keep talking to gateways).

shard(group) = riverbed.coordinator.offsets_topic.partition_for(group, partitions of
__consumer_offsets) — the partition count comes from the metadata cache, so gateways need no
config of their own for it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from riverbed import errors
from riverbed._proto.v1 import group_pb2, header_pb2, offset_pb2
from riverbed.wire.apis import APIS

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode

GROUP_COORDINATOR = "group_coordinator"
OFFSET_MANAGER = "offset_manager"

# api -> the role owning the group's shard
PER_GROUP_APIS: dict[int, str] = {
    ApiKey.JOIN_GROUP: GROUP_COORDINATOR, ApiKey.SYNC_GROUP: GROUP_COORDINATOR,
    ApiKey.HEARTBEAT: GROUP_COORDINATOR, ApiKey.LEAVE_GROUP: GROUP_COORDINATOR,
    ApiKey.OFFSET_COMMIT: OFFSET_MANAGER, ApiKey.OFFSET_FETCH: OFFSET_MANAGER,
    ApiKey.OFFSET_DELETE: OFFSET_MANAGER,
}
# Whole-request errors after which the gateway re-reads the owners and tries once more.
REROUTE_CODES = frozenset({E.NOT_COORDINATOR})


def error_body(api: int, request, code: int, message: str):
    """The response to `request` answering `code` everywhere a client looks for it (the
    top-level error_code, and per partition for the offset APIs)."""
    resp = APIS[api].response_type()
    if api == ApiKey.DESCRIBE_GROUPS:
        for gid in request.groups:
            resp.groups.add(group_id=gid, error_code=code, error_message=message)
        return resp
    resp.error_code = code
    resp.error_message = message
    if api == ApiKey.JOIN_GROUP:
        resp.generation_id = -1
        resp.member_id = request.member_id
    elif api == ApiKey.OFFSET_COMMIT:
        for t in request.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partitions:
                tr.partitions.add(partition_index=p.partition_index, error_code=code,
                                  error_message=message)
    elif api == ApiKey.OFFSET_FETCH:
        for t in request.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partition_indexes:
                tr.partitions.add(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                  error_code=code, error_message=message)
    elif api == ApiKey.OFFSET_DELETE:
        for t in request.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partition_indexes:
                tr.partitions.add(partition_index=p, error_code=code, error_message=message)
    return resp


def fit_heartbeat_wait(request: group_pb2.HeartbeatRequest,
                       forward_timeout_ms: int) -> group_pb2.HeartbeatRequest:
    """The HEARTBEAT to forward: its max_wait_ms (how long the coordinator may hold it) capped at
    half the gateway's own wait for the answer, so a held heartbeat is answered by the
    coordinator, never timed out here (a client whose header timeout leaves too little room gets
    a shorter hold, not COORDINATOR_NOT_AVAILABLE). The request itself when it fits."""
    cap = forward_timeout_ms // 2
    if request.max_wait_ms <= cap:
        return request
    fitted = group_pb2.HeartbeatRequest()
    fitted.CopyFrom(request)
    fitted.max_wait_ms = max(cap, 0)
    return fitted


def group_of(api: int, request) -> str:
    return request.group_id


def merge_described(groups: Sequence[str], answers: Mapping[str, group_pb2.DescribedGroup]
                    ) -> group_pb2.DescribeGroupsResponse:
    """DESCRIBE_GROUPS answer in request order from per-group answers (missing: not available)."""
    resp = group_pb2.DescribeGroupsResponse()
    for gid in groups:
        d = answers.get(gid)
        if d is None:
            resp.groups.add(group_id=gid, error_code=E.COORDINATOR_NOT_AVAILABLE,
                            error_message="no group coordinator answered for this group")
        else:
            resp.groups.add().CopyFrom(d)
    return resp


def merge_listed(answers: Sequence[group_pb2.ListGroupsResponse | tuple[int, str]]
                 ) -> group_pb2.ListGroupsResponse:
    """LIST_GROUPS over every coordinator: the union of the groups; the first error (an
    instance's, or (code, message) for one that did not answer) is kept so the caller knows the
    list may be partial."""
    resp = group_pb2.ListGroupsResponse()
    seen: set[str] = set()
    if not answers:
        resp.error_code = E.COORDINATOR_NOT_AVAILABLE
        resp.error_message = "no live group coordinator"
        return resp
    for a in answers:
        if isinstance(a, tuple):
            code, msg = a
            groups = ()
        else:
            code, msg = a.error_code, a.error_message
            groups = a.groups
        if code != E.NONE and resp.error_code == E.NONE:
            resp.error_code, resp.error_message = code, msg
        for g in groups:
            if g.group_id not in seen:
                seen.add(g.group_id)
                resp.groups.add().CopyFrom(g)
    resp.groups.sort(key=lambda g: g.group_id)
    return resp


def find_coordinator_error(request: group_pb2.FindCoordinatorRequest) -> tuple[int, str] | None:
    if request.key_type not in (group_pb2.COORDINATOR_TYPE_UNSPECIFIED, group_pb2.GROUP,
                                group_pb2.OFFSETS):
        return E.INVALID_REQUEST, "only GROUP and OFFSETS coordinators exist"
    if not request.key:
        return E.INVALID_GROUP_ID, "empty key"
    return None


def find_coordinator_role(request: group_pb2.FindCoordinatorRequest) -> str:
    return OFFSET_MANAGER if request.key_type == group_pb2.OFFSETS else GROUP_COORDINATOR


__all__ = ["PER_GROUP_APIS", "REROUTE_CODES", "GROUP_COORDINATOR", "OFFSET_MANAGER", "error_body",
           "merge_described", "merge_listed", "find_coordinator_error", "find_coordinator_role",
           "offset_pb2"]
