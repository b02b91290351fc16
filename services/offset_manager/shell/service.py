"""The offset manager service: the pure core behind a ROUTER, its shards hosted by ShardHost
(the wiring is services.common.sharded_service, shared with the group coordinator).

OFFSET_COMMIT / OFFSET_FETCH / OFFSET_DELETE (normally forwarded by a gateway) become
`RequestReceived` inputs; the handler waits for the `Reply` effect naming its request id (a
commit's after its acks=all write). `AppendRecords` effects are written by the ShardHost and fed
back as `WriteCompleted`. Owned shards are loaded and then tailed (`tail=True`), so the group
coordinator's group records reach `replay` and the core learns generations and members.

The core sees wall-clock milliseconds: commit timestamps are stored in __consumer_offsets.
"""
from __future__ import annotations

from collections.abc import Mapping

from riverbed._proto.v1 import header_pb2
from services.common import rpc, znodes
from services.common.sharded_service import ShardedService
from services.offset_manager.config import OffsetManagerConfig
from services.offset_manager.core.events import RequestReceived
from services.offset_manager.core.manager import OffsetManagerCore

ApiKey = header_pb2.ApiKey
# The core's tick only acts every offsets.retention.check.interval.ms; ticking often is cheap.
TICK_S = 1.0


class OffsetManagerService(ShardedService):
    apis = (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE)
    tick_s = TICK_S

    def __init__(self, config: OffsetManagerConfig):
        super().__init__(config, OffsetManagerCore(config),
                         name=f"offset-manager-{config.offset_manager_id}",
                         root=znodes.OFFSET_MANAGERS, instance_id=config.offset_manager_id,
                         required_acks=config.offsets_commit_required_acks, tail=True)

    async def _request(self, req: rpc.Request) -> rpc.Reply:
        return await self._call(lambda rid: RequestReceived(rid, req.body))

    # -- ShardListener --------------------------------------------------------------------
    def topics_changed(self, partition_counts: Mapping[str, int]) -> None:
        pass                              # offsets are kept for any topic name
