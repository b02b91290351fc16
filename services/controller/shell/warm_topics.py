"""A standby controller's copy of the topic znodes, kept current by ZooKeeper watches, so that
an election reads only what changed (issue 15: controller failover with 10,000 partitions).

What it holds: the children of /brokers/topics and, per topic, its assignment
(/brokers/topics/<t>), config (/config/topics/<t>) and every partition state
(/brokers/topics/<t>/partitions/<p>/state), each as (data, version) or absent. Every read sets
a watch; a watch that fires marks its path dirty; `refresh()` re-reads the dirty paths
(pipelined, each with a new watch) until none is left. A standby refreshes every
REFRESH_INTERVAL_S; an election does the same once more, after a barrier:

Why the copy is exact at election. ZooKeeper sends a session the notification of a change to a
watched znode before the answer to any later request of that session, and kazoo's connection
thread reads them in that order, handing watch callbacks to its one callback thread in order.
The elected controller has just bumped /controller_epoch (zxid Z); `barrier()` then queues a
callback behind every notification read before that answer and waits for it, so every change
before Z has marked its path dirty, and `refresh()` re-reads those. Every other path was read
with a watch that has not fired, i.e. it has not changed since it was read. Nothing after Z can
change these znodes but this controller: every write is a transaction checked against the
epoch's version. So the snapshot equals what a full read after Z would return, at the cost of
the reads that changed (O(changed), not O(partitions)).

Anything doubtful empties the copy (it is then read in full, as before): a session that is not
CONNECTED (watches may be lost with it), a barrier that does not complete in time, becoming
the active controller (the copy is kept only while standing by).

Blocking kazoo calls: run on the shell's ZooKeeper executor (one thread, in order), like
zk_store. Watch callbacks run on kazoo's thread and only touch the sets under the lock.
"""
from __future__ import annotations

import logging
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import Callback

from services.common import znodes
from services.controller.core.model import NEW, LeaderIsr, TopicSnapshot

log = logging.getLogger(__name__)

REFRESH_INTERVAL_S = 0.5
BARRIER_TIMEOUT_S = 5.0
MAX_REFRESH_PASSES = 100       # a pass adds paths only for new topics/partitions: a few suffice
# A standby's background refresh reads at most this many znodes per call, so an election that
# begins meanwhile (same ZooKeeper executor) never waits behind a long one, e.g. the first
# load of 10,000 partition states; the election's own refresh has no limit.
BACKGROUND_MAX_READS = 1000


