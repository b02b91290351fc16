"""The storage node serving FETCH, to consumers (through the gateway) and to followers: the
follower's checks on arrival (leader epoch, divergence, offset range, ISR expansion), the read
below the high watermark (consumers; below the last stable offset for read_committed ones, with
the aborted transactions in the range read) or the log end (followers), and the long poll until
fetch.min.bytes or max_wait_ms (core.purgatory). A mixin of StorageNode (shell.node), split out
of it along this seam; it never imports shell.node."""
from __future__ import annotations

import logging

from riverbed import errors
from riverbed._proto.v1 import fetch_pb2
from riverbed.wire.framing import Request

from services.common.rpc import Reply, remote_wait
from services.storage_node.core import divergence
from services.storage_node.core.fetch_session import FINAL_EPOCH, ContextKind, FetchContext
from services.storage_node.core.purgatory import FetchDecision, decide_fetch
from services.storage_node.core.replica_state import NONE, Role
from services.storage_node.shell import log_access
from services.storage_node.shell.clock import now_ms

log = logging.getLogger(__name__)

NOT_LEADER_FOR_PARTITION = errors.NotLeaderForPartitionError.code
OFFSET_OUT_OF_RANGE = errors.OffsetOutOfRangeError.code
KAFKA_STORAGE_ERROR = errors.KafkaStorageError.code


