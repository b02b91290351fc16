"""The storage node as a partition leader that writes: PRODUCE and WRITE_TXN_MARKERS.

A mixin of StorageNode (shell.node), split out of it along this seam; it never imports
shell.node. A PRODUCE is admitted partition by partition (core.produce_admission: acks, batch
size, min.insync.replicas, the producer state's sequence check) and appended on the loop
thread; acks=all waits in the produce purgatory until the high watermark passes the records
(`_await_replicated`, an "await followers" span when traced). Transaction markers from the
transaction coordinators are control batches appended the same way, with acks=all semantics.
"""
from __future__ import annotations

import contextlib
import logging

from opentelemetry import trace

from riverbed import errors
from riverbed._proto.v1 import produce_pb2, transaction_pb2
from riverbed.coordinator.offsets_topic import OFFSETS_TOPIC
from riverbed.wire.framing import Request

from services.common.rpc import Reply, remote_wait
from services.storage_node.core.produce_admission import (admit_partition, check_acks,
                                                          max_batch_bytes)
from services.storage_node.core.producer_state import Verdict
from services.storage_node.core.replica_state import NONE
from services.storage_node.shell import log_access
from services.storage_node.shell.clock import now_ms

log = logging.getLogger("services.storage_node.shell.node")   # the node's logger, as before

KAFKA_STORAGE_ERROR = errors.KafkaStorageError.code
INVALID_REQUIRED_ACKS = errors.InvalidRequiredAcksError.code

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


class LeaderWrites:
    """PRODUCE and WRITE_TXN_MARKERS (mixed into StorageNode)."""

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
