"""The shell's only contact with the storage engine (services.storage_node.log): opening the
LogManager with the node's defaults, and the few PartitionLog calls the handlers make. Kept in
one place so the engine's API can move without touching the request handlers.

Idempotent producers: every partition log has a `ProducerStateStore` beside it (loaded from its
snapshots + log at startup, created empty with a new log). Appends and truncations go through
the store, so the producer state always describes exactly the log (the store snapshots on roll
and at close, and reloads on truncation). Everything runs on the node's loop thread, the
partition's only writer, so check -> append -> apply happen in order per partition."""
from __future__ import annotations

import logging
import os
import random
import time

from riverbed.records import BatchHeader, iter_batches, read_header
from riverbed.records.control import ControlRecord, build_marker_batch

from services.storage_node.config import StorageNodeConfig
from services.storage_node.core import checkpoints
from services.storage_node.core.producer_state import Decision
from services.storage_node.log import LogConfig, LogManager, PartitionLog, files
from services.storage_node.log.producer_snapshot import ProducerStateStore

log = logging.getLogger(__name__)

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
# Topic-level keys the replica layer reads (not passed to the log's LogConfig).
REPLICATION_TOPIC_KEYS = frozenset({"min.insync.replicas", "unclean.leader.election.enable"})


def _now_ms() -> int:
    return int(time.time() * 1000)


def log_defaults(cfg: StorageNodeConfig) -> LogConfig:
    """The node's log.* keys as a LogConfig (topic-level names); topics override these."""
    flush_ms = cfg.log_flush_interval_ms
    return LogConfig(
        segment_bytes=cfg.log_segment_bytes,
        segment_ms=cfg.effective_log_roll_ms,
        segment_jitter_ms=cfg.log_roll_jitter_ms,
        segment_index_bytes=cfg.log_index_size_max_bytes,
        index_interval_bytes=cfg.log_index_interval_bytes,
        flush_messages=cfg.log_flush_interval_messages,
        flush_ms=flush_ms if flush_ms is not None else LogConfig.flush_ms,
        retention_ms=cfg.effective_log_retention_ms,
        retention_bytes=cfg.log_retention_bytes,
        file_delete_delay_ms=cfg.log_segment_delete_delay_ms,
        cleanup_policy=cfg.log_cleanup_policy,
        delete_retention_ms=cfg.log_cleaner_delete_retention_ms,
        min_cleanable_dirty_ratio=cfg.log_cleaner_min_cleanable_ratio,
        max_message_bytes=cfg.message_max_bytes,
    )


