"""The storage node talking to the active controller: ISR proposals (ALTER_PARTITION, at most
one in flight per partition, applied once committed, sent together in one request by one
sender) and CONTROLLED_SHUTDOWN on SIGTERM. The
controller's endpoint comes from the /controller znode. A mixin of StorageNode (shell.node),
split out of it along this seam; it never imports shell.node.

Following the controller: the channel belongs to one /controller znode (its creation zxid). As
soon as another controller is known — the /controller watch fires with another znode or none,
or a LEADER_AND_ISR arrives with a higher controller epoch (then /controller is read again) —
the channel is closed, which fails the requests waiting on it at once, and they are sent again
to the new controller without a backoff (ALTER_PARTITION answers a retry of what it already
committed with the committed state). Before, a request to a controller that had died waited
out controller.socket.timeout.ms (30 s) on it."""
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

# ISR proposals sent in one ALTER_PARTITION at most (the controller writes them in one
# ZooKeeper transaction, which ZooKeeper bounds at jute.maxbuffer, 1 MiB: a few hundred bytes
# each).
MAX_ALTER_ITEMS = 1000
# Per-partition ALTER_PARTITION answers worth resending (the controller moved or was busy).
RETRIABLE_ALTER_CODES = frozenset({errors.NotControllerError.code,
                                   errors.RequestTimedOutError.code,
                                   errors.NetworkError.code,
                                   errors.CoordinatorNotAvailableError.code})


class NoActiveController(errors.NotControllerError):
    """No /controller znode (or no session to read it): retriable for ALTER_PARTITION."""


