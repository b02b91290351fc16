"""The controller's shell: asyncio + ZeroMQ + kazoo around the pure ControllerCore.

Tasks (one TaskGroup): the ROUTER server, the election loop, the broker-registration loop, the
metadata tick. Every use of the core happens on the event loop under `self._lock`, and the
effects it returns are performed before the lock is released, so the core's decisions and the
ZooKeeper writes that make them durable happen in one order. Kazoo runs its callbacks on its
own threads; they only hand a note to the loop with `call_soon_threadsafe`.

Fencing (STYLE.md §9): kazoo's election helpers keep running a leader after its session is
gone, so the shell does not use them. It creates /controller itself, bumps /controller_epoch
with a versioned write, and every later write carries a version check on /controller_epoch. On
SUSPENDED or LOST, on another controller's /controller, or on any failed write it stops acting
at once (the core forgets its model) and runs the election again when connected.

Producer ids (INIT_PRODUCER_ID, idempotent producers): the active controller holds a
`ProducerIdAllocator` (core/producer_ids.py), created empty on election and dropped on losing
it. Blocks of ids are claimed through /latest_producer_id_block on the ZooKeeper executor
(shell/producer_ids_store.py, a versioned write: blocks never overlap, even across failovers):
one claim on election, then whenever the allocator asks (prefetch at 90% used). A request that
finds no id waits for the running claim and is answered once more; the claim is not fenced by
/controller_epoch and does not take the core's lock. That part lives in
shell/producer_id_serving.py, a mixin of ControllerService.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from services.common import zk as zkmod
from services.common import znodes
from services.common.metrics_core import RequestMetrics
from services.common.telemetry import Telemetry
from services.common.rpc import ChannelPool, Publisher, Reply, Request, RpcServer
from services.controller.config import ControllerConfig
from services.controller.core.active_controller_watch import ActiveController
from services.controller.core.controller import ControllerCore
from services.controller.core.effects import (
    PublishMetadata, Respond, Resign, SendLeaderAndIsr, SendStopReplica, ZkWrite)
from services.controller.core.events import (
    BrokersChanged, ElectedAsController, GatewaysChanged, LeadershipLost,
    PreferredElectionZnodeChanged, ReassignmentsZnodeChanged, RequestReceived)
from services.controller.core.producer_ids import ProducerIdAllocator
from services.controller.shell.active_controller_probe import ActiveControllerProbe
from services.controller.shell.producer_id_serving import ProducerIdServing
from services.controller.shell.senders import NodeSenders
from services.controller.shell.warm_topics import (
    BACKGROUND_MAX_READS, REFRESH_INTERVAL_S, WarmTopics)
from services.controller.shell.zk_store import Fenced, ZkStore

log = logging.getLogger(__name__)
ApiKey = header_pb2.ApiKey

SERVED_APIS = (ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.CREATE_TOPICS,
               ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DESCRIBE_CONFIGS,
               ApiKey.ALTER_CONFIGS, ApiKey.ALTER_PARTITION, ApiKey.CONTROLLED_SHUTDOWN,
               ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
               ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.BROKER_HEARTBEAT)
TICK_INTERVAL_S = 0.1
ELECTION_RETRY_S = 0.5
METADATA_TOPIC = b"metadata"


class _Stop(Exception):
    pass


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ControllerService(ProducerIdServing):
    def __init__(self, config: ControllerConfig, rng: random.Random | None = None):
        self.cfg = config
        self.core = ControllerCore(config, rng or random.Random())
        self._lock = asyncio.Lock()
        self._zk_exec = ThreadPoolExecutor(1, thread_name_prefix="controller-zk")
        self._connected = False
        self._session_generation = 0
        self._epoch_zk_version = -1
        self._election_wake = asyncio.Event()
        self._brokers_dirty = asyncio.Event()
        self._admin_dirty = asyncio.Event()       # /admin/reassign_partitions, .../preferred_...
        self._gateways_dirty = asyncio.Event()
        self._log_dir_events: asyncio.Queue[list[str]] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.client = None
        self.store: ZkStore | None = None
        self.warm: WarmTopics | None = None       # standby: topic znodes kept by watches
        self.last_election: dict[str, float] = {}
        self._electing = False          # an election attempt holds the ZooKeeper executor
        self.server: RpcServer | None = None
        self.publisher: Publisher | None = None
        self.pool: ChannelPool | None = None
        self.senders: NodeSenders | None = None
        self._watcher: zkmod.SessionWatcher | None = None
        self._probe: ActiveControllerProbe | None = None       # standby: the active's process
        self.fast_takeovers = 0
        # Producer ids: set while active (a fresh one per election), the running block claim.
        self._pid_alloc: ProducerIdAllocator | None = None
        self._pid_claim: asyncio.Task | None = None
        self.request_metrics = RequestMetrics()
        self.election_time_s = 0.0              # seconds spent handling storage node changes
        self.telemetry: Telemetry | None = None

    async def _zk(self, fn, *args, **kw):
        return await self._loop.run_in_executor(self._zk_exec, lambda: fn(*args, **kw))

    # ---- lifecycle ---------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop` is set (SIGTERM/SIGINT in services.common.service_main); 1 when
        ZooKeeper or the sockets cannot be reached at start."""
        self._loop = loop = asyncio.get_running_loop()
        cfg = self.cfg
        try:
            self.client = await self._zk(
                zkmod.connect, cfg.zookeeper_connect,
                timeout_s=cfg.zookeeper_connection_timeout_ms / 1000,
                session_timeout_ms=cfg.zookeeper_session_timeout_ms)
        except zkmod.ZkConnectError as e:
            log.error("%s", e)
            self._zk_exec.shutdown(wait=False)
            return 1
        self.store = ZkStore(self.client)
        self.warm = WarmTopics(self.client) if cfg.controller_warm_standby_enable else None
        try:
            await self._zk(self.store.ensure_paths)
            handlers = {api: self._handle for api in SERVED_APIS}
            handlers[ApiKey.INIT_PRODUCER_ID] = self._handle_init_producer_id
            self.server = RpcServer(cfg.endpoint, handlers, name=f"controller-{cfg.controller_id}",
                                    socket_request_max_bytes=cfg.socket_request_max_bytes,
                                    metrics=self.request_metrics if cfg.metrics_port >= 0 else None)
            self.telemetry = Telemetry("controller", cfg.controller_id, host=cfg.host_name,
                                       port=cfg.metrics_port)
            self._register_metrics(self.telemetry)
            self.telemetry.start()
            self.publisher = Publisher(cfg.pub_endpoint)
        except Exception as e:  # noqa: BLE001 - e.g. the port is taken
            log.error("controller %d cannot start: %s", cfg.controller_id, e)
            await self._shutdown()
            return 1
        self.pool = ChannelPool(client_id=f"controller-{cfg.controller_id}",
                                max_message_bytes=cfg.socket_request_max_bytes)
        self.senders = NodeSenders(self.pool, self._target_of, self._epoch_still_valid,
                                   cfg.controller_socket_timeout_ms)
        self._watcher = zkmod.SessionWatcher(
            self.client, on_change=lambda ch: loop.call_soon_threadsafe(self._on_session, ch),
            name="controller-session").start()
        if cfg.controller_fast_takeover_enable:
            self._probe = ActiveControllerProbe(
                lambda target: loop.call_soon_threadsafe(self._on_active_gone, target),
                name=f"-{cfg.controller_id}").start()
        self.client.DataWatch(znodes.CONTROLLER, self._controller_watch)
        self.client.ChildrenWatch(znodes.BROKER_IDS, self._brokers_watch)
        self.client.ChildrenWatch(znodes.GATEWAYS, self._gateways_watch)
        self.client.ChildrenWatch(znodes.LOG_DIR_EVENT_NOTIFICATION, self._log_dir_events_watch)
        self.client.DataWatch(znodes.REASSIGN_PARTITIONS, self._admin_watch)
        self.client.DataWatch(znodes.PREFERRED_REPLICA_ELECTION, self._admin_watch)
        log.info("controller %d up: %s, metadata on %s", cfg.controller_id, cfg.endpoint,
                 cfg.pub_endpoint)

        async def wait_stop():
            await stop.wait()
            raise _Stop

        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.server.serve())
                tg.create_task(self._election_loop())
                tg.create_task(self._broker_loop())
                tg.create_task(self._tick_loop())
                tg.create_task(self._admin_loop())
                tg.create_task(self._gateway_loop())
                tg.create_task(self._log_dir_event_loop())
                if self.warm is not None:
                    tg.create_task(self._warm_loop())
                tg.create_task(wait_stop())
        except* _Stop:
            pass
        log.info("controller %d stopping", cfg.controller_id)
        await self._shutdown()
        return 0

    def _register_metrics(self, tel: Telemetry) -> None:
        core, rm = self.core, self.request_metrics
        tel.gauge("riverbed.controller.active_controller_count", lambda: [(int(core.active), {})],
                  description="1 on the active controller, 0 on standbys (sum: exactly 1)")
        tel.gauge("riverbed.controller.offline_partitions_count",
                  lambda: [(core.offline_partitions(), {})],
                  description="partitions without a leader (the active controller's view)")
        tel.gauge("riverbed.controller.epoch", lambda: [(core.controller_epoch, {})],
                  description="the controller epoch this controller last saw or won")
        tel.counter("riverbed.controller.leader_elections", lambda: [(core.leader_elections, {})],
                    description="partition leaders elected after a failure (clean or not)")
        tel.counter("riverbed.controller.unclean_leader_elections",
                    lambda: [(core.unclean_elections, {})],
                    description="leaders elected from outside the ISR")
        tel.counter("riverbed.controller.elr_leader_elections",
                    lambda: [(core.elr_elections, {})],
                    description="clean leader elections of an eligible leader replica (KIP-966: "
                                "no ISR member was live)")
        tel.counter("riverbed.controller.fenced_brokers",
                    lambda: [(core.liveness.fencings, {})],
                    description="storage nodes fenced for missing heartbeats "
                                "(broker.session.timeout.ms)")
        tel.counter("riverbed.controller.fast_takeovers", lambda: [(self.fast_takeovers, {})],
                    description="elections this standby began by deleting the /controller of "
                                "a controller whose process was gone (controller.fast.takeover"
                                ".enable), before its ZooKeeper session expired")
        tel.counter("riverbed.controller.broker_changes", lambda: [(core.broker_changes, {})],
                    description="storage node joins and departures handled while active (one "
                                "per node, however many one ZooKeeper event carries)")
        tel.counter("riverbed.controller.election.time", lambda: [(self.election_time_s, {})],
                    unit="s", description="time spent electing leaders after node changes")
        tel.counter("riverbed.controller.requests", rm.requests_obs, description="requests per API")
        tel.counter("riverbed.controller.request.time", rm.time_obs, unit="s",
                    description="time on requests per API and phase")
        tel.counter("riverbed.controller.request.errors", rm.errors_obs,
                    description="error answers per API and error")

    async def _shutdown(self) -> None:
        if self.telemetry is not None:
            self.telemetry.shutdown()
            self.telemetry = None
        if self.senders is not None:
            await self.senders.close()
        if self.pool is not None:
            await self.pool.close_all()
        if self.server is not None:
            await self.server.close()
        if self.publisher is not None:
            await self.publisher.close()
        if self._watcher is not None:
            self._watcher.stop()
        if self._probe is not None:
            await asyncio.to_thread(self._probe.stop)
        if self.client is not None:
            # Closing the session removes /controller at once, so a standby takes over now.
            await self._zk(zkmod.close, self.client)
        self._zk_exec.shutdown(wait=False)

    # ---- kazoo callbacks (other threads): hand over to the loop, never block ------------------
    def _controller_watch(self, data, stat, event=None):
        czxid = stat.czxid if stat is not None else -1
        self._loop.call_soon_threadsafe(self._on_controller_znode, data, czxid)

    def _brokers_watch(self, children):
        self._loop.call_soon_threadsafe(self._brokers_dirty.set)

    def _log_dir_events_watch(self, children):
        """A storage node's log dir failed: its registration now names the offline replicas;
        re-read the registrations (the broker loop) and consume the notifications."""
        if children:
            self._loop.call_soon_threadsafe(self._log_dir_events.put_nowait, list(children))

    def _gateways_watch(self, children):
        self._loop.call_soon_threadsafe(self._gateways_dirty.set)

    def _admin_watch(self, data, stat, event=None):
        self._loop.call_soon_threadsafe(self._admin_dirty.set)

    # ---- on the loop -------------------------------------------------------------------------
    def _on_session(self, change: zkmod.SessionChange) -> None:
        if change.state is zkmod.SessionState.CONNECTED:
            self._connected = True
            self._election_wake.set()
            self._brokers_dirty.set()
            self._gateways_dirty.set()
        else:
            self._connected = False
            self._session_generation += 1
            if self.warm is not None:       # watches may be gone with the session
                self.warm.invalidate(f"ZooKeeper session {change.state.value}")
            self._lose(f"ZooKeeper session {change.state.value}", release=False)

    def _on_controller_znode(self, data, czxid: int = -1) -> None:
        if data is None:
            if self._probe is not None:
                self._probe.set_target(None)
            # Deleted under an active controller: its session ended (the session events say
            # so too) or a standby judged it gone; either way it stops and competes again.
            self._lose("/controller was deleted", release=False)
            return
        try:
            info = znodes.decode_controller(data)
        except znodes.ZnodeDataError:
            return
        who = info.controller_id
        if self._probe is not None:
            self._probe.set_target(
                None if who == self.cfg.controller_id or not info.endpoint
                else ActiveController(who, info.endpoint, czxid))
        if self.core.active and who != self.cfg.controller_id:
            self._lose(f"controller {who} registered in /controller", release=False)

    def _on_active_gone(self, target: ActiveController) -> None:
        """The probe judged the active controller's process gone: delete its /controller (if
        it is still that znode) so that the election runs now; the watch then wakes it."""
        if self.core.active or not self._connected:
            return

        async def remove() -> None:
            try:
                removed = await self._zk(self.store.remove_dead_controller, target)
            except Exception as e:  # noqa: BLE001 - connection loss: the session expiry path
                log.info("removing the /controller of controller %d failed: %r",
                         target.controller_id, e)
                return
            if removed:
                self.fast_takeovers += 1
                log.warning("deleted /controller of controller %d (process gone); electing",
                            target.controller_id)
        self._loop.create_task(remove())

    def _lose(self, reason: str, *, release: bool = True) -> None:
        if self.core.active:
            log.warning("controller %d stops acting (epoch %d): %s", self.cfg.controller_id,
                        self.core.controller_epoch, reason)
            self.core.handle(LeadershipLost(reason), _now_ms())
            if self.senders is not None:
                self.senders.recheck()    # requests of the epoch that ended: not waited for
            self._pid_alloc = None        # a running claim's block is dropped (ids are lost)
            if release and self._connected:
                self._loop.run_in_executor(self._zk_exec, self.store.release_controller)
        self._election_wake.set()

    def _target_of(self, node: int) -> tuple[str, int] | None:
        """(endpoint, broker epoch) of `node`'s live registration; None when it is not live."""
        b = self.core.brokers.get(node) if self.core.active else None
        return (b.endpoint, b.epoch) if b is not None else None

    def _epoch_still_valid(self, epoch: int) -> bool:
        return self.core.active and self.core.controller_epoch == epoch and self._connected

    async def _election_loop(self) -> None:
        cfg = self.cfg
        while True:
            await self._election_wake.wait()
            self._election_wake.clear()
            if self.core.active or not self._connected:
                continue
            generation = self._session_generation
            info = znodes.ControllerInfo(cfg.controller_id, cfg.endpoint, cfg.pub_endpoint,
                                         int(time.time() * 1000))
            self._electing = True
            try:
                await self._election_attempt(generation, info)
            finally:
                self._electing = False
                if self.core.active and self.warm is not None:
                    self.warm.invalidate()        # the copy is kept only while standing by

    async def _election_attempt(self, generation: int, info: znodes.ControllerInfo) -> None:
        cfg = self.cfg
        try:
            if not await self._zk(self.store.try_claim_controller, info):
                return              # someone else leads; the /controller watch wakes us
            t0 = time.perf_counter()
            epoch, version = await self._zk(self.store.bump_epoch)
            cluster_id = await self._zk(self.store.cluster_id)
            brokers = await self._zk(self.store.read_brokers)
            topics, read = await self._zk(self._read_topics_at_election)
            t_read = time.perf_counter()
            pending = await self._zk(self.store.read_pending_deletions)
            reassignments, reassign_version = await self._zk(self.store.read_reassignments)
            gateways = await self._zk(self.store.read_gateways)
        except Exception as e:  # noqa: BLE001 - Fenced, connection loss: try again
            log.info("election attempt failed: %r", e)
            if self._connected:
                await self._zk(self.store.release_controller)
            await asyncio.sleep(ELECTION_RETRY_S)
            self._election_wake.set()
            return
        t_rest = time.perf_counter()
        async with self._lock:
            if generation != self._session_generation or not self._connected:
                self._election_wake.set()
                return
            t_locked = time.perf_counter()
            self._epoch_zk_version = version
            effects = self.core.handle(
                ElectedAsController(epoch, cluster_id, brokers, topics, pending,
                                    reassignments, reassign_version, gateways), _now_ms())
            t_core = time.perf_counter()
            await self._execute(effects)
            self.last_election = {
                "partitions": sum(len(t.assignment) for t in topics),
                "topic_znodes_read": read, "read_s": round(t_read - t0, 3),
                "other_reads_s": round(t_rest - t_read, 3),
                "lock_wait_s": round(t_locked - t_rest, 3), "core_s": round(t_core - t_locked, 3),
                "announce_s": round(time.perf_counter() - t_core, 3)}
            log.info("controller %d elected (epoch %d): %s", cfg.controller_id, epoch,
                     self.last_election)
            if self.core.active:
                self._pid_alloc = ProducerIdAllocator()
                self._maybe_claim_producer_ids()
        self._brokers_dirty.set()   # registrations may have changed while we read
        self._admin_dirty.set()     # a pending /admin/preferred_replica_election

    def _read_topics_at_election(self):
        """(topics, topic znodes read): from the warm copy (only what changed since it was
        read: warm_topics.py says why that is exact), else everything."""
        warm = self.warm
        if warm is not None and warm.barrier():
            read = warm.refresh()
            return warm.snapshot(), read
        topics = self.store.read_topics()
        return topics, sum(2 + len(t.assignment) for t in topics)

    async def _warm_loop(self) -> None:
        """Standby: keep the topic znodes' copy current (one refresh per interval)."""
        while True:
            await asyncio.sleep(REFRESH_INTERVAL_S)
            if self.core.active or self._electing or not self._connected:
                continue
            try:
                # Bounded: an election starting meanwhile waits for this call on the executor.
                await self._zk(self.warm.refresh, BACKGROUND_MAX_READS)
            except Exception as e:  # noqa: BLE001 - connection loss: read again when back
                log.info("refreshing the warm topic copy failed: %r", e)
                self.warm.invalidate("refresh failed")

    async def _log_dir_event_loop(self) -> None:
        while True:
            children = await self._log_dir_events.get()
            if not self.core.active:
                continue
            for child in children:
                path = f"{znodes.LOG_DIR_EVENT_NOTIFICATION}/{child}"
                try:
                    data, _ = await self._zk(self.client.get, path)
                    log.warning("log dir failure reported by storage node %d",
                                znodes.decode_log_dir_event(data))
                    await self._zk(self.client.delete, path)
                except Exception as e:  # noqa: BLE001 - gone already, or unreadable: skip it
                    log.info("log dir event %s: %r", child, e)
            self._brokers_dirty.set()

    async def _broker_loop(self) -> None:
        while True:
            await self._brokers_dirty.wait()
            self._brokers_dirty.clear()
            if not self.core.active:
                continue
            try:
                brokers = await self._zk(self.store.read_brokers)
            except Exception as e:  # noqa: BLE001 - connection loss: the session events follow
                log.info("reading /brokers/ids failed: %r", e)
                await asyncio.sleep(ELECTION_RETRY_S)
                self._brokers_dirty.set()
                continue
            async with self._lock:
                if self.core.active:
                    t0 = time.perf_counter()
                    await self._execute(self.core.handle(BrokersChanged(brokers), _now_ms()))
                    self.election_time_s += time.perf_counter() - t0

    async def _admin_loop(self) -> None:
        """Tools write /admin/reassign_partitions and /admin/preferred_replica_election. The
        znodes are read under the lock, after every write of ours has been committed, so the
        core never sees an older version than the one it wrote."""
        while True:
            await self._admin_dirty.wait()
            self._admin_dirty.clear()
            if not self.core.active:
                continue
            async with self._lock:
                if not self.core.active:
                    continue
                try:
                    reassign = await self._zk(self.store.read_reassignments)
                    preferred = await self._zk(self.store.read_preferred_election)
                except Exception as e:  # noqa: BLE001 - connection loss: session events follow
                    log.info("reading /admin failed: %r", e)
                    self._loop.call_later(ELECTION_RETRY_S, self._admin_dirty.set)
                    continue
                # Idempotent: entries already in progress change nothing.
                await self._execute(self.core.handle(ReassignmentsZnodeChanged(*reassign),
                                                     _now_ms()))
                if self.core.active and preferred[1] != -1:
                    await self._execute(self.core.handle(
                        PreferredElectionZnodeChanged(*preferred), _now_ms()))

    async def _gateway_loop(self) -> None:
        while True:
            await self._gateways_dirty.wait()
            self._gateways_dirty.clear()
            if not self._connected:
                continue
            try:
                gateways = await self._zk(self.store.read_gateways)
            except Exception as e:  # noqa: BLE001 - connection loss: session events follow
                log.info("reading %s failed: %r", znodes.GATEWAYS, e)
                self._loop.call_later(ELECTION_RETRY_S, self._gateways_dirty.set)
                continue
            async with self._lock:
                self.core.handle(GatewaysChanged(gateways), _now_ms())

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            async with self._lock:
                effects = self.core.tick(_now_ms())
                if effects:
                    await self._execute(effects)

    async def _handle(self, req: Request) -> Reply:
        if req.api == ApiKey.BROKER_HEARTBEAT:
            body = self.core.heartbeat_without_changes(req.body, _now_ms())
            if body is not None:
                return Reply(body)
        async with self._lock:
            effects = self.core.handle(RequestReceived(req.api, req.body), _now_ms())
            respond = await self._execute(effects)
        if respond is None:   # pragma: no cover - the core always answers a request
            raise errors.UnknownServerError("no answer")
        if respond.error is not None:
            raise respond.error
        return Reply(respond.body)

    # ---- effects -----------------------------------------------------------------------------
    async def _execute(self, effects) -> Respond | None:
        """Perform effects in order; consecutive ZooKeeper writes are one fenced transaction.
        After a failed write nothing more is done and the answer is NOT_CONTROLLER. Then
        requests in flight to a node that registered again (or left) are abandoned."""
        try:
            return await self._perform(effects)
        finally:
            if self.senders is not None:
                self.senders.recheck()

    async def _perform(self, effects) -> Respond | None:
        writes: list[ZkWrite] = []
        epoch = self.core.controller_epoch
        for e in effects:
            if isinstance(e, ZkWrite):
                writes.append(e)
                continue
            if writes:
                if not await self._commit(writes):
                    return Respond(None, errors.NotControllerError("lost the controllership"))
                writes = []
            if isinstance(e, SendLeaderAndIsr):
                self.senders.enqueue(e.node_id, ApiKey.LEADER_AND_ISR, e.request, epoch)
            elif isinstance(e, SendStopReplica):
                self.senders.enqueue(e.node_id, ApiKey.STOP_REPLICA, e.request, epoch)
            elif isinstance(e, PublishMetadata):
                await self.publisher.publish(METADATA_TOPIC, [e.update.SerializeToString()])
            elif isinstance(e, Resign):
                self._lose(e.reason)
            elif isinstance(e, Respond):
                return e
        if writes and not await self._commit(writes):
            return Respond(None, errors.NotControllerError("lost the controllership"))
        return None

    async def _commit(self, writes: list[ZkWrite]) -> bool:
        if not self._connected:
            self._lose("not connected to ZooKeeper", release=False)
            return False
        try:
            await self._zk(self.store.commit, writes, self._epoch_zk_version)
            return True
        except Fenced as e:
            self._lose(str(e))
            return False
