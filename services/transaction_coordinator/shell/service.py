"""The transaction coordinator service: the pure core behind a ROUTER, its shards of
`__transaction_state` hosted by ShardHost (the wiring is services.common.sharded_service, shared
with the group coordinator and the offset manager).

INIT_PRODUCER_ID (v1, with a transactional id), ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN,
END_TXN, DESCRIBE_TRANSACTIONS and LIST_TRANSACTIONS (forwarded by a gateway) become
`RequestReceived` inputs; the handler waits for the `Reply` effect naming its request id.
Besides the shared effects, this shell performs:
- `AllocateProducerId`: INIT_PRODUCER_ID (v0, no transactional id) at the active controller,
  which hands out producer ids; fed back as ProducerIdAllocated;
- `SendMarkers`: WRITE_TXN_MARKERS to each partition's leader (from the controller's metadata
  snapshots), one request per leader, rounds every transaction.marker.retry.backoff.ms for the
  partitions that answered a retriable error, until all are written, the core no longer wants
  them (`marker_wanted`), or a leader says this coordinator is fenced; fed back as
  MarkersWritten. A partition whose topic is gone from the metadata is done (Kafka's rule).

Taking a shard bumps its coordinator epoch (`<root>/epochs/<shard>`, coordinator_epochs=True);
markers carry it, so a leader refuses the markers of a coordinator that lost the shard.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from riverbed import errors
from riverbed._proto.v1 import header_pb2, producer_id_pb2, transaction_pb2 as tx
from services.common import failpoints, rpc, znodes
from services.common.sharded_service import ShardedService, now_ms
from services.common.telemetry import Telemetry
from services.common.txn_errors import error_response
from services.transaction_coordinator.config import TransactionCoordinatorConfig
from services.transaction_coordinator.core.coordinator import TransactionCoordinatorCore
from services.transaction_coordinator.core.effects import AllocateProducerId, SendMarkers
from services.transaction_coordinator.core.events import (
    MarkersWritten, ProducerIdAllocated, RequestReceived, TopicMetadataChanged,
)
from services.transaction_coordinator.core.markers import MarkerOutcome, marker_outcome

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
# The core's timers act on their own intervals; ticking often keeps the Complete retries quick.
TICK_S = 0.2

log = logging.getLogger(__name__)


class TransactionCoordinatorService(ShardedService):
    apis = (ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN,
            ApiKey.END_TXN, ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS)
    tick_s = TICK_S

    def __init__(self, config: TransactionCoordinatorConfig):
        super().__init__(config, TransactionCoordinatorCore(config),
                         name=f"transaction-coordinator-{config.transaction_coordinator_id}",
                         root=znodes.TRANSACTION_COORDINATORS,
                         instance_id=config.transaction_coordinator_id, required_acks=-1,
                         tail=False, coordinator_epochs=True)
        self.tc_config = config
        self._tasks: set[asyncio.Task] = set()
        self.markers_sent = 0           # WRITE_TXN_MARKERS requests
        self.marker_retries = 0         # partitions retried after a retriable answer

    async def _request(self, req: rpc.Request) -> rpc.Reply:
        if self.host.topic_exists(self.host.config.topic.name) is not True:
            # __transaction_state is created on the first transactional request (Kafka's
            # rule); until it exists and is loaded the client hears a retriable error.
            self.host.request_topic()
            return rpc.Reply(_not_available(req.api, req.body))
        return await self._call(lambda rid: RequestReceived(rid, req.body))

    # -- effects beyond the shared ones ---------------------------------------------------
    def _perform(self, effects) -> None:
        rest = []
        for eff in effects:
            if isinstance(eff, AllocateProducerId):
                self._spawn(self._allocate(eff))
            elif isinstance(eff, SendMarkers):
                self._spawn(self._send_markers(eff))
            else:
                rest.append(eff)
        if rest:
            super()._perform(rest)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _allocate(self, eff: AllocateProducerId) -> None:
        req = producer_id_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1)
        try:
            body = await self.host.call_controller(ApiKey.INIT_PRODUCER_ID, req,
                                                   self.config.request_timeout_ms)
            ev = ProducerIdAllocated(eff.alloc_id, body.producer_id, body.error_code,
                                     body.error_message)
        except errors.KafkaError as e:
            ev = ProducerIdAllocated(eff.alloc_id, -1, e.code, e.message or e.name)
        except Exception as e:  # noqa: BLE001 - a socket failure: the client retries
            ev = ProducerIdAllocated(eff.alloc_id, -1, E.COORDINATOR_NOT_AVAILABLE, repr(e))
        self._perform(self.core.handle(ev, now_ms()))

    async def _send_markers(self, eff: SendMarkers) -> None:
        """Write one transaction's markers to all its partitions (see the module doc)."""
        if failpoints.action("transaction_coordinator.before_markers") == "hang":
            # tests: the decision is durable, the markers never leave (the test kills us here)
            log.warning("[txn=%s] failpoint transaction_coordinator.before_markers: hanging",
                        eff.transactional_id)
            await asyncio.Event().wait()
        backoff_s = self.tc_config.transaction_marker_retry_backoff_ms / 1000.0
        timeout_ms = self.config.request_timeout_ms
        remaining = set(eff.partitions)
        fenced = False
        first = True
        while remaining and self.core.marker_wanted(eff.marker_id):
            if not first:
                await asyncio.sleep(backoff_s)
            first = False
            by_leader: dict[str, list[tuple[str, int]]] = {}
            for tp in sorted(remaining):
                if self.host.topic_exists(tp[0]) is False:
                    log.info("[txn=%s] %s is gone: no marker for %s-%d", eff.transactional_id,
                             tp[0], tp[0], tp[1])
                    remaining.discard(tp)
                    continue
                _, endpoint = self.host.partition_leader(*tp)
                if endpoint is None:
                    self.host.refresh_metadata_soon()
                    continue
                by_leader.setdefault(endpoint, []).append(tp)
            if not by_leader:
                continue
            results = await asyncio.gather(*(self._write_markers(ep, eff, tps, timeout_ms)
                                             for ep, tps in by_leader.items()))
            refresh = False
            for answered in results:
                for tp, code in answered.items():
                    outcome = marker_outcome(code)
                    if outcome is MarkerOutcome.DONE:
                        remaining.discard(tp)
                    elif outcome is MarkerOutcome.FENCED:
                        log.warning("[txn=%s] %s-%d refused the marker: %s", eff.transactional_id,
                                    tp[0], tp[1], E.Name(code))
                        fenced = True
                    else:
                        self.marker_retries += 1
                        refresh |= outcome is MarkerOutcome.RETRY_REFRESH
            if fenced:
                break
            if refresh:
                self.host.refresh_metadata_soon()
        if self.core.marker_wanted(eff.marker_id):
            self._perform(self.core.handle(MarkersWritten(eff.marker_id, fenced), now_ms()))

    async def _write_markers(self, endpoint: str, eff: SendMarkers,
                             tps: list[tuple[str, int]], timeout_ms: int) -> dict:
        """One WRITE_TXN_MARKERS to one leader: {(topic, partition): error code}; a failed call
        counts as REQUEST_TIMED_OUT for all of them (retried)."""
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        req = tx.WriteTxnMarkersRequest(markers=[tx.WritableTxnMarker(
            producer_id=eff.producer_id, producer_epoch=eff.producer_epoch,
            transaction_result=eff.commit, coordinator_epoch=eff.coordinator_epoch,
            topics=[tx.TxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
        self.markers_sent += 1
        try:
            resp = await self.host.pool.get(endpoint).call(ApiKey.WRITE_TXN_MARKERS, req,
                                                           timeout_ms=timeout_ms)
        except errors.KafkaError as e:
            log.debug("WRITE_TXN_MARKERS to %s failed: %s", endpoint, e)
            return {tp: (e.code if not e.retriable else E.REQUEST_TIMED_OUT) for tp in tps}
        except Exception as e:  # noqa: BLE001 - a socket failure: retried
            log.debug("WRITE_TXN_MARKERS to %s failed: %r", endpoint, e)
            return {tp: E.REQUEST_TIMED_OUT for tp in tps}
        out = {tp: E.REQUEST_TIMED_OUT for tp in tps}     # not answered: retried
        for m in resp.body.markers:
            for t in m.topics:
                for p in t.partitions:
                    if (t.name, p.partition_index) in out:
                        out[(t.name, p.partition_index)] = p.error_code
        return out

    # -- metrics --------------------------------------------------------------------------
    def register_metrics(self, tel: Telemetry) -> None:
        core = self.core
        st = core.stats
        tel.gauge("riverbed.transaction_coordinator.transactional_ids",
                  lambda: [(n, {"state": s}) for s, n in core.states().items()],
                  description="transactional ids this instance coordinates, per state")
        tel.counter("riverbed.transaction_coordinator.commits", lambda: [(st.commits, {})],
                    description="transactions committed (CompleteCommit written)")
        tel.counter("riverbed.transaction_coordinator.aborts", lambda: [(st.aborts, {})],
                    description="transactions aborted (CompleteAbort written)")
        tel.counter("riverbed.transaction_coordinator.timed_out", lambda: [(st.timed_out, {})],
                    description="open transactions aborted by transaction.timeout.ms")
        tel.counter("riverbed.transaction_coordinator.fenced", lambda: [(st.fenced, {})],
                    description="open transactions aborted because a new instance of their "
                                "transactional id started")
        tel.gauge("riverbed.transaction_coordinator.requests.parked",
                  lambda: [(core.parked_count, {})],
                  description="AddPartitions/AddOffsets waiting for the previous transaction "
                              "of their id to complete")
        tel.counter("riverbed.transaction_coordinator.marker_requests",
                    lambda: [(self.markers_sent, {})],
                    description="WRITE_TXN_MARKERS requests sent to partition leaders")

    def stopping(self) -> list:
        for t in list(self._tasks):
            t.cancel()
        return []

    # -- ShardListener --------------------------------------------------------------------
    def topics_changed(self, partition_counts: Mapping[str, int]) -> None:
        self._perform(self.core.handle(TopicMetadataChanged(dict(partition_counts)), now_ms()))


def _not_available(api: int, body):
    return error_response(api, body, E.COORDINATOR_NOT_AVAILABLE,
                          "__transaction_state is being created")
