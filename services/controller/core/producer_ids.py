"""Producer ids for idempotent producers (Kafka's ProducerIdManager, ZooKeeper mode). Pure.

Ids are handed out in blocks of PRODUCER_ID_BLOCK_SIZE (1000) claimed through the znode
`/latest_producer_id_block` ({"version":1,"broker":<controller.id>,"block_start":"n",
"block_end":"m"}): a claimer reads the node and its version, computes the next block
(`next_block`), and writes it with a conditional set on that version; on BadVersion (another
claimer won) it reads again (shell/producer_ids_store.py). Blocks therefore never overlap, and an
id is never handed out twice even across controller failovers (unused ids of a block are lost,
as in Kafka).

`ProducerIdAllocator` holds the active controller's current block and a prefetched next one: it
asks for the next block once PREFETCH_RATIO of the current one is used (as Kafka's
RPCProducerIdManager does), so INIT_PRODUCER_ID rarely waits on ZooKeeper. A fresh allocator (a
newly active controller) has no block: the shell should claim one on activation.

INIT_PRODUCER_ID (`handle_init_producer_id`), for idempotent producers only (no transactions):

- producer_id -1, epoch -1: a new id, epoch 0.
- producer_id >= 0, epoch 0..32766: the same id with epoch + 1 (KIP-360 style bump; the
  controller keeps no per-producer state, so it trusts the given epoch and never answers
  INVALID_PRODUCER_EPOCH).
- producer_id >= 0, epoch 32767: the epoch is exhausted: a new id, epoch 0.
- a transactional_id, or any other id/epoch combination: INVALID_REQUEST.
- no id available yet (the block is being claimed): COORDINATOR_NOT_AVAILABLE (retriable), and
  a `ClaimProducerIdBlock` effect if no claim is running.
"""
from __future__ import annotations

from dataclasses import dataclass

from riverbed import errors
from riverbed._proto.v1 import producer_id_pb2

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "PREFETCH_RATIO", "MAX_PRODUCER_EPOCH", "ProducerIdBlock",
           "ProducerIdsExhaustedError", "next_block", "ProducerIdAllocator",
           "ClaimProducerIdBlock", "handle_init_producer_id"]

PRODUCER_ID_BLOCK_SIZE = 1000          # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PREFETCH_RATIO = 0.9                   # claim the next block once 90% of this one is used
MAX_PRODUCER_EPOCH = 32767             # int16
_MAX_ID = (1 << 63) - 1

_NONE = errors.ErrorCode.Value("NONE")
_INVALID_REQUEST = errors.ErrorCode.Value("INVALID_REQUEST")
_COORDINATOR_NOT_AVAILABLE = errors.ErrorCode.Value("COORDINATOR_NOT_AVAILABLE")


