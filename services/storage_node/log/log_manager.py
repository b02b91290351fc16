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
from collections.abc import Callable, Iterable, Mapping

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
FUTURE_DIR_SUFFIX = "-future"      # a replica being copied to another log dir (KIP-113)


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
        # Where replicas not hosted yet are to be created (ALTER_REPLICA_LOG_DIRS, KIP-113).
        self.preferred_dirs: dict[tuple[str, int], str] = {}
        # log dirs with partition dirs created but not fsynced yet (get_or_create(sync_dir=False))
        self._unsynced_dirs: set[str] = set()
        # Log dirs that held logs and had no clean-shutdown marker at startup: this process
        # follows an unclean shutdown, and may have lost what the page cache held (KIP-966).
        self.unclean_dirs: list[str] = []
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
            if name.endswith(FUTURE_DIR_SUFFIX):
                # A move between log dirs that did not swap: the live replica is still where
                # it was; the copy is dropped (an operator re-runs the move).
                log.warning("%s: dropping an unfinished log dir move", path)
                shutil.rmtree(path, ignore_errors=True)
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
            held = sum(1 for d in self._dir_of.values() if d == log_dir)
            log.warning("%s: no clean shutdown marker; recovered %d logs", log_dir, held)
            if held:            # a dir that held logs (not a new one) stopped uncleanly
                self.unclean_dirs.append(log_dir)
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

    def choose_dir(self, tp: tuple[str, int] | None = None) -> str:
        """The log dir a new replica goes to: the one an ALTER_REPLICA_LOG_DIRS named for it
        if online, else the online dir holding the fewest partitions (the first such in
        log.dirs order). KafkaStorageError when every log dir is offline."""
        online = self.online_dirs
        if not online:
            raise errors.KafkaStorageError("every log dir of this node is offline")
        preferred = self.preferred_dirs.get(tp) if tp is not None else None
        if preferred in online:
            return preferred
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
                      *, now_ms: int, sync_dir: bool = True) -> PartitionLog:
        """The partition's log, created (empty) if absent. A new partition dir is made durable
        by an fsync of its log dir: at once, or with `sync_dir=False` by the caller's
        `sync_created_dirs()` (one fsync per log dir for a LEADER_AND_ISR creating thousands
        of partitions, instead of one per partition: issue 15)."""
        with self._lock:
            tp = (topic, partition)
            if overrides is not None:
                self.topic_overrides[topic] = dict(overrides)
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            log_dir = self.choose_dir(tp)
            self.preferred_dirs.pop(tp, None)
            try:
                plog = PartitionLog.open(os.path.join(log_dir, f"{topic}-{partition}"), topic,
                                         partition, self.config_for(topic), now_ms=now_ms,
                                         rng=self.rng)
                if sync_dir:
                    files.fsync_dir(log_dir)
                else:
                    self._unsynced_dirs.add(log_dir)
            except OSError as e:
                e.log_dir = log_dir      # type: ignore[attr-defined] - for the caller to fail it
                raise
            self._logs[tp] = plog
            self._dir_of[tp] = log_dir
            return plog

    def sync_created_dirs(self) -> list[tuple[str, OSError]]:
        """fsync every log dir that got partition dirs from `get_or_create(sync_dir=False)`
        since the last call. Returns (log dir, error) for those that failed."""
        with self._lock:
            dirs, self._unsynced_dirs = sorted(self._unsynced_dirs), set()
            failed = []
            for d in dirs:
                try:
                    files.fsync_dir(d)
                except OSError as e:
                    failed.append((d, e))
            return failed

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

    # ---- moving a replica to another log dir (KIP-113) -----------------------------------
    def future_path(self, topic: str, partition: int, target_dir: str) -> str:
        """Where the copy of a replica being moved to `target_dir` is made."""
        return os.path.join(os.path.abspath(target_dir),
                            f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")

    def swap_in_future(self, topic: str, partition: int, future: str,
                       copied: dict[str, tuple[int, int, int]], truncations: int) -> PartitionLog:
        """The last step of a move: close the live log (flushed: nothing is unwritten), bring
        the copy `future` up to date (files changed since `copy_tree` made `copied`; the whole
        replica again if the log was truncated meanwhile), rename it into place, open it and
        drop the old dir. Nothing else may touch the log meanwhile (the caller runs it on the
        partition's writer). Returns the new log; OSError leaves the live log where it was
        (reopened) and the copy is removed."""
        tp = (topic, partition)
        with self._lock:
            plog = self._logs[tp]
            src_dir = self._dir_of[tp]
            target_dir = os.path.dirname(future)
            final = os.path.join(target_dir, f"{topic}-{partition}")
            plog.close()
            try:
                if plog.truncations != truncations:
                    copied = {}
                    shutil.rmtree(future, ignore_errors=True)
                copy_tree(plog.dir, future, copied, final=True)
                files.fsync_dir(future)
                os.rename(future, final)
                files.fsync_dir(target_dir)
            except OSError:
                shutil.rmtree(future, ignore_errors=True)
                self._logs[tp] = self._reopen(plog)
                raise
            moved = PartitionLog.open(final, topic, partition, self.config_for(topic),
                                      now_ms=int(time.time() * 1000), rng=self.rng,
                                      recovery_point=plog.recovery_point,
                                      log_start_offset=plog.log_start_offset,
                                      cleaner_checkpoint=plog.cleaner_checkpoint)
            self._logs[tp] = moved
            self._dir_of[tp] = target_dir
            doomed = os.path.join(src_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            try:
                os.rename(plog.dir, doomed)
                files.fsync_dir(src_dir)
                self._write_checkpoints(src_dir)
            except OSError as e:   # the source dir failing now costs only its own copy
                log.warning("%s: the old copy of %s-%d could not be removed: %s", src_dir,
                            topic, partition, e)
                doomed = None
            self._write_checkpoints(target_dir)
        if doomed is not None:
            shutil.rmtree(doomed, ignore_errors=True)
        return moved

    def _reopen(self, plog: PartitionLog) -> PartitionLog:
        return PartitionLog.open(plog.dir, plog.topic, plog.partition, self.config_for(plog.topic),
                                 now_ms=int(time.time() * 1000), rng=self.rng,
                                 recovery_point=plog.recovery_point,
                                 log_start_offset=plog.log_start_offset,
                                 cleaner_checkpoint=plog.cleaner_checkpoint)

    # ---- background work ----------------------------------------------------------------
    def tick(self, now_ms: int, *, background_io: bool = True) -> list[tuple[str, OSError]]:
        """flush.ms, retention, and `background_io` (unless False: the caller runs it, e.g. in
        a worker thread). An I/O error stops the work on that log dir: returns
        [(log dir, error)] for the caller to take offline (the other dirs' work goes on)."""
        def work(plog: PartitionLog) -> None:
            plog.tick(now_ms, background_io=False)
            plog.delete_old_segments(now_ms)
        failed = self._on_each_log(work)
        if background_io:
            failed.update((d, e) for d, e in self.background_io(now_ms) if d not in failed)
        return list(failed.items())

    def background_io(self, now_ms: int) -> list[tuple[str, OSError]]:
        """Every log's flush after a roll and due deletions (PartitionLog.background_io), the
        cleaning of compacted logs, then the checkpoints: the fsyncs, unlinks and long reads
        of log maintenance. Safe in a worker thread: the checkpoints hold this manager's
        lock, and the cleaner copes with appends, truncations and closes meanwhile.
        [(log dir, I/O error)] for the dirs where one failed."""
        def work(plog: PartitionLog) -> None:
            plog.background_io(now_ms)
            if self.cleaner_enable and plog.config.compact:
                clean_log(plog, now_ms=now_ms, throttler=self.throttler)
        failed = self._on_each_log(work)
        return list(failed.items()) + [f for f in self.checkpoint() if f[0] not in failed]

    def _on_each_log(self, work: Callable[[PartitionLog], None]) -> dict[str, OSError]:
        """`work` on every open log; the first I/O error of a log dir stops the work there:
        {log dir: error}."""
        failed: dict[str, OSError] = {}
        for tp, plog in list(self._logs.items()):
            d = self._dir_of.get(tp)
            if plog.closed or d in failed:
                continue
            try:
                work(plog)
            except OSError as e:
                if d is not None:
                    failed[d] = e
        return failed

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


def copy_tree(src: str, dst: str, copied: dict[str, tuple[int, int, int]], *,
              final: bool = False) -> int:
    """Copy a partition dir's files into `dst`, skipping those unchanged since the last call
    (`copied`: name -> (inode, size, mtime_ns) as copied; updated). A segment file that only
    grew (same inode, not truncated: the caller re-copies everything after a truncation) gets
    just its new tail. Files gone from `src` go from `dst` too. Without `final` the source is
    live, so a file that vanishes meanwhile (retention, a cleaner swap) is skipped; `final`
    copies under the log's writer and fsyncs each file. Returns the bytes copied."""
    os.makedirs(dst, exist_ok=True)
    total = 0
    names = set()
    listing = sorted(os.listdir(src))
    # The newest segment's indexes are written through mmap, which need not move their mtime:
    # the last pass copies them (and every small non-segment file) whatever their stat says.
    bases = [n[:-len(files.LOG_SUFFIX)] for n in listing
             if n.endswith(files.LOG_SUFFIX) and n[:-len(files.LOG_SUFFIX)].isdigit()]
    newest = max(bases, key=int) if bases else None
    for name in listing:
        path = os.path.join(src, name)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue
        if not os.path.isfile(path):
            continue
        names.add(name)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        seen = copied.get(name)
        stem = name.split(".", 1)[0]
        always = final and (stem == newest or not stem.isdigit())
        if seen == key and not always and not name.endswith(files.LOG_SUFFIX):
            continue
        target = os.path.join(dst, name)
        try:
            with open(path, "rb") as fin:
                start = 0
                if (seen is not None and name.endswith(files.LOG_SUFFIX) and seen[0] == st.st_ino
                        and seen[1] <= st.st_size and os.path.exists(target)
                        and os.path.getsize(target) == seen[1]):
                    start = seen[1]
                mode = "r+b" if start else "wb"
                with open(target, mode) as fout:
                    fin.seek(start)
                    fout.seek(start)
                    fout.truncate(start)
                    while True:
                        chunk = fin.read(1 << 20)
                        if not chunk:
                            break
                        fout.write(chunk)
                        total += len(chunk)
                    if final:
                        fout.flush()
                        os.fsync(fout.fileno())
        except FileNotFoundError:
            if final:
                raise
            names.discard(name)
            continue
        copied[name] = key
    for name in os.listdir(dst):
        if name not in names:
            files.unlink_quietly(os.path.join(dst, name))
            copied.pop(name, None)
    return total
