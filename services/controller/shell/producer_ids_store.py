"""Claiming producer-id blocks through /latest_producer_id_block (Kafka's
ZkProducerIdManager.getNewProducerIdBlock). Blocking kazoo calls: run on the controller's
ZooKeeper executor thread, never on the event loop.

    read the node and its version  ->  next block (core.producer_ids.next_block)
    -> set with version (or create when absent)  ->  BadVersion / NodeExists: read again

The conditional write makes two claimers (a controller failing over while the old one still
runs, or two controllers racing) get different, non-overlapping blocks; the loser retries. The
write is not fenced by /controller_epoch: uniqueness comes from the version check alone, as in
Kafka, and a stale controller holding a block harms nobody.
"""
from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from services.common import znodes
from services.controller.core.producer_ids import (
    PRODUCER_ID_BLOCK_SIZE, ProducerIdBlock, next_block)

log = logging.getLogger(__name__)

# Each failed attempt means another claimer succeeded meanwhile; this many in a row means
# something is wrong (a writer looping), so give up rather than spin.
MAX_CLAIM_ATTEMPTS = 100


class ProducerIdClaimError(Exception):
    """No block could be claimed within MAX_CLAIM_ATTEMPTS."""


def to_block(info: znodes.ProducerIdBlockInfo) -> ProducerIdBlock:
    return ProducerIdBlock(info.broker_id, info.block_start, info.block_end - info.block_start + 1)


def to_info(block: ProducerIdBlock) -> znodes.ProducerIdBlockInfo:
    return znodes.ProducerIdBlockInfo(block.broker_id, block.first_id, block.last_id)


class ProducerIdBlockStore:
    """`client` is a started KazooClient (or anything with its get/set/create and exceptions)."""

    def __init__(self, client, *, block_size: int = PRODUCER_ID_BLOCK_SIZE,
                 max_attempts: int = MAX_CLAIM_ATTEMPTS) -> None:
        self.client = client
        self.block_size = block_size
        self.max_attempts = max_attempts

    def read_latest(self) -> tuple[ProducerIdBlock | None, int | None]:
        """(latest block or None, znode version or None when the node does not exist). Empty
        data (a node created by ensure_path) counts as no block. Raises ZnodeDataError on
        garbage: allocating after an unreadable block could hand out ids twice."""
        try:
            data, stat = self.client.get(znodes.LATEST_PRODUCER_ID_BLOCK)
        except NoNodeError:
            return None, None
        if not data:
            return None, stat.version
        return to_block(znodes.decode_producer_id_block(data)), stat.version

    def try_write(self, block: ProducerIdBlock, version: int | None) -> bool:
        """Write `block` if the node is still at `version` (None: create it). False if another
        claimer got there first."""
        data = znodes.encode_producer_id_block(to_info(block))
        try:
            if version is None:
                self.client.create(znodes.LATEST_PRODUCER_ID_BLOCK, data)
            else:
                self.client.set(znodes.LATEST_PRODUCER_ID_BLOCK, data, version=version)
            return True
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False

    def claim_next_block(self, broker_id: int) -> ProducerIdBlock:
        """Claim the block after the latest one for controller `broker_id`."""
        for attempt in range(1, self.max_attempts + 1):
            latest, version = self.read_latest()
            block = next_block(latest, broker_id, self.block_size)
            if self.try_write(block, version):
                log.info("claimed producer ids %d..%d (attempt %d)", block.first_id,
                         block.last_id, attempt)
                return block
            log.debug("producer id block claim lost a race; retrying")
        raise ProducerIdClaimError(f"no producer id block after {self.max_attempts} attempts")
