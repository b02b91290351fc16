"""LogManager: every partition log of a storage node across its `log.dirs`.

Per log dir: `<topic>-<partition>/` directories, `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `cleaner-offset-checkpoint` (Kafka's offset-checkpoint format) and
the `.kafka_cleanshutdown` marker. At startup a dir without the marker was stopped uncleanly, so
its logs are recovered from their recovery points; the marker is removed once the dir is loaded
and written again by close().
"""
from __future__ import annotations

import logging
import os
import random
import shutil
import threading
import time
import uuid
from collections.abc import Iterable, Mapping

from riverbed import errors
from services.storage_node.core import checkpoints
from services.storage_node.log import files
from services.storage_node.log.cleaner import Throttler, clean_log
from services.storage_node.log.config import LogConfig
from services.storage_node.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for anything else (e.g. `x-1.<uuid>-delete`)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def _listed_partitions(log_dir: str) -> list[tuple[str, int]]:
    """Partitions a log dir's names say it holds (for a dir that failed to load)."""
    try:
        names = os.listdir(log_dir)
    except OSError:
        return []
    return [tp for tp in (parse_partition_dir(n) for n in names) if tp is not None]


class LogManager:
    def __init__(self, log_dirs: list[str], default_config: LogConfig, *, now_ms: int,
                 rng: random.Random, topic_overrides: Mapping[str, Mapping[str, str]] | None = None,
                 cleaner_enable: bool = True,
                 cleaner_io_max_bytes_per_second: float = float("inf"),
                 clock=time.monotonic, sleep=time.sleep) -> None:
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.rng = rng
        self.topic_overrides = {t: dict(o) for t, o in (topic_overrides or {}).items()}
        self.cleaner_enable = cleaner_enable
        self.throttler = Throttler(cleaner_io_max_bytes_per_second, clock=clock, sleep=sleep)
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._lock = threading.RLock()
        self.closed = False
        # Log dirs taken offline after an I/O error (KIP-112), with the partitions they held.
        self.offline_dirs: dict[str, tuple[tuple[str, int], ...]] = {}
        for d in self.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
                self._load_dir(d, now_ms)
            except OSError as e:
                log.error("log dir %s cannot be loaded (%s): offline", d, e)
                self.mark_offline(d, _listed_partitions(d))
        if len(self.offline_dirs) == len(self.log_dirs):
            raise OSError(f"every log dir is offline: {', '.join(self.log_dirs)}")

    # ---- startup ------------------------------------------------------------------------
    def _read_checkpoint(self, log_dir: str, name: str) -> dict[tuple[str, int], int]:
        text = files.read_text(os.path.join(log_dir, name))
        if text is None:
            return {}
        try:
            return checkpoints.parse_offsets(text)
        except checkpoints.CheckpointError as e:
            log.warning("%s/%s unreadable (%s); treating as empty", log_dir, name, e)
            return {}

    def _load_dir(self, log_dir: str, now_ms: int) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER)
        clean = os.path.exists(marker)
        recovery = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
        starts = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
        cleaner = self._read_checkpoint(log_dir, CLEANER_OFFSET_CHECKPOINT)
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)       # an unfinished partition delete
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            plog = PartitionLog.open(
                path, tp[0], tp[1], self.config_for(tp[0]), now_ms=now_ms, rng=self.rng,
                recovery_point=recovery.get(tp, 0), log_start_offset=starts.get(tp, 0),
                needs_recovery=not clean, cleaner_checkpoint=cleaner.get(tp, 0))
            self._logs[tp] = plog
            self._dir_of[tp] = log_dir
        if not clean:
            log.warning("%s: no clean shutdown marker; recovered %d logs", log_dir,
                        sum(1 for d in self._dir_of.values() if d == log_dir))
        self._write_checkpoints(log_dir)
        files.unlink_quietly(marker)
        files.fsync_dir(log_dir)

    # ---- partitions ---------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        overrides = self.topic_overrides.get(topic)
        if not overrides:
            return self.default_config
        return LogConfig.from_topic_configs(self.default_config, overrides)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def choose_dir(self) -> str:
        """The online log dir holding the fewest partitions (the first such in log.dirs
        order). KafkaStorageError when every log dir is offline."""
        online = self.online_dirs
        if not online:
            raise errors.KafkaStorageError("every log dir of this node is offline")
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])

    def mark_offline(self, log_dir: str, extra: Iterable[tuple[str, int]] = ()
                     ) -> tuple[tuple[str, int], ...]:
        """Take `log_dir` offline after an I/O error: its logs are closed without flushing
        (best effort) and forgotten; nothing is written there any more. Returns the partitions
        it held (all of them, also on a second call)."""
        log_dir = os.path.abspath(log_dir)
        with self._lock:
            if log_dir in self.offline_dirs:
                return self.offline_dirs[log_dir]
            tps = sorted({tp for tp, d in self._dir_of.items() if d == log_dir} | set(extra))
            for tp in tps:
                plog = self._logs.pop(tp, None)
                self._dir_of.pop(tp, None)
                if plog is not None:
                    try:
                        plog.abandon()
                    except Exception:  # noqa: BLE001 - the disk is gone: closing may fail too
                        pass
            self.offline_dirs[log_dir] = tuple(tps)
            return self.offline_dirs[log_dir]

    def get_or_create(self, topic: str, partition: int, overrides: Mapping[str, str] | None = None,
                      *, now_ms: int) -> PartitionLog:
        with self._lock:
            tp = (topic, partition)
            if overrides is not None:
                self.topic_overrides[topic] = dict(overrides)
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            log_dir = self.choose_dir()
            try:
                plog = PartitionLog.open(os.path.join(log_dir, f"{topic}-{partition}"), topic,
                                         partition, self.config_for(topic), now_ms=now_ms,
                                         rng=self.rng)
                files.fsync_dir(log_dir)
            except OSError as e:
                e.log_dir = log_dir      # type: ignore[attr-defined] - for the caller to fail it
                raise
            self._logs[tp] = plog
            self._dir_of[tp] = log_dir
            return plog

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close the log, rename its dir to `<topic>-<partition>.<uuid>-delete`, remove it."""
        with self._lock:
            tp = (topic, partition)
            plog = self._logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
            if plog is None or log_dir is None:
                return False
            plog.close()
            doomed = os.path.join(log_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            os.rename(plog.dir, doomed)
            files.fsync_dir(log_dir)
            self._write_checkpoints(log_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # ---- background work ----------------------------------------------------------------
    def tick(self, now_ms: int) -> list[tuple[str, OSError]]:
        """flush.ms and post-roll flushes, retention, due deletions, cleaning, checkpoints.
        An I/O error stops the work on that log dir: returns [(log dir, error)] for the caller
        to take offline (the other dirs' work goes on)."""
        failed: dict[str, OSError] = {}
        for tp, plog in list(self._logs.items()):
            d = self._dir_of.get(tp)
            if plog.closed or d in failed:
                continue
            try:
                plog.tick(now_ms)
                plog.delete_old_segments(now_ms)
                if self.cleaner_enable and plog.config.compact:
                    clean_log(plog, now_ms=now_ms, throttler=self.throttler)
            except OSError as e:
                if d is not None:
                    failed[d] = e
        return list(failed.items()) + [f for f in self.checkpoint() if f[0] not in failed]

    def checkpoint(self) -> list[tuple[str, OSError]]:
        """Write each online dir's checkpoints; [(log dir, error)] for those that failed."""
        failed = []
        with self._lock:
            for d in self.online_dirs:
                try:
                    self._write_checkpoints(d)
                except OSError as e:
                    failed.append((d, e))
        return failed

    def _write_checkpoints(self, log_dir: str) -> None:
        logs = {tp: p for tp, p in self._logs.items() if self._dir_of.get(tp) == log_dir}
        for name, value in ((RECOVERY_POINT_CHECKPOINT, lambda p: p.recovery_point),
                            (LOG_START_OFFSET_CHECKPOINT, lambda p: p.log_start_offset),
                            (CLEANER_OFFSET_CHECKPOINT, lambda p: p.cleaner_checkpoint)):
            text = checkpoints.format_offsets({tp: value(p) for tp, p in logs.items()})
            path = os.path.join(log_dir, name)
            if files.read_text(path) != text:
                files.atomic_write(path, text)

    def close(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown markers."""
        with self._lock:
            if self.closed:
                return
            failed = set()
            for tp, plog in self._logs.items():
                try:
                    plog.close()
                except OSError as e:
                    d = self._dir_of.get(tp)
                    log.error("closing %s-%d failed (%s): %s left without a clean-shutdown "
                              "marker", tp[0], tp[1], e, d)
                    failed.add(d)
            failed |= {d for d, _ in self.checkpoint()}
            for d in self.online_dirs:
                if d in failed:
                    continue
                try:
                    files.atomic_write(os.path.join(d, CLEAN_SHUTDOWN_MARKER), "")
                except OSError as e:
                    log.error("clean-shutdown marker in %s: %s", d, e)
            self.closed = True
