"""Controller -> storage node requests (LEADER_AND_ISR, STOP_REPLICA), in order per node, each
retried until it is answered or the node is no longer registered (or the controller resigned).

One task per node with a bounded queue: requests to one node keep their order (a newer
LEADER_AND_ISR never overtakes an older one); a slow node does not hold up the others.
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
RETRY_BACKOFF_MS = (50, 100, 200, 500, 1000)
# Requests waiting per node. A controller produces one per node per change; above this the
# oldest are useless anyway (a node that comes back gets a full LEADER_AND_ISR).
MAX_QUEUED_PER_NODE = 10_000


class NodeSenders:
    """`enqueue(node, api, body)`; `endpoint_of(node)` returns the node's endpoint or None when
    it is not registered; `still_valid(epoch)` says whether requests of that controller epoch
    may still be sent."""

    def __init__(self, pool: ChannelPool, endpoint_of: Callable[[int], str | None],
                 still_valid: Callable[[int], bool], timeout_ms: int):
        self._pool = pool
        self._endpoint_of = endpoint_of
        self._still_valid = still_valid
        self._timeout_ms = timeout_ms
        self._queues: dict[int, asyncio.Queue] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self.sent = 0
        self.dropped = 0

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

    async def _run(self, node: int, q: asyncio.Queue) -> None:
        while not q.empty():
            api, body, epoch = q.get_nowait()
            attempt = 0
            while True:
                endpoint = self._endpoint_of(node)
                if endpoint is None or not self._still_valid(epoch):
                    self.dropped += 1
                    break
                try:
                    resp = await self._pool.get(endpoint).call(api, body,
                                                               timeout_ms=self._timeout_ms)
                    code = getattr(resp.body, "error_code", 0)
                    if code == STALE:
                        log.warning("node %d refused %s: stale controller epoch %d", node,
                                    ApiKey.Name(api), epoch)
                    elif code:
                        log.warning("node %d answered %s with error %s: %s", node,
                                    ApiKey.Name(api), errors.ErrorCode.Name(code),
                                    resp.body.error_message)
                    self.sent += 1
                    break
                except errors.KafkaError as e:
                    delay = RETRY_BACKOFF_MS[min(attempt, len(RETRY_BACKOFF_MS) - 1)]
                    log.info("%s to node %d failed (%s); retry in %d ms", ApiKey.Name(api), node,
                             e, delay)
                    attempt += 1
                    await asyncio.sleep(delay / 1000)

    async def close(self) -> None:
        for t in self._tasks.values():
            t.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()
        self._queues.clear()
