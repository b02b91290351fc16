"""The storage node's metrics (Kafka's operations chapter, "Monitoring"), registered as observable
instruments read at collection from the node's own state: nothing here runs per request.

- per topic: riverbed.server.bytes_in / bytes_out / messages_in (client produce and fetch),
  riverbed.server.replication.bytes_out (followers' fetches);
- per API (services.common.rpc): riverbed.server.requests, riverbed.server.request.time with
  phase = queue | local | remote | send | total, riverbed.server.request.time.max,
  riverbed.server.request.errors per error;
- riverbed.server.under_replicated_partitions, partition_count, leader_count,
  riverbed.server.isr.shrinks / isr.expands, riverbed.server.replica.max_lag (messages: the
  largest lag of any follower of a partition this node leads), riverbed.server.purgatory.size
  (operation = produce | fetch);
- fetch sessions (KIP-227): riverbed.server.fetch_sessions and fetch_sessions.partitions (the
  leader's cache: Kafka's NumIncrementalFetchSessions / NumIncrementalFetchPartitionsCached),
  fetch_sessions.evictions; riverbed.server.replica_fetches (kind = full | incremental),
  replica_fetch.partitions_named and replica_fetch.session_errors (this node as a follower);
- riverbed.log.flushes, riverbed.log.flush.time, riverbed.log.size per partition,
  riverbed.log_dir.size and riverbed.log_dir.free per log dir.
"""
from __future__ import annotations

import os
import shutil
from typing import Any

from services.common.metrics_core import TopicCounters
from services.common.telemetry import Telemetry
from services.storage_node.log.partition_log import FLUSH_STATS

# The node whose figures these are (shell.node.StorageNode). Not imported: node.py imports this
# module, and shell parts never import shell.node (an import-linter contract).
StorageNode = Any

__all__ = ["register"]


def _replicas(node: "StorageNode"):
    return list(node.core.replicas.values()) if hasattr(node.core, "replicas") else []


def register(tel: Telemetry, node: "StorageNode") -> None:
    rm = node.request_metrics
    tc: TopicCounters = node.topic_counters
    c, g = tel.counter, tel.gauge
    c("riverbed.server.bytes_in", lambda: tc.obs(tc.bytes_in), unit="By",
      description="record batch bytes appended from producers, per topic")
    c("riverbed.server.bytes_out", lambda: tc.obs(tc.bytes_out), unit="By",
      description="record batch bytes sent to consumers, per topic")
    c("riverbed.server.messages_in", lambda: tc.obs(tc.messages_in),
      description="records appended from producers, per topic")
    c("riverbed.server.replication.bytes_out",
      lambda: tc.obs(node.replication_bytes_out), unit="By",
      description="record batch bytes sent to followers, per topic")
    c("riverbed.server.requests", rm.requests_obs, description="requests handled, per API")
    c("riverbed.server.request.time", rm.time_obs, unit="s",
      description="time spent on requests per API and phase (queue, local, remote, send, total)")
    g("riverbed.server.request.time.max", rm.max_obs, unit="s",
      description="the longest request per API since start")
    c("riverbed.server.request.errors", rm.errors_obs, description="error answers per API and error")

    def replicas():
        return _replicas(node)

    def under_replicated():
        return [(sum(1 for r in replicas() if r.is_leader and len(r.isr) < len(r.replicas)), {})]

    def max_lag():
        lag = 0
        for r in replicas():
            if not r.is_leader:
                continue
            leos = r.follower_leos
            for n in r.replicas:
                if n != node.cfg.broker_id:
                    lag = max(lag, r.log_end_offset - leos.get(n, 0))
        return [(lag, {})]

    g("riverbed.server.under_replicated_partitions", under_replicated,
      description="partitions this node leads whose ISR is smaller than their replica list")
    g("riverbed.server.partition_count", lambda: [(len(replicas()), {})],
      description="partition replicas on this node")
    g("riverbed.server.leader_count",
      lambda: [(sum(1 for r in replicas() if r.is_leader), {})],
      description="partitions this node leads")
    c("riverbed.server.isr.shrinks", lambda: [(node.isr_changes["shrink"], {})],
      description="ISR shrinks proposed by this node")
    c("riverbed.server.isr.expands", lambda: [(node.isr_changes["expand"], {})],
      description="ISR expansions proposed by this node")
    g("riverbed.server.replica.max_lag", max_lag,
      description="largest lag in messages of any follower of a partition this node leads")
    g("riverbed.server.purgatory.size", lambda: [
        (len(node.produce_purgatory), {"operation": "produce"}),
        (len(node.fetch_waiters), {"operation": "fetch"})],
      description="requests waiting: acks=all produces and long-polled fetches")
    fs = node.fetch_sessions
    rf = node.replica_fetch_stats
    g("riverbed.server.fetch_sessions", lambda: [(len(fs), {})],
      description="incremental fetch sessions this node keeps for its followers")
    g("riverbed.server.fetch_sessions.partitions", lambda: [(fs.partitions_cached(), {})],
      description="partitions in this node's fetch sessions")
    c("riverbed.server.fetch_sessions.evictions", lambda: [(fs.evictions, {})],
      description="fetch sessions evicted (stale, or making room)")
    c("riverbed.server.replica_fetches", lambda: [(rf["full"], {"kind": "full"}),
                                                  (rf["incremental"], {"kind": "incremental"})],
      description="replica fetches this node sent as a follower, full or incremental")
    c("riverbed.server.replica_fetch.partitions_named", lambda: [(rf["partitions_named"], {})],
      description="partitions named in this node's replica fetches")
    c("riverbed.server.replica_fetch.session_errors", lambda: [(rf["session_errors"], {})],
      description="fetch session errors answered to this node's replica fetches")
    c("riverbed.log.flushes", lambda: [(FLUSH_STATS.count, {})], description="log flushes")
    c("riverbed.log.flush.time", lambda: [(FLUSH_STATS.seconds, {})], unit="s",
      description="time spent flushing logs")

    def log_sizes():
        logs = node.logs
        if logs is None:
            return []
        out = []
        for tp in logs.partitions():
            plog = logs.get(tp)
            if plog is not None and not plog.closed:
                out.append((plog.size_bytes, {"topic": tp[0], "partition": str(tp[1])}))
        return out

    def dir_sizes():
        logs = node.logs
        if logs is None:
            return []
        norm = os.path.realpath
        by_dir = {norm(d): 0 for d in logs.manager.log_dirs}
        for tp in logs.partitions():
            plog = logs.get(tp)
            d = logs.manager.dir_of(tp[0], tp[1])
            if plog is not None and not plog.closed and d is not None and norm(d) in by_dir:
                by_dir[norm(d)] += plog.size_bytes
        return [(n, {"log_dir": d}) for d, n in by_dir.items()]

    def dir_free():
        logs = node.logs
        if logs is None:
            return []
        out = []
        for d in logs.manager.log_dirs:
            try:
                out.append((shutil.disk_usage(d).free, {"log_dir": os.path.realpath(d)}))
            except OSError:
                continue
        return out

    g("riverbed.log.size", log_sizes, unit="By", description="bytes of each partition's log")
    g("riverbed.log_dir.size", dir_sizes, unit="By", description="bytes of logs in each log dir")
    g("riverbed.log_dir.free", dir_free, unit="By",
      description="free bytes on each log dir's file system")
