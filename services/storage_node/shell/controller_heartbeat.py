"""BROKER_HEARTBEAT from a storage node to the active controller, every
broker.heartbeat.interval.ms, beside the ZooKeeper session (Kafka's BrokerHeartbeat, KIP-631).

The controller fences a node it has not heard from in broker.session.timeout.ms: the node's
partitions get new leaders and leader epochs (so its own later writes and ISR changes are
refused), and it is unfenced, with a LEADER_AND_ISR for its partitions, at the next heartbeat
that arrives. The loop is its own task with its own channel, so a slow ALTER_PARTITION or
CONTROLLED_SHUTDOWN never delays a heartbeat; the controller's endpoint (the /controller znode)
is read again only after a failed or refused heartbeat.
"""
from __future__ import annotations

import asyncio
import logging
import time

from riverbed import errors
from riverbed._proto.v1 import replication_pb2
from riverbed.wire.apis import ApiKey
from services.common import znodes
from services.common.rpc import AsyncChannel

log = logging.getLogger(__name__)


class ControllerHeartbeat:
    def __init__(self, node):
        self.node = node                 # the StorageNode: cfg, zk, broker_epoch
        self.interval_s = node.cfg.broker_heartbeat_interval_ms / 1000.0
        self._channel: AsyncChannel | None = None
        self.sent = 0
        self.failed = 0
        self.fenced_answers = 0

    async def run(self) -> None:
        if self.interval_s <= 0:
            return
        cfg = self.node.cfg
        try:
            next_at = time.monotonic()
            while True:
                await self._beat(cfg)
                next_at += self.interval_s
                delay = next_at - time.monotonic()
                if delay < 0:                 # late (a busy loop): beat now, keep the cadence
                    next_at = time.monotonic()
                    delay = 0
                await asyncio.sleep(delay)
        finally:
            await self._drop()

    async def _beat(self, cfg) -> None:
        node = self.node
        if node.zk is None or node.broker_epoch < 0:
            return
        req = replication_pb2.BrokerHeartbeatRequest(broker_id=cfg.broker_id,
                                                     broker_epoch=node.broker_epoch)
        try:
            ch = self._channel or await self._connect()
            # A heartbeat later than a session is worthless: never wait longer than two beats.
            resp = await ch.call(ApiKey.BROKER_HEARTBEAT, req,
                                 timeout_ms=max(1, int(self.interval_s * 2000)))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - no controller, moved, timed out: find it again
            self.failed += 1
            if not isinstance(e, (errors.NotControllerError, errors.RequestTimedOutError)):
                log.debug("[node %d] heartbeat failed: %r", cfg.broker_id, e)
            await self._drop()
            return
        self.sent += 1
        body = resp.body
        if body.error_code != 0:
            self.failed += 1
            log.info("[node %d] heartbeat refused: %s %s", cfg.broker_id,
                     errors.ErrorCode.Name(body.error_code), body.error_message)
            await self._drop()
        elif body.is_fenced:
            self.fenced_answers += 1
            log.warning("[node %d] the controller had fenced this node (no heartbeat in its "
                        "broker.session.timeout.ms); unfenced now, LEADER_AND_ISR follows",
                        cfg.broker_id)

    async def _connect(self) -> AsyncChannel:
        node = self.node
        data, _ = await asyncio.to_thread(node.zk.get, znodes.CONTROLLER)
        info = znodes.decode_controller(data)
        if not info.endpoint:
            raise errors.NotControllerError(f"controller {info.controller_id} has no endpoint")
        self._channel = AsyncChannel(info.endpoint,
                                     client_id=f"storage-node-{node.cfg.broker_id}-heartbeat",
                                     max_message_bytes=node.cfg.socket_request_max_bytes)
        return self._channel

    async def _drop(self) -> None:
        ch, self._channel = self._channel, None
        if ch is not None:
            await ch.close()
