"""Shard hosting for a sharded role (group coordinator, offset manager, transaction coordinator):
ZooKeeper membership and shard ownership, and reading/writing the shards, i.e. the partitions of
the role's internal topic (`__consumer_offsets`, `__transaction_state`: `ShardTopic`).

Shared by the roles (it lives in services/common because no service imports another).

ZooKeeper (paths in services.common.znodes, `root` = GROUP_COORDINATORS, OFFSET_MANAGERS or
TRANSACTION_COORDINATORS):
- `<root>/ids/<id>` (ephemeral, endpoint): this instance is alive; re-created after a new session.
- shards are divided among the live ids deterministically: shard s belongs to
  sorted(live ids)[s % n] (`desired_shards`). An instance takes a shard by creating the
  ephemeral `<root>/shards/<s>`; while another instance still holds it (a dead one until its
  session expires, a live one until it sees the new membership and lets go) it waits and retries.
  It gives a shard up by unloading it and deleting the znode. Session LOST: every shard is
  unloaded (the ephemerals are gone); the next session registers and takes them again.
- with `coordinator_epochs` (transaction coordinators): after taking shard s, `<root>/epochs/<s>`
  is set; its new version is the coordinator epoch handed to `shard_load_started`. Versions only
  grow, so each owner of a shard has a larger epoch than every owner before it.

Loading a shard: FETCH the partition from its leader (learnt from the controller's metadata
snapshots: its PUB feed, and METADATA at the controller) from offset 0 (or the log start) up to
the high watermark, handing every record to `listener.replay` (a transactional record with its
producer id), every transaction marker to `listener.replay_control`, then
`shard_load_completed`. With `tail=True` (the offset manager) it keeps long-polling the
partition into `replay` afterwards, so records other writers append (the group coordinator's
group records, the transaction coordinators' markers) arrive.

Writing (`append`): one record batch PRODUCEd with acks=all (offsets.commit.required.acks) to the
shard's leader, timeout the topic's commit timeout; returns (error_code, base_offset). With a
producer id the batch is a transactional one of that producer (TXN_OFFSET_COMMIT).

The topic: if it is missing once metadata is known, CREATE_TOPICS at the active controller (from
/controller) with its partition count, the replication factor capped at the live storage nodes
(WARNING), cleanup.policy=compact, its segment.bytes and min.insync.replicas (capped at the
replication factor); TOPIC_ALREADY_EXISTS is success (another instance was first).

Threads: kazoo callbacks only hand their input to the loop (`call_soon_threadsafe`); blocking
ZooKeeper calls run in `asyncio.to_thread`. The listener is called on the event loop.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from google.protobuf.message import DecodeError
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from riverbed import errors
from riverbed._proto.v1 import (controller_pb2, fetch_pb2, header_pb2, list_offsets_pb2, metadata_pb2,
                                 produce_pb2)
from riverbed.coordinator.offsets_topic import StoredControl, StoredRecord
from riverbed.records import build_batch, decode_batch, iter_batches
from riverbed.records.control import read_control_record
from services.common import rpc, zk, znodes
from services.common.controller_feed import ControllerFeed
from services.common.sharded_role import ShardTopic

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
METADATA_TOPIC = b"metadata"
# How often ownership is re-checked without a ZooKeeper event (a shard whose old owner has not
# let go yet is retried at this pace).
RECONCILE_INTERVAL_S = 0.25
# Back-off after a failed shard read (no leader yet, leader moved, node down).
LOAD_RETRY_S = 0.2
# While tailing, how long one FETCH may wait for new records at the leader.
TAIL_MAX_WAIT_MS = 500
# Creating the topic: wait this long for more storage nodes to register before capping the
# replication factor at those alive.
CREATE_WAIT_FOR_NODES_S = 3.0
REGISTER_RETRY_S = 0.2

log = logging.getLogger(__name__)


class ShardListener(Protocol):
    def shard_load_started(self, shard: int, coordinator_epoch: int) -> None: ...
    def replay(self, record: StoredRecord) -> None: ...
    def replay_control(self, control: StoredControl) -> None: ...
    def shard_load_completed(self, shard: int) -> None: ...
    def shard_unloaded(self, shard: int) -> None: ...
    def topics_changed(self, partition_counts: Mapping[str, int]) -> None: ...


def desired_shards(instance_id: int, live_ids: Iterable[int], num_shards: int) -> set[int]:
    """The shards `instance_id` should own: shard s -> sorted(live ids)[s % n]."""
    live = sorted(set(live_ids))
    if instance_id not in live:
        return set()
    return {s for s in range(num_shards) if live[s % len(live)] == instance_id}


@dataclass(frozen=True, slots=True)
class ShardHostConfig:
    root: str                        # znodes.GROUP_COORDINATORS, OFFSET_MANAGERS, ...
    instance_id: int
    endpoint: str                    # this instance's ROUTER, for the znodes
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    topic: ShardTopic                # the topic, partitions, replication, commit timeout...
    required_acks: int               # offsets.commit.required.acks (-1)
    request_timeout_ms: int
    max_message_bytes: int           # socket.request.max.bytes, for our DEALERs
    tail: bool                       # keep reading owned shards after loading
    coordinator_epochs: bool = False  # bump <root>/epochs/<shard> on taking a shard

    @property
    def num_shards(self) -> int:
        return self.topic.num_partitions


class _Prefixed(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"[{self.extra['prefix']}] {msg}", kwargs


class ShardHost:
    def __init__(self, config: ShardHostConfig, listener: ShardListener, *, name: str):
        self.config = config
        self.listener = listener
        self.name = name
        self.log = _Prefixed(log, {"prefix": name})
        self._zk = None
        self._watcher = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool = rpc.ChannelPool(client_id=name, max_message_bytes=config.max_message_bytes)
        self._subscriber: rpc.Subscriber | None = None
        self._controller = ControllerFeed(self.log)
        self._stamp: tuple[int, int] | None = None
        self._brokers: dict[int, str] = {}
        self._topics: dict[str, metadata_pb2.TopicMetadata] = {}
        self._partition_counts: dict[str, int] = {}
        self._metadata_changed = asyncio.Event()
        self._live_ids: tuple[int, ...] = ()
        self._registered_session: int | None = None
        self._reconcile = asyncio.Event()
        self._sessions: asyncio.Queue = asyncio.Queue()
        self._owned: dict[int, asyncio.Task] = {}    # shard -> its loader task
        self._loaded: set[int] = set()
        self._topic_ready = False
        self._topic_wanted = asyncio.Event()
        self._refreshing: asyncio.Task | None = None

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect to ZooKeeper and set the watches (then run `run()` in the service's TaskGroup)."""
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        self._subscriber = rpc.Subscriber((), topics=(METADATA_TOPIC,),
                                          max_message_bytes=cfg.max_message_bytes)
        self._zk = await asyncio.to_thread(
            zk.connect, cfg.zookeeper_connect,
            timeout_s=cfg.zookeeper_connection_timeout_ms / 1000.0,
            session_timeout_ms=cfg.zookeeper_session_timeout_ms)
        for path in (znodes.shard_instances_path(cfg.root), znodes.shard_owners_path(cfg.root)):
            await asyncio.to_thread(self._zk.ensure_path, path)
        loop = self._loop
        self._watcher = zk.SessionWatcher(
            self._zk, name=f"{self.name}-zk",
            on_connected=lambda ch: ch.new_session and loop.call_soon_threadsafe(
                self._sessions.put_nowait, ch.session_id),
            on_suspended=lambda ch: self.log.warning("ZooKeeper connection suspended"),
            on_lost=lambda ch: loop.call_soon_threadsafe(self._on_session_lost))
        self._watcher.start()
        DataWatch(self._zk, znodes.CONTROLLER, self._controller_watch)
        ChildrenWatch(self._zk, znodes.shard_instances_path(cfg.root), self._ids_watch)

    async def run(self) -> None:
        """The host's loops; runs until cancelled."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._register_loop(), name="register")
            tg.create_task(self._subscribe_loop(), name="metadata-sub")
            tg.create_task(self._reconcile_loop(), name="shards")
            tg.create_task(self._ensure_offsets_topic(), name="offsets-topic")

    async def close(self) -> None:
        for task in list(self._owned.values()):
            task.cancel()
        if self._owned:
            await asyncio.gather(*self._owned.values(), return_exceptions=True)
        self._owned.clear()
        if self._refreshing is not None:
            self._refreshing.cancel()
        if self._subscriber is not None:
            await self._subscriber.close()
        await self._pool.close_all()
        if self._watcher is not None:
            self._watcher.stop()
        if self._zk is not None:
            await asyncio.to_thread(zk.close, self._zk)   # our ephemerals go with the session

    # -- queries --------------------------------------------------------------------------
    @property
    def owned_shards(self) -> frozenset[int]:
        return frozenset(self._owned)

    @property
    def partition_counts(self) -> dict[str, int]:
        return dict(self._partition_counts)

    # -- ZooKeeper inputs (kazoo threads: hand over, never block) --------------------------
    def _controller_watch(self, data, stat, event=None):
        self._loop.call_soon_threadsafe(self._on_controller_data, data)

    def _ids_watch(self, children):
        ids = []
        for c in children:
            try:
                ids.append(int(c))
            except ValueError:
                continue
        self._loop.call_soon_threadsafe(self._on_ids, tuple(sorted(ids)))

    def _on_ids(self, ids: tuple[int, ...]) -> None:
        if ids != self._live_ids:
            self.log.info("live instances: %s", list(ids))
        self._live_ids = ids
        self._reconcile.set()

    def _on_controller_data(self, data: bytes | None) -> None:
        if self._controller.update(data, self._subscriber) and self._controller.current:
            self.refresh_metadata_soon()

    def _on_session_lost(self) -> None:
        self.log.warning("ZooKeeper session lost: unloading %d shards", len(self._owned))
        self._registered_session = None
        for shard in sorted(self._owned):
            self._release(shard, delete_znode=False)

    # -- registration ---------------------------------------------------------------------
    async def _register_loop(self) -> None:
        while True:
            session_id = await self._sessions.get()
            await asyncio.to_thread(self._register, session_id)
            self._registered_session = session_id
            self._reconcile.set()

    def _register(self, session_id: int | None) -> None:
        """Create <root>/ids/<id> for this session (blocking; a thread)."""
        cfg = self.config
        path = znodes.shard_instance_path(cfg.root, cfg.instance_id)
        data = znodes.encode_coordinator_instance(znodes.CoordinatorInstance(
            cfg.instance_id, cfg.endpoint, int(time.time() * 1000)))
        try:
            zk.register_ephemeral(self._zk, path, data, session_id=session_id,
                                  timeout_s=cfg.zookeeper_session_timeout_ms / 1000.0 * 2,
                                  retry_s=REGISTER_RETRY_S)
        except zk.EphemeralHeldError:
            raise RuntimeError(f"{path} is held by another live instance with this id") from None
        self.log.info("registered %s", path)

    # -- shard ownership ------------------------------------------------------------------
    async def _reconcile_loop(self) -> None:
        while True:
            try:
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
                # races with the event (the service would then never stop).
                async with asyncio.timeout(RECONCILE_INTERVAL_S):
                    await self._reconcile.wait()
            except TimeoutError:
                pass
            self._reconcile.clear()
            await self._reconcile_once()

    async def _reconcile_once(self) -> None:
        cfg = self.config
        session = self._registered_session
        if session is None:
            return
        want = desired_shards(cfg.instance_id, self._live_ids, cfg.num_shards)
        for shard in sorted(set(self._owned) - want):
            self.log.info("giving up shard %d", shard)
            self._release(shard, delete_znode=True)
        missing = sorted(want - set(self._owned))
        if not missing:
            return
        claimed = await asyncio.to_thread(self._claim, missing, session)
        if self._registered_session != session:
            return                      # the session changed meanwhile: the claims are void
        for shard, epoch in claimed:
            if shard in self._owned:
                continue
            if shard not in desired_shards(cfg.instance_id, self._live_ids, cfg.num_shards):
                # membership changed while claiming: let it go again at once
                asyncio.get_running_loop().create_task(asyncio.to_thread(self._delete_owner, shard))
                continue
            if epoch >= 0:
                self.log.info("took shard %d (coordinator epoch %d)", shard, epoch)
            else:
                self.log.info("took shard %d", shard)
            self.listener.shard_load_started(shard, epoch)
            self._owned[shard] = asyncio.get_running_loop().create_task(
                self._read_shard(shard), name=f"shard-{shard}")

    def _claim(self, shards: list[int], session_id: int) -> list[tuple[int, int]]:
        """Create <root>/shards/<s> for each shard not held by someone else (blocking; a thread).
        Returns (shard, coordinator epoch) pairs; the epoch is -1 without `coordinator_epochs`."""
        cfg = self.config
        got: list[int] = []
        for shard in shards:
            path = znodes.shard_owner_path(cfg.root, shard)
            data = znodes.encode_shard_owner(znodes.ShardOwner(
                shard, cfg.instance_id, cfg.endpoint, int(time.time() * 1000)))
            try:
                self._zk.create(path, data, ephemeral=True, makepath=True)
                got.append(shard)
            except NodeExistsError:
                try:
                    _, stat = self._zk.get(path)
                except NoNodeError:
                    continue                 # vanished meanwhile: next round
                if stat.ephemeralOwner == session_id:
                    got.append(shard)        # ours already (a retried create)
            except Exception as e:  # noqa: BLE001 - ZooKeeper hiccup: next round
                self.log.warning("could not claim shard %d: %r", shard, e)
                break
        if not cfg.coordinator_epochs:
            return [(s, -1) for s in got]
        out = []
        for shard in got:
            try:
                out.append((shard, self._bump_epoch(shard)))
            except Exception as e:  # noqa: BLE001 - ZooKeeper hiccup: give it back, next round
                self.log.warning("could not bump the epoch of shard %d: %r", shard, e)
                self._delete_owner(shard)
        return out

    def _bump_epoch(self, shard: int) -> int:
        """Set <root>/epochs/<shard> (created at version 0 when missing): the new version is this
        owner's coordinator epoch. Only the owner of the shard's ephemeral writes it."""
        path = znodes.shard_epoch_path(self.config.root, shard)
        try:
            stat = self._zk.set(path, znodes.encode_shard_epoch())
        except NoNodeError:
            try:
                self._zk.create(path, znodes.encode_shard_epoch(), makepath=True)
            except NodeExistsError:
                pass
            stat = self._zk.set(path, znodes.encode_shard_epoch())
        return stat.version

    def _release(self, shard: int, *, delete_znode: bool) -> None:
        task = self._owned.pop(shard, None)
        if task is None:
            return
        task.cancel()
        self._loaded.discard(shard)
        self.listener.shard_unloaded(shard)
        if delete_znode:
            asyncio.get_running_loop().create_task(asyncio.to_thread(self._delete_owner, shard))

    def _delete_owner(self, shard: int) -> None:
        path = znodes.shard_owner_path(self.config.root, shard)
        try:
            _, stat = self._zk.get(path)
            if stat.ephemeralOwner == self._zk.client_id[0]:
                self._zk.delete(path, version=stat.version)
        except Exception as e:  # noqa: BLE001 - gone already, or the session is: same result
            self.log.debug("deleting %s: %r", path, e)

    # -- reading a shard ------------------------------------------------------------------
    async def _read_shard(self, shard: int) -> None:
        cfg = self.config
        topic = cfg.topic.name
        offset = 0
        max_bytes = cfg.topic.load_buffer_size
        loaded = False
        started = time.monotonic()
        records = 0
        while True:
            leader = self.leader_endpoint(shard)
            if leader is None:
                if self.topic_exists(topic) is False:
                    await self._wait_metadata(1.0)   # not created yet: the feed says when it is
                    continue
                self.refresh_metadata_soon()
                await asyncio.sleep(LOAD_RETRY_S)
                continue
            wait_ms = TAIL_MAX_WAIT_MS if loaded else 0
            req = fetch_pb2.FetchRequest(
                replica_id=-1, max_wait_ms=wait_ms, min_bytes=1 if loaded else 0, max_bytes=0,
                topics=[fetch_pb2.FetchTopic(name=topic, partitions=[fetch_pb2.FetchPartition(
                    partition=shard, fetch_offset=offset, partition_max_bytes=max_bytes,
                    current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1)])])
            try:
                resp = await self._pool.get(leader).call(
                    ApiKey.FETCH, req, timeout_ms=cfg.request_timeout_ms + wait_ms)
                pr = resp.body.topics[0].partitions[0]
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - node down or a bad answer: retry
                self.log.debug("reading shard %d from %s failed: %r", shard, leader, e)
                self.refresh_metadata_soon()
                await asyncio.sleep(LOAD_RETRY_S)
                continue
            if pr.error_code == E.OFFSET_OUT_OF_RANGE and pr.log_start_offset > offset:
                offset = pr.log_start_offset
                continue
            if pr.error_code != E.NONE:
                self.log.debug("reading shard %d: %s", shard, E.Name(pr.error_code))
                self.refresh_metadata_soon()
                await asyncio.sleep(LOAD_RETRY_S)
                continue
            data = _buffer(resp.payloads[0]) if resp.payloads else b""
            whole = 0
            try:
                for pos, header in iter_batches(data):
                    whole += 1
                    if header.next_offset <= offset:
                        continue
                    if header.is_control:
                        if header.producer_id >= 0 and header.base_offset >= offset:
                            marker = read_control_record(data, pos)
                            if marker.coordinator_epoch >= 0:     # a transaction marker
                                self.listener.replay_control(StoredControl(
                                    shard, header.base_offset, header.producer_id,
                                    header.producer_epoch, marker.commit))
                    else:
                        pid = header.producer_id if header.is_transactional else -1
                        epoch = header.producer_epoch if header.is_transactional else -1
                        for rec in decode_batch(data, pos):
                            if rec.offset >= offset and rec.key is not None:
                                self.listener.replay(StoredRecord(shard, rec.offset, rec.key,
                                                                  rec.value, pid, epoch))
                                records += 1
                    offset = header.next_offset
            except errors.CorruptMessageError as e:
                # A storage node validated these bytes; a bad CRC here is a bug to see, not to skip.
                raise RuntimeError(f"shard {shard}: corrupt batch at offset {offset}: {e}") from e
            if not loaded:
                if offset >= pr.high_watermark:
                    loaded = True
                    self._loaded.add(shard)
                    self.log.info("shard %d loaded: %d records up to offset %d in %.0f ms", shard,
                                  records, offset, (time.monotonic() - started) * 1000)
                    self.listener.shard_load_completed(shard)
                    if not cfg.tail:
                        return
                elif whole == 0 and data:
                    max_bytes = min(max_bytes * 2, cfg.max_message_bytes)   # one batch is bigger

    # -- writing --------------------------------------------------------------------------
    async def append(self, shard: int, records: Iterable[tuple[bytes, bytes | None]], *,
                     producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        """Append records (one batch) to the shard with acks=all; (error_code, base_offset).
        With `producer_id` >= 0, a transactional batch of that producer and epoch (base
        sequence -1: the storage node takes a coordinator's transactional write unsequenced)."""
        cfg = self.config
        commit_timeout_ms = cfg.topic.commit_timeout_ms
        leader = self.leader_endpoint(shard)
        if leader is None:
            await self.refresh_metadata(commit_timeout_ms // 2)
            leader = self.leader_endpoint(shard)
            if leader is None:
                return E.UNKNOWN_TOPIC_OR_PARTITION, -1    # -> COORDINATOR_NOT_AVAILABLE
        now_ms = int(time.time() * 1000)
        if producer_id >= 0:
            batch = build_batch([(now_ms, k, v) for k, v in records], producer_id=producer_id,
                                producer_epoch=producer_epoch, base_sequence=-1,
                                is_transactional=True)
        else:
            batch = build_batch([(now_ms, k, v) for k, v in records])
        req = produce_pb2.ProduceRequest(
            acks=cfg.required_acks, timeout_ms=commit_timeout_ms,
            topics=[produce_pb2.ProduceTopic(name=cfg.topic.name,
                                             partitions=[produce_pb2.ProducePartition(partition=shard)])])
        try:
            resp = await self._pool.get(leader).call(
                ApiKey.PRODUCE, req, payloads=[batch], timeout_ms=commit_timeout_ms + 1000)
            pr = resp.body.topics[0].partitions[0]
        except errors.KafkaError as e:
            self.log.warning("writing to shard %d failed: %s", shard, e)
            self.refresh_metadata_soon()
            return (e.code if e.code != E.UNKNOWN_SERVER_ERROR else E.REQUEST_TIMED_OUT), -1
        except (IndexError, OSError) as e:
            self.log.warning("writing to shard %d failed: %r", shard, e)
            return E.REQUEST_TIMED_OUT, -1
        if pr.error_code != E.NONE:
            self.log.warning("writing to shard %d: %s %s", shard, E.Name(pr.error_code), pr.error_message)
            if pr.error_code in (E.NOT_LEADER_FOR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION,
                                 E.LEADER_NOT_AVAILABLE):
                self.refresh_metadata_soon()
        return pr.error_code, pr.base_offset

    async def latest_offsets(self, partitions: Iterable[tuple[str, int]], timeout_ms: int
                             ) -> dict[tuple[str, int], int]:
        """Each partition's latest offset (its high watermark: LIST_OFFSETS as a consumer),
        asked of its leader; partitions without a known leader or answering an error are left
        out."""
        by_leader: dict[str, list[tuple[str, int]]] = {}
        for topic, p in partitions:
            t = self._topics.get(topic)
            if t is None:
                continue
            for pm in t.partitions:
                if pm.partition == p and pm.leader >= 0 and pm.leader in self._brokers:
                    by_leader.setdefault(self._brokers[pm.leader], []).append((topic, p))
        out: dict[tuple[str, int], int] = {}

        async def ask(endpoint: str, tps: list[tuple[str, int]]) -> None:
            req = list_offsets_pb2.ListOffsetsRequest(replica_id=-1)
            by_topic: dict[str, list[int]] = {}
            for topic, p in tps:
                by_topic.setdefault(topic, []).append(p)
            for topic, ps in by_topic.items():
                req.topics.add(name=topic, partitions=[
                    list_offsets_pb2.ListOffsetsPartition(partition=p, timestamp=-1) for p in ps])
            try:
                resp = await self._pool.get(endpoint).call(ApiKey.LIST_OFFSETS, req,
                                                           timeout_ms=timeout_ms)
            except (errors.KafkaError, OSError) as e:
                self.log.debug("LIST_OFFSETS to %s failed: %r", endpoint, e)
                return
            for t in resp.body.topics:
                for pr in t.partitions:
                    if pr.error_code == E.NONE:
                        out[(t.name, pr.partition)] = pr.offset

        await asyncio.gather(*(ask(ep, tps) for ep, tps in by_leader.items()))
        return out

    # -- metadata -------------------------------------------------------------------------
    def leader_endpoint(self, shard: int) -> str | None:
        return self.partition_leader(self.config.topic.name, shard)[1]

    def partition_leader(self, topic: str, partition: int) -> tuple[int, str | None]:
        """(leader node id, its endpoint) of any partition from the metadata snapshot: (-1, None)
        when unknown; a node id with None when that node is not live."""
        t = self._topics.get(topic)
        if t is None:
            return -1, None
        for p in t.partitions:
            if p.partition == partition:
                if p.leader < 0:
                    return -1, None
                return p.leader, self._brokers.get(p.leader)
        return -1, None

    def topic_exists(self, topic: str) -> bool | None:
        """Whether `topic` is in the metadata snapshot (None before the first snapshot)."""
        if self._stamp is None:
            return None
        return topic in self._topics

    @property
    def pool(self) -> rpc.ChannelPool:
        """The host's DEALER channels (the transaction coordinator sends its markers on them)."""
        return self._pool

    async def _subscribe_loop(self) -> None:
        while True:
            topic, frames = await self._subscriber.recv()
            if topic != METADATA_TOPIC or not frames:
                continue
            update = metadata_pb2.UpdateMetadataRequest()
            try:
                update.ParseFromString(frames[0])
            except DecodeError:
                continue
            self._apply((update.controller_epoch, update.metadata_version), update.live_brokers,
                        update.topics)

    def _apply(self, stamp: tuple[int, int], brokers, topics) -> None:
        if self._stamp is not None and stamp <= self._stamp:
            return
        self._stamp = stamp
        self._brokers = {b.node_id: (b.endpoint or f"tcp://{b.host}:{b.port}") for b in brokers}
        self._topics = {t.name: t for t in topics if t.error_code == E.NONE}
        counts = {t.name: len(t.partitions) for t in self._topics.values()}
        self._metadata_changed.set()
        if counts != self._partition_counts:
            self._partition_counts = counts
            self.listener.topics_changed(counts)

    def refresh_metadata_soon(self) -> None:
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh_once())

    async def refresh_metadata(self, timeout_ms: int) -> None:
        self.refresh_metadata_soon()
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                await asyncio.shield(self._refreshing)
        except Exception:  # noqa: BLE001 - timed out or failed: best effort; callers re-check
            pass

    async def _refresh_once(self) -> None:
        info = self._controller.current
        if info is None or not info.endpoint:
            return
        try:
            resp = await self._pool.get(info.endpoint).call(
                ApiKey.METADATA, metadata_pb2.MetadataRequest(),
                timeout_ms=self.config.request_timeout_ms)
        except Exception as e:  # noqa: BLE001 - try again on the next need
            self.log.debug("metadata from controller %d failed: %r", info.controller_id, e)
            return
        b = resp.body
        self._apply((b.controller_epoch, b.metadata_version), b.brokers, b.topics)

    async def _ensure_offsets_topic(self) -> None:
        """Create the role's topic when missing (once metadata says so); then return."""
        cfg = self.config
        st = cfg.topic
        first_short_of_nodes: float | None = None
        while True:
            if self._stamp is None:
                self.refresh_metadata_soon()
                await self._wait_metadata(1.0)
                continue
            topic = self._topics.get(st.name)
            if topic is None and st.create_on_demand and not self._topic_wanted.is_set():
                await self._wait_topic_wanted(5.0)
                continue
            if topic is not None:
                if len(topic.partitions) != st.num_partitions:
                    self.log.error("%s has %d partitions but the role is configured for %d: "
                                   "shards beyond the topic never load; fix the config",
                                   st.name, len(topic.partitions), st.num_partitions)
                self._topic_ready = True
                return
            live = len(self._brokers)
            if live < st.replication_factor:
                now = time.monotonic()
                first_short_of_nodes = first_short_of_nodes or now
                if live == 0 or now - first_short_of_nodes < CREATE_WAIT_FOR_NODES_S:
                    self.refresh_metadata_soon()
                    await self._wait_metadata(0.5)
                    continue
            rf = min(st.replication_factor, live)
            if rf < st.replication_factor:
                self.log.warning("creating %s with replication factor %d: only %d live storage "
                                 "nodes (configured: %d)", st.name, rf, live, st.replication_factor)
            code = await self._create_offsets_topic(rf)
            if code in (E.NONE, E.TOPIC_ALREADY_EXISTS):
                if code == E.NONE:
                    self.log.info("created %s: %d partitions, replication factor %d",
                                  st.name, st.num_partitions, rf)
                await self.refresh_metadata(cfg.request_timeout_ms)
                continue
            await asyncio.sleep(1.0)

    async def _create_offsets_topic(self, rf: int) -> int:
        cfg = self.config
        st = cfg.topic
        info = self._controller.current
        if info is None or not info.endpoint:
            return E.NOT_CONTROLLER
        configs = {"cleanup.policy": "compact", "segment.bytes": str(st.segment_bytes)}
        if st.min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(max(1, min(st.min_insync_replicas, rf)))
        req = controller_pb2.CreateTopicsRequest(timeout_ms=cfg.request_timeout_ms, topics=[
            controller_pb2.CreatableTopic(
                name=st.name, num_partitions=st.num_partitions, replication_factor=rf,
                configs=configs)])
        try:
            resp = await self._pool.get(info.endpoint).call(
                ApiKey.CREATE_TOPICS, req, timeout_ms=cfg.request_timeout_ms * 2)
        except errors.KafkaError as e:
            self.log.warning("creating %s at controller %d: %s", st.name, info.controller_id, e)
            return e.code
        result = resp.body.topics[0]
        if result.error_code not in (E.NONE, E.TOPIC_ALREADY_EXISTS):
            self.log.warning("creating %s: %s %s", st.name, E.Name(result.error_code),
                             result.error_message)
        return result.error_code

    async def call_controller(self, api: int, body, timeout_ms: int):
        """`body` at the active controller (from /controller); NOT_CONTROLLER or a lost channel
        is retried on whoever is active then, 3 calls at most. Returns the response body;
        raises errors.KafkaError (NotControllerError when none is known)."""
        last: errors.KafkaError | None = None
        for attempt in range(3):
            info = self._controller.current
            if info is None or not info.endpoint:
                last = errors.NotControllerError("no active controller")
            else:
                try:
                    resp = await self._pool.get(info.endpoint).call(api, body,
                                                                    timeout_ms=timeout_ms)
                    return resp.body
                except (errors.NotControllerError, errors.NetworkError) as e:
                    last = e
            if attempt < 2:
                await asyncio.sleep(LOAD_RETRY_S)
        assert last is not None
        raise last

    def request_topic(self) -> None:
        """A request needs the topic (ShardTopic.create_on_demand): create it if missing."""
        if not self._topic_wanted.is_set():
            self.log.info("%s is needed: creating it if missing", self.config.topic.name)
            self._topic_wanted.set()

    async def _wait_topic_wanted(self, timeout_s: float) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                await self._topic_wanted.wait()
        except TimeoutError:
            pass

    async def _wait_metadata(self, timeout_s: float) -> None:
        self._metadata_changed.clear()
        try:
            async with asyncio.timeout(timeout_s):
                await self._metadata_changed.wait()
        except TimeoutError:
            pass


def _buffer(frame) -> memoryview | bytes:
    buf = getattr(frame, "buffer", None)
    return buf if buf is not None else frame
