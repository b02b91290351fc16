"""The gateway's shell: ROUTER for clients, DEALERs to storage nodes and the controller, a SUB
on the active controller's metadata PUB, and a ZooKeeper session.

Loops (one TaskGroup; a dead loop stops the gateway):
- the RpcServer: METADATA / DESCRIBE_CLUSTER from the cache; PRODUCE / FETCH / LIST_OFFSETS
  split per leader (core.routing), forwarded concurrently, merged; admin forwarded to the
  controller (re-read /controller and retry on NOT_CONTROLLER, at most 3 calls);
- the metadata subscriber: UpdateMetadataRequest snapshots into the cache;
- ZooKeeper inputs: /controller (DataWatch) and /riverbed/gateways (ChildrenWatch) callbacks run
  on kazoo's threads and only hand their input to the loop (`call_soon_threadsafe`); blocking
  kazoo calls run in `asyncio.to_thread`;
- a ticker asking the controller for a snapshot when none came for metadata.max.age.ms;
- with `listeners` set, the Kafka listeners (services/gateway/kafka/listener.py): Kafka clients'
  requests reach the same handlers (and guard) as the SDK's, on this same event loop. Their
  advertised endpoints are registered in /riverbed/gateways/<id> and read back from every live
  gateway: the brokers Kafka clients see.

Metadata refreshes (controller METADATA for all topics) are coalesced: at most one in flight, and
a caller waits for one that started after it asked.

Mixed in: the Kafka listeners' wiring (shell/kafka_wiring.py) and the cluster-wide admin APIs
(log dirs, ACLs, controller-bound admin: shell/cluster_admin.py); groups and coordinators are
the GroupRouter's (shell/groups.py).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable

from google.protobuf.message import DecodeError
from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from riverbed import errors
from riverbed._proto.v1 import header_pb2, metadata_pb2
from services.common import rpc, zk, znodes
from services.common.controller_feed import ControllerFeed
from services.common.metrics_core import RequestMetrics
from services.common.telemetry import Telemetry
from services.gateway.config import GatewayConfig
from services.gateway.core import authorization as authz
from services.gateway.core.metadata_cache import MetadataCache
from services.gateway.core.routing import (
    ROUTED_APIS,
    NodeReply,
    SubRequest,
    forward_timeout_ms,
    merge,
    split,
)
from services.gateway.shell.cluster_admin import CONTROLLER_ATTEMPTS, TOPIC_CHANGING_APIS  # noqa: F401
from services.gateway.shell.cluster_admin import ClusterAdmin
from services.gateway.shell.groups import GroupRouter
from services.gateway.shell.kafka_wiring import KafkaListeners
from services.gateway.shell.guard import Guard

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
METADATA_TOPIC = b"metadata"
ADMIN_APIS = (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
              ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.ELECT_LEADERS,
              ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
              ApiKey.INIT_PRODUCER_ID)   # producer ids are handed out by the active controller
TICK_S = 1.0
# How often to retry registering /riverbed/gateways/<id> while a previous session of the same
# id still holds it (it disappears within zookeeper.session.timeout.ms).
REGISTER_RETRY_S = 0.2

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class _Prefixed(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"[{self.extra['prefix']}] {msg}", kwargs


async def _raise(e: BaseException):
    raise e


def _kafka_endpoints(info: znodes.GatewayInfo) -> tuple[tuple[str, str, int], ...]:
    """A gateway's advertised Kafka listeners as (name, host, port); unreadable ones skipped."""
    from services.gateway.kafka.listeners import ListenerError, parse_listeners
    out = []
    for e in info.kafka_endpoints:
        try:
            for li in parse_listeners(e, None, key="kafka_endpoints"):
                out.append((li.name, li.host, li.port))
        except ListenerError:
            continue
    return tuple(out)