class ProducerIdsExhaustedError(Exception):
    """Every int64 producer id has been handed out (Kafka: "Have exhausted all producerIds")."""


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids first_id .. first_id + size - 1, claimed by controller `broker_id`."""
    broker_id: int
    first_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last_id(self) -> int:
        return self.first_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_id + self.size

    def __post_init__(self) -> None:
        if self.first_id < 0 or self.size < 1 or self.last_id > _MAX_ID:
            raise ValueError(f"bad producer id block {self.first_id}+{self.size}")


def next_block(latest: ProducerIdBlock | None, broker_id: int,
               size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
    """The block after `latest` (the one in the znode; None when there is none yet)."""
    if latest is None:
        return ProducerIdBlock(broker_id, 0, size)
    if latest.last_id > _MAX_ID - size:
        raise ProducerIdsExhaustedError(f"no producer ids after {latest.last_id}")
    return ProducerIdBlock(broker_id, latest.next_block_first_id, size)


@dataclass(frozen=True, slots=True)
class ClaimProducerIdBlock:
    """Effect: claim the next block through /latest_producer_id_block (conditional write, retry
    on BadVersion), then feed it to `ProducerIdAllocator.install_block` (or `claim_failed`)."""


class ProducerIdAllocator:
    """The active controller's producer ids: the current block, a prefetched one, a cursor."""

    def __init__(self, *, prefetch_ratio: float = PREFETCH_RATIO) -> None:
        self.prefetch_ratio = prefetch_ratio
        self.current: ProducerIdBlock | None = None
        self.prefetched: ProducerIdBlock | None = None
        self._next_id = -1
        self.claim_in_flight = False

    @property
    def remaining(self) -> int:
        """Ids left in the current block (the prefetched one not counted)."""
        return 0 if self.current is None else self.current.last_id - self._next_id + 1

    @property
    def needs_new_block(self) -> bool:
        """True when a claim should start: none running, none prefetched, and the current block
        is missing or at least `prefetch_ratio` used."""
        if self.claim_in_flight or self.prefetched is not None:
            return False
        if self.current is None or self.remaining == 0:
            return True
        used = self._next_id - self.current.first_id
        return used >= self.prefetch_ratio * self.current.size

    def start_claim(self) -> bool:
        """Mark a claim as running if one is needed; True when the caller must perform it."""
        if not self.needs_new_block:
            return False
        self.claim_in_flight = True
        return True

    def install_block(self, block: ProducerIdBlock) -> None:
        """A claimed block (from ZooKeeper): the current one when exhausted, else prefetched."""
        self.claim_in_flight = False
        if self.current is not None and block.first_id <= self.current.last_id:
            raise ValueError(f"block {block} overlaps or precedes the current {self.current}")
        if self.current is None or self.remaining == 0:
            self.current, self._next_id = block, block.first_id
        else:
            self.prefetched = block

    def claim_failed(self) -> None:
        self.claim_in_flight = False

    def next_id(self) -> int | None:
        """The next unused id, or None when both blocks are used up (a claim is needed)."""
        if self.remaining == 0 and self.prefetched is not None:
            self.current, self.prefetched = self.prefetched, None
            self._next_id = self.current.first_id
        if self.remaining == 0:
            return None
        pid = self._next_id
        self._next_id += 1
        return pid


def _response(code: int, message: str = "", producer_id: int = -1,
              producer_epoch: int = -1) -> producer_id_pb2.InitProducerIdResponse:
    return producer_id_pb2.InitProducerIdResponse(error_code=code, error_message=message,
                                                  producer_id=producer_id,
                                                  producer_epoch=producer_epoch)


def handle_init_producer_id(request: producer_id_pb2.InitProducerIdRequest,
                            allocator: ProducerIdAllocator
                            ) -> tuple[producer_id_pb2.InitProducerIdResponse,
                                       list[ClaimProducerIdBlock]]:
    """INIT_PRODUCER_ID on the active controller. Returns (response, effects); the effects are
    at most one ClaimProducerIdBlock. See the module docstring for the rules."""
    if request.transactional_id:
        return _response(_INVALID_REQUEST, "transactions are not supported: "
                                           "transactional_id must be empty"), []
    pid, epoch = request.producer_id, request.producer_epoch
    if pid >= 0 and 0 <= epoch < MAX_PRODUCER_EPOCH:
        return _response(_NONE, "", pid, epoch + 1), []
    if not ((pid == -1 and epoch == -1) or (pid >= 0 and epoch == MAX_PRODUCER_EPOCH)):
        return _response(_INVALID_REQUEST,
                         f"producer id {pid} with epoch {epoch}: send -1/-1 for a new id, or an "
                         f"id >= 0 with its epoch in 0..{MAX_PRODUCER_EPOCH}"), []
    new_id = allocator.next_id()
    effects = [ClaimProducerIdBlock()] if allocator.start_claim() else []
    if new_id is None:
        return _response(_COORDINATOR_NOT_AVAILABLE,
                         "no producer id block yet; retry shortly"), effects
    return _response(_NONE, "", new_id, 0), effects
