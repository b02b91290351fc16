"""Producer ids: blocks through /latest_producer_id_block (conditional writes, racing claimers
never overlap), the allocator's prefetch, and INIT_PRODUCER_ID's answers."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from riverbed import errors
from riverbed._proto.v1.producer_id_pb2 import InitProducerIdRequest
from services.common import znodes
from services.controller.core.producer_ids import (
    MAX_PRODUCER_EPOCH, PRODUCER_ID_BLOCK_SIZE, ClaimProducerIdBlock, ProducerIdAllocator,
    ProducerIdBlock, ProducerIdsExhaustedError, handle_init_producer_id, next_block)
from services.controller.shell.producer_ids_store import (
    ProducerIdBlockStore, ProducerIdClaimError)

code = errors.ErrorCode.Value


class FakeZk:
    """The three kazoo calls the store uses, with ZooKeeper's version semantics."""

    def __init__(self):
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.before_write = None           # hook: runs once before the next set/create

    def get(self, path):
        if path not in self.nodes:
            raise NoNodeError()
        data, version = self.nodes[path]
        return data, SimpleNamespace(version=version)

    def _hook(self):
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook()

    def create(self, path, data):
        self._hook()
        if path in self.nodes:
            raise NodeExistsError()
        self.nodes[path] = (data, 0)

    def set(self, path, data, version=-1):
        self._hook()
        if path not in self.nodes:
            raise NoNodeError()
        current = self.nodes[path][1]
        if version != -1 and version != current:
            raise BadVersionError()
        self.nodes[path] = (data, current + 1)


def test_znode_payload_is_kafkas_json():
    zk = FakeZk()
    block = ProducerIdBlockStore(zk).claim_next_block(3)
    assert (block.first_id, block.last_id) == (0, PRODUCER_ID_BLOCK_SIZE - 1)
    data = zk.nodes[znodes.LATEST_PRODUCER_ID_BLOCK][0]
    assert json.loads(data) == {"version": 1, "broker": 3, "block_start": "0",
                                "block_end": "999"}
    assert znodes.decode_producer_id_block(data) == znodes.ProducerIdBlockInfo(3, 0, 999)


@pytest.mark.parametrize("bad", [b"{}", b'{"version":1,"broker":1,"block_start":"x","block_end":"9"}',
                                 b'{"version":1,"broker":1,"block_start":"9","block_end":"3"}',
                                 b"\xff"])
def test_unreadable_block_znode_refuses_to_allocate(bad):
    zk = FakeZk()
    zk.nodes[znodes.LATEST_PRODUCER_ID_BLOCK] = (bad, 4)
    with pytest.raises(znodes.ZnodeDataError):
        ProducerIdBlockStore(zk).claim_next_block(1)


def test_empty_node_from_ensure_path_means_first_block():
    zk = FakeZk()
    zk.nodes[znodes.LATEST_PRODUCER_ID_BLOCK] = (b"", 0)
    assert ProducerIdBlockStore(zk).claim_next_block(1).first_id == 0
    assert ProducerIdBlockStore(zk).claim_next_block(2).first_id == 1000


def test_claim_that_loses_the_race_retries_and_gets_the_next_block():
    zk = FakeZk()
    a, b = ProducerIdBlockStore(zk), ProducerIdBlockStore(zk)
    a.claim_next_block(1)                                   # 0..999
    won = []
    zk.before_write = lambda: won.append(b.claim_next_block(2))   # b sneaks in: 1000..1999
    lost_then_won = a.claim_next_block(1)
    assert won[0].first_id == 1000 and lost_then_won.first_id == 2000


def test_claim_gives_up_after_the_bounded_attempts():
    zk = FakeZk()
    other = ProducerIdBlockStore(zk)
    store = ProducerIdBlockStore(zk, max_attempts=3)

    def always_interfere():
        other.claim_next_block(9)
        zk.before_write = always_interfere
    zk.before_write = always_interfere
    with pytest.raises(ProducerIdClaimError):
        store.claim_next_block(1)