class Gateway(KafkaListeners, ClusterAdmin):
    def __init__(self, config: GatewayConfig):
        self.config = config
        self.cache = MetadataCache()
        self.log = _Prefixed(log, {"prefix": f"gateway-{config.gateway_id}"})
        self.name = f"gateway-{config.gateway_id}"
        self._zk = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: rpc.RpcServer | None = None
        self._pool: rpc.ChannelPool | None = None
        self._subscriber: rpc.Subscriber | None = None
        self._controller = ControllerFeed(self.log)
        self._gateways_changed = asyncio.Event()
        self._registrations = asyncio.Queue()   # one item per new ZooKeeper session
        self._refresh_task: asyncio.Task | None = None
        self._refresh_next: asyncio.Future | None = None
        # (principal, client id) -> done once that client's request that waited for metadata
        # has been answered (its later requests queue behind it: _routed)
        self._metadata_waits: dict[tuple[str, str, str], asyncio.Future] = {}
        self._background: set[asyncio.Task] = set()
        self.refreshes = 0
        self._groups = GroupRouter(self)   # group/offset APIs -> coordinators
        self.guard = Guard(config)         # ACLs and quotas (watched in ZooKeeper)
        # Metrics (read by the observable instruments registered in run()).
        self.request_metrics = RequestMetrics()
        self.request_metrics.track_clients = True
        self.forwards: dict[int, list] = {}          # node id -> [requests, seconds]
        self.forward_errors: dict[tuple[int, str], int] = {}
        self.telemetry: Telemetry | None = None
        # Kafka listeners (empty unless `listeners` is set) and what each live gateway
        # advertises: gateway id -> (listener name, host, port) for each of its listeners.
        self.kafka_listeners: list = []
        self._kafka_endpoints: dict[int, tuple[tuple[str, str, int], ...]] = {}

    # -- lifecycle ------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        # Bound first (served from the TaskGroup below): once the SDK port accepts, so does
        # the Kafka one (the fleet waits for the former).
        try:
            await self._start_kafka_listeners()
        except BaseException:
            for k in self.kafka_listeners:
                await k.close()
            raise
        self._server = rpc.RpcServer(
            cfg.endpoint, self._handlers(), name=self.name,
            socket_request_max_bytes=cfg.socket_request_max_bytes,
            queued_max_requests=cfg.queued_max_requests, metrics=self.request_metrics if cfg.metrics_port >= 0 else None)
        self.telemetry = Telemetry("gateway", cfg.gateway_id, host=cfg.host_name,
                                   port=cfg.metrics_port)
        self._register_metrics(self.telemetry)
        self.guard.register_metrics(self.telemetry)
        self.telemetry.start()
        self._pool = rpc.ChannelPool(client_id=self.name,
                                     max_message_bytes=cfg.socket_request_max_bytes)
        self._subscriber = rpc.Subscriber((), topics=(METADATA_TOPIC,),
                                          max_message_bytes=cfg.socket_request_max_bytes)
        watcher = None
        try:
            self._zk = await asyncio.to_thread(
                zk.connect, cfg.zookeeper_connect,
                timeout_s=cfg.zookeeper_connection_timeout_ms / 1000.0,
                session_timeout_ms=cfg.zookeeper_session_timeout_ms)
            await asyncio.to_thread(self._zk.ensure_path, znodes.GATEWAYS)
            loop = self._loop
            watcher = zk.SessionWatcher(
                self._zk, name=f"{self.name}-zk",
                on_connected=lambda ch: ch.new_session and loop.call_soon_threadsafe(
                    self._registrations.put_nowait, ch.session_id),
                on_suspended=lambda ch: self.log.warning("ZooKeeper connection suspended"),
                on_lost=lambda ch: self.log.warning("ZooKeeper session lost"))
            watcher.start()
            DataWatch(self._zk, znodes.CONTROLLER, self._controller_watch)
            ChildrenWatch(self._zk, znodes.GATEWAYS, self._gateways_watch)
            await asyncio.to_thread(self._groups.watch, self._zk)
            # ACLs and quota configs are read before the first request is served.
            await asyncio.to_thread(self.guard.watch, self._zk)
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(self._server.serve(), name="rpc"),
                         tg.create_task(self._subscribe_loop(), name="metadata-sub"),
                         tg.create_task(self._register_loop(), name="register"),
                         tg.create_task(self._gateways_loop(), name="gateways"),
                         tg.create_task(self._tick_loop(), name="tick"),
                         tg.create_task(self._groups.run(), name="group-owners")]
                tasks += [tg.create_task(k.serve(), name=f"kafka-{k.advertised.name}")
                          for k in self.kafka_listeners]
                self.log.info("serving on %s", self._server.bound_endpoint)
                await stop.wait()
                self.log.info("stopping")
                for t in tasks:
                    t.cancel()
        finally:
            await self._close(watcher)

    async def _close(self, watcher) -> None:
        for t in list(self._background) + ([self._refresh_task] if self._refresh_task else []):
            t.cancel()
        for k in self.kafka_listeners:
            await k.close()
        if self._server is not None:
            await self._server.close()
        if self.telemetry is not None:
            self.telemetry.shutdown()
            self.telemetry = None
        if self._subscriber is not None:
            await self._subscriber.close()
        if self._pool is not None:
            await self._pool.close_all()
        if watcher is not None:
            watcher.stop()
        self.guard.stop()
        if self._zk is not None:
            await asyncio.to_thread(zk.close, self._zk)   # our ephemeral goes with the session

    def _register_metrics(self, tel: Telemetry) -> None:
        """Requests per API and per client, errors per code, forward latency per leader."""
        rm = self.request_metrics
        tel.counter("riverbed.gateway.requests", rm.requests_obs, description="requests per API")
        tel.counter("riverbed.gateway.client.requests", rm.clients_obs,
                    description="requests per API and client id")
        tel.counter("riverbed.gateway.request.time", rm.time_obs, unit="s",
                    description="time on requests per API and phase (remote = forwarded)")
        tel.gauge("riverbed.gateway.request.time.max", rm.max_obs, unit="s",
                  description="the longest request per API since start")
        tel.counter("riverbed.gateway.request.errors", rm.errors_obs,
                    description="error answers per API and error code")
        tel.counter("riverbed.gateway.forward.requests", lambda: [
            (v[0], {"node_id": str(n)}) for n, v in list(self.forwards.items())],
            description="requests forwarded to each storage node (leader)")
        tel.counter("riverbed.gateway.forward.time", lambda: [
            (v[1], {"node_id": str(n)}) for n, v in list(self.forwards.items())], unit="s",
            description="time waiting on each storage node (leader)")
        tel.counter("riverbed.gateway.forward.errors", lambda: [
            (c, {"node_id": str(n), "error": e}) for (n, e), c in list(self.forward_errors.items())],
            description="forwards that failed, per storage node and error")
        tel.counter("riverbed.gateway.kafka.requests", lambda: [
            (c, {"listener": k.advertised.name, "api": a})
            for k in self.kafka_listeners for a, c in list(k.requests_by_api.items())],
            description="Kafka requests per listener and Kafka API")
        tel.counter("riverbed.gateway.kafka.connections", lambda: [
            (k.connections_accepted, {"listener": k.advertised.name}) for k in self.kafka_listeners],
            description="Kafka connections accepted per listener")
        tel.counter("riverbed.gateway.kafka.connections.closed", lambda: [
            (n, {"listener": k.advertised.name, "reason": why}) for k in self.kafka_listeners
            for why, n in (("bad_request", k.closed_bad_request), ("oversize", k.closed_oversize),
                           ("idle", k.closed_idle), ("unauthenticated", k.closed_unauthenticated))],
            description="Kafka connections the gateway closed, per reason")
        # Kafka's successful-authentication-total / failed-authentication-total
        tel.counter("riverbed.gateway.kafka.successful.authentication", lambda: [
            (n, {"listener": k.advertised.name, "mechanism": m}) for k in self.kafka_listeners
            for m, n in list(k.authentications.items())],
            description="Kafka connections authenticated, per listener and mechanism (SSL: a "
                        "client certificate)")
        tel.counter("riverbed.gateway.kafka.failed.authentication", lambda: [
            (n, {"listener": k.advertised.name, "mechanism": m}) for k in self.kafka_listeners
            for m, n in list(k.failed_authentications.items())],
            description="Kafka connections whose authentication failed (a wrong password, an "
                        "unknown user or mechanism, a failed TLS handshake), per listener and "
                        "mechanism")
        tel.gauge("riverbed.gateway.metadata.brokers",
                  lambda: [(len(self.cache.describe_cluster().brokers), {})],
                  description="storage nodes in the gateway's metadata")

    def _handlers(self) -> dict:
        h = {ApiKey.METADATA: self._metadata, ApiKey.DESCRIBE_CLUSTER: self._describe_cluster}
        for api in ROUTED_APIS:
            h[api] = self._routed
        for api in ADMIN_APIS:
            h[api] = self._admin
        h.update(self._groups.handlers())
        h[ApiKey.DESCRIBE_LOG_DIRS] = self._describe_log_dirs
        h[ApiKey.ALTER_REPLICA_LOG_DIRS] = self._alter_replica_log_dirs
        h[ApiKey.DESCRIBE_ACLS] = self._describe_acls
        h[ApiKey.CREATE_ACLS] = self._create_acls
        h[ApiKey.DELETE_ACLS] = self._delete_acls
        # Every client API goes through the guard: throttled clients are held, throttle times
        # stamped. Authorization is inside each handler (parts of a request may be denied).
        return {api: self.guard.wrap(fn) for api, fn in h.items()}

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- ZooKeeper inputs (kazoo threads: hand over, never block) --------------------------
    def _controller_watch(self, data, stat, event=None):
        self._loop.call_soon_threadsafe(self._on_controller_data, data)

    def _gateways_watch(self, children):
        self._loop.call_soon_threadsafe(self._gateways_changed.set)

    def _on_controller_data(self, data: bytes | None) -> None:
        old = self._controller.current
        if not self._controller.update(data, self._subscriber):
            return
        info = self._controller.current
        if (old is not None and old.endpoint and self._pool is not None
                and (info is None or info.endpoint != old.endpoint)):
            # Calls waiting on the old controller (dead, or resigned) fail now and are retried
            # on the new one (_call_controller) instead of waiting out their timeout.
            self._drop_nodes(frozenset({old.endpoint}), what="the old controller")
        if info is None:
            self.log.info("no active controller")
            return
        self.log.info("controller is %d at %s (metadata from %s)", info.controller_id,
                      info.endpoint, info.pub_endpoint)
        self.cache.set_controller_hint(info.controller_id)
        self._ensure_refresh()

    async def _reread_controller(self) -> None:
        def read():
            try:
                return self._zk.get(znodes.CONTROLLER)[0]
            except NoNodeError:
                return None
        self._on_controller_data(await asyncio.to_thread(read))

    async def _register_loop(self) -> None:
        while True:
            session_id = await self._registrations.get()
            await asyncio.to_thread(self._register, session_id)

    def _register(self, session_id: int | None) -> None:
        """Create /riverbed/gateways/<id> (ephemeral) for this session (blocking; a thread)."""
        cfg = self.config
        path = znodes.gateway_path(cfg.gateway_id)
        data = znodes.encode_gateway(znodes.GatewayInfo(
            cfg.gateway_id, cfg.endpoint, int(time.time() * 1000),
            kafka_endpoints=tuple(str(k.advertised) for k in self.kafka_listeners)))
        try:
            zk.register_ephemeral(self._zk, path, data, session_id=session_id,
                                  timeout_s=cfg.zookeeper_session_timeout_ms / 1000.0 * 2,
                                  retry_s=REGISTER_RETRY_S)
        except zk.EphemeralHeldError:
            raise RuntimeError(f"gateway.id {cfg.gateway_id} is registered by another "
                               f"live gateway ({path})") from None
        self.log.info("registered %s", path)

    async def _gateways_loop(self) -> None:
        while True:
            await self._gateways_changed.wait()
            self._gateways_changed.clear()
            try:
                gateways = await asyncio.to_thread(self._read_gateways)
            except Exception as e:  # noqa: BLE001 - ZooKeeper hiccup; the watch fires again
                self.log.warning("could not read %s: %s", znodes.GATEWAYS, e)
                continue
            self.cache.set_gateways((g.gateway_id, g.endpoint) for g in gateways)
            self._kafka_endpoints = {g.gateway_id: _kafka_endpoints(g) for g in gateways
                                     if g.kafka_endpoints}

    def _read_gateways(self) -> list[znodes.GatewayInfo]:
        out = []
        for child in self._zk.get_children(znodes.GATEWAYS):
            try:
                gid = int(child)
                data, _ = self._zk.get(f"{znodes.GATEWAYS}/{child}")
                out.append(znodes.decode_gateway(gid, data))
            except (ValueError, NoNodeError, znodes.ZnodeDataError):
                continue   # gone meanwhile, or not ours to read
        return out

    # -- metadata -------------------------------------------------------------------------
    async def _subscribe_loop(self) -> None:
        while True:
            topic, frames = await self._subscriber.recv()
            if topic != METADATA_TOPIC or not frames:
                continue
            update = metadata_pb2.UpdateMetadataRequest()
            try:
                update.ParseFromString(frames[0])
            except DecodeError:
                self.log.warning("dropping an unreadable metadata update (%d bytes)", len(frames[0]))
                continue
            self._apply(update=update)

    def _apply(self, *, update=None, response=None) -> None:
        before = self.cache.stamp
        nodes_before = self.cache.node_endpoints()
        if update is not None:
            self.cache.apply_update(update, _now_ms())
        else:
            self.cache.apply_metadata_response(response, _now_ms())
        after = self.cache.stamp
        if after != before:
            level = logging.INFO if before is None or after[0] != before[0] else logging.DEBUG
            self.log.log(level, "metadata (controller_epoch, version) %s -> %s, %d topics",
                         before, after, len(self.cache.topic_names))
            gone = nodes_before - self.cache.node_endpoints()
            if gone and self._pool is not None:
                self._drop_nodes(gone)

    def _drop_nodes(self, endpoints: frozenset[str], what: str = "") -> None:
        """Storage nodes that left the live set (dead, or fenced by the controller): close their
        channels now, so requests waiting on them fail at once with NETWORK_EXCEPTION (retriable:
        the client retries on the new leader) instead of waiting out their timeout, and nothing
        queued for them is delivered later."""
        self.log.info("%s %s left: dropping the connections",
                      what or "storage nodes", sorted(endpoints))
        for ep in endpoints:
            if ep in self._pool:
                task = asyncio.get_running_loop().create_task(self._pool.discard(ep))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if self.cache.is_stale(_now_ms(), self.config.metadata_max_age_ms):
                self._ensure_refresh()
            self.guard.tick()

    def _ensure_refresh(self) -> asyncio.Future:
        """A future for a refresh that starts after now (shared by all who ask meanwhile)."""
        if self._refresh_next is None:
            self._refresh_next = asyncio.get_running_loop().create_future()
            if self._refresh_task is None:
                self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_loop())
        return self._refresh_next

    async def _refresh_loop(self) -> None:
        try:
            while self._refresh_next is not None:
                fut, self._refresh_next = self._refresh_next, None
                ok = await self._refresh_once()
                if not fut.done():
                    fut.set_result(ok)
        finally:
            self._refresh_task = None

    async def _refresh_once(self) -> bool:
        self.refreshes += 1
        info = self._controller.current
        if info is None or not info.endpoint:
            return False
        try:
            resp = await self._pool.get(info.endpoint).call(
                ApiKey.METADATA, metadata_pb2.MetadataRequest(),
                timeout_ms=self.config.request_timeout_ms)
        except Exception as e:  # noqa: BLE001 - KafkaError or a socket failure: try next time
            self.log.warning("metadata refresh from controller %d failed: %r",
                             info.controller_id, e)
            return False
        self._apply(response=resp.body)
        return True

    async def _wait_refresh(self, timeout_ms: int) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(self._ensure_refresh()), timeout_ms / 1000.0)
        except TimeoutError:
            pass

    async def _ensure_metadata(self, timeout_ms: int) -> None:
        if self.cache.stamp is None:
            await self._wait_refresh(timeout_ms)

    # -- handlers -------------------------------------------------------------------------
    def _timeout(self, req: rpc.Request) -> int:
        return forward_timeout_ms(req.api, req.body, req.header.timeout_ms,
                                  self.config.request_timeout_ms)

    async def _metadata(self, req: rpc.Request) -> rpc.Reply:
        timeout = self._timeout(req)
        may = self.guard.may(req)
        await self._ensure_metadata(timeout // 2)
        resp, missing = self.cache.metadata_response(req.body)
        if not missing:
            return rpc.Reply(authz.filter_metadata(resp, req.body, may))
        body = authz.metadata_request(req.body, may, missing)   # no auto-creation unless allowed
        if body.allow_auto_topic_creation:
            theirs = await self._call_controller(ApiKey.METADATA, body, timeout)
            self._ensure_refresh()
            return rpc.Reply(authz.filter_metadata(self.cache.with_gateways(theirs.body),
                                                   req.body, may))
        await self._wait_refresh(timeout // 2)
        resp, _ = self.cache.metadata_response(req.body)
        return rpc.Reply(authz.filter_metadata(resp, req.body, may))

    async def _describe_cluster(self, req: rpc.Request) -> rpc.Reply:
        await self._ensure_metadata(self._timeout(req) // 2)
        return rpc.Reply(self.cache.describe_cluster())

    async def _routed(self, req: rpc.Request) -> rpc.Reply | None:
        api, body = req.api, req.body
        timeout = self._timeout(req)
        await self._ensure_metadata(timeout // 2)
        may = self.guard.may(req)
        denied = authz.denied_routed_topics(api, body, may)     # never forwarded
        refused = authz.routed_request_denied(api, body, may)   # nothing forwarded
        # One client's requests reach the leaders in the order they came (a producer's batches
        # carry consecutive sequence numbers): while one of them waits for metadata, that
        # client's later ones wait until it has been answered instead of overtaking it. (A
        # Kafka client is its connection: their client ids are often the library's name.)
        client = (req.principal, req.header.client_id, req.connection)
        ahead = self._metadata_waits.get(client)
        if ahead is not None:
            await asyncio.shield(ahead)
        plan = split(api, body, req.payloads, self.cache, denied, refused)  # InvalidRequestError: envelope
        version = req.header.api_version      # FETCH / LIST_OFFSETS v1: isolation_level
        if not plan.unknown_topics:
            return await self._send_plan(api, plan, timeout, version)
        gate = asyncio.get_running_loop().create_future()
        self._metadata_waits[client] = gate
        try:
            # Created through another gateway, or more partitions: ask before failing them.
            await self._wait_refresh(timeout // 2)
            plan = split(api, body, req.payloads, self.cache, denied, refused)
            return await self._send_plan(api, plan, timeout, version)
        finally:
            if self._metadata_waits.get(client) is gate:
                del self._metadata_waits[client]
            gate.set_result(None)

    async def _send_plan(self, api: int, plan, timeout: int,
                         api_version: int = 0) -> rpc.Reply | None:
        subs = plan.sub_requests
        if not plan.expects_response:
            if len(subs) == 1:
                await self._start_oneway(api, subs[0], timeout)
            else:       # all sent now, in order (see below), then awaited
                await asyncio.gather(*[self._start_oneway(api, sub, timeout) for sub in subs])
            return None
        if len(subs) == 1:
            # One leader (the common case): await it in this task. gather() would wrap the
            # call in a task of its own: a task, a future and extra event-loop turns per hop.
            results = [await self._start_forward(api, subs[0], timeout, api_version)]
        else:
            # Every sub-request leaves now, in order, before this task yields. Sent from tasks
            # of their own (gather), they would leave only when the loop got to those tasks,
            # and a later request of the same client with one leader, sent at once from its
            # own handler, could reach that leader first: a producer's later batch then
            # arrives before its earlier one and is refused as out of order.
            results = await asyncio.gather(*[self._start_forward(api, sub, timeout, api_version)
                                             for sub in subs])
        merged = merge(plan, {sub.node_id: r for sub, r in zip(subs, results)})
        if merged.refresh_metadata:
            self._ensure_refresh()
        return rpc.Reply(merged.body, merged.payloads)

    def _start_forward(self, api: int, sub: SubRequest, timeout_ms: int,
                       api_version: int = 0) -> Awaitable[NodeReply]:
        """Send `sub` to its leader now (AsyncChannel.start_call); the awaitable returned gives
        the leader's answer, or its failure as a NodeReply."""
        t0 = time.perf_counter()
        try:
            answer = self._pool.get(sub.endpoint).start_call(
                api, sub.body, payloads=sub.payloads, timeout_ms=timeout_ms,
                api_version=api_version)
        except Exception as e:  # noqa: BLE001 - e.g. a closed channel: answered below
            answer = _raise(e)
        return self._answered(sub, t0, answer)

    async def _answered(self, sub: SubRequest, t0: float, answer: Awaitable) -> NodeReply:
        try:
            with rpc.remote_wait():
                resp = await answer
        except errors.KafkaError as e:
            self._forwarded(sub.node_id, t0, e.name)
            return NodeReply.failed(e.code, e.message or e.name)
        except Exception as e:  # noqa: BLE001 - a socket failure is this leader's problem only
            self.log.warning("forwarding to node %d failed: %r", sub.node_id, e)
            self._forwarded(sub.node_id, t0, "NETWORK_EXCEPTION")
            return NodeReply.failed(E.Value("NETWORK_EXCEPTION"), f"node {sub.node_id}: {e}")
        self._forwarded(sub.node_id, t0, None)
        return NodeReply(resp.body, resp.payloads)

    def _forwarded(self, node_id: int, t0: float, error: str | None) -> None:
        st = self.forwards.get(node_id)
        if st is None:
            st = self.forwards[node_id] = [0, 0.0]
        st[0] += 1
        st[1] += time.perf_counter() - t0
        if error is not None:
            key = (node_id, error)
            self.forward_errors[key] = self.forward_errors.get(key, 0) + 1

    def _start_oneway(self, api: int, sub: SubRequest, timeout_ms: int) -> Awaitable[None]:
        try:
            taken = self._pool.get(sub.endpoint).start_oneway(
                api, sub.body, payloads=sub.payloads, timeout_ms=timeout_ms)
        except Exception as e:  # noqa: BLE001 - e.g. a closed channel: logged below
            taken = _raise(e)
        return self._oneway_taken(sub, taken)

    async def _oneway_taken(self, sub: SubRequest, taken: Awaitable) -> None:
        try:
            await taken
        except Exception as e:  # noqa: BLE001 - acks=0: nobody to tell
            self.log.debug("acks=0 produce to node %d dropped: %r", sub.node_id, e)