class FetchServing:
    """FETCH handling. Uses the node's cfg, core, logs, fetch_waiters, _fetch_futs, _ids,
    _loop, _tick_wake, replication_bytes_out, topic_counters, fail_log_dir, _dir_of,
    _partition_changed, _propose_isr."""

    async def handle_fetch(self, req: Request) -> Reply:
        body: fetch_pb2.FetchRequest = req.body
        replica_id = body.replica_id
        is_follower = replica_id >= 0
        ctx = self._fetch_context(body)
        if ctx.kind is ContextKind.ERROR:
            return Reply(fetch_pb2.FetchResponse(error_code=ctx.error_code,
                                                 error_message=ctx.error_message))
        # Every partition of the session, named in this request or not: each counts as fetched
        # at its cached state (ISR) and each wakes the long poll.
        entries = ctx.entries
        prechecked: dict[int, dict] = {}
        if is_follower:
            prechecked = self._follower_fetch_precheck(replica_id, entries)
        start = now_ms()
        deadline = start + body.max_wait_ms
        wid = None
        try:
            while True:
                parts, any_error = self._read_fetch(body, entries, is_follower, prechecked,
                                                    ctx.kind is ContextKind.INCREMENTAL)
                decision = decide_fetch((len(x[1]) for x in parts if x is not None),
                                        min_bytes=body.min_bytes,
                                        now_ms=now_ms(), deadline_ms=deadline,
                                        any_error=any_error)
                if decision is FetchDecision.RESPOND or self.fetch_waiters.full() and wid is None:
                    return self._fetch_reply(body, ctx, parts)
                if wid is None:
                    wid = next(self._ids)
                    self.fetch_waiters.add(wid, [(t, p.partition) for t, p in entries], deadline)
                    self._tick_wake.set()
                fut = self._loop.create_future()
                self._fetch_futs[wid] = fut
                with remote_wait():              # waiting for data
                    await fut
        finally:
            if wid is not None:
                self.fetch_waiters.remove(wid)
                self._fetch_futs.pop(wid, None)

    def _fetch_context(self, body) -> FetchContext:
        """What this FETCH is (core.fetch_session): sessionless (consumers, peers that predate
        sessions: session_epoch unset or -1), a full fetch opening a session (followers), an
        incremental one, or a session error. Only followers' fetches open sessions."""
        epoch = body.session_epoch if body.HasField("session_epoch") else FINAL_EPOCH
        named = [(t.name, p) for t in body.topics for p in t.partitions]
        if epoch == FINAL_EPOCH and body.session_id == 0:
            return FetchContext(ContextKind.SESSIONLESS, named)
        forgotten = [(t.name, p) for t in body.forgotten_topics_data for p in t.partitions]
        ctx = self.fetch_sessions.new_context(body.replica_id, body.session_id, epoch, named,
                                              forgotten, now_ms(),
                                              may_create=body.replica_id >= 0)
        if ctx.kind is ContextKind.FULL:
            log.info("[node %d] fetch session %d opened for replica %d (%d partitions%s)",
                     self.cfg.broker_id, ctx.session_id, body.replica_id,
                     len(ctx.session.partitions),
                     f"; closed session {body.session_id}" if body.session_id else "")
        return ctx

    def _follower_fetch_precheck(self, replica_id: int, entries) -> dict[int, dict]:
        """A follower's FETCH, checked once on arrival (Kafka Partition.fetchRecords): its view
        of the leader epoch (FENCED / UNKNOWN_LEADER_EPOCH), then whether its log diverges from
        ours (answer diverging_epoch/diverging_end_offset, no data), then the offset range.
        Only a fetch that passes records the follower's log end (and may add it to the ISR).
        Returns the response fields of the partitions answered here, by entry index."""
        out: dict[int, dict] = {}
        now = now_ms()
        core = self.core
        logs = self.logs
        broker_id = self.cfg.broker_id
        for i, (topic, p) in enumerate(entries):
            tp = (topic, p.partition)
            r = core.get(tp)
            if r is None or r.role is not Role.LEADER:
                continue        # _read_fetch answers UNKNOWN / NOT_LEADER
            code = divergence.check_current_leader_epoch(p.current_leader_epoch, r.leader_epoch)
            if code != NONE:
                fields = self._precheck_fields(p, r, logs.get(tp))
                fields.update(error_code=code, error_message=(
                    f"follower's leader epoch {p.current_leader_epoch}, "
                    f"leader's {r.leader_epoch}"))
                out[i] = fields
                continue
            if replica_id not in r.replicas or replica_id == broker_id:
                continue        # not a replica of ours: served like a consumer of the log end
            plog = logs.get(tp)
            leo = log_access.log_end_offset(plog)
            div = divergence.diverging_epoch(log_access.epoch_entries_view(plog), leo,
                                             p.last_fetched_epoch, p.fetch_offset,
                                             r.high_watermark)
            if div is not None:
                fields = self._precheck_fields(p, r, plog)
                fields.update(diverging_epoch=div[0], diverging_end_offset=div[1])
                log.info("[%s-%d leader_epoch=%d] follower %d diverges: its epoch %d at offset "
                         "%d; epoch %d ends at %d here", topic, p.partition, r.leader_epoch,
                         replica_id, p.last_fetched_epoch, p.fetch_offset, div[0], div[1])
                out[i] = fields
                continue
            if p.fetch_offset > leo or p.fetch_offset < log_access.log_start_offset(plog):
                continue        # _read_fetch answers OFFSET_OUT_OF_RANGE
            if core.on_follower_fetch(tp, replica_id, p.fetch_offset, now):
                self._partition_changed(tp, True)
            alter = core.maybe_expand_isr(tp, replica_id)
            if alter is not None:
                self._propose_isr(alter, "expand")
        return out

    @staticmethod
    def _precheck_fields(p, r, plog) -> dict:
        return dict(partition=p.partition, error_code=NONE, error_message="",
                    high_watermark=r.high_watermark, last_stable_offset=r.high_watermark,
                    log_start_offset=log_access.log_start_offset(plog),
                    log_end_offset=log_access.log_end_offset(plog), leader_epoch=r.leader_epoch,
                    diverging_epoch=-1, diverging_end_offset=-1)

    def _read_fetch(self, body, entries, is_follower: bool, prechecked=None,
                    incremental: bool = False):
        """Per partition (response fields, data) in request order, and whether any failed
        (or must be answered at once: a diverging follower). In an incremental session fetch
        (`entries` are the session's CachedPartitions) a partition with nothing to say (no
        records, no error, and the high watermark, log start offset and leader epoch this
        session was told last) is None: it is not in the answer (FetchContext.include)."""
        out = []
        any_error = False
        got_data = False
        remaining = body.max_bytes if body.max_bytes > 0 else None
        core = self.core
        logs = self.logs
        read_committed = body.isolation_level == 1 and not is_follower
        for i, (topic, p) in enumerate(entries):
            if prechecked and i in prechecked:
                out.append((prechecked[i], b""))
                any_error = True
                continue
            tp = (topic, p.partition)
            r = core.get(tp)
            if r is not None and r.role is Role.LEADER:
                plog = logs.get(tp)
                hw = r.high_watermark
                leo = log_access.log_end_offset(plog)
                lso = log_access.log_start_offset(plog)
                stable = log_access.last_stable_offset(logs.store(tp), hw)
                upper = leo if is_follower else (stable if read_committed else hw)
                if incremental and lso <= p.fetch_offset and upper <= p.fetch_offset <= leo \
                        and p.told(hw, lso, r.leader_epoch):
                    out.append(None)            # idle, and nothing new to tell
                    continue
            fields = dict(partition=p.partition, error_code=NONE, error_message="",
                          high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                          log_end_offset=-1, leader_epoch=-1, diverging_epoch=-1,
                          diverging_end_offset=-1)
            data = b""
            if r is None:
                code = core.leader_check(tp)
                fields.update(error_code=code, error_message=(
                    f"{topic}-{p.partition}: its log dir is offline here"
                    if code == KAFKA_STORAGE_ERROR else f"{topic}-{p.partition} is not hosted here"))
            elif r.role is not Role.LEADER:
                fields.update(error_code=NOT_LEADER_FOR_PARTITION, leader_epoch=r.leader_epoch,
                              error_message=f"{topic}-{p.partition}: leader is {r.leader}")
            else:
                fields.update(high_watermark=hw, last_stable_offset=stable, log_start_offset=lso,
                              log_end_offset=leo, leader_epoch=r.leader_epoch)
                if p.fetch_offset < lso or p.fetch_offset > leo:
                    fields.update(error_code=OFFSET_OUT_OF_RANGE,
                                  error_message=f"offset {p.fetch_offset} outside "
                                                f"[{lso}, {leo}]")
                elif p.fetch_offset < upper:
                    limit = p.partition_max_bytes or self.cfg.replica_fetch_max_bytes
                    if remaining is not None:
                        limit = min(limit, max(remaining, 0))
                    if limit > 0 or not got_data:
                        try:
                            data = log_access.read(plog, p.fetch_offset, max(limit, 1), upper)
                        except OSError as e:
                            self.fail_log_dir(self._dir_of(tp), e, f"a read of {topic}-{p.partition}")
                            fields.update(error_code=KAFKA_STORAGE_ERROR, error_message=str(e))
                            data = b""
                        if remaining is not None:
                            remaining -= len(data)
                        if data:
                            got_data = True
                            if read_committed:
                                aborted = log_access.aborted_transactions(plog, p.fetch_offset,
                                                                          data)
                                if aborted:
                                    fields["aborted_transactions"] = [
                                        fetch_pb2.AbortedTransaction(producer_id=pid,
                                                                     first_offset=first)
                                        for pid, first in aborted]
            if fields["error_code"] != NONE:
                any_error = True
            out.append((fields, data))
        return out, any_error

    def _fetch_reply(self, body, ctx: FetchContext, parts) -> Reply:
        """The answer: every partition of a full fetch, in request order; for an incremental
        one only those the session must hear about (FetchContext.include), in session order.
        Consecutive partitions of one topic share its entry."""
        resp = fetch_pb2.FetchResponse(session_id=ctx.session_id)
        payloads = []
        out = self.replication_bytes_out if body.replica_id >= 0 else self.topic_counters.bytes_out
        answered = _incremental_answer(ctx, parts) if ctx.kind is ContextKind.INCREMENTAL \
            else _full_answer(body, ctx, parts)
        rt = None
        for topic, fields, data in answered:
            if rt is None or rt.name != topic:
                rt = resp.topics.add(name=topic)
            rt.partitions.add(**fields)
            payloads.append(data)
            if data:
                out[topic] = out.get(topic, 0) + len(data)
        return Reply(resp, payloads)


def _full_answer(body, ctx: FetchContext, parts):
    """(topic, fields, data) of every partition, in request order; a full fetch that opened a
    session records what the session was told."""
    i = 0
    for t in body.topics:
        for _ in t.partitions:
            fields, data = parts[i]
            i += 1
            if ctx.session is not None:
                _include(ctx, t.name, fields, data)
            yield t.name, fields, data


def _incremental_answer(ctx: FetchContext, parts):
    """(topic, fields, data) of the session's partitions it must hear about, in session order."""
    for (topic, _), part in zip(ctx.entries, parts):
        if part is not None and _include(ctx, topic, part[0], part[1]):
            yield topic, part[0], part[1]


def _include(ctx: FetchContext, topic: str, fields: dict, data) -> bool:
    return ctx.include((topic, fields["partition"]), has_data=len(data) > 0,
                       error_code=fields["error_code"], high_watermark=fields["high_watermark"],
                       log_start_offset=fields["log_start_offset"],
                       leader_epoch=fields["leader_epoch"],
                       diverging=fields["diverging_end_offset"] >= 0)
