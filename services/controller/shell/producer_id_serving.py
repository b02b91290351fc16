"""INIT_PRODUCER_ID on the controller: answering from the allocator and claiming id blocks.

A mixin of ControllerService (shell.service), split out of it along this seam; it never
imports shell.service. The active controller holds a `ProducerIdAllocator`
(core/producer_ids.py) in `self._pid_alloc`, created empty on election and dropped on losing it;
blocks of ids are claimed through /latest_producer_id_block on the ZooKeeper executor
(shell/producer_ids_store.py); `self._pid_claim` is the claim running, if any.
"""
from __future__ import annotations

import asyncio
import logging

from riverbed import errors
from services.common.rpc import Reply, Request
from services.controller.core.producer_ids import ProducerIdAllocator, handle_init_producer_id
from services.controller.shell.producer_ids_store import ProducerIdBlockStore

log = logging.getLogger(__name__)

COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code


class ProducerIdServing:
    """INIT_PRODUCER_ID and the block claims behind it (mixed into ControllerService)."""

    async def _handle_init_producer_id(self, req: Request) -> Reply:
        """INIT_PRODUCER_ID: a standby answers NOT_CONTROLLER; the active controller answers
        from its allocator, waiting for a block claim only when it has no id at all."""
        alloc = self._pid_alloc
        if not self.core.active or alloc is None:
            raise errors.NotControllerError(
                f"node {self.cfg.controller_id} is not the active controller")
        resp, effects = handle_init_producer_id(req.body, alloc)
        if effects:
            self._start_claim(alloc)
        if resp.error_code == COORDINATOR_NOT_AVAILABLE and self._pid_claim is not None:
            claim = self._pid_claim
            # Bounded: the claim is a few ZooKeeper round trips, retried on lost races only.
            try:
                await asyncio.wait_for(asyncio.shield(claim),
                                       self.cfg.controller_socket_timeout_ms / 1000)
            except TimeoutError:
                return Reply(resp)
            if self._pid_alloc is alloc and claim.result():
                resp, effects = handle_init_producer_id(req.body, alloc)
                if effects:
                    self._start_claim(alloc)
        return Reply(resp)

    def _maybe_claim_producer_ids(self) -> None:
        alloc = self._pid_alloc
        if alloc is not None and alloc.start_claim():
            self._start_claim(alloc)

    def _start_claim(self, alloc: ProducerIdAllocator) -> None:
        """`alloc.start_claim()` said True: claim the next block on the ZooKeeper executor."""
        self._pid_claim = self._loop.create_task(self._claim_producer_ids(alloc))

    async def _claim_producer_ids(self, alloc: ProducerIdAllocator) -> bool:
        """Claim one block for `alloc`; True when it was installed."""
        try:
            block = await self._zk(ProducerIdBlockStore(self.client).claim_next_block,
                                   self.cfg.controller_id)
        except Exception as e:  # noqa: BLE001 - connection loss, exhausted, unreadable znode
            log.warning("claiming a producer id block failed: %r", e)
            alloc.claim_failed()
            return False
        if self._pid_alloc is not alloc:     # lost the controllership meanwhile: ids unused
            log.info("producer ids %d..%d claimed after losing the controllership; dropped",
                     block.first_id, block.last_id)
            return False
        alloc.install_block(block)
        return True
