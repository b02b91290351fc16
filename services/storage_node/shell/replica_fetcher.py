"""A follower's replica fetchers: `num.replica.fetchers` tasks per leader (a partition always
goes to the same one, `core.replica_state.fetcher_id`), each pulling its partitions from that
leader in batches with FETCH(replica_id = broker.id, max_wait_ms = replica.fetch.wait.max.ms,
min_bytes = replica.fetch.min.bytes, partition_max_bytes = replica.fetch.max.bytes, max_bytes =
replica.fetch.response.max.bytes) and appending what arrives with the leader's offsets
(assign_offsets=False).

Each fetcher keeps an incremental fetch session with its leader (KIP-227,
`core.fetch_session.FetchSessionHandler`): the first fetch names every partition and opens the
session; later ones name only the partitions whose fetch state changed (a new log end offset
after an append or a truncation, a new leader epoch, a partition added) and list the ones it
stopped fetching as forgotten; the leader keeps evaluating every partition of the session and
answers only those with something to say. A session error (FETCH_SESSION_ID_NOT_FOUND after a
leader restart or an eviction, INVALID_FETCH_SESSION_EPOCH) or a failed call makes the next
fetch a full one.

Each partition sends its local log end offset, the leader epoch of its last batch
(`last_fetched_epoch`) and the leader epoch it follows (`current_leader_epoch`); a
`diverging_end_offset` in the answer makes the node truncate (KIP-320) before the next round.
The core decides roles, the node (StorageNode) owns the logs. A response is applied only if the
partition is still followed from the same leader at the same leader epoch and the local log
still ends where the request started (a LEADER_AND_ISR may arrive meanwhile).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from riverbed import errors
from riverbed._proto.v1 import fetch_pb2
from riverbed.records import iter_batches
from riverbed.wire.apis import ApiKey

from services.common.rpc import AsyncChannel
from services.storage_node.core.fetch_session import (FetchSessionHandler, PartitionFetchState,
                                                     error_backoff_ms)
from services.storage_node.core.replica_state import Role, fetcher_id
from services.storage_node.shell import log_access

log = logging.getLogger(__name__)

OFFSET_OUT_OF_RANGE = errors.OffsetOutOfRangeError.code


def whole_batches_end(buf) -> int:
    """Bytes of `buf` holding whole batches (a fetch may end with a partial one)."""
    end = 0
    for pos, header in iter_batches(buf):
        end = pos + header.size
    return end


class FollowerNode(Protocol):
    """What a fetcher needs from its node (StorageNode is one). A protocol rather than an
    import of shell.node: node.py imports this module, never the other way round."""

    cfg: Any
    core: Any
    logs: Any
    replica_fetch_stats: dict     # full / incremental fetches, partitions named, session errors

    def apply_replicated(self, tp, sent_epoch: int, sent_offset: int, leader_id: int, data,
                         leader_hw: int, leader_log_start: int = -1) -> None: ...

    def truncate_on_divergence(self, tp, sent_epoch: int, sent_offset: int, leader_id: int,
                               div_epoch: int, div_end_offset: int) -> None: ...

    def reset_follower_offset(self, tp, leader_id: int, leader_leo: int,
                              leader_log_start: int) -> None: ...


class ReplicaFetcher:
    def __init__(self, node: FollowerNode, leader_id: int, endpoint: str, fetcher_index: int = 0,
                 num_fetchers: int = 1):
        self.node = node
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.fetcher_index = fetcher_index
        self.num_fetchers = num_fetchers
        self.task: asyncio.Task | None = None
        self._channel: AsyncChannel | None = None
        # The incremental fetch session with this leader (KIP-227): after the first (full)
        # fetch, a request names only the partitions whose fetch state changed.
        self.session = FetchSessionHandler()
        # The FETCH in flight (a long poll of up to replica.fetch.wait.max.ms), the partitions
        # it covers, and whether follow() cut it short.
        self._call: asyncio.Future | None = None
        self._fetching: frozenset = frozenset()
        self._fetch_epochs: dict = {}     # tp -> the leader epoch the fetch in flight names
        self._interrupted = False
        # Partitions whose last answer was an error, left out of the fetches until then
        # (loop time): Kafka's delayPartitions(replica.fetch.backoff.ms). The others go on.
        self._delayed: dict = {}
        self._error_streak: dict = {}     # errors in a row per partition (its next delay)

    def follow(self, partitions) -> None:
        """The partitions this fetcher pulls now (the node's reconcile after a LEADER_AND_ISR).
        A partition new to it (a new topic, a leader moved here) would otherwise wait for the
        long poll in flight, which covers only the old ones, to end: up to
        replica.fetch.wait.max.ms in which no acks=all write to it can complete. So that poll is
        abandoned (its answer, if it comes, is dropped) and the next fetch, a full one, names
        the new partitions at once. The same when a partition's leader epoch changed (this
        node registered again after a network cut, or the leader was re-elected): the fetch
        in flight names the old epoch, and its answer could only be FENCED_LEADER_EPOCH, which
        would hold the partition back for the error backoff (issue 24)."""
        delayed = self._delayed
        if any(tp not in self._fetching and tp not in delayed for tp in partitions):
            self._interrupt()
            return
        epochs, core = self._fetch_epochs, self.node.core
        if epochs and any((r := core.get(tp)) is not None and tp in epochs
                          and r.leader_epoch != epochs[tp] for tp in partitions):
            self._interrupt()

    def _interrupt(self) -> None:
        """Abandon the fetch in flight, if any: the next one is built at once (a full fetch)."""
        call = self._call
        if call is None or call.done():
            return
        self._interrupted = True
        call.cancel()

    def _rejoin(self, tp) -> None:
        """tp's delay is over: if the fetch in flight does not cover it, fetch again now."""
        if tp not in self._fetching:
            self._interrupt()

    def _partitions(self, now: float = 0.0):
        """(tp, leader epoch, log end offset, last fetched epoch) of the partitions to fetch
        now: followed from this leader by this fetcher and not delayed after an error."""
        core = self.node.core
        out = []
        leader, n, index = self.leader_id, self.num_fetchers, self.fetcher_index
        delayed = self._delayed
        if delayed:
            for tp in [tp for tp, until in delayed.items() if until <= now]:
                del delayed[tp]
        streaks = self._error_streak
        if streaks:
            for tp in [tp for tp in streaks if (r := core.get(tp)) is None
                       or r.leader != leader or r.role is not Role.FOLLOWER]:
                del streaks[tp]         # no longer fetched from here (deleted, moved)
        for tp, r in core.replicas.items():
            if r.leader == leader and r.role is Role.FOLLOWER \
                    and (n == 1 or fetcher_id(tp, n) == index) and tp not in delayed:
                plog = self.node.logs.get(tp)
                last_epoch = log_access.latest_epoch(plog) if plog is not None else -1
                out.append((tp, r.leader_epoch, r.log_end_offset, last_epoch))
        return out

    async def run(self) -> None:
        cfg = self.node.cfg
        self._channel = AsyncChannel(self.endpoint, client_id=f"replica-fetcher-{cfg.broker_id}",
                                     max_message_bytes=cfg.socket_request_max_bytes)
        log.info("[fetcher leader=%d id=%d] fetching from %s", self.leader_id,
                 self.fetcher_index, self.endpoint)
        try:
            loop = asyncio.get_running_loop()
            while True:
                parts = self._partitions(loop.time())
                if not parts:
                    if not self._delayed_still_followed():
                        return
                    # every partition is delayed: wait for the first to come back
                    await asyncio.sleep(max(min(self._delayed.values()) - loop.time(), 0.0))
                    continue
                try:
                    await self._fetch_once(parts)
                except asyncio.CancelledError:
                    raise
                except errors.KafkaError as e:
                    log.warning("[fetcher leader=%d] fetch failed: %s", self.leader_id, e)
                    await asyncio.sleep(cfg.replica_fetch_backoff_ms / 1000.0)
                except Exception:   # a log error on append: back off, the next round retries
                    log.exception("[fetcher leader=%d] fetch round failed", self.leader_id)
                    await asyncio.sleep(cfg.replica_fetch_backoff_ms / 1000.0)
        finally:
            await self._channel.close()

    async def _fetch_once(self, parts) -> None:
        cfg = self.node.cfg
        states = {tp: PartitionFetchState(leo, epoch, last_epoch, -1, cfg.replica_fetch_max_bytes)
                  for tp, epoch, leo, last_epoch in parts}
        nxt = self.session.build(states)
        stats = self.node.replica_fetch_stats
        stats["full" if nxt.full else "incremental"] += 1
        stats["partitions_named"] += len(nxt.to_send)
        req = fetch_pb2.FetchRequest(replica_id=cfg.broker_id,
                                     max_wait_ms=cfg.replica_fetch_wait_max_ms,
                                     min_bytes=cfg.replica_fetch_min_bytes,
                                     max_bytes=cfg.replica_fetch_response_max_bytes,
                                     session_id=nxt.session_id, session_epoch=nxt.session_epoch)
        by_topic: dict[str, fetch_pb2.FetchTopic] = {}
        for (topic, partition), st in nxt.to_send:
            t = by_topic.get(topic)
            if t is None:
                t = by_topic[topic] = req.topics.add(name=topic)
            t.partitions.add(partition=partition, fetch_offset=st.fetch_offset,
                             partition_max_bytes=st.partition_max_bytes,
                             current_leader_epoch=st.current_leader_epoch,
                             log_start_offset=st.log_start_offset,
                             last_fetched_epoch=st.last_fetched_epoch)
        forgotten: dict[str, fetch_pb2.ForgottenTopic] = {}
        for topic, partition in nxt.forgotten:
            f = forgotten.get(topic)
            if f is None:
                f = forgotten[topic] = req.forgotten_topics_data.add(name=topic)
            f.partitions.append(partition)
        # Every partition of the session is answered (or not) at the state built here.
        sent = {tp: (epoch, leo) for tp, epoch, leo, _ in parts}
        call = asyncio.ensure_future(self._channel.call(
            ApiKey.FETCH, req,
            timeout_ms=cfg.replica_fetch_wait_max_ms + cfg.replica_socket_timeout_ms))
        self._call, self._fetching, self._interrupted = call, frozenset(states), False
        self._fetch_epochs = {tp: epoch for tp, (epoch, _) in sent.items()}
        try:
            resp = await call
        except asyncio.CancelledError:
            self.session.handle_error()
            if self._interrupted and not asyncio.current_task().cancelling():
                return                  # follow(): fetch again now, with the new partitions
            raise
        except BaseException:
            self.session.handle_error()
            raise
        finally:
            self._call = None
        body = resp.body
        if not self.session.handle_response(body.error_code, body.session_id):
            if body.error_code != 0:
                stats["session_errors"] += 1
                log.info("[fetcher leader=%d id=%d] fetch session %d: %s %s; full fetch next",
                         self.leader_id, self.fetcher_index, nxt.session_id,
                         errors.ErrorCode.Name(body.error_code), body.error_message)
            else:
                log.warning("[fetcher leader=%d id=%d] answer in session %d to a fetch in "
                            "session %d dropped; full fetch next", self.leader_id,
                            self.fetcher_index, body.session_id, nxt.session_id)
            return
        i = 0
        for t in body.topics:
            for p in t.partitions:
                tp = (t.name, p.partition)
                payload = resp.payloads[i] if i < len(resp.payloads) else b""
                i += 1
                if tp not in sent:
                    continue
                if p.error_code != 0:
                    self._on_error(tp, p)
                    continue
                if self._error_streak:
                    self._error_streak.pop(tp, None)
                if p.diverging_end_offset >= 0:
                    self.node.truncate_on_divergence(tp, sent[tp][0], sent[tp][1], self.leader_id,
                                                     p.diverging_epoch, p.diverging_end_offset)
                    continue
                self.node.apply_replicated(tp, sent[tp][0], sent[tp][1], self.leader_id,
                                           getattr(payload, "buffer", payload), p.high_watermark,
                                           p.log_start_offset)

    def _delayed_still_followed(self) -> bool:
        """Whether a delayed partition is still this fetcher's (else forget them all)."""
        core = self.node.core
        for tp in self._delayed:
            r = core.get(tp)
            if r is not None and r.leader == self.leader_id and r.role is Role.FOLLOWER:
                return True
        self._delayed.clear()
        self._error_streak.clear()
        return False

    def _on_error(self, tp, p) -> None:
        if p.error_code == OFFSET_OUT_OF_RANGE:
            # Ahead of the leader's log end (a follower without epochs; with epochs the
            # divergence answer comes first): cut back to it. Behind its log start: start over
            # there.
            self.node.reset_follower_offset(tp, self.leader_id, p.log_end_offset,
                                            p.log_start_offset)
        else:
            # e.g. NOT_LEADER / UNKNOWN while the leader has not handled its LEADER_AND_ISR
            # yet, FENCED_LEADER_EPOCH: this partition waits, the others are fetched on.
            loop = asyncio.get_running_loop()
            streak = self._error_streak[tp] = self._error_streak.get(tp, 0) + 1
            until = self._delayed[tp] = loop.time() + error_backoff_ms(
                streak, self.node.cfg.replica_fetch_backoff_ms) / 1000.0
            # back in the next fetch when the delay ends, not when the poll then in flight
            # (which does not cover it) ends
            loop.call_at(until, self._rejoin, tp)
            log.info("[fetcher leader=%d] %s-%d: %s %s", self.leader_id, tp[0], tp[1],
                     errors.ErrorCode.Name(p.error_code), p.error_message)