class ControllerLink:
    """ALTER_PARTITION and CONTROLLED_SHUTDOWN. Uses the node's cfg, core, zk, broker_epoch,
    isr_changes, _controller_channels, _alter_tasks, _closing, _tg, _partition_changed, and
    its own _controller_czxid / _controller_moves / _controller_moved and _alter_queue /
    _alter_wake / _alter_task (set in node.py)."""

    async def _controller_channel(self) -> AsyncChannel:
        """A channel to the active controller, whose endpoint is in the /controller znode."""
        if self.zk is None:
            raise errors.NotControllerError("no ZooKeeper session")
        try:
            data, stat = await asyncio.to_thread(self.zk.get, znodes.CONTROLLER)
        except Exception as e:   # NoNodeError: no controller elected; or connection loss
            raise NoActiveController(f"no active controller ({type(e).__name__})") from None
        info = znodes.decode_controller(data)
        if not info.endpoint:
            raise errors.NotControllerError(f"controller {info.controller_id} has no endpoint")
        if stat.czxid != self._controller_czxid:
            self._controller_changed(stat.czxid)
        ch = self._controller_channels.get(info.endpoint)
        if ch is None:
            for old in list(self._controller_channels.values()):
                await old.close()
            self._controller_channels.clear()
            ch = AsyncChannel(info.endpoint, client_id=f"storage-node-{self.cfg.broker_id}",
                              max_message_bytes=self.cfg.socket_request_max_bytes)
            self._controller_channels[info.endpoint] = ch
        return ch

    # -- following the controller --------------------------------------------------------------
    def _controller_watch(self, data, stat, event=None) -> None:
        """kazoo's DataWatch on /controller (its thread): hand the znode's identity to the loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._controller_changed,
                                      stat.czxid if stat is not None else -1)

    def _controller_changed(self, czxid: int) -> None:
        """/controller is now the znode created at `czxid` (-1: none). If that is not the one
        our channel was opened for, close the channel (its waiting requests fail now and are
        resent) and wake every retry that waits for a controller."""
        if czxid == self._controller_czxid:
            return
        if 0 <= czxid <= self._controller_czxid_max:
            # An older znode read late (a read on another thread answered before the watch
            # that reported its successor was handled): a newer /controller always has a
            # larger czxid, so this is not news. (The newest one again after a late "deleted"
            # is where we are: no move.)
            if czxid == self._controller_czxid_max:
                self._controller_czxid = czxid
            return
        known = self._controller_czxid
        self._controller_czxid = czxid
        self._controller_czxid_max = max(self._controller_czxid_max, czxid)
        if known is None:
            return                               # the first sighting: nothing was sent yet
        self._controller_moves += 1
        log.info("[node %d] the active controller changed (/controller czxid %s -> %s); "
                 "requests to the old one are resent", self.cfg.broker_id, known, czxid)
        channels = list(self._controller_channels.values())
        self._controller_channels.clear()
        for ch in channels:
            self._spawn(ch.close())         # fails the calls waiting on it (retriable)
        moved, self._controller_moved = self._controller_moved, asyncio.Event()
        moved.set()

    def _on_controller_epoch(self, controller_epoch: int) -> None:
        """A LEADER_AND_ISR came with a higher controller epoch than any before: a new
        controller was elected; read /controller again (the watch may be late or lost)."""
        async def check() -> None:
            try:
                _, stat = await asyncio.to_thread(self.zk.get, znodes.CONTROLLER)
            except Exception:    # noqa: BLE001 - no /controller or no session: the watch follows
                return
            self._controller_changed(stat.czxid)
        if self.zk is not None and self._controller_czxid is not None:
            self._spawn(check())

    async def _wait_for_retry(self, backoff_s: float, moves_before: int) -> None:
        """Back off before resending, unless the controller changed since the request was
        sent (then resend at once); a change while waiting ends the wait."""
        if self._controller_moves != moves_before:
            return
        try:
            await asyncio.wait_for(self._controller_moved.wait(), backoff_s)
        except TimeoutError:
            pass

    def _propose_isr(self, eff: AlterIsr, what: str) -> None:
        self.isr_changes[what] += 1
        r = self.core.get(eff.tp)
        log.info("[%s-%d leader_epoch=%d] proposing ISR %s: %s -> %s (zk_version %d)",
                 eff.tp[0], eff.tp[1], eff.leader_epoch, what, list(r.isr) if r else [],
                 list(eff.new_isr), eff.zk_version)
        if self._closing:
            return
        self._alter_queue[eff.tp] = eff
        self._alter_wake.set()
        if self._alter_task is None or self._alter_task.done():
            coro = self._alter_sender()
            task = self._tg.create_task(coro) if self._tg is not None \
                else asyncio.get_running_loop().create_task(coro)
            self._alter_task = task
            self._alter_tasks.add(task)
            task.add_done_callback(self._alter_tasks.discard)

    async def _alter_sender(self) -> None:
        """Send the queued ISR proposals, up to MAX_ALTER_ITEMS in one ALTER_PARTITION, until
        each is answered or superseded (a LEADER_AND_ISR replaced it). A node back in every ISR
        after a restart proposes one expansion per partition it replicates: one request (and
        one ZooKeeper transaction at the controller) rather than one each, as Kafka's
        AlterPartitionManager batches them. Retriable failures go back in the queue and the
        sender backs off (alter.partition.retry.backoff.ms, cut short by a controller move)."""
        backoff_s = self.cfg.alter_partition_retry_backoff_ms / 1000.0
        queue = self._alter_queue
        while not self._closing:
            if not queue:
                self._alter_wake.clear()
                await self._alter_wake.wait()
                continue
            batch: dict = {}
            for tp in list(queue)[:MAX_ALTER_ITEMS]:
                eff = queue.pop(tp)
                if self.core.pending_alter(tp) == eff:
                    batch[tp] = eff
            if not batch:
                continue
            retry, moves = await self._send_alter_batch(batch)
            if retry:
                for tp, eff in retry.items():
                    queue.setdefault(tp, eff)        # a newer proposal queued meanwhile wins
                await self._wait_for_retry(backoff_s, moves)

    async def _send_alter_batch(self, batch: dict) -> tuple[dict, int]:
        """One ALTER_PARTITION for `batch` (tp -> AlterIsr); applies what the controller
        answered. Returns the proposals to send again and the controller moves seen."""
        cfg = self.cfg
        req = replication_pb2.AlterPartitionRequest(broker_id=cfg.broker_id,
                                                    broker_epoch=self.broker_epoch)
        for (topic, partition), eff in batch.items():
            req.partitions.add(topic=topic, partition=partition, leader_id=eff.leader_id,
                               leader_epoch=eff.leader_epoch, new_isr=list(eff.new_isr),
                               partition_epoch=eff.zk_version)
        moves = self._controller_moves
        try:
            ch = await self._controller_channel()
            moves = self._controller_moves
            resp = await ch.call(ApiKey.ALTER_PARTITION, req,
                                 timeout_ms=cfg.controller_socket_timeout_ms)
        except asyncio.CancelledError:
            raise
        except errors.KafkaError as e:
            if e.retriable:
                log.info("ALTER_PARTITION of %d partition(s): %s; retrying", len(batch), e)
                return batch, moves
            results = {tp: AlterPartitionResult(tp, e.code) for tp in batch}
        except Exception:
            log.exception("ALTER_PARTITION of %d partition(s) failed; retrying", len(batch))
            return batch, moves
        else:
            results = self._alter_results(batch, resp.body)
        retry = {}
        for tp, eff in batch.items():
            result = results[tp]
            if result.error_code in RETRIABLE_ALTER_CODES:
                retry[tp] = eff
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
        return retry, moves

    @staticmethod
    def _alter_results(batch: dict, body) -> dict:
        """tp -> AlterPartitionResult for every partition of `batch` from the answer."""
        if body.error_code != NONE:
            return {tp: AlterPartitionResult(tp, body.error_code) for tp in batch}
        answered = {(p.topic, p.partition): p for p in body.partitions}
        out = {}
        for tp in batch:
            p = answered.get(tp)
            out[tp] = AlterPartitionResult(tp, errors.UnknownTopicOrPartitionError.code) \
                if p is None else AlterPartitionResult(tp, p.error_code, p.leader_id,
                                                       p.leader_epoch, tuple(p.isr),
                                                       p.partition_epoch)
        return out

    async def _controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown: ask the controller to move our leaderships away and
        take us out of the ISRs, retrying up to controlled.shutdown.max.retries times; then
        stop regardless. An attempt cut short because the controller changed under it (a
        controller failover while we stop) is resent to the new one at once and not counted
        (at most controlled.shutdown.max.retries such resends)."""
        cfg = self.cfg
        if not cfg.controlled_shutdown_enable or self.zk is None:
            return
        req = replication_pb2.ControlledShutdownRequest(broker_id=cfg.broker_id,
                                                        broker_epoch=self.broker_epoch)
        moves_at_start = self._controller_moves
        attempt = resends = 0
        while attempt < cfg.controlled_shutdown_max_retries:
            attempt += 1
            moves = self._controller_moves
            try:
                ch = await self._controller_channel()
                moves = self._controller_moves
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
                if self._controller_moves == moves_at_start:
                    # Nobody could move our leaderships: waiting out the retries only delays
                    # the stop (Kafka would retry; a fleet without a controller is a test or a
                    # teardown).
                    log.warning("[node %d] controlled shutdown skipped: %s", cfg.broker_id, e)
                    return
                # The controller went away while we stop: a successor is being elected.
                log.info("[node %d] controlled shutdown: %s; waiting for the next controller",
                         cfg.broker_id, e)
            except errors.KafkaError as e:
                log.warning("[node %d] controlled shutdown attempt %d failed: %s",
                            cfg.broker_id, attempt, e)
                if not e.retriable:    # e.g. a controller that does not serve the API
                    break
            except Exception as e:     # an undecodable /controller, a socket failure
                log.warning("[node %d] controlled shutdown attempt %d failed: %s",
                            cfg.broker_id, attempt, e)
            if self._controller_moves != moves and resends < cfg.controlled_shutdown_max_retries:
                resends += 1
                attempt -= 1           # cut short by a controller change: not counted
            if attempt < cfg.controlled_shutdown_max_retries:
                await self._wait_for_retry(cfg.controlled_shutdown_retry_backoff_ms / 1000.0,
                                           moves)
        log.warning("[node %d] controlled shutdown did not complete; stopping anyway",
                    cfg.broker_id)
