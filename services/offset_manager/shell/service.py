"""The offset manager service: the pure core behind a ROUTER, its shards hosted by ShardHost.

OFFSET_COMMIT / OFFSET_FETCH / OFFSET_DELETE (normally forwarded by a gateway) become
`RequestReceived` inputs; the handler waits for the `Reply` effect naming its request id (a
commit's after its acks=all write). `AppendRecords` effects are written by the ShardHost and fed
back as `WriteCompleted`. Owned shards are loaded and then tailed (`tail=True`), so the group
coordinator's group records reach `replay` and the core learns generations and members.

The core sees wall-clock milliseconds: commit timestamps are stored in __consumer_offsets.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from riverbed._proto.v1 import header_pb2
from riverbed.coordinator.offsets_topic import StoredRecord
from services.common import rpc, znodes
from services.offset_manager.config import OffsetManagerConfig
from services.offset_manager.core.effects import AppendRecords, Reply
from services.offset_manager.core.events import (
    RequestReceived, ShardLoadCompleted, ShardLoadStarted, ShardUnloaded, WriteCompleted,
)
from services.offset_manager.core.manager import OffsetManagerCore
from services.common.shard_host import ShardHost, ShardHostConfig

ApiKey = header_pb2.ApiKey
# The core's tick only acts every offsets.retention.check.interval.ms; ticking often is cheap.
TICK_S = 1.0

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class OffsetManagerService:
    def __init__(self, config: OffsetManagerConfig):
        self.config = config
        self.name = f"offset-manager-{config.offset_manager_id}"
        self.core = OffsetManagerCore(config)
        self.host = ShardHost(ShardHostConfig(
            root=znodes.OFFSET_MANAGERS, instance_id=config.offset_manager_id,
            endpoint=config.endpoint, zookeeper_connect=config.zookeeper_connect,
            zookeeper_session_timeout_ms=config.zookeeper_session_timeout_ms,
            zookeeper_connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            num_shards=config.offsets_topic_num_partitions,
            replication_factor=config.offsets_topic_replication_factor,
            segment_bytes=config.offsets_topic_segment_bytes,
            commit_timeout_ms=config.offsets_commit_timeout_ms,
            required_acks=config.offsets_commit_required_acks,
            load_buffer_size=config.offsets_load_buffer_size,
            request_timeout_ms=config.request_timeout_ms,
            max_message_bytes=config.socket_request_max_bytes, tail=True), self, name=self.name)
        self._waiters: dict[int, asyncio.Future] = {}
        self._next_request_id = 1
        self._writes: set[asyncio.Task] = set()

    # -- lifecycle ------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.config
        server = rpc.RpcServer(cfg.endpoint, self._handlers(), name=self.name,
                               socket_request_max_bytes=cfg.socket_request_max_bytes,
                               queued_max_requests=cfg.queued_max_requests)
        try:
            await self.host.start()
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(server.serve(), name="rpc"),
                         tg.create_task(self.host.run(), name="shards"),
                         tg.create_task(self._tick_loop(), name="tick")]
                log.info("[%s] serving on %s", self.name, server.bound_endpoint)
                await stop.wait()
                log.info("[%s] stopping", self.name)
                for t in tasks:
                    t.cancel()
        finally:
            for t in list(self._writes):
                t.cancel()
            await server.close()
            await self.host.close()

    def _handlers(self) -> dict:
        return {api: self._request for api in (
            ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE)}

    # -- the core's door ------------------------------------------------------------------
    def _perform(self, effects) -> None:
        for eff in effects:
            if isinstance(eff, Reply):
                fut = self._waiters.get(eff.request_id)
                if fut is not None and not fut.done():
                    fut.set_result(eff.body)
            elif isinstance(eff, AppendRecords):
                task = asyncio.get_running_loop().create_task(self._write(eff))
                self._writes.add(task)
                task.add_done_callback(self._writes.discard)
            else:
                raise TypeError(f"unknown effect {eff!r}")

    async def _write(self, eff: AppendRecords) -> None:
        code, base_offset = await self.host.append(eff.shard, eff.records)
        self._perform(self.core.handle(WriteCompleted(eff.write_id, code, base_offset), _now_ms()))

    async def _request(self, req: rpc.Request) -> rpc.Reply:
        rid = self._next_request_id
        self._next_request_id += 1
        fut = asyncio.get_running_loop().create_future()
        self._waiters[rid] = fut
        try:
            self._perform(self.core.handle(RequestReceived(rid, req.body), _now_ms()))
            return rpc.Reply(await fut)
        finally:
            self._waiters.pop(rid, None)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self._perform(self.core.tick(_now_ms()))
            self.core.check_invariants()

    # -- ShardListener (called on the loop by the ShardHost) ------------------------------
    def shard_load_started(self, shard: int) -> None:
        self._perform(self.core.handle(ShardLoadStarted(shard), _now_ms()))

    def replay(self, record: StoredRecord) -> None:
        self.core.replay(record)

    def shard_load_completed(self, shard: int) -> None:
        self._perform(self.core.handle(ShardLoadCompleted(shard), _now_ms()))

    def shard_unloaded(self, shard: int) -> None:
        self._perform(self.core.handle(ShardUnloaded(shard), _now_ms()))

    def topics_changed(self, partition_counts: Mapping[str, int]) -> None:
        pass                              # offsets are kept for any topic name
