"""The controller's per-node senders (services/controller/shell/senders.py) over a fake channel
pool: a request is meant for one registration (broker epoch) of its node; when the node
registers again, the request in flight is abandoned and queued ones for the old registration
are dropped, so the new registration's LEADER_AND_ISR goes at once (issue 24). No sockets."""
import asyncio

from riverbed._proto.v1 import controller_pb2, header_pb2
from services.controller.shell.senders import NodeSenders, still_addressed

Api = header_pb2.ApiKey


class FakeChannel:
    def __init__(self):
        self.calls: list[int] = []             # broker epochs of the requests sent
        self.answers: asyncio.Queue = asyncio.Queue()
        self.waiting = asyncio.Event()

    async def call(self, api, body, timeout_ms):
        self.calls.append(body.broker_epoch)
        self.waiting.set()
        resp = await self.answers.get()        # never answered unless the test says so

        class R:
            pass
        r = R()
        r.body = resp
        return r


class FakePool:
    def __init__(self):
        self.channel = FakeChannel()

    def get(self, endpoint):
        return self.channel


def lai(broker_epoch):
    return controller_pb2.LeaderAndIsrRequest(controller_epoch=1, broker_epoch=broker_epoch)


def test_still_addressed():
    assert still_addressed(("ep", 10), 10)
    assert not still_addressed(("ep", 11), 10)     # registered again: a new peer
    assert not still_addressed(None, 10)           # gone (or fenced)
    assert still_addressed(("ep", 11), 0)          # unstamped: any registration
    assert still_addressed(("ep", -1), 10)         # registration epoch unknown


def test_a_request_to_a_registration_that_ended_is_abandoned_and_the_new_one_served_at_once():
    async def body():
        pool = FakePool()
        target = {3: ("tcp://n3", 10)}
        senders = NodeSenders(pool, target.get, lambda epoch: True, timeout_ms=30_000)
        senders.enqueue(3, Api.LEADER_AND_ISR, lai(10), 1)    # the old process never answers
        await pool.channel.waiting.wait()
        pool.channel.waiting.clear()
        senders.enqueue(3, Api.LEADER_AND_ISR, lai(10), 1)    # queued behind it
        target[3] = ("tcp://n3", 11)                          # the node registered again
        senders.enqueue(3, Api.LEADER_AND_ISR, lai(11), 1)    # its full LEADER_AND_ISR
        senders.recheck()
        await pool.channel.waiting.wait()
        assert pool.channel.calls == [10, 11]                 # the queued old one never went
        await pool.channel.answers.put(controller_pb2.LeaderAndIsrResponse())
        for _ in range(100):
            if senders.sent:
                break
            await asyncio.sleep(0)
        assert (senders.sent, senders.abandoned, senders.dropped) == (1, 1, 1)
        await senders.close()
    asyncio.run(body())


def test_recheck_leaves_a_request_to_the_same_registration_alone():
    async def body():
        pool = FakePool()
        senders = NodeSenders(pool, {3: ("tcp://n3", 10)}.get, lambda epoch: True, 30_000)
        senders.enqueue(3, Api.LEADER_AND_ISR, lai(10), 1)
        await pool.channel.waiting.wait()
        senders.recheck()
        await pool.channel.answers.put(controller_pb2.LeaderAndIsrResponse())
        for _ in range(100):
            if senders.sent:
                break
            await asyncio.sleep(0)
        assert (senders.sent, senders.abandoned, senders.dropped) == (1, 0, 0)
        await senders.close()
    asyncio.run(body())


def test_a_controller_that_resigned_abandons_what_it_was_sending():
    async def body():
        pool = FakePool()
        active = [True]
        senders = NodeSenders(pool, {3: ("tcp://n3", 10)}.get, lambda epoch: active[0], 30_000)
        senders.enqueue(3, Api.LEADER_AND_ISR, lai(10), 1)
        await pool.channel.waiting.wait()
        active[0] = False
        senders.recheck()
        for _ in range(100):
            if senders.abandoned:
                break
            await asyncio.sleep(0)
        assert (senders.sent, senders.abandoned) == (0, 1)
        await senders.close()
    asyncio.run(body())
