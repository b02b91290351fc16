"""The controller shell's INIT_PRODUCER_ID wiring (shell/service.py): a standby answers
NOT_CONTROLLER; the active controller waits for its first block claim and answers once more;
a failed claim is COORDINATOR_NOT_AVAILABLE and the next request claims again; a block claimed
after losing the controllership is dropped. ZooKeeper is an in-memory fake and the executor hop
is replaced by a direct call (no threads)."""
from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from riverbed._proto.v1.producer_id_pb2 import InitProducerIdRequest
from riverbed.wire.framing import Request
from services.common import znodes
from services.controller.config import ControllerConfig
from services.controller.core.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdAllocator
from services.controller.shell.service import ControllerService

code = errors.ErrorCode.Value


class FakeZk:
    """get / create / set with ZooKeeper's version semantics; `fail_next` gets raise a
    connection loss."""

    def __init__(self):
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.fail_next = 0

    def get(self, path):
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("connection loss")
        if path not in self.nodes:
            raise NoNodeError()
        data, version = self.nodes[path]
        return data, SimpleNamespace(version=version)

    def create(self, path, data):
        if path in self.nodes:
            raise NodeExistsError()
        self.nodes[path] = (data, 0)

    def set(self, path, data, version=-1):
        if path not in self.nodes:
            raise NoNodeError()
        current = self.nodes[path][1]
        if version not in (-1, current):
            raise BadVersionError()
        self.nodes[path] = (data, current + 1)


def request(pid=-1, epoch=-1) -> Request:
    return Request(header_pb2.RequestHeader(), header_pb2.ApiKey.INIT_PRODUCER_ID,
                   InitProducerIdRequest(producer_id=pid, producer_epoch=epoch))


def service(zk) -> ControllerService:
    svc = ControllerService(ControllerConfig(controller_id=7), random.Random(0))
    svc._zk_exec.shutdown(wait=False)
    svc._loop = asyncio.get_running_loop()
    svc.client = zk

    async def direct(fn, *args, **kw):
        await asyncio.sleep(0)       # a real hop yields to the loop too
        return fn(*args, **kw)
    svc._zk = direct
    return svc


def become_active(svc: ControllerService) -> None:
    svc.core.active = True           # what ElectedAsController does, for this test's purpose
    svc._pid_alloc = ProducerIdAllocator()


async def answer(svc, req=None):
    return (await svc._handle_init_producer_id(req or request())).body


def test_standby_answers_not_controller():
    async def main():
        svc = service(FakeZk())
        with pytest.raises(errors.NotControllerError):
            await svc._handle_init_producer_id(request())
    asyncio.run(main())


def test_first_request_waits_for_the_claim_then_ids_are_distinct_and_bumps_keep_the_id():
    async def main():
        zk = FakeZk()
        svc = service(zk)
        become_active(svc)
        first, second = await asyncio.gather(answer(svc), answer(svc))
        assert (first.error_code, second.error_code) == (code("NONE"), code("NONE"))
        assert {first.producer_id, second.producer_id} == {0, 1}
        assert (first.producer_epoch, second.producer_epoch) == (0, 0)
        # one block claimed, by this controller
        info = znodes.decode_producer_id_block(zk.nodes[znodes.LATEST_PRODUCER_ID_BLOCK][0])
        assert (info.broker_id, info.block_start, info.block_end) == \
            (7, 0, PRODUCER_ID_BLOCK_SIZE - 1)
        bumped = await answer(svc, request(first.producer_id, 0))
        assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)
    asyncio.run(main())


def test_failed_claim_is_retriable_and_the_next_request_claims_again():
    async def main():
        zk = FakeZk()
        zk.fail_next = 1
        svc = service(zk)
        become_active(svc)
        r = await answer(svc)
        assert r.error_code == code("COORDINATOR_NOT_AVAILABLE")
        assert not svc._pid_alloc.claim_in_flight
        r = await answer(svc)
        assert (r.error_code, r.producer_id) == (code("NONE"), 0)
    asyncio.run(main())


def test_block_claimed_after_losing_the_controllership_is_not_used():
    async def main():
        zk = FakeZk()
        svc = service(zk)
        become_active(svc)
        old = svc._pid_alloc
        pending = asyncio.ensure_future(answer(svc))
        await asyncio.sleep(0)                 # the claim has started
        svc._lose("test")                      # LeadershipLost: the allocator is dropped
        r = await pending
        assert r.error_code == code("COORDINATOR_NOT_AVAILABLE")
        assert old.current is None and svc._pid_alloc is None
        with pytest.raises(errors.NotControllerError):
            await svc._handle_init_producer_id(request())
    asyncio.run(main())
