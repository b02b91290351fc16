"""The shell of a sharded role (group coordinator, offset manager, transaction coordinator): the
role's pure core behind a ROUTER, its shards hosted by a ShardHost, a tick task driving the
core's timers.

Requests (normally forwarded by a gateway) become the role's `RequestReceived` inputs; the handler
waits for the `Reply` effect naming its request id. `AppendRecords` effects are written by the
ShardHost and fed back as `WriteCompleted`. Shard ownership changes become ShardLoad*/
ShardUnloaded inputs, and every record read from a shard goes to the core's `replay` (every
transaction marker to its `replay_control`, when it has one).

The core sees wall-clock milliseconds (its timestamps are stored in __consumer_offsets and read
by other instances); deadlines are compared against the same clock.

A role subclasses ShardedService and supplies: its core, the APIs it serves (`apis`), how a
request becomes its input (`_request`, via `_call`), its tick interval (`tick_s`) and what it
does with topic metadata (`topics_changed`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from riverbed.coordinator.offsets_topic import StoredControl, StoredRecord
from services.common import rpc
from services.common.metrics_core import RequestMetrics
from services.common.telemetry import Telemetry
from services.common.shard_host import ShardHost, ShardHostConfig
from services.common.sharded_role import (
    AppendRecords, Reply, ShardedServiceConfig, ShardLoadCompleted, ShardLoadStarted,
    ShardUnloaded, WriteCompleted,
)

log = logging.getLogger(__name__)
# On stop, how long replies the core gave at the last moment (parked heartbeats) get to leave
# the socket before it closes: libzmq writes them from its I/O thread within milliseconds; this
# leaves room on a loaded machine and delays only a stop that had something to answer.
STOP_REPLY_FLUSH_S = 0.2


def now_ms() -> int:
    return int(time.time() * 1000)


class ShardedService:
    apis: tuple[int, ...] = ()       # the ApiKeys this role serves, all through `_request`
    tick_s: float = 1.0              # how often the core's tick runs

    def __init__(self, config: ShardedServiceConfig, core: Any, *, name: str, root: str,
                 instance_id: int, required_acks: int, tail: bool,
                 coordinator_epochs: bool = False):
        """`core` has handle(event, now_ms), tick(now_ms), replay(record), check_invariants()
        (and replay_control(control) if it cares about transaction markers); `root` is the
        role's znode root, `tail` whether owned shards are read past loading,
        `coordinator_epochs` whether taking a shard bumps its epoch znode."""
        self.config = config
        self.name = name
        self.core = core
        self.host = ShardHost(ShardHostConfig(
            root=root, instance_id=instance_id,
            endpoint=config.endpoint, zookeeper_connect=config.zookeeper_connect,
            zookeeper_session_timeout_ms=config.zookeeper_session_timeout_ms,
            zookeeper_connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            topic=config.shard_topic(), required_acks=required_acks,
            request_timeout_ms=config.request_timeout_ms,
            max_message_bytes=config.socket_request_max_bytes, tail=tail,
            coordinator_epochs=coordinator_epochs), self, name=name)
        self._waiters: dict[int, asyncio.Future] = {}
        self._next_request_id = 1
        self._writes: set[asyncio.Task] = set()
        self.request_metrics = RequestMetrics()
        self.telemetry: Telemetry | None = None

    # -- lifecycle ------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.config
        server = rpc.RpcServer(cfg.endpoint, {api: self._request for api in self.apis},
                               name=self.name,
                               socket_request_max_bytes=cfg.socket_request_max_bytes,
                               queued_max_requests=cfg.queued_max_requests,
                               metrics=self.request_metrics if cfg.metrics_port >= 0 else None)
        role = self.name.rsplit("-", 1)[0].replace("-", "_")
        self.telemetry = Telemetry(role, self.host.config.instance_id, host=cfg.host_name,
                                   port=cfg.metrics_port)
        prefix = "riverbed." + role
        rm = self.request_metrics
        self.telemetry.counter(f"{prefix}.requests", rm.requests_obs, description="requests per API")
        self.telemetry.counter(f"{prefix}.request.time", rm.time_obs, unit="s",
                               description="time on requests per API and phase (commit latency: "
                                           "OFFSET_COMMIT, remote = the write to the log)")
        self.telemetry.counter(f"{prefix}.request.errors", rm.errors_obs,
                               description="error answers per API and error")
        self.telemetry.gauge(f"{prefix}.shards", lambda: [(len(self.host.owned_shards), {})],
                             description="partitions of the role's internal topic "
                                         "(__consumer_offsets, __transaction_state) this "
                                         "instance owns")
        self.register_metrics(self.telemetry)
        self.telemetry.start()
        try:
            await self.host.start()
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(server.serve(), name="rpc"),
                         tg.create_task(self.host.run(), name="shards"),
                         tg.create_task(self._tick_loop(), name="tick")]
                tasks += [tg.create_task(coro) for coro in self.background()]
                log.info("[%s] serving on %s", self.name, server.bound_endpoint)
                await stop.wait()
                log.info("[%s] stopping", self.name)
                await self._answer_now(self.stopping())
                for t in tasks:
                    t.cancel()
        finally:
            for t in list(self._writes):
                t.cancel()
            await server.close()
            self.telemetry.shutdown()
            await self.host.close()

    def register_metrics(self, tel: Telemetry) -> None:
        """The role's own instruments (groups per state, lag, ...)."""

    def stopping(self) -> list:
        """The core's effects when the instance stops (a role whose core parks requests answers
        them here, while the server can still send the replies)."""
        return []

    async def _answer_now(self, effects: list) -> None:
        """Perform `effects` and let the handlers of the requests they answer send their
        replies (each needs one turn of the loop), then give libzmq's I/O thread the time to
        write them out: the server's socket closes with LINGER 0, dropping what is still queued."""
        answered = [e.request_id for e in effects if isinstance(e, Reply)]
        self._perform(effects)
        if not answered:
            return
        for _ in range(10):
            if not any(rid in self._waiters for rid in answered):
                break
            await asyncio.sleep(0)
        await asyncio.sleep(STOP_REPLY_FLUSH_S)

    def background(self) -> list:
        """The role's own background coroutines, run beside the server until stop."""
        return []

    # -- the core's door ------------------------------------------------------------------
    def _perform(self, effects) -> None:
        for eff in effects:
            if isinstance(eff, Reply):
                fut = self._waiters.get(eff.request_id)
                if fut is not None and not fut.done():
                    fut.set_result(eff.body)
            elif isinstance(eff, AppendRecords):
                task = asyncio.get_running_loop().create_task(self._write(eff))
                self._writes.add(task)
                task.add_done_callback(self._writes.discard)
            else:
                raise TypeError(f"unknown effect {eff!r}")

    async def _write(self, eff: AppendRecords) -> None:
        code, base_offset = await self.host.append(eff.shard, eff.records,
                                                   producer_id=eff.producer_id,
                                                   producer_epoch=eff.producer_epoch)
        self._perform(self.core.handle(WriteCompleted(eff.write_id, code, base_offset), now_ms()))

    async def _request(self, req: rpc.Request) -> rpc.Reply:
        """The role's handler for every API in `apis`: turn `req` into its input with `_call`."""
        raise NotImplementedError

    async def _call(self, make_input: Callable[[int], Any]) -> rpc.Reply:
        """Hand the core `make_input(request_id)` and wait for the Reply naming that id."""
        rid = self._next_request_id
        self._next_request_id += 1
        fut = asyncio.get_running_loop().create_future()
        self._waiters[rid] = fut
        try:
            self._perform(self.core.handle(make_input(rid), now_ms()))
            with rpc.remote_wait():    # the log write, or the other members of a rebalance
                body = await fut
            return rpc.Reply(body)
        finally:
            self._waiters.pop(rid, None)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            self._perform(self.core.tick(now_ms()))
            self.core.check_invariants()

    # -- ShardListener (called on the loop by the ShardHost) ------------------------------
    def shard_load_started(self, shard: int, coordinator_epoch: int = -1) -> None:
        self._perform(self.core.handle(ShardLoadStarted(shard, coordinator_epoch), now_ms()))

    def replay(self, record: StoredRecord) -> None:
        self.core.replay(record)

    def replay_control(self, control: StoredControl) -> None:
        replay_control = getattr(self.core, "replay_control", None)
        if replay_control is not None:
            self._perform(replay_control(control))

    def shard_load_completed(self, shard: int) -> None:
        self._perform(self.core.handle(ShardLoadCompleted(shard), now_ms()))

    def shard_unloaded(self, shard: int) -> None:
        self._perform(self.core.handle(ShardUnloaded(shard), now_ms()))

    def topics_changed(self, partition_counts: Mapping[str, int]) -> None:
        raise NotImplementedError
