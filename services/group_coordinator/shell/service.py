"""The group coordinator service: the pure core behind a ROUTER, its shards hosted by ShardHost
(the wiring is services.common.sharded_service, shared with the offset manager).

Requests (JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, DESCRIBE_GROUPS, LIST_GROUPS,
FIND_COORDINATOR; normally forwarded by a gateway) become `RequestReceived` inputs; the handler
waits for the `Reply` effect naming its request id (joins and syncs wait for the rebalance).
`AppendRecords` effects are written with acks=all by the ShardHost and fed back as
`WriteCompleted`. Shard ownership changes and metadata snapshots become ShardLoad*/ShardUnloaded
and TopicMetadataChanged inputs. A tick task drives session expiry, rebalance timeouts and the
end of parked heartbeats' waits (so a long-polled heartbeat is answered within TICK_S of its
max_wait_ms); on stop, parked heartbeats are answered before the server closes.

The core sees wall-clock milliseconds (its timestamps are stored in __consumer_offsets and read
by other instances); deadlines are compared against the same clock.
"""
from __future__ import annotations

import random
from collections.abc import Mapping

from riverbed._proto.v1 import group_pb2, header_pb2
from services.common import rpc, znodes
from services.common.sharded_service import ShardedService, now_ms
from services.common.telemetry import Telemetry
from services.group_coordinator.config import GroupCoordinatorConfig
from services.group_coordinator.core.coordinator import GroupCoordinatorCore
from services.group_coordinator.core.events import (
    CoordinatorStopping, RequestReceived, TopicMetadataChanged,
)

ApiKey = header_pb2.ApiKey
TICK_S = 0.1
# A join naming topics this instance has not seen yet waits this long for fresh metadata, so a
# topic created just before the join is assigned in the first generation.
JOIN_METADATA_WAIT_MS = 2000


class GroupCoordinatorService(ShardedService):
    apis = (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
            ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.FIND_COORDINATOR,
            ApiKey.DELETE_GROUPS)
    tick_s = TICK_S

    def __init__(self, config: GroupCoordinatorConfig, rng: random.Random | None = None):
        super().__init__(config, GroupCoordinatorCore(config, rng or random.Random()),
                         name=f"group-coordinator-{config.group_coordinator_id}",
                         root=znodes.GROUP_COORDINATORS,
                         instance_id=config.group_coordinator_id, required_acks=-1, tail=False)

    async def _request(self, req: rpc.Request) -> rpc.Reply:
        body = req.body
        if isinstance(body, group_pb2.JoinGroupRequest):
            await self._know_topics(body)
        return await self._call(lambda rid: RequestReceived(rid, body, req.header.client_id))

    def stopping(self) -> list:
        return self.core.handle(CoordinatorStopping(), now_ms())

    def register_metrics(self, tel: Telemetry) -> None:
        core = self.core
        tel.gauge("riverbed.group_coordinator.groups",
                  lambda: [(n, {"state": st}) for st, n in core.groups_by_state().items()],
                  description="groups this instance coordinates, per state")
        tel.counter("riverbed.group_coordinator.rebalances", lambda: [(core.rebalances, {})],
                    description="rebalances completed (PreparingRebalance -> Stable)")
        tel.gauge("riverbed.group_coordinator.heartbeats.parked",
                  lambda: [(core.parked_heartbeats, {})],
                  description="long-polled heartbeats waiting for their answer")
        tel.counter("riverbed.group_coordinator.rebalance.time",
                    lambda: [(core.rebalance_ms_total / 1000.0, {})], unit="s",
                    description="time groups spent rebalancing")

    async def _know_topics(self, body: group_pb2.JoinGroupRequest) -> None:
        wanted = {t for p in body.protocols for t in p.subscription.topics}
        if wanted - set(self.core.topics):
            await self.host.refresh_metadata(JOIN_METADATA_WAIT_MS)

    # -- ShardListener --------------------------------------------------------------------
    def topics_changed(self, partition_counts: Mapping[str, int]) -> None:
        self._perform(self.core.handle(TopicMetadataChanged(dict(partition_counts)), now_ms()))
