"""The group coordinator core's admin requests: DescribeGroups, ListGroups, DeleteGroups and
FindCoordinator.

A mixin of GroupCoordinatorCore (core/coordinator.py), split out of it along this seam; it never
imports core.coordinator. Pure, like the core. Describe and List read the groups of the loaded
shards; DeleteGroups writes an Empty group's tombstone and answers once every asked group's
tombstone is written (`_DeleteRequest`); FindCoordinator names this coordinator for the
shards it serves.
"""
from __future__ import annotations

from dataclasses import dataclass

from riverbed._proto.v1 import group_pb2
from riverbed.coordinator import offsets_topic as ot
from riverbed.coordinator.consumer_protocol import Assignment, encode_assignment, encode_subscription
from riverbed.errors import ErrorCode as E
from services.group_coordinator.core.effects import Effect, Reply
from services.group_coordinator.core.states import GroupState
from services.group_coordinator.core.subscription_pb import assignment_to_pb, subscription_to_pb

S = GroupState


@dataclass(slots=True)
class _DeleteRequest:
    """A DeleteGroups waiting for its groups' tombstones."""
    request_id: int
    response: group_pb2.DeleteGroupsResponse
    outstanding: int = 0


class GroupAdmin:
    """DescribeGroups, ListGroups, DeleteGroups, FindCoordinator (mixed into
    GroupCoordinatorCore)."""

    def _describe(self, req: group_pb2.DescribeGroupsRequest) -> group_pb2.DescribeGroupsResponse:
        resp = group_pb2.DescribeGroupsResponse()
        for gid in req.groups:
            d = resp.groups.add(group_id=gid)
            err = self._shard_error(gid)
            if err:
                d.error_code, d.error_message = err
                continue
            g = self.groups.get(gid)
            if g is None:
                d.group_state = S.DEAD.value
                continue
            d.group_state = g.state.value
            d.protocol_type = g.protocol_type or ""
            d.protocol_data = g.protocol or ""
            d.generation_id = g.generation_id
            d.leader = g.leader_id or ""
            for m in g.members.values():
                dm = d.members.add(member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                                   assignment=assignment_to_pb(m.assignment))
                if g.client_assignment:
                    dm.member_metadata = (m.raw_metadata(g.protocol) or b"") if g.protocol else b""
                    dm.member_assignment = m.assignment_data
                    continue
                dm.member_assignment = encode_assignment(Assignment(m.assignment))
                if g.protocol and g.protocol in m.protocol_names():
                    sub = m.subscription(g.protocol)
                    dm.subscription.CopyFrom(subscription_to_pb(sub))
                    dm.member_metadata = encode_subscription(sub)
        return resp

    def _delete_groups(self, rid: int, req: group_pb2.DeleteGroupsRequest, out: list[Effect]) -> None:
        """Kafka's DeleteGroups: an Empty group's tombstone is written, then it is gone (the
        gateway then has the offset manager delete its offsets up to the tombstone)."""
        pending = _DeleteRequest(rid, group_pb2.DeleteGroupsResponse())
        for gid in dict.fromkeys(req.group_ids):
            r = pending.response.results.add(group_id=gid, tombstone_offset=-1)
            err = self._shard_error(gid)
            g = self.groups.get(gid) if err is None else None
            if err is None and g is None:
                err = E.GROUP_ID_NOT_FOUND, f"group {gid!r} does not exist"
            elif err is None and g.state is not S.EMPTY:
                err = E.NON_EMPTY_GROUP, f"group {gid!r} has members ({g.state.value})"
            if err is not None:
                r.error_code, r.error_message = err
                continue
            assert g is not None
            if g.pending_write is None:
                g.pending_write = self._write(g, "tombstone", None, out)
            g.delete_waiters.append((pending, r))     # (or wait for the expiry's tombstone)
            pending.outstanding += 1
        if pending.outstanding == 0:
            out.append(Reply(rid, pending.response))

    @staticmethod
    def _deleted(waiter, group_id: str, code: int, msg: str, log_offset: int,
                 out: list[Effect]) -> None:
        pending, r = waiter
        r.error_code, r.error_message = code, msg
        r.tombstone_offset = log_offset if code == E.NONE else -1
        pending.outstanding -= 1
        if pending.outstanding == 0:
            out.append(Reply(pending.request_id, pending.response))

    def _list(self, req: group_pb2.ListGroupsRequest) -> group_pb2.ListGroupsResponse:
        resp = group_pb2.ListGroupsResponse()
        if any(not s.loaded for s in self.shards.values()):
            resp.error_code = E.COORDINATOR_LOAD_IN_PROGRESS
            resp.error_message = "some shards are loading; the list is partial"
        wanted = {s.lower() for s in req.states_filter}
        for gid in sorted(self.groups):
            g = self.groups[gid]
            if self._loaded(g.shard) and (not wanted or g.state.value.lower() in wanted):
                resp.groups.add(group_id=gid, protocol_type=g.protocol_type or "", group_state=g.state.value)
        return resp

    def _find_coordinator(self, req: group_pb2.FindCoordinatorRequest) -> group_pb2.FindCoordinatorResponse:
        if req.key_type not in (group_pb2.COORDINATOR_TYPE_UNSPECIFIED, group_pb2.GROUP):
            return group_pb2.FindCoordinatorResponse(error_code=E.INVALID_REQUEST,
                                                     error_message="this is a group coordinator")
        if not req.key:
            return group_pb2.FindCoordinatorResponse(error_code=E.INVALID_GROUP_ID, error_message="empty key")
        shard = ot.partition_for(req.key, self.config.offsets_topic_num_partitions)
        if shard not in self.shards:
            return group_pb2.FindCoordinatorResponse(error_code=E.COORDINATOR_NOT_AVAILABLE, shard=shard,
                                                     error_message=f"shard {shard} is not served here")
        c = self.config
        return group_pb2.FindCoordinatorResponse(error_code=E.NONE, node_id=c.group_coordinator_id,
                                                 host=c.host_name, port=c.port, endpoint=c.endpoint, shard=shard)