@settings(max_examples=150, deadline=None)
@given(schedule=st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=60))
def test_racing_claimers_never_get_overlapping_blocks(schedule):
    """Three claimers interleave their read and conditional-write phases in any order."""
    zk = FakeZk()
    stores = [ProducerIdBlockStore(zk, block_size=10) for _ in range(3)]
    pending: dict[int, tuple] = {}                  # claimer -> (block, version) read
    claimed: list[ProducerIdBlock] = []
    for who, phase_read in schedule:
        if phase_read or who not in pending:
            latest, version = stores[who].read_latest()
            pending[who] = (next_block(latest, who, 10), version)
        else:
            block, version = pending.pop(who)
            if stores[who].try_write(block, version):
                claimed.append(block)
    ids = [i for b in claimed for i in range(b.first_id, b.last_id + 1)]
    assert len(ids) == len(set(ids))
    assert sorted(b.first_id for b in claimed) == [10 * i for i in range(len(claimed))]


def test_next_block_refuses_to_overflow_int64():
    last = ProducerIdBlock(1, (1 << 63) - PRODUCER_ID_BLOCK_SIZE, PRODUCER_ID_BLOCK_SIZE)
    with pytest.raises(ProducerIdsExhaustedError):
        next_block(last, 1)


# ---- the allocator ---------------------------------------------------------------------------

def test_allocator_hands_out_each_id_once_and_prefetches_at_ninety_percent():
    alloc = ProducerIdAllocator()
    assert alloc.next_id() is None and alloc.start_claim()
    assert not alloc.start_claim()                     # one claim at a time
    alloc.install_block(ProducerIdBlock(1, 0, 10))
    got = [alloc.next_id() for _ in range(8)]
    assert got == list(range(8)) and not alloc.needs_new_block
    got.append(alloc.next_id())                        # 9 of 10 used: time to prefetch
    assert alloc.needs_new_block and alloc.start_claim()
    alloc.install_block(ProducerIdBlock(2, 50, 10))
    got += [alloc.next_id() for _ in range(11)]
    assert got == list(range(10)) + list(range(50, 60))
    assert alloc.next_id() is None and alloc.needs_new_block


def test_allocator_refuses_an_overlapping_block():
    alloc = ProducerIdAllocator()
    alloc.install_block(ProducerIdBlock(1, 100, 10))
    with pytest.raises(ValueError):
        alloc.install_block(ProducerIdBlock(1, 105, 10))


# ---- INIT_PRODUCER_ID ------------------------------------------------------------------------

def req(pid=-1, epoch=-1, txn=""):
    return InitProducerIdRequest(producer_id=pid, producer_epoch=epoch, transactional_id=txn)


def test_new_producer_gets_a_fresh_id_at_epoch_zero():
    alloc = ProducerIdAllocator()
    alloc.install_block(ProducerIdBlock(1, 1000, 1000))
    r1, e1 = handle_init_producer_id(req(), alloc)
    r2, _ = handle_init_producer_id(req(), alloc)
    assert (r1.error_code, r1.producer_id, r1.producer_epoch) == (code("NONE"), 1000, 0)
    assert r2.producer_id == 1001 and e1 == []


def test_without_a_block_the_answer_is_retriable_and_a_claim_is_asked_once():
    alloc = ProducerIdAllocator()
    r, effects = handle_init_producer_id(req(), alloc)
    assert r.error_code == code("COORDINATOR_NOT_AVAILABLE") and r.producer_id == -1
    assert effects == [ClaimProducerIdBlock()]
    assert handle_init_producer_id(req(), alloc)[1] == []          # claim already running
    alloc.install_block(ProducerIdBlock(1, 0))
    assert handle_init_producer_id(req(), alloc)[0].producer_id == 0


def test_epoch_bump_keeps_the_id_and_exhausted_epoch_gets_a_new_id():
    alloc = ProducerIdAllocator()
    alloc.install_block(ProducerIdBlock(1, 0))
    r, _ = handle_init_producer_id(req(42, 7), alloc)
    assert (r.producer_id, r.producer_epoch) == (42, 8)
    r, _ = handle_init_producer_id(req(42, MAX_PRODUCER_EPOCH), alloc)
    assert (r.producer_id, r.producer_epoch) == (0, 0)


@pytest.mark.parametrize("pid,epoch,txn", [(-1, 0, ""), (5, -1, ""), (-2, -1, ""),
                                           (5, MAX_PRODUCER_EPOCH + 1, ""), (-1, -1, "tx")])
def test_invalid_requests(pid, epoch, txn):
    alloc = ProducerIdAllocator()
    alloc.install_block(ProducerIdBlock(1, 0))
    r, effects = handle_init_producer_id(req(pid, epoch, txn), alloc)
    assert r.error_code == code("INVALID_REQUEST") and effects == []
    assert alloc.next_id() == 0                                    # nothing was used up