class Logs:
    """The node's LogManager, keyed by (topic, partition), plus the high-watermark checkpoint
    (`replication-offset-checkpoint` per log dir), which is the replica layer's to write (as
    Kafka's ReplicaManager does)."""

    def __init__(self, manager: LogManager, defaults: LogConfig, *,
                 producer_id_expiration_ms: int = 86400000,
                 producer_state_batches_retained: int = 5):
        self.manager = manager
        self.defaults = defaults
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.batches_retained = producer_state_batches_retained
        # One producer-state store per partition log, loaded once the log is open (recovered).
        self.stores: dict[tuple[str, int], ProducerStateStore] = {}
        now = _now_ms()
        for tp in manager.partitions():
            store = ProducerStateStore(manager.get(*tp), batches_retained=self.batches_retained)
            store.load(now_ms=now, producer_id_expiration_ms=producer_id_expiration_ms)
            self.stores[tp] = store
        self.hw_checkpoint: dict[tuple[str, int], int] = {}
        for d in manager.log_dirs:
            text = files.read_text(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT))
            if text is None:
                continue
            try:
                self.hw_checkpoint.update(checkpoints.parse_offsets(text))
            except checkpoints.CheckpointError as e:
                log.warning("%s/%s unreadable (%s); treating as empty", d,
                            REPLICATION_OFFSET_CHECKPOINT, e)
        self._written: dict[str, str] = {}
        # the log start offset each partition's old snapshots were last pruned at
        self._snapshots_pruned_at: dict[tuple[str, int], int] = {}

    def partitions(self) -> list[tuple[str, int]]:
        return self.manager.partitions()

    def get(self, tp) -> PartitionLog | None:
        return self.manager.get(tp[0], tp[1])

    def get_or_create(self, tp, topic_configs: dict[str, str], *,
                      sync_dir: bool = True) -> PartitionLog:
        # The replica layer's topic keys (min.insync.replicas, ...) are not the log's.
        topic_configs = {k: v for k, v in (topic_configs or {}).items()
                         if k not in REPLICATION_TOPIC_KEYS}
        # Validate the topic's overrides first: a bad value is INVALID_CONFIG, nothing created.
        LogConfig.from_topic_configs(self.defaults, topic_configs)
        plog = self.manager.get_or_create(tp[0], tp[1], topic_configs or None, now_ms=_now_ms(),
                                          sync_dir=sync_dir)
        if tp not in self.stores:
            # a new log: empty state at its start
            self.stores[tp] = ProducerStateStore(plog, batches_retained=self.batches_retained)
        return plog

    def sync_created_dirs(self) -> list[tuple[str, OSError]]:
        return self.manager.sync_created_dirs()

    def store(self, tp) -> ProducerStateStore | None:
        """The partition's producer state + log (appends and truncations go through it)."""
        return self.stores.get(tp)

    def high_watermark_checkpoint(self, tp) -> int:
        return self.hw_checkpoint.get(tp, 0)

    def delete(self, tp) -> None:
        # The partition dir goes, snapshots included; the state goes with it.
        self.stores.pop(tp, None)
        self.manager.delete_partition(tp[0], tp[1])
        self.hw_checkpoint.pop(tp, None)

    def tick(self) -> list[tuple[str, OSError]]:
        """Log maintenance but its fsyncs, unlinks and cleaning (`background_io`, run off the
        request loop); [(log dir, I/O error)] for dirs that failed (to take offline)."""
        failed = dict(self.manager.tick(_now_ms(), background_io=False))
        for tp, store in list(self.stores.items()):
            if store.log.closed:
                continue
            start = store.log.log_start_offset
            if self._snapshots_pruned_at.get(tp) == start:
                continue                        # no listdir per partition per tick
            try:
                store.delete_old_snapshots()    # retention moved the log start past them
                self._snapshots_pruned_at[tp] = start
            except OSError as e:
                d = self.manager.dir_of(*tp)
                if d is not None:
                    failed.setdefault(d, e)
        return list(failed.items())

    def background_io(self) -> list[tuple[str, OSError]]:
        """The flush after each roll, due deletions, the cleaning of compacted logs and the
        checkpoints: fsyncs of whole segments, unlinks and long reads, so the node runs it in
        a worker thread (LogManager.background_io). [(log dir, I/O error)]."""
        return self.manager.background_io(_now_ms())

    def dir_of(self, tp) -> str | None:
        return self.manager.dir_of(tp[0], tp[1])

    def mark_offline(self, log_dir: str) -> tuple[tuple[str, int], ...]:
        """Take a failed log dir offline (LogManager.mark_offline); forget its partitions'
        producer state. Returns the partitions it held."""
        tps = self.manager.mark_offline(log_dir)
        for tp in tps:
            self.stores.pop(tp, None)
            self.hw_checkpoint.pop(tp, None)
        return tps

    def expire_producers(self) -> int:
        """Forget producers idle for producer.id.expiration.ms. Returns how many."""
        now = _now_ms()
        dropped = 0
        for tp, store in list(self.stores.items()):
            gone = store.expire(now, self.producer_id_expiration_ms)
            if gone:
                log.info("[%s-%d] expired %d producer id(s)", tp[0], tp[1], len(gone))
                dropped += len(gone)
        return dropped

    def write_high_watermarks(self, hws: dict[tuple[str, int], int]) -> list[tuple[str, OSError]]:
        """Write `replication-offset-checkpoint` in each online log dir (only when it changed);
        [(log dir, I/O error)] for those that failed."""
        plan = self.high_watermark_writes(hws)
        return self.high_watermarks_written(plan, write_checkpoint_files(plan))

    def high_watermark_writes(self, hws: dict[tuple[str, int], int]) -> list[tuple[str, str]]:
        """The checkpoint files to write for `hws`, [(log dir, text)] (only dirs whose file
        changed). Pure bookkeeping: `write_checkpoint_files` does the I/O (in any thread), then
        `high_watermarks_written` records the outcome (on the partition's writer)."""
        by_dir: dict[str, dict] = {d: {} for d in self.manager.online_dirs}
        for tp, hw in hws.items():
            d = self.manager.dir_of(tp[0], tp[1])
            if d is not None and d in by_dir:
                by_dir[d][tp] = hw
        self.hw_checkpoint = dict(hws)
        plan = []
        for d, offsets in by_dir.items():
            text = checkpoints.format_offsets(offsets)
            if self._written.get(d) != text:
                plan.append((d, text))
        return plan

    def high_watermarks_written(self, plan: list[tuple[str, str]],
                                failed: list[tuple[str, OSError]]) -> list[tuple[str, OSError]]:
        bad = {d for d, _ in failed}
        for d, text in plan:
            if d not in bad:
                self._written[d] = text
        return failed

    def close(self) -> None:
        """A snapshot of every partition's producer state at its log end, then the logs (flush,
        checkpoints, clean-shutdown marker): a clean restart loads the snapshots, no log scan."""
        for tp, store in self.stores.items():
            if store.log.closed:
                continue
            try:
                store.close()
            except OSError as e:     # the next start rebuilds from an older snapshot + the log
                log.error("[%s-%d] producer snapshot at close failed: %s", tp[0], tp[1], e)
        self.manager.close()


