"""The offset manager service: the pure core behind a ROUTER, its shards hosted by ShardHost
(the wiring is services.common.sharded_service, shared with the group coordinator).

OFFSET_COMMIT / OFFSET_FETCH / OFFSET_DELETE / TXN_OFFSET_COMMIT (normally forwarded by a gateway) become
`RequestReceived` inputs; the handler waits for the `Reply` effect naming its request id (a
commit's after its acks=all write). `AppendRecords` effects are written by the ShardHost and fed
back as `WriteCompleted`. Owned shards are loaded and then tailed (`tail=True`), so the group
coordinator's group records reach `replay` and the core learns generations and members.

The core sees wall-clock milliseconds: commit timestamps are stored in __consumer_offsets.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from riverbed._proto.v1 import header_pb2
from services.common import rpc, znodes
from services.common.sharded_service import ShardedService
from services.common.telemetry import Telemetry
from services.offset_manager.config import OffsetManagerConfig
from services.offset_manager.core.events import RequestReceived
from services.offset_manager.core.manager import OffsetManagerCore

ApiKey = header_pb2.ApiKey
# The core's tick only acts every offsets.retention.check.interval.ms; ticking often is cheap.
TICK_S = 1.0
# How often the lag of the groups this instance owns is refreshed (LIST_OFFSETS to the leaders).
LAG_INTERVAL_S = 5.0

log = logging.getLogger(__name__)


class OffsetManagerService(ShardedService):
    apis = (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE,
            ApiKey.TXN_OFFSET_COMMIT,
            ApiKey.DELETE_GROUPS)   # DeleteGroups: the offsets of groups the coordinator deleted
    tick_s = TICK_S

    def __init__(self, config: OffsetManagerConfig):
        super().__init__(config, OffsetManagerCore(config),
                         name=f"offset-manager-{config.offset_manager_id}",
                         root=znodes.OFFSET_MANAGERS, instance_id=config.offset_manager_id,
                         required_acks=config.offsets_commit_required_acks, tail=True)

        self.end_offsets: dict[tuple[str, int], int] = {}

    async def _request(self, req: rpc.Request) -> rpc.Reply:
        return await self._call(lambda rid: RequestReceived(rid, req.body))

    # -- metrics: riverbed.group.lag --------------------------------------------------------
    def register_metrics(self, tel: Telemetry) -> None:
        def lag():
            out = []
            ends = self.end_offsets
            for group, offsets in list(self.core.offsets.items()):
                for tp, cached in list(offsets.items()):
                    end = ends.get(tuple(tp))
                    if end is not None:
                        out.append((max(0, end - cached.value.offset),
                                    {"group": group, "topic": tp[0], "partition": str(tp[1])}))
            return out

        def committed():
            return [(sum(len(o) for o in self.core.offsets.values()), {})]

        tel.gauge("riverbed.group.lag", lag,
                  description="messages between a group's committed offset and the partition's "
                              f"high watermark (refreshed every {LAG_INTERVAL_S:g} s)")
        tel.gauge("riverbed.offset_manager.committed_partitions", committed,
                  description="group-partition offsets held by this instance")

    def background(self) -> list:
        return [self._lag_loop()]

    async def _lag_loop(self) -> None:
        while True:
            await asyncio.sleep(LAG_INTERVAL_S)
            tps = {tuple(tp) for offsets in list(self.core.offsets.values()) for tp in offsets}
            if not tps:
                self.end_offsets = {}
                continue
            try:
                self.end_offsets = await self.host.latest_offsets(
                    tps, timeout_ms=int(LAG_INTERVAL_S * 1000))
            except Exception:   # noqa: BLE001 - the metric goes stale, the service goes on
                log.debug("lag refresh failed", exc_info=True)

    # -- ShardListener --------------------------------------------------------------------
    def topics_changed(self, partition_counts: Mapping[str, int]) -> None:
        pass                              # offsets are kept for any topic name
