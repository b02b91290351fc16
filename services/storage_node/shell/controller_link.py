"""The storage node talking to the active controller: ISR proposals (ALTER_PARTITION, at most
one in flight per partition, applied once committed) and CONTROLLED_SHUTDOWN on SIGTERM. The
controller's endpoint comes from the /controller znode. A mixin of StorageNode (shell.node),
split out of it along this seam; it never imports shell.node."""
from __future__ import annotations

import asyncio
import logging

from riverbed import errors
from riverbed._proto.v1 import replication_pb2
from riverbed.wire.apis import ApiKey

from services.common import znodes
from services.common.rpc import AsyncChannel
from services.storage_node.core.replica_state import NONE, AlterIsr, AlterPartitionResult

log = logging.getLogger(__name__)

# Per-partition ALTER_PARTITION answers worth resending (the controller moved or was busy).
RETRIABLE_ALTER_CODES = frozenset({errors.NotControllerError.code,
                                   errors.RequestTimedOutError.code,
                                   errors.NetworkError.code,
                                   errors.CoordinatorNotAvailableError.code})


class NoActiveController(errors.NotControllerError):
    """No /controller znode (or no session to read it): retriable for ALTER_PARTITION."""


class ControllerLink:
    """ALTER_PARTITION and CONTROLLED_SHUTDOWN. Uses the node's cfg, core, zk, broker_epoch,
    isr_changes, _controller_channels, _alter_tasks, _closing, _tg, _partition_changed."""

    async def _controller_channel(self) -> AsyncChannel:
        """A channel to the active controller, whose endpoint is in the /controller znode."""
        if self.zk is None:
            raise errors.NotControllerError("no ZooKeeper session")
        try:
            data, _ = await asyncio.to_thread(self.zk.get, znodes.CONTROLLER)
        except Exception as e:   # NoNodeError: no controller elected; or connection loss
            raise NoActiveController(f"no active controller ({type(e).__name__})") from None
        info = znodes.decode_controller(data)
        if not info.endpoint:
            raise errors.NotControllerError(f"controller {info.controller_id} has no endpoint")
        ch = self._controller_channels.get(info.endpoint)
        if ch is None:
            for old in list(self._controller_channels.values()):
                await old.close()
            self._controller_channels.clear()
            ch = AsyncChannel(info.endpoint, client_id=f"storage-node-{self.cfg.broker_id}",
                              max_message_bytes=self.cfg.socket_request_max_bytes)
            self._controller_channels[info.endpoint] = ch
        return ch

    def _propose_isr(self, eff: AlterIsr, what: str) -> None:
        self.isr_changes[what] += 1
        r = self.core.get(eff.tp)
        log.info("[%s-%d leader_epoch=%d] proposing ISR %s: %s -> %s (zk_version %d)",
                 eff.tp[0], eff.tp[1], eff.leader_epoch, what, list(r.isr) if r else [],
                 list(eff.new_isr), eff.zk_version)
        if self._closing:
            return
        coro = self._alter_partition(eff)
        task = self._tg.create_task(coro) if self._tg is not None \
            else asyncio.get_running_loop().create_task(coro)
        self._alter_tasks.add(task)
        task.add_done_callback(self._alter_tasks.discard)

    async def _alter_partition(self, eff: AlterIsr) -> None:
        """Send one ISR proposal until the controller answers it, or it is superseded."""
        cfg = self.cfg
        backoff_s = cfg.alter_partition_retry_backoff_ms / 1000.0
        tp = eff.tp
        while not self._closing:
            if self.core.pending_alter(tp) != eff:
                return                       # a LEADER_AND_ISR replaced it
            req = replication_pb2.AlterPartitionRequest(broker_id=cfg.broker_id,
                                                        broker_epoch=self.broker_epoch)
            req.partitions.add(topic=tp[0], partition=tp[1], leader_id=eff.leader_id,
                               leader_epoch=eff.leader_epoch, new_isr=list(eff.new_isr),
                               partition_epoch=eff.zk_version)
            try:
                ch = await self._controller_channel()
                resp = await ch.call(ApiKey.ALTER_PARTITION, req,
                                     timeout_ms=cfg.controller_socket_timeout_ms)
            except asyncio.CancelledError:
                raise
            except errors.KafkaError as e:
                if e.retriable:
                    log.info("[%s-%d] ALTER_PARTITION: %s; retrying", tp[0], tp[1], e)
                    await asyncio.sleep(backoff_s)
                    continue
                result = AlterPartitionResult(tp, e.code)
            except Exception:
                log.exception("[%s-%d] ALTER_PARTITION failed; retrying", tp[0], tp[1])
                await asyncio.sleep(backoff_s)
                continue
            else:
                result = self._alter_result(tp, resp.body)
                if result.error_code in RETRIABLE_ALTER_CODES:
                    await asyncio.sleep(backoff_s)
                    continue
            moved = self.core.on_alter_partition_result(eff, result)
            r = self.core.get(tp)
            if result.error_code == NONE:
                log.info("[%s-%d leader_epoch=%d] ISR committed: %s (zk_version %d)", tp[0],
                         tp[1], eff.leader_epoch, list(result.isr), result.zk_version)
            else:
                log.warning("[%s-%d leader_epoch=%d] ISR change %s refused: %s; waiting for "
                            "LEADER_AND_ISR", tp[0], tp[1], eff.leader_epoch, list(eff.new_isr),
                            errors.ErrorCode.Name(result.error_code))
            if r is not None:
                self._partition_changed(tp, moved)
            return

    @staticmethod
    def _alter_result(tp, body) -> AlterPartitionResult:
        if body.error_code != NONE:
            return AlterPartitionResult(tp, body.error_code)
        for p in body.partitions:
            if (p.topic, p.partition) == tp:
                return AlterPartitionResult(tp, p.error_code, p.leader_id, p.leader_epoch,
                                            tuple(p.isr), p.partition_epoch)
        return AlterPartitionResult(tp, errors.UnknownTopicOrPartitionError.code)

    async def _controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown: ask the controller to move our leaderships away and
        take us out of the ISRs, retrying up to controlled.shutdown.max.retries times; then
        stop regardless."""
        cfg = self.cfg
        if not cfg.controlled_shutdown_enable or self.zk is None:
            return
        req = replication_pb2.ControlledShutdownRequest(broker_id=cfg.broker_id,
                                                        broker_epoch=self.broker_epoch)
        for attempt in range(1, cfg.controlled_shutdown_max_retries + 1):
            try:
                ch = await self._controller_channel()
                resp = await ch.call(ApiKey.CONTROLLED_SHUTDOWN, req,
                                     timeout_ms=cfg.controller_socket_timeout_ms)
                body = resp.body
                if body.error_code == NONE and not body.remaining_partitions:
                    log.info("[node %d] controlled shutdown succeeded", cfg.broker_id)
                    return
                log.warning("[node %d] controlled shutdown attempt %d: %s, %d partition(s) "
                            "still led here", cfg.broker_id, attempt,
                            errors.ErrorCode.Name(body.error_code),
                            len(body.remaining_partitions))
            except asyncio.CancelledError:
                raise
            except NoActiveController as e:
                # Nobody could move our leaderships: waiting out the retries only delays the
                # stop (Kafka would retry; a fleet without a controller is a test or a teardown).
                log.warning("[node %d] controlled shutdown skipped: %s", cfg.broker_id, e)
                return
            except errors.KafkaError as e:
                log.warning("[node %d] controlled shutdown attempt %d failed: %s",
                            cfg.broker_id, attempt, e)
                if not e.retriable:    # e.g. a controller that does not serve the API
                    break
            except Exception as e:     # an undecodable /controller, a socket failure
                log.warning("[node %d] controlled shutdown attempt %d failed: %s",
                            cfg.broker_id, attempt, e)
            if attempt < cfg.controlled_shutdown_max_retries:
                await asyncio.sleep(cfg.controlled_shutdown_retry_backoff_ms / 1000.0)
        log.warning("[node %d] controlled shutdown did not complete; stopping anyway",
                    cfg.broker_id)