def write_checkpoint_files(plan: list[tuple[str, str]]) -> list[tuple[str, OSError]]:
    """Write each (log dir, text) of `high_watermark_writes` as its
    replication-offset-checkpoint (tmp + fsync + rename + dir fsync). Safe in a worker thread:
    touches only those files. [(log dir, I/O error)] for the writes that failed."""
    failed = []
    for d, text in plan:
        try:
            files.atomic_write(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT), text)
        except OSError as e:
            failed.append((d, e))
    return failed


def open_logs(cfg: StorageNodeConfig) -> Logs:
    """Open (and recover) every local partition log."""
    defaults = log_defaults(cfg)
    manager = LogManager(cfg.log_dir_list, defaults, now_ms=_now_ms(), rng=random.Random(),
                         cleaner_enable=cfg.log_cleaner_enable)
    return Logs(manager, defaults, producer_id_expiration_ms=cfg.producer_id_expiration_ms,
                producer_state_batches_retained=cfg.producer_state_batches_retained)


# -- PartitionLog calls ----------------------------------------------------------------------

def headers_of(payload) -> list[BatchHeader]:
    """The batch headers of a payload of whole batches, in order."""
    return [h for _, h in iter_batches(payload)]


def append_as_leader(store: ProducerStateStore, payload, leader_epoch: int,
                     validated: tuple | None = None, *,
                     allow_unsequenced: bool = False) -> tuple[Decision, int, int]:
    """Check the payload's idempotent batches against the producer state, then append (assign
    offsets, stamp the leader epoch) and apply. Returns (decision, first offset, last offset):
    for APPEND the offsets written; for DUPLICATE the offsets of the batch(es) already in the
    log (nothing appended); for REFUSE -1, -1 (nothing appended). `validated`: the payload's
    headers as produce admission's validate_batches returned them (the CRCs are then not
    checked a second time). `allow_unsequenced`: a coordinator's transactional write."""
    if validated:
        decision, info = store.append_as_leader(payload, list(validated), now_ms=_now_ms(),
                                                leader_epoch=leader_epoch, validated=True,
                                                allow_unsequenced=allow_unsequenced)
    else:
        decision, info = store.append_as_leader(payload, headers_of(payload), now_ms=_now_ms(),
                                                leader_epoch=leader_epoch,
                                                allow_unsequenced=allow_unsequenced)
    if info is not None:
        return decision, info.first_offset, info.last_offset
    return decision, decision.first_offset, decision.last_offset


