"""The storage node's log-dir health (KIP-112): a dir that fails an I/O goes offline for good
(until a restart), a dir low on space (log.dir.free.bytes.min) hands its partitions over until
space is back; both are reported to the controller through our registration plus
/log_dir_event_notification. A mixin of StorageNode (shell.node), split out of it along this
seam; it never imports shell.node."""
from __future__ import annotations

import asyncio
import logging
import shutil

from services.common import znodes

log = logging.getLogger(__name__)


class LogDirHealth:
    """Log-dir failures and headroom. Uses the node's cfg, core, logs, space, low_dirs,
    produce_purgatory, zk, _stop_event, _spawn, _finish_produce, _partition_changed,
    _reconcile_fetchers, _registration."""

    def _report_log_dirs(self) -> None:
        """Tell the controller (a ZooKeeper thread): our registration names the offline
        replicas, and a log-dir event makes the controller read it now (Kafka's
        /log_dir_event_notification)."""
        if self.zk is None:
            return
        try:
            self.zk.set(znodes.broker_path(self.cfg.broker_id), self._registration())
            self.zk.create(f"{znodes.LOG_DIR_EVENT_NOTIFICATION}/{znodes.LOG_DIR_EVENT_PREFIX}",
                           znodes.encode_log_dir_event(self.cfg.broker_id), sequence=True,
                           makepath=True)
        except Exception as e:  # noqa: BLE001 - the session is gone: re-registration tells it
            log.warning("[node %d] reporting log dirs to the controller failed: %r",
                        self.cfg.broker_id, e)

    def _dir_of(self, tp) -> str | None:
        return self.logs.dir_of(tp) if self.logs is not None else None

    def fail_log_dir(self, log_dir: str | None, err: BaseException, what: str) -> None:
        """An I/O error in `log_dir` (ENOSPC, EROFS, EIO...): take it offline for good (until
        a restart), hand its partitions to other replicas, keep serving the other dirs."""
        if log_dir is None or self.logs is None or log_dir in self.logs.manager.offline_dirs:
            return
        self.log_dir_failures += 1
        tps = self.logs.mark_offline(log_dir)
        self.space.forget(log_dir)
        self.low_dirs.pop(log_dir, None)
        log.error("[node %d] log dir %s failed during %s: %s. It is offline until a restart; "
                  "its %d partition(s) move to other replicas", self.cfg.broker_id, log_dir,
                  what, err, len(tps))
        self._take_offline(tps)
        if not self.logs.manager.online_dirs:
            log.error("[node %d] every log dir is offline: shutting down", self.cfg.broker_id)
            if self._stop_event is not None:
                self._stop_event.set()

    def _take_offline(self, tps) -> None:
        for tp in self.core.mark_offline(tps):
            for op in self.produce_purgatory.on_leadership_lost(tp):
                self._finish_produce(op)
            self._partition_changed(tp, False)
        self._reconcile_fetchers()
        self._spawn(asyncio.to_thread(self._report_log_dirs))

    def _space_changed(self, change) -> None:
        if change is None or self.logs is None:
            return
        d = change.log_dir
        if change.low:
            tps = tuple(tp for tp in self.logs.partitions() if self.logs.dir_of(tp) == d)
            self.low_dirs[d] = tps
            log.error("[node %d] log dir %s has %d bytes free, below log.dir.free.bytes.min=%d: "
                      "it refuses appends and its %d partition(s) move to other replicas until "
                      "%d bytes are free", self.cfg.broker_id, d, change.free,
                      self.cfg.log_dir_free_bytes_min, len(tps),
                      int(self.cfg.log_dir_free_bytes_min * 1.5))
            self._take_offline(tps)
        else:
            tps = self.low_dirs.pop(d, ())
            log.warning("[node %d] log dir %s has %d bytes free again: its %d partition(s) "
                        "rejoin", self.cfg.broker_id, d, change.free, len(tps))
            self.core.mark_online(tps)
            self._spawn(asyncio.to_thread(self._report_log_dirs))

    def _measure_space(self) -> None:
        if self.cfg.log_dir_free_bytes_min <= 0 or self.logs is None:
            return
        for d in self.logs.manager.online_dirs:
            try:
                free = shutil.disk_usage(d).free
            except OSError as e:
                self.fail_log_dir(d, e, "a free-space check")
                continue
            self._space_changed(self.space.measured(d, free))

    def _space_low_after(self, log_dir: str | None, nbytes: int) -> bool:
        """Count an append of nbytes against the dir's measured free space; True (and the dir
        handed over) when it would go below log.dir.free.bytes.min."""
        if log_dir is None:
            return False
        change = self.space.appended(log_dir, nbytes)
        if change is None:
            return False
        self._space_changed(change)
        return True