class WarmTopics:
    def __init__(self, client: KazooClient):
        self.client = client
        self._lock = threading.Lock()
        self._generation = 0
        self._topics: set[str] = set()
        self._topics_dirty = True
        # path -> (data, version), or None: absent (an exists watch waits for its creation)
        self._data: dict[str, tuple[bytes, int] | None] = {}
        self._dirty: set[str] = set()
        self.full_loads = 0
        self.reads = 0

    # ---- kazoo's thread ----------------------------------------------------------------------
    def _path_watch(self, event) -> None:
        with self._lock:
            if self._topic_of(event.path) in self._topics:
                self._dirty.add(event.path)

    def _children_watch(self, event) -> None:
        with self._lock:
            self._topics_dirty = True

    # ---- any thread --------------------------------------------------------------------------
    def invalidate(self, reason: str = "") -> None:
        """Forget everything: the next refresh reads it all again."""
        with self._lock:
            if self._data or self._topics:
                log.info("warm topic copy dropped%s", f": {reason}" if reason else "")
            self._generation += 1
            self._topics = set()
            self._topics_dirty = True
            self._data = {}
            self._dirty = set()

    def statistics(self) -> dict[str, int]:
        with self._lock:
            return {"topics": len(self._topics), "znodes": len(self._data),
                    "dirty": len(self._dirty), "full_loads": self.full_loads,
                    "reads": self.reads}

    # ---- the ZooKeeper executor ---------------------------------------------------------------
    def barrier(self, timeout_s: float = BARRIER_TIMEOUT_S) -> bool:
        """Wait until every watch notification kazoo has read so far has been handled (see the
        module doc). False (and the copy dropped) if that does not happen in time."""
        done = threading.Event()
        self.client.handler.dispatch_callback(Callback("watch", done.set, ()))
        if done.wait(timeout_s):
            return True
        self.invalidate("watch barrier timed out")
        return False

    def refresh(self, max_reads: int | None = None) -> int:
        """Re-read what is dirty (everything, when empty) until nothing is, or until about
        `max_reads` znodes were read; the number read."""
        total = 0
        for _ in range(MAX_REFRESH_PASSES):
            n = self._refresh_pass(None if max_reads is None else max(1, max_reads - total))
            total += n
            if n == 0 or (max_reads is not None and total >= max_reads):
                return total
        return total

    def _refresh_pass(self, limit: int | None = None) -> int:
        c = self.client
        with self._lock:
            generation = self._generation
            topics_dirty, self._topics_dirty = self._topics_dirty, False
            cold = not self._data
        if topics_dirty:
            names = set(c.get_children(znodes.BROKER_TOPICS, watch=self._children_watch))
            with self._lock:
                if generation != self._generation:
                    return 1
                gone = self._topics - names
                for name in names - self._topics:
                    self._dirty.add(znodes.topic_path(name))
                    self._dirty.add(znodes.topic_config_path(name))
                if gone:
                    def dropped(path: str) -> bool:
                        return self._topic_of(path) in gone
                    self._data = {p: v for p, v in self._data.items() if not dropped(p)}
                    self._dirty = {p for p in self._dirty if not dropped(p)}
                self._topics = names
        with self._lock:
            if limit is None or len(self._dirty) <= limit:
                paths, self._dirty = self._dirty, set()
            else:
                paths = set()
                while len(paths) < limit:
                    paths.add(self._dirty.pop())
        if not paths:
            return 1 if topics_dirty else 0
        reads = [(p, c.get_async(p, watch=self._path_watch)) for p in paths]
        got: dict[str, tuple[bytes, int] | None] = {}
        missing = []
        for path, r in reads:
            try:
                data, stat = r.get()
                got[path] = (data, stat.version)
            except NoNodeError:
                got[path] = None
                missing.append(path)
        # Absent: watch for the creation (exists sets a watch whether or not the node exists).
        for path, r in [(p, c.exists_async(p, watch=self._path_watch)) for p in missing]:
            if r.get() is not None:
                with self._lock:
                    self._dirty.add(path)          # created meanwhile: read it next pass
        with self._lock:
            if generation != self._generation:
                return len(paths)
            if cold:
                self.full_loads += 1
            self.reads += len(paths)
            for path, value in got.items():
                topic = self._topic_of(path)
                if topic is None or topic not in self._topics:
                    continue                          # deleted meanwhile
                self._data[path] = value
                if value is not None and path == znodes.topic_path(topic):
                    try:
                        assignment = znodes.decode_topic_assignment(value[0])
                    except (ValueError, znodes.ZnodeDataError):
                        continue
                    for p in assignment:
                        sp = znodes.partition_state_path(topic, p)
                        if sp not in self._data:
                            self._dirty.add(sp)
        return len(paths)

    @staticmethod
    def _topic_of(path: str) -> str | None:
        for prefix in (znodes.BROKER_TOPICS + "/", znodes.CONFIG_TOPICS + "/"):
            if path.startswith(prefix):
                return path[len(prefix):].split("/", 1)[0]
        return None

    def snapshot(self) -> tuple[TopicSnapshot, ...]:
        """Every topic as ZkStore.read_topics returns it, from the copy (refresh first)."""
        out = []
        with self._lock:
            names = sorted(self._topics)
            data = dict(self._data)
        for name in names:
            head = data.get(znodes.topic_path(name))
            if head is None:
                continue
            try:
                assignment = znodes.decode_topic_assignment(head[0])
                conf = data.get(znodes.topic_config_path(name))
                configs, config_version = ((znodes.decode_topic_config(conf[0]), conf[1])
                                           if conf is not None else ({}, NEW))
                states: dict[int, LeaderIsr] = {}
                for p in assignment:
                    st = data.get(znodes.partition_state_path(name, p))
                    if st is None:
                        continue
                    s = znodes.decode_partition_state(st[0])
                    states[p] = LeaderIsr(s.leader, s.leader_epoch, tuple(s.isr),
                                          s.controller_epoch, st[1], s.elr, s.last_known_elr)
            except (ValueError, znodes.ZnodeDataError) as e:
                log.error("ignoring topic %s: unreadable znodes: %s", name, e)
                continue
            out.append(TopicSnapshot(name, assignment, configs, head[1], config_version, states))
        return tuple(out)