def append_marker(store: ProducerStateStore, producer_id: int, producer_epoch: int,
                  commit: bool, coordinator_epoch: int,
                  leader_epoch: int) -> tuple[tuple[int, str] | None, int]:
    """Write a transaction marker as the leader (Kafka's control batch; see
    riverbed.records.control). Returns (refusal, offset): (error code, message) and -1 when the
    producer state refuses it (an older producer or coordinator epoch), else None and the
    marker's offset."""
    now = _now_ms()
    batch = build_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now)
    refusal, info = store.append_marker(batch, read_header(batch),
                                        ControlRecord(commit, coordinator_epoch),
                                        now_ms=now, leader_epoch=leader_epoch)
    if refusal is not None:
        return refusal, -1
    return None, info.first_offset


def last_stable_offset(store: ProducerStateStore | None, high_watermark: int) -> int:
    """The partition's last stable offset (the HW when no transaction is open)."""
    if store is None:
        return high_watermark
    return store.last_stable_offset(high_watermark)


def aborted_transactions(plog, fetch_offset: int, data) -> list[tuple[int, int]]:
    """(producer id, first offset) of the aborted transactions a read_committed reader of `data`
    (read from `fetch_offset`) must skip: those overlapping [fetch_offset, the offset after its
    last whole batch)."""
    upper = fetch_offset
    for _, h in iter_batches(data):
        upper = h.next_offset
    if upper <= fetch_offset:
        return []
    return [(e.producer_id, e.first_offset)
            for e in plog.collect_aborted_transactions(fetch_offset, upper)]


def append_as_follower(store: ProducerStateStore, payload) -> None:
    """The leader's batches with the leader's offsets, applied to the producer state."""
    store.append_as_follower(payload, headers_of(payload), now_ms=_now_ms())


def read(plog, offset: int, max_bytes: int, max_offset: int):
    return plog.read(offset, max_bytes, max_offset=max_offset).data


def log_end_offset(plog) -> int:
    return plog.log_end_offset


def log_start_offset(plog) -> int:
    return plog.log_start_offset


def offset_for_timestamp(plog, timestamp: int) -> tuple[int, int] | None:
    """(timestamp, offset) or None."""
    found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return None
    offset, ts = found
    return ts, offset


def truncate_to(store: ProducerStateStore, offset: int) -> None:
    """Truncate the log to `offset` and reload the producer state (from the newest snapshot at
    or below the new end plus the log). At or past the log end nothing changes (no reload)."""
    if offset >= store.log.log_end_offset:
        return
    store.truncate_to(offset, now_ms=_now_ms())


def truncate_fully_and_start_at(store: ProducerStateStore, offset: int) -> None:
    """Empty log at `offset`, every producer snapshot deleted, empty producer state."""
    store.truncate_fully_and_start_at(offset, now_ms=_now_ms())


def epoch_entries(plog) -> list[tuple[int, int]]:
    """The leader-epoch cache: (epoch, start offset) pairs, oldest first."""
    return list(plog.epochs.entries)


def epoch_entries_view(plog):
    """The leader-epoch cache's entries themselves, not a copy: to read at once, never keep
    or change (the per-partition checks of every replica fetch)."""
    return plog.epochs.entries


def end_offset_for_epoch(plog, epoch: int) -> tuple[int, int]:
    """(largest epoch <= `epoch`, where the next epoch starts; the log end offset for the
    latest), or (-1, -1) when the log has no epoch that old: OffsetForLeaderEpoch's answer."""
    return plog.end_offset_for_epoch(epoch)


def latest_epoch(plog) -> int:
    entries = plog.epochs.entries
    return entries[-1][0] if entries else -1


def assign_epoch(plog, epoch: int, start_offset: int) -> None:
    """Record that `epoch` starts at `start_offset` (a new leader; written to
    leader-epoch-checkpoint)."""
    plog.assign_epoch(epoch, start_offset)
