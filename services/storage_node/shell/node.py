"""The storage node's shell: RpcServer handlers, the LogManager, ZooKeeper registration, the
replica fetchers and the purgatory clock. Decisions live in the core (`services.storage_node.core`):
replica state and epochs (`replica_state`), produce admission (`produce_admission`), delayed
produce and fetch long poll (`purgatory`), ISR tracking (`isr`), leader-epoch divergence
(`divergence`). Everything here runs on one asyncio loop; kazoo's threads only hand events over
with `loop.call_soon_threadsafe`.

Replication (issue 4): followers pull in batches (`replica_fetcher`); the leader tracks each
follower's caught-up time, proposes ISR changes to the active controller with ALTER_PARTITION
(at most one in flight per partition) and applies them only once committed; divergent followers
are told where their log stops agreeing (FETCH diverging_epoch) and truncate there; on SIGTERM
the node asks the controller for a CONTROLLED_SHUTDOWN before it stops serving.

Appends are synchronous file writes on the loop thread (fast enough; no thread hop).
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import random
import time

from opentelemetry import trace

from riverbed import errors
from riverbed._proto.v1 import (
    controller_pb2,
    delete_records_pb2,
    list_offsets_pb2,
    produce_pb2,
    transaction_pb2,
)
from riverbed.coordinator.offsets_topic import OFFSETS_TOPIC
from riverbed.wire.apis import ApiKey
from riverbed.wire.framing import Request

from services.common import zk as zkmod
from services.common import znodes
from services.common.metrics_core import RequestMetrics, TopicCounters
from services.common.rpc import AsyncChannel, Reply, RpcServer, remote_wait
from services.common.telemetry import Telemetry
from services.storage_node.config import StorageNodeConfig
from services.storage_node.core import divergence
from services.storage_node.core.fetch_session import FetchSessionCache
from services.storage_node.core.log_dirs import DirSpace
from services.storage_node.core.produce_admission import (acks_all_result, admit_partition,
                                                          check_acks, max_batch_bytes,
                                                          min_insync_replicas)
from services.storage_node.core.producer_state import Verdict
from services.storage_node.core.purgatory import FetchWaiters, ProducePurgatory
from services.storage_node.core.replica_state import (NONE, BecomeFollower, BecomeLeader,
                                                      LocalLog, PartitionStateIn, ReplicaManager,
                                                      Role, stale_broker_epoch)
from services.storage_node.shell import log_access, log_dirs_admin
from services.storage_node.shell.controller_heartbeat import ControllerHeartbeat
from services.storage_node.shell import metrics as node_metrics
from services.storage_node.shell.clock import now_ms
from services.storage_node.shell.controller_link import ControllerLink
from services.storage_node.shell.fetch_serving import FetchServing
from services.storage_node.shell.following import Following
from services.storage_node.shell.log_dir_health import LogDirHealth
from services.storage_node.shell.replica_fetcher import ReplicaFetcher

log = logging.getLogger(__name__)

UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartitionError.code
NOT_LEADER_FOR_PARTITION = errors.NotLeaderForPartitionError.code
OFFSET_OUT_OF_RANGE = errors.OffsetOutOfRangeError.code
INVALID_REQUEST = errors.InvalidRequestError.code
KAFKA_STORAGE_ERROR = errors.KafkaStorageError.code
INVALID_REQUIRED_ACKS = errors.InvalidRequiredAcksError.code
STALE_BROKER_EPOCH = errors.StaleBrokerEpochError.code
# The tick task wakes at least this often even with nothing waiting (bounds clock drift).
IDLE_TICK_S = 1.0


_tracer = trace.get_tracer("riverbed.storage_node")


def _followers_span(partitions: int, acks: int):
    """The acks=all wait on followers as its own span, inside the request's server span (a
    no-op context when the request is not traced)."""
    if not trace.get_current_span().is_recording():
        return contextlib.nullcontext()
    return _tracer.start_as_current_span(
        "await followers", attributes={"riverbed.partitions": partitions, "riverbed.acks": acks})


def _buf(frame):
    return getattr(frame, "buffer", frame)


class StorageNode(LogDirHealth, FetchServing, Following, ControllerLink):
    """One storage node. Its parts live beside it, one seam each: log_dir_health (KIP-112),
    fetch_serving (FETCH for consumers and followers), following (replica fetchers, follower
    appends), controller_link (ALTER_PARTITION, CONTROLLED_SHUTDOWN)."""

    def __init__(self, cfg: StorageNodeConfig):
        self.cfg = cfg
        self.core = ReplicaManager(cfg.broker_id, min_insync_of=self._min_insync)
        self.produce_purgatory = ProducePurgatory()
        self.fetch_waiters = FetchWaiters(cfg.queued_max_requests)
        # Followers' incremental fetch sessions (KIP-227). Random ids: a restarted node does not
        # hand out the ids its followers still hold.
        _rng = random.Random()
        self.fetch_sessions = FetchSessionCache(cfg.max_incremental_fetch_session_cache_slots,
                                                new_id=lambda: _rng.randint(1, 2**31 - 1))
        self._produce_futs: dict[int, asyncio.Future] = {}
        self._fetch_futs: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.leader_endpoints: dict[int, str] = {}
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.broker_epoch = -1                     # czxid of our /brokers/ids/<id>
        self._controller_channels: dict[str, AsyncChannel] = {}
        # The /controller znode (czxid) the channel talks to; None until first seen. Bumped
        # moves and a set-and-replaced Event wake the retries when it changes (controller_link).
        self._controller_czxid: int | None = None
        self._controller_czxid_max = -1            # the newest /controller znode seen
        self._controller_moves = 0
        self._controller_moved = asyncio.Event()
        self._stopping = False
        self._closing = False            # no new background work (ISR proposals)
        self._alter_tasks: set[asyncio.Task] = set()
        # ISR proposals waiting to be sent, the newest per partition, and their one sender
        # (controller_link._alter_sender)
        self._alter_queue: dict = {}
        self._alter_wake = asyncio.Event()
        self._alter_task: asyncio.Task | None = None
        self.logs: log_access.Logs | None = None
        self.server: RpcServer | None = None
        self.zk = None
        self._watcher = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._tick_wake = asyncio.Event()
        # Metrics: plain counters bumped per request or batch, read by shell/metrics.py.
        self.request_metrics = RequestMetrics()
        self.topic_counters = TopicCounters()
        self.replication_bytes_out: dict[str, int] = {}
        # This node's replica fetches as a follower (fetch sessions, KIP-227).
        self.replica_fetch_stats = {"full": 0, "incremental": 0, "partitions_named": 0,
                                    "session_errors": 0}
        self.isr_changes = {"shrink": 0, "expand": 0}
        self.telemetry: Telemetry | None = None
        # Log dirs (KIP-112): free space against log.dir.free.bytes.min, dirs low on space.
        self.space = DirSpace(cfg.log_dir_free_bytes_min)
        self.low_dirs: dict[str, tuple] = {}       # log dir -> its partitions, while low
        self.log_dir_failures = 0
        self.log_dir_moves: dict = {}              # (topic, p) -> log_dirs_admin.Move in progress
        self._stop_event: asyncio.Event | None = None
        self._background: set[asyncio.Task] = set()
        self._hw_checkpoint_task: asyncio.Task | None = None
        self._background_io_task: asyncio.Task | None = None

    # =========================================================================================
    # lifecycle

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop` is set (SIGTERM/SIGINT in services.common.service_main)."""
        self._loop = asyncio.get_running_loop()
        self._stop_event = stop
        cfg = self.cfg
        self.logs = log_access.open_logs(cfg)
        for d, tps in self.logs.manager.offline_dirs.items():   # failed to load: not served
            self.core.mark_offline(tps)
            log.error("[node %d] log dir %s is offline (%d partition(s)); the others serve",
                      cfg.broker_id, d, len(tps))
        self._measure_space()
        log.info("[node %d] opened %d local partition log(s) in %s", cfg.broker_id,
                 len(self.logs.partitions()), cfg.log_dirs)
        # Local logs are served only once a LEADER_AND_ISR names this node a replica.
        handlers = {
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.DELETE_RECORDS: self.handle_delete_records,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offset_for_leader_epoch,
            ApiKey.LEADER_AND_ISR: self.handle_leader_and_isr,
            ApiKey.STOP_REPLICA: self.handle_stop_replica,
            ApiKey.DESCRIBE_LOG_DIRS: lambda req: log_dirs_admin.describe_log_dirs(self, req),
            ApiKey.ALTER_REPLICA_LOG_DIRS:
                lambda req: log_dirs_admin.alter_replica_log_dirs(self, req),
            ApiKey.WRITE_TXN_MARKERS: self.handle_write_txn_markers,
        }
        self.server = RpcServer(cfg.endpoint, handlers, name=f"storage-node-{cfg.broker_id}",
                                socket_request_max_bytes=cfg.socket_request_max_bytes,
                                queued_max_requests=cfg.queued_max_requests,
                                metrics=self.request_metrics if cfg.metrics_port >= 0 else None,
                                # clients reach the log-dir APIs only through a gateway, which
                                # checks their ACLs (Describe / Alter on the cluster)
                                # (DELETE_RECORDS too: Delete on the topic, checked there)
                                cluster_action_apis=frozenset({ApiKey.DESCRIBE_LOG_DIRS,
                                                               ApiKey.ALTER_REPLICA_LOG_DIRS,
                                                               ApiKey.DELETE_RECORDS,
                                                               # transaction coordinators only
                                                               ApiKey.WRITE_TXN_MARKERS}))
        self.telemetry = Telemetry("storage_node", cfg.broker_id, host=cfg.host_name,
                                   port=cfg.metrics_port)
        node_metrics.register(self.telemetry, self)
        self.telemetry.start()
        heartbeat = ControllerHeartbeat(self)     # its own thread: see controller_heartbeat.py
        try:
            await asyncio.to_thread(self._zk_start)
            heartbeat.start()
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                serve = tg.create_task(self.server.serve())
                tick = tg.create_task(self._tick_loop())
                await stop.wait()
                log.info("[node %d] stopping", cfg.broker_id)
                self._stopping = True
                # Still serving: the controller moves leadership away while we answer fetches.
                await self._controlled_shutdown()
                self._closing = True
                serve.cancel()
                tick.cancel()
                for f in list(self.fetchers.values()):
                    if f.task is not None:
                        f.task.cancel()
                for t in list(self._alter_tasks):
                    t.cancel()
        finally:
            await asyncio.to_thread(heartbeat.stop)
            await self._shutdown()
        return 0

    async def _shutdown(self) -> None:
        if self.server is not None:
            await self.server.close()
        if self.telemetry is not None:
            self.telemetry.shutdown()
            self.telemetry = None
        for ch in self._controller_channels.values():
            await ch.close()
        self._controller_channels.clear()
        for fut in itertools.chain(self._produce_futs.values(), self._fetch_futs.values()):
            if not fut.done():
                fut.cancel()
        for task in (self._hw_checkpoint_task, self._background_io_task):
            if task is not None:
                with contextlib.suppress(Exception):
                    await task     # never two writers of one checkpoint file; flushes done
        if self.logs is not None:
            self._checkpoint_high_watermarks()
            self.logs.close()   # flush, checkpoints, clean-shutdown marker
            self.logs = None
        if self.zk is not None:
            await asyncio.to_thread(self._zk_stop)
        log.info("[node %d] stopped cleanly", self.cfg.broker_id)

    # -- ZooKeeper --------------------------------------------------------------------------
    def _zk_start(self) -> None:
        cfg = self.cfg
        self.zk = zkmod.connect(cfg.zookeeper_connect,
                                timeout_s=cfg.zookeeper_connection_timeout_ms / 1000.0,
                                session_timeout_ms=cfg.zookeeper_session_timeout_ms)
        self._register()
        self._watcher = zkmod.SessionWatcher(self.zk, on_connected=self._on_zk_connected,
                                             name=f"zk-session-{cfg.broker_id}")
        self._watcher.start()
        self.zk.DataWatch(znodes.CONTROLLER, self._controller_watch)

    def _on_zk_connected(self, change) -> None:
        # Runs on the SessionWatcher's own thread (blocking ZooKeeper calls are fine there).
        if change.new_session:
            try:
                self._register()
            except Exception:
                log.exception("[node %d] re-registration failed", self.cfg.broker_id)

    def _register(self) -> None:
        cfg = self.cfg
        path = znodes.broker_path(cfg.broker_id)
        data = self._registration()
        try:   # an old session of ours may still be expiring: register_ephemeral waits for it
            stat = zkmod.register_ephemeral(
                self.zk, path, data, session_id=self.zk.client_id[0],
                timeout_s=cfg.zookeeper_session_timeout_ms / 1000.0 + 2)
        except zkmod.EphemeralHeldError:
            raise RuntimeError(f"{path} is held by another session: is broker.id "
                               f"{cfg.broker_id} used twice?") from None
        self.broker_epoch = stat.czxid
        log.info("[node %d] registered %s (broker epoch %d)", cfg.broker_id, path,
                 self.broker_epoch)

    def _registration(self) -> bytes:
        cfg = self.cfg
        # KIP-966: the first registration of a process that started after an unclean shutdown
        # says so (the controller takes this node out of every ELR); a later one (a new
        # ZooKeeper session of the same process) does not.
        unclean = bool(self.logs.manager.unclean_dirs) if self.logs is not None \
            and self.broker_epoch < 0 else False
        return znodes.encode_broker(znodes.BrokerInfo(
            broker_id=cfg.broker_id, host=cfg.host_name, port=cfg.port,
            endpoints=(cfg.endpoint,), rack=cfg.broker_rack or None,
            timestamp_ms=int(time.time() * 1000),
            offline_partitions=self.offline_partitions(), unclean_shutdown=unclean))

    def offline_partitions(self) -> tuple[tuple[str, int], ...]:
        """Replicas this node cannot serve: in failed log dirs, or in dirs low on space."""
        out: set = set(self.core.offline)
        return tuple(sorted(out))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- log dirs: failures and headroom ----------------------------------------------------

    def _zk_stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        try:
            self.zk.delete(znodes.broker_path(self.cfg.broker_id))
        except Exception:
            pass
        zkmod.close(self.zk)
        self.zk = None

    # -- the clock ---------------------------------------------------------------------------
    async def _tick_loop(self) -> None:
        next_log_tick = 0
        next_hw_checkpoint = now_ms() + self.cfg.replica_high_watermark_checkpoint_interval_ms
        next_isr_check = 0
        next_producer_expiry = now_ms() + self.cfg.producer_id_expiration_check_interval_ms
        isr_interval = self.cfg.effective_replica_lag_check_interval_ms
        while True:
            now = now_ms()
            if now >= next_isr_check:
                next_isr_check = now + isr_interval
                for eff in self.core.isr_tick(now, self.cfg.replica_lag_time_max_ms):
                    self._propose_isr(eff, "shrink")
            if now >= next_log_tick:
                next_log_tick = now + int(IDLE_TICK_S * 1000)
                try:     # flush.ms, the flush after a roll, due deletions, retention
                    for d, e in self.logs.tick():
                        self.fail_log_dir(d, e, "log maintenance")
                except Exception:
                    log.exception("log maintenance failed")
                if self._background_io_task is None or self._background_io_task.done():
                    self._background_io_task = asyncio.get_running_loop().create_task(
                        self._background_io_off_loop())
                self._measure_space()
            if now >= next_hw_checkpoint:
                next_hw_checkpoint = now + self.cfg.replica_high_watermark_checkpoint_interval_ms
                if self._hw_checkpoint_task is None or self._hw_checkpoint_task.done():
                    self._hw_checkpoint_task = asyncio.get_running_loop().create_task(
                        self._checkpoint_high_watermarks_off_loop())
            if now >= next_producer_expiry:
                next_producer_expiry = now + self.cfg.producer_id_expiration_check_interval_ms
                try:
                    self.logs.expire_producers()    # producer.id.expiration.ms
                except Exception:
                    log.exception("producer id expiry failed")
            for op in self.produce_purgatory.tick(now):
                self._finish_produce(op)
            for wid in self.fetch_waiters.tick(now):
                self._wake_fetch(wid)
            deadlines = [d for d in (self.produce_purgatory.next_deadline_ms(),
                                     self.fetch_waiters.next_deadline_ms(), next_isr_check)
                         if d is not None]
            wait_s = IDLE_TICK_S
            if deadlines:
                wait_s = min(wait_s, max(0.0, (min(deadlines) - now_ms()) / 1000.0))
            self._tick_wake.clear()
            try:
                async with asyncio.timeout(wait_s + 0.001):
                    await self._tick_wake.wait()
            except TimeoutError:
                pass

    # =========================================================================================
    # events from appends

    def _partition_changed(self, tp, hw_moved: bool) -> None:
        """New data (or a new role) on tp: complete acks=-1 produces, wake waiting fetches."""
        if hw_moved:
            r = self.core.get(tp)
            if r is not None:
                for op in self.produce_purgatory.on_high_watermark(tp, r.high_watermark):
                    self._finish_produce(op)
                # completed transactions below the new HW stop holding the LSO (and the cleaner)
                log_access.last_stable_offset(self.logs.store(tp), r.high_watermark)
        for wid in self.fetch_waiters.on_data(tp):
            self._wake_fetch(wid)

    def _finish_produce(self, op) -> None:
        for tp, code in op.results.items():
            if code == NONE:
                op.results[tp] = acks_all_result(code, self.core.isr_size(tp),
                                                 self._min_insync(tp[0]))
        fut = self._produce_futs.pop(op.op_id, None)
        if fut is not None and not fut.done():
            fut.set_result(op.results)

    def _min_insync(self, topic: str) -> int:
        return min_insync_replicas(self.topic_configs.get(topic), self.cfg.min_insync_replicas)

    def _wake_fetch(self, wid: int) -> None:
        fut = self._fetch_futs.get(wid)
        if fut is not None and not fut.done():
            fut.set_result(None)

    # =========================================================================================
    # PRODUCE

    async def handle_produce(self, req: Request) -> Reply | None:
        body: produce_pb2.ProduceRequest = req.body
        entries = [(t.name, p.partition) for t in body.topics for p in t.partitions]
        if len(set(entries)) != len(entries):
            raise errors.InvalidRequestError("a partition appears twice in one PRODUCE")
        if len(req.payloads) != len(entries):
            raise errors.InvalidRequestError(
                f"{len(entries)} partitions but {len(req.payloads)} payload frames")
        acks_error = check_acks(body.acks)
        results: dict[tuple[str, int], list] = {}   # tp -> [code, message, base_offset, log_start]
        required: dict[tuple[str, int], int] = {}
        for i, tp in enumerate(entries):
            if acks_error != NONE:
                results[tp] = [INVALID_REQUIRED_ACKS, f"acks={body.acks}: use 0, 1 or -1", -1, -1]
                continue
            payload = _buf(req.payloads[i])
            adm = admit_partition(self.core, tp, payload, max_batch_bytes(
                self.topic_configs.get(tp[0]), self.cfg.message_max_bytes),
                acks=body.acks, min_insync=self._min_insync(tp[0]))
            if not adm.ok:
                results[tp] = [adm.error_code, adm.error_message, -1, -1]
                continue
            replica = self.core.get(tp)
            plog = self.logs.get(tp)
            log_dir = self._dir_of(tp)
            if self.space.is_low(log_dir) or self._space_low_after(log_dir, len(payload)):
                results[tp] = [KAFKA_STORAGE_ERROR, f"{tp[0]}-{tp[1]}: log dir {log_dir} is below "
                               "log.dir.free.bytes.min; leadership is moving", -1, -1]
                continue
            try:
                # __consumer_offsets' transactional writes come from offset managers
                # (TXN_OFFSET_COMMIT), unsequenced as Kafka's coordinator-origin appends
                decision, first, last = log_access.append_as_leader(
                    self.logs.store(tp), payload, replica.leader_epoch, adm.headers,
                    allow_unsequenced=tp[0] == OFFSETS_TOPIC)
            except errors.KafkaError as e:
                results[tp] = [e.code, e.message, -1, -1]
                continue
            except OSError as e:
                self.fail_log_dir(log_dir, e, f"an append to {tp[0]}-{tp[1]}")
                results[tp] = [KAFKA_STORAGE_ERROR, f"{tp[0]}-{tp[1]}: {e}", -1, -1]
                continue
            if decision.verdict is Verdict.REFUSE:       # sequence/epoch check: nothing appended
                results[tp] = [decision.error_code, decision.message, -1, -1]
                continue
            if decision.verdict is Verdict.DUPLICATE:    # a retry of batches already written
                log.debug("[%s-%d] duplicate produce answered with offset %d", tp[0], tp[1],
                          first)
                results[tp] = [NONE, "", first, log_access.log_start_offset(plog)]
                required[tp] = last + 1                  # acks=-1: once the HW passes them
                continue
            moved = self.core.on_local_append(tp, log_access.log_end_offset(plog))
            self.topic_counters.produced(tp[0], len(payload), last - first + 1)
            results[tp] = [NONE, "", first, log_access.log_start_offset(plog)]
            required[tp] = last + 1
            self._partition_changed(tp, moved)
        if body.acks == 0:
            return None
        if body.acks == -1 and required:
            timeout = body.timeout_ms or req.header.timeout_ms or self.cfg.request_timeout_ms
            codes = await self._await_replicated(
                required, timeout, span=lambda: _followers_span(len(required), body.acks))
            if codes:
                for tp, code in codes.items():
                    if code != NONE:
                        results[tp][0] = code
                        results[tp][1] = errors.ErrorCode.Name(code).lower().replace("_", " ")
        resp = produce_pb2.ProduceResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                code, msg, base, start = results[(t.name, p.partition)]
                rt.partitions.add(partition=p.partition, error_code=code, error_message=msg,
                                  base_offset=base, log_append_time_ms=-1,
                                  log_start_offset=start)
        return Reply(resp)

    async def _await_replicated(self, required: dict, timeout_ms: int,
                                span=None) -> dict | None:
        """acks=all: wait (in the produce purgatory) until each partition's high watermark
        reaches its required offset, leadership is lost, or `timeout_ms`; the code per
        partition, or None when every one was there already. `span`: a context manager
        factory around the wait (the request's "await followers" span)."""
        op_id = next(self._ids)
        hws = {tp: self.core.get(tp).high_watermark for tp in required}
        op = self.produce_purgatory.add(op_id, required, now_ms() + timeout_ms, hws)
        if op is None:
            return None
        fut = self._loop.create_future()
        self._produce_futs[op_id] = fut
        self._tick_wake.set()
        try:
            with remote_wait(), (span() if span is not None else contextlib.nullcontext()):
                return await fut
        finally:
            self._produce_futs.pop(op_id, None)
            self.produce_purgatory.cancel(op_id)

    # =========================================================================================
    # FETCH

    # =========================================================================================
    # LIST_OFFSETS

    async def handle_list_offsets(self, req: Request) -> Reply:
        body: list_offsets_pb2.ListOffsetsRequest = req.body
        resp = list_offsets_pb2.ListOffsetsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                tp = (t.name, p.partition)
                out = rt.partitions.add(partition=p.partition, timestamp=-1, offset=-1,
                                        leader_epoch=-1)
                r = self.core.get(tp)
                if r is None:
                    out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if r.role is not Role.LEADER and body.replica_id < 0:
                    out.error_code = NOT_LEADER_FOR_PARTITION
                    continue
                plog = self.logs.get(tp)
                out.leader_epoch = r.leader_epoch
                # read_committed (v1): nothing at or past the last stable offset is visible
                visible = r.high_watermark
                if body.isolation_level == 1 and body.replica_id < 0:
                    visible = log_access.last_stable_offset(self.logs.store(tp), visible)
                if p.timestamp == -2:
                    out.offset = log_access.log_start_offset(plog)
                elif p.timestamp == -1:
                    out.offset = visible if body.replica_id < 0 \
                        else log_access.log_end_offset(plog)
                elif p.timestamp < 0:
                    out.error_code = INVALID_REQUEST
                    out.error_message = f"timestamp {p.timestamp}: use -1, -2 or a time in ms"
                else:
                    found = log_access.offset_for_timestamp(plog, p.timestamp)
                    if found is not None:
                        ts, off = found
                        if body.replica_id < 0 and off >= visible:
                            continue
                        out.timestamp, out.offset = ts, off
        return Reply(resp)

    async def handle_delete_records(self, req: Request) -> Reply:
        """Kafka's DeleteRecords on the leader: the log start offset moves up to the offset
        asked (-1: the high watermark), never past the high watermark (OFFSET_OUT_OF_RANGE).
        Followers follow when their next fetch answer carries the new log start offset (Kafka
        also waits for them before answering; here the leader's move is the answer)."""
        body: delete_records_pb2.DeleteRecordsRequest = req.body
        resp = delete_records_pb2.DeleteRecordsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                tp = (t.name, p.partition)
                out = rt.partitions.add(partition=p.partition, low_watermark=-1)
                r = self.core.get(tp)
                plog = self.logs.get(tp) if r is not None else None
                if r is None or plog is None:
                    out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if r.role is not Role.LEADER:
                    out.error_code = NOT_LEADER_FOR_PARTITION
                    continue
                offset = r.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > r.high_watermark:
                    out.error_code = OFFSET_OUT_OF_RANGE
                    out.error_message = (f"offset {p.offset}: records can be deleted up to the "
                                         f"high watermark {r.high_watermark}")
                    continue
                try:
                    out.low_watermark = plog.delete_records_before(offset)
                except errors.KafkaError as e:
                    out.error_code, out.error_message = e.code, e.message or e.name
                    continue
                except OSError as e:     # writing the epoch checkpoint
                    self.fail_log_dir(self._dir_of(tp), e, f"deleting records of {t.name}-{p.partition}")
                    out.error_code = KAFKA_STORAGE_ERROR
                    continue
                log.info("[%s-%d] records before %d deleted (DeleteRecords); log start offset %d",
                         t.name, p.partition, offset, out.low_watermark)
        return Reply(resp)

    async def handle_offset_for_leader_epoch(self, req: Request) -> Reply:
        """Where each asked epoch ends in this leader's log (Kafka's OffsetForLeaderEpoch for
        consumers: the leader answers, after checking the caller's view of its epoch)."""
        body: list_offsets_pb2.OffsetForLeaderEpochRequest = req.body
        resp = list_offsets_pb2.OffsetForLeaderEpochResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                out = rt.partitions.add(partition=p.partition, leader_epoch=-1, end_offset=-1)
                r = self.core.get((t.name, p.partition))
                if r is None:
                    out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if r.role is not Role.LEADER:
                    out.error_code = NOT_LEADER_FOR_PARTITION
                    continue
                code = divergence.check_current_leader_epoch(p.current_leader_epoch,
                                                             r.leader_epoch)
                if code != NONE:
                    out.error_code = code
                    out.error_message = (f"leader epoch {p.current_leader_epoch} asked, "
                                         f"the leader's is {r.leader_epoch}")
                    continue
                plog = self.logs.get((t.name, p.partition))
                if plog is None:
                    out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                out.leader_epoch, out.end_offset = log_access.end_offset_for_epoch(
                    plog, p.leader_epoch)
        return Reply(resp)

    # =========================================================================================
    # WRITE_TXN_MARKERS (from transaction coordinators)

    async def handle_write_txn_markers(self, req: Request) -> Reply:
        """Each marker as a control batch on each partition this node leads, with acks=all
        semantics (min.insync.replicas before, the high watermark past it after, at most
        request.timeout.ms); per partition NONE or the error (Kafka's
        WriteTxnMarkers: NOT_LEADER_FOR_PARTITION, NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED, ...)."""
        body: transaction_pb2.WriteTxnMarkersRequest = req.body
        results: dict[tuple[int, str, int], list] = {}     # (marker index, topic, p) -> [code, msg]
        required: dict[tuple[str, int], int] = {}
        waiting: dict[tuple[str, int], list[tuple[int, str, int]]] = {}
        for i, m in enumerate(body.markers):
            for t in m.topics:
                for p in t.partitions:
                    tp = (t.name, p)
                    key = (i, t.name, p)
                    code, msg, offset = self._write_marker(tp, m)
                    results[key] = [code, msg]
                    if code == NONE:
                        required[tp] = max(required.get(tp, 0), offset + 1)
                        waiting.setdefault(tp, []).append(key)
        if required:
            codes = await self._await_replicated(
                required, req.header.timeout_ms or self.cfg.request_timeout_ms)
            if codes:
                for tp, code in codes.items():
                    for key in waiting.get(tp, ()):
                        if code != NONE:
                            results[key] = [code, errors.ErrorCode.Name(code).lower()]
        resp = transaction_pb2.WriteTxnMarkersResponse()
        for i, m in enumerate(body.markers):
            mr = resp.markers.add(producer_id=m.producer_id)
            for t in m.topics:
                tr = mr.topics.add(name=t.name)
                for p in t.partitions:
                    code, msg = results[(i, t.name, p)]
                    tr.partitions.add(partition_index=p, error_code=code, error_message=msg)
        return Reply(resp)

    def _write_marker(self, tp, m) -> tuple[int, str, int]:
        """Append one marker to tp as its leader: (code, message, marker offset)."""
        code = self.core.leader_check(tp)
        if code != NONE:
            return code, f"{tp[0]}-{tp[1]}: not the leader here", -1
        isr = self.core.isr_size(tp)
        min_insync = self._min_insync(tp[0])
        if isr < min_insync:
            return errors.NotEnoughReplicasError.code, \
                f"{tp[0]}-{tp[1]}: ISR has {isr} member(s), min.insync.replicas is {min_insync}", -1
        log_dir = self._dir_of(tp)
        if self.space.is_low(log_dir):
            return KAFKA_STORAGE_ERROR, f"log dir {log_dir} is below log.dir.free.bytes.min", -1
        replica = self.core.get(tp)
        plog = self.logs.get(tp)
        try:
            refusal, offset = log_access.append_marker(
                self.logs.store(tp), m.producer_id, m.producer_epoch, m.transaction_result,
                m.coordinator_epoch, replica.leader_epoch)
        except errors.KafkaError as e:
            return e.code, e.message, -1
        except OSError as e:
            self.fail_log_dir(log_dir, e, f"a marker append to {tp[0]}-{tp[1]}")
            return KAFKA_STORAGE_ERROR, f"{tp[0]}-{tp[1]}: {e}", -1
        if refusal is not None:
            return refusal[0], refusal[1], -1
        log.debug("[%s-%d] %s marker of producer %d epoch %d at offset %d", tp[0], tp[1],
                  "commit" if m.transaction_result else "abort", m.producer_id,
                  m.producer_epoch, offset)
        moved = self.core.on_local_append(tp, log_access.log_end_offset(plog))
        self._partition_changed(tp, moved)
        return NONE, "", offset

    # =========================================================================================
    # LEADER_AND_ISR / STOP_REPLICA

    def _stale_registration(self, broker_epoch: int) -> str | None:
        """Why a controller request stamped for `broker_epoch` is refused (an earlier
        registration of this node), or None."""
        if stale_broker_epoch(broker_epoch, self.broker_epoch):
            log.info("[node %d] refused a controller request for broker epoch %d (registered "
                     "as %d since)", self.cfg.broker_id, broker_epoch, self.broker_epoch)
            return (f"broker epoch {broker_epoch} is stale: node {self.cfg.broker_id} "
                    f"registered as {self.broker_epoch} since")
        return None

    async def handle_leader_and_isr(self, req: Request) -> Reply:
        body: controller_pb2.LeaderAndIsrRequest = req.body
        why = self._stale_registration(body.broker_epoch)
        if why is not None:
            return Reply(controller_pb2.LeaderAndIsrResponse(
                error_code=STALE_BROKER_EPOCH, error_message=why))
        states = [PartitionStateIn(s.topic, s.partition, s.leader, s.leader_epoch, tuple(s.isr),
                                   tuple(s.replicas), dict(s.topic_configs), s.zk_version)
                  for s in body.partitions]
        newer_controller = body.controller_epoch > self.core.controller_epoch
        plan = self.core.plan_leader_and_isr(body.controller_epoch, states)
        resp = controller_pb2.LeaderAndIsrResponse(error_code=plan.error_code,
                                                   error_message=plan.error_message)
        perrs = dict(plan.partition_errors)
        if plan.error_code == NONE:
            for b in body.live_leaders:
                if b.endpoint:
                    self.leader_endpoints[b.node_id] = b.endpoint
                elif b.host and b.port:
                    self.leader_endpoints[b.node_id] = f"tcp://{b.host}:{b.port}"
            local: dict = {}
            accepted = []
            for s in plan.accepted:
                try:
                    if s.topic_configs:
                        self.topic_configs[s.topic] = dict(s.topic_configs)
                    # new partition dirs: one fsync per log dir after the loop, not one each
                    plog = self.logs.get_or_create(s.tp, self.topic_configs.get(s.topic, {}),
                                                   sync_dir=False)
                except OSError as e:
                    self.fail_log_dir(getattr(e, "log_dir", None), e,
                                      f"opening {s.topic}-{s.partition}")
                    perrs[s.tp] = KAFKA_STORAGE_ERROR
                    continue
                except (errors.KafkaError, ValueError) as e:
                    log.error("[%s-%d] cannot open the log: %s", s.topic, s.partition, e)
                    perrs[s.tp] = getattr(e, "code", KAFKA_STORAGE_ERROR) \
                        if isinstance(e, errors.KafkaError) else errors.InvalidConfigError.code
                    continue
                local[s.tp] = LocalLog(log_access.log_end_offset(plog),
                                       self.logs.high_watermark_checkpoint(s.tp),
                                       log_access.latest_epoch(plog))
                accepted.append(s)
            failed_dirs = self.logs.sync_created_dirs()
            if failed_dirs:
                dir_of = {s.tp: self._dir_of(s.tp) for s in accepted}
                for d, e in failed_dirs:
                    self.fail_log_dir(d, e, "making new partition dirs durable")
                    for tp, where in dir_of.items():
                        if where == d:
                            perrs[tp] = KAFKA_STORAGE_ERROR
                accepted = [s for s in accepted if s.tp not in perrs]
            plan = dataclasses.replace(plan, accepted=tuple(accepted))
            if newer_controller:
                self._on_controller_epoch(body.controller_epoch)
            for eff in self.core.apply_leader_and_isr(plan, local, now_ms()):
                self._apply_role_change(eff)
            for s in plan.accepted:      # an ISR the controller changed may move the HW
                r = self.core.get(s.tp)
                if r is not None and r.role is Role.LEADER:
                    self._partition_changed(s.tp, True)
            self._reconcile_fetchers()
        for s in body.partitions:
            resp.partitions.add(topic=s.topic, partition=s.partition,
                                error_code=perrs.get((s.topic, s.partition), NONE))
        return Reply(resp)

    def _apply_role_change(self, eff) -> None:
        try:
            self._apply_role_change_io(eff)
        except OSError as e:
            self.fail_log_dir(self._dir_of(eff.tp), e, f"a role change of {eff.tp[0]}-{eff.tp[1]}")

    def _apply_role_change_io(self, eff) -> None:
        tp = eff.tp
        if isinstance(eff, BecomeLeader):
            log.info("[%s-%d leader_epoch=%d] became leader; epoch starts at offset %d",
                     tp[0], tp[1], eff.leader_epoch, eff.start_offset)
            log_access.assign_epoch(self.logs.get(tp), eff.leader_epoch, eff.start_offset)
            self._partition_changed(tp, True)
        elif isinstance(eff, BecomeFollower):
            log.info("[%s-%d leader_epoch=%d] became follower of %d from offset %d",
                     tp[0], tp[1], eff.leader_epoch, eff.leader, eff.truncate_to)
            for op in self.produce_purgatory.on_leadership_lost(tp):
                self._finish_produce(op)
            plog = self.logs.get(tp)
            log_access.truncate_to(self.logs.store(tp), eff.truncate_to)
            self.core.on_truncated(tp, log_access.log_end_offset(plog))
            self._partition_changed(tp, False)

    async def handle_stop_replica(self, req: Request) -> Reply:
        body: controller_pb2.StopReplicaRequest = req.body
        why = self._stale_registration(body.broker_epoch)
        if why is not None:
            return Reply(controller_pb2.StopReplicaResponse(
                error_code=STALE_BROKER_EPOCH, error_message=why))
        tps = [(p.topic, p.partition) for p in body.partitions]
        code, perrs, removed = self.core.stop_replica(body.controller_epoch, tps)
        resp = controller_pb2.StopReplicaResponse(error_code=code)
        if code != NONE:
            resp.error_message = f"controller epoch {body.controller_epoch} is stale"
        perrs = dict(perrs)
        for tp in removed:
            for op in self.produce_purgatory.on_leadership_lost(tp):
                self._finish_produce(op)
            self._partition_changed(tp, False)
        if code == NONE and body.delete_partitions:
            for tp in tps:
                try:
                    self.logs.delete(tp)
                except (errors.KafkaError, OSError) as e:
                    log.error("[%s-%d] delete failed: %s", tp[0], tp[1], e)
                    perrs[tp] = KAFKA_STORAGE_ERROR
        self._reconcile_fetchers()
        for tp in tps:
            resp.partitions.add(topic=tp[0], partition=tp[1], error_code=perrs.get(tp, NONE))
        return Reply(resp)

    # =========================================================================================
    # replication (called by ReplicaFetcher)

    async def _background_io_off_loop(self) -> None:
        """Log maintenance's fsyncs, unlinks and cleaning (the flush after a roll: half a
        second for a 1 GiB segment's dirty pages on this kind of disk; due deletions; the
        compaction of compacted topics; the checkpoints) in a worker thread, as Kafka runs them
        on its scheduler and cleaner threads: the loop answers requests meanwhile."""
        logs = self.logs
        if logs is None:
            return
        try:
            failed = await asyncio.to_thread(logs.background_io)
            for d, e in failed:
                self.fail_log_dir(d, e, "log maintenance")
        except Exception:
            log.exception("log maintenance failed")

    async def _checkpoint_high_watermarks_off_loop(self) -> None:
        """The periodic high-watermark checkpoint: the text is made here, the files (with their
        fsyncs, milliseconds on a busy disk) are written by a worker thread, so requests on the
        loop never wait behind them."""
        try:
            hws = dict(self.logs.hw_checkpoint)
            hws.update({tp: r.high_watermark for tp, r in self.core.replicas.items()})
            plan = self.logs.high_watermark_writes(hws)
            if not plan:
                return
            failed = await asyncio.to_thread(log_access.write_checkpoint_files, plan)
            if self.logs is None:
                return
            for d, e in self.logs.high_watermarks_written(plan, failed):
                self.fail_log_dir(d, e, "the high-watermark checkpoint")
        except Exception:
            log.exception("writing the high-watermark checkpoint failed")

    def _checkpoint_high_watermarks(self) -> None:
        try:
            hws = dict(self.logs.hw_checkpoint)
            hws.update({tp: r.high_watermark for tp, r in self.core.replicas.items()})
            for d, e in self.logs.write_high_watermarks(hws):
                self.fail_log_dir(d, e, "the high-watermark checkpoint")
        except Exception:
            log.exception("writing the high-watermark checkpoint failed")

    # =========================================================================================
    # talking to the controller: ALTER_PARTITION, CONTROLLED_SHUTDOWN

