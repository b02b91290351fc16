"""Controller -> storage node requests (LEADER_AND_ISR, STOP_REPLICA), in order per node, each
retried until it is answered or the node is no longer registered (or the controller resigned).

One task per node with a bounded queue: requests to one node keep their order (a newer
LEADER_AND_ISR never overtakes an older one); a slow node does not hold up the others.

A request is meant for one registration of its node: the core stamps it with the node's broker
epoch (the czxid of /brokers/ids/<id>). A node that registers again (a restart, a new ZooKeeper
session) is a new peer: the controller sends it a full LEADER_AND_ISR of its own, so whatever
was meant for the old registration is dropped, the request in flight included (`recheck`, called
after every change the controller makes): nothing for the new process waits behind an answer
the old one will never give. The channel underneath (services.common.rpc.channel) already
resends a request lost with a broken connection; if such a resend reaches the new process
first, the node refuses it (STALE_BROKER_EPOCH).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from services.common.rpc import ChannelPool

log = logging.getLogger(__name__)

ApiKey = header_pb2.ApiKey
STALE = errors.ErrorCode.Value("STALE_CONTROLLER_EPOCH")
STALE_BROKER_EPOCH = errors.ErrorCode.Value("STALE_BROKER_EPOCH")
RETRY_BACKOFF_MS = (50, 100, 200, 500, 1000)
# Requests waiting per node. A controller produces one per node per change; above this the
# oldest are useless anyway (a node that comes back gets a full LEADER_AND_ISR).
MAX_QUEUED_PER_NODE = 10_000

# node -> (endpoint, broker epoch) of its live registration, or None
TargetOf = Callable[[int], "tuple[str, int] | None"]


def still_addressed(target: tuple[str, int] | None, broker_epoch: int) -> bool:
    """May a request stamped for `broker_epoch` (0: not stamped) still go to the node, whose
    live registration is `target`?"""
    if target is None:
        return False
    return broker_epoch <= 0 or target[1] <= 0 or target[1] == broker_epoch


class NodeSenders:
    """`enqueue(node, api, body, epoch)`; `target_of(node)` returns the node's (endpoint, broker
    epoch) or None when it is not registered (or fenced); `still_valid(epoch)` says whether
    requests of that controller epoch may still be sent."""

    def __init__(self, pool: ChannelPool, target_of: TargetOf,
                 still_valid: Callable[[int], bool], timeout_ms: int):
        self._pool = pool
        self._target_of = target_of
        self._still_valid = still_valid
        self._timeout_ms = timeout_ms
        self._queues: dict[int, asyncio.Queue] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        # node -> (controller epoch, broker epoch, the call) of the request in flight
        self._inflight: dict[int, tuple[int, int, asyncio.Future]] = {}
        self.sent = 0
        self.dropped = 0
        self.abandoned = 0      # in flight when their node's registration changed

    def enqueue(self, node: int, api: int, body, epoch: int) -> None:
        q = self._queues.get(node)
        if q is None:
            q = self._queues[node] = asyncio.Queue(MAX_QUEUED_PER_NODE)
        if q.full():
            q.get_nowait()
            self.dropped += 1
        q.put_nowait((api, body, epoch))
        task = self._tasks.get(node)
        if task is None or task.done():
            self._tasks[node] = asyncio.get_running_loop().create_task(
                self._run(node, q), name=f"send-node-{node}")

    def recheck(self) -> None:
        """Abandon each request in flight to a node that is no longer the registration it was
        meant for (gone, fenced, registered again) or whose controller epoch is over."""
        for node, (epoch, broker_epoch, call) in list(self._inflight.items()):
            if call.done():
                continue
            if not (self._still_valid(epoch)
                    and still_addressed(self._target_of(node), broker_epoch)):
                call.cancel()

    async def _run(self, node: int, q: asyncio.Queue) -> None:
        while not q.empty():
            api, body, epoch = q.get_nowait()
            broker_epoch = getattr(body, "broker_epoch", 0)
            attempt = 0
            while True:
                target = self._target_of(node)
                if not self._still_valid(epoch) or not still_addressed(target, broker_epoch):
                    self.dropped += 1
                    break
                call = asyncio.ensure_future(self._pool.get(target[0]).call(
                    api, body, timeout_ms=self._timeout_ms))
                self._inflight[node] = (epoch, broker_epoch, call)
                try:
                    resp = await call
                except asyncio.CancelledError:
                    if not call.cancelled() or asyncio.current_task().cancelling():
                        raise
                    self.abandoned += 1
                    log.info("%s to node %d abandoned: the node registered again or left "
                             "(broker epoch %d)", ApiKey.Name(api), node, broker_epoch)
                    break
                except errors.KafkaError as e:
                    delay = RETRY_BACKOFF_MS[min(attempt, len(RETRY_BACKOFF_MS) - 1)]
                    log.info("%s to node %d failed (%s); retry in %d ms", ApiKey.Name(api), node,
                             e, delay)
                    attempt += 1
                    await asyncio.sleep(delay / 1000)
                    continue
                finally:
                    self._inflight.pop(node, None)
                code = getattr(resp.body, "error_code", 0)
                if code == STALE:
                    log.warning("node %d refused %s: stale controller epoch %d", node,
                                ApiKey.Name(api), epoch)
                elif code == STALE_BROKER_EPOCH:
                    log.info("node %d refused %s meant for its earlier registration: %s", node,
                             ApiKey.Name(api), resp.body.error_message)
                elif code:
                    log.warning("node %d answered %s with error %s: %s", node,
                                ApiKey.Name(api), errors.ErrorCode.Name(code),
                                resp.body.error_message)
                self.sent += 1
                break

    async def close(self) -> None:
        for t in self._tasks.values():
            t.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()
        self._queues.clear()
        self._inflight.clear()
