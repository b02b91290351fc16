"""The storage node as a follower: one replica-fetcher task per (leader, fetcher id), and what
a fetched answer does to the local log (append with the leader's offsets, truncate on
divergence or out-of-range). A mixin of StorageNode (shell.node), split out of it along this
seam; it never imports shell.node (the fetchers see the node through
replica_fetcher.FollowerNode)."""
from __future__ import annotations

import asyncio
import logging

from services.storage_node.core import divergence
from services.storage_node.core.replica_state import Role
from services.storage_node.shell import log_access
from services.storage_node.shell.replica_fetcher import ReplicaFetcher, whole_batches_end

log = logging.getLogger(__name__)


class Following:
    """Replica fetchers and follower appends. Uses the node's cfg, core, logs, fetchers,
    leader_endpoints, space, _closing, _tg, fail_log_dir, _dir_of, _space_low_after,
    _partition_changed."""

    def _reconcile_fetchers(self) -> None:
        """One fetcher task per (leader, fetcher id): num.replica.fetchers per leader."""
        n = self.cfg.num_replica_fetchers
        wanted = self.core.followed_fetchers(n)
        for key, f in list(self.fetchers.items()):
            endpoint = self.leader_endpoints.get(key[0])
            if key not in wanted or f.endpoint != endpoint or f.task is None or f.task.done():
                if f.task is not None:
                    f.task.cancel()
                del self.fetchers[key]
        if self._closing:
            # Stopping: run() has cancelled the fetchers already; a LEADER_AND_ISR handled after
            # that (the controller's answer to our controlled shutdown) must not start new ones,
            # or the TaskGroup waits for them forever and SIGTERM ends in SIGKILL.
            return
        for key, tps in wanted.items():
            if key in self.fetchers:
                self.fetchers[key].follow(tps)
                continue
            leader_id, fid = key
            endpoint = self.leader_endpoints.get(leader_id)
            if endpoint is None:
                log.warning("no endpoint known for leader %d; not fetching %s", leader_id,
                            wanted[key])
                continue
            f = ReplicaFetcher(self, leader_id, endpoint, fid, n)
            f.task = self._tg.create_task(f.run()) if self._tg is not None \
                else asyncio.create_task(f.run())
            self.fetchers[key] = f

    def apply_replicated(self, tp, sent_epoch: int, sent_offset: int, leader_id: int, data,
                         leader_hw: int, leader_log_start: int = -1) -> None:
        r = self.core.get(tp)
        if r is None or r.role is not Role.FOLLOWER or r.leader != leader_id \
                or r.leader_epoch != sent_epoch or r.log_end_offset != sent_offset:
            return   # the partition changed while the fetch was in flight
        plog = self.logs.get(tp)
        end = whole_batches_end(data)
        log_dir = self._dir_of(tp)
        if end > 0:
            if self.space.is_low(log_dir) or self._space_low_after(log_dir, end):
                return                                 # handed over: the fetcher drops tp
            try:
                log_access.append_as_follower(self.logs.store(tp), memoryview(data)[:end])
            except OSError as e:
                self.fail_log_dir(log_dir, e, f"a replicated append to {tp[0]}-{tp[1]}")
                return
        moved = self.core.on_follower_appended(tp, log_access.log_end_offset(plog), leader_hw)
        if leader_log_start > log_access.log_start_offset(plog):
            # The leader's log start moved (DeleteRecords, retention): ours follows (Kafka's
            # maybeIncrementLogStartOffset), up to what we have.
            try:
                plog.delete_records_before(min(leader_log_start, log_access.log_end_offset(plog)))
            except OSError as e:
                self.fail_log_dir(log_dir, e, f"moving the log start of {tp[0]}-{tp[1]}")
                return
        self._partition_changed(tp, moved)

    def truncate_on_divergence(self, tp, sent_epoch: int, sent_offset: int, leader_id: int,
                               div_epoch: int, div_end_offset: int) -> None:
        """The leader says our log diverges after (div_epoch, div_end_offset): truncate where
        our epochs and its answer agree (core.divergence), then the next fetch goes on."""
        r = self.core.get(tp)
        if r is None or r.role is not Role.FOLLOWER or r.leader != leader_id \
                or r.leader_epoch != sent_epoch or r.log_end_offset != sent_offset:
            return
        plog = self.logs.get(tp)
        leo = log_access.log_end_offset(plog)
        target = divergence.follower_truncation_offset(
            log_access.epoch_entries(plog), leo, r.high_watermark, div_epoch, div_end_offset)
        log.info("[%s-%d leader_epoch=%d] leader %d: diverging epoch %d ends at %d; truncating "
                 "%d -> %d", tp[0], tp[1], r.leader_epoch, leader_id, div_epoch, div_end_offset,
                 leo, target)
        if target < leo:
            log_access.truncate_to(self.logs.store(tp), target)
        self.core.on_truncated(tp, log_access.log_end_offset(plog))
        self._partition_changed(tp, False)

    def reset_follower_offset(self, tp, leader_id: int, leader_leo: int,
                              leader_log_start: int) -> None:
        r = self.core.get(tp)
        if r is None or r.role is not Role.FOLLOWER or r.leader != leader_id:
            return
        plog = self.logs.get(tp)
        if leader_leo >= 0 and r.log_end_offset > leader_leo:
            log.warning("[%s-%d] ahead of leader (%d > %d): truncating", tp[0], tp[1],
                        r.log_end_offset, leader_leo)
            log_access.truncate_to(self.logs.store(tp), leader_leo)
        elif leader_log_start >= 0 and r.log_end_offset < leader_log_start:
            log.warning("[%s-%d] behind leader's log start %d: starting over there",
                        tp[0], tp[1], leader_log_start)
            log_access.truncate_fully_and_start_at(self.logs.store(tp), leader_log_start)
        self.core.on_truncated(tp, log_access.log_end_offset(plog))
