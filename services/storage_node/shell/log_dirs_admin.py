"""A storage node's answers about its log dirs (KIP-112/113): DESCRIBE_LOG_DIRS (what each dir
holds, its space and whether it is online) and ALTER_REPLICA_LOG_DIRS (move a replica to
another dir of this node while it keeps serving).

A move copies the replica into the target dir beside the live one (`<topic>-<p>.<id>-future`,
in a thread, while appends go on), copies again what changed, then on the event loop — where
every append, truncation and read of the partition runs, so nothing interleaves — closes the
live log, copies the last changes, renames the copy into place and opens it
(LogManager.swap_in_future). The producer state stays in memory and moves with it. A move that
fails (I/O error on the target) leaves the replica where it was; one cut short by a crash
leaves a `-future` dir that the next start removes.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil

from riverbed import errors
from riverbed._proto.v1 import admin_ops_pb2
from riverbed.wire.framing import Request
from services.common.rpc import Reply
from services.storage_node.core.replica_state import NONE, Role
from services.storage_node.log.log_manager import copy_tree

log = logging.getLogger(__name__)

KAFKA_STORAGE_ERROR = errors.KafkaStorageError.code
LOG_DIR_NOT_FOUND = errors.LogDirNotFoundError.code
REASSIGNMENT_IN_PROGRESS = errors.ReassignmentInProgressError.code

# A move copies in passes while the replica is live; the swap (on the event loop) copies what
# the last pass missed. Passes stop once one copies less than this, or after MAX_PASSES.
SWAP_WHEN_BELOW_BYTES = 1 << 20
MAX_PASSES = 5


def _usage(path: str) -> tuple[int, int]:
    try:
        u = shutil.disk_usage(path)
        return u.total, u.free
    except OSError:
        return -1, -1


async def describe_log_dirs(node, req: Request) -> Reply:
    body: admin_ops_pb2.DescribeLogDirsRequest = req.body
    topics = set(body.topics)
    resp = admin_ops_pb2.DescribeLogDirsResponse(error_code=NONE)
    resp.brokers.append(describe(node, topics, await _usages(node)))
    return Reply(resp)


async def _usages(node) -> dict[str, tuple[int, int]]:
    dirs = list(node.logs.manager.log_dirs) if node.logs is not None else []
    return await asyncio.to_thread(lambda: {d: _usage(d) for d in dirs})


def describe(node, topics: set[str], usage: dict[str, tuple[int, int]]
             ) -> admin_ops_pb2.BrokerLogDirs:
    """This node's log dirs as a BrokerLogDirs (runs on the event loop: a consistent view)."""
    out = admin_ops_pb2.BrokerLogDirs(broker_id=node.cfg.broker_id, error_code=NONE)
    logs = node.logs
    if logs is None:
        return out
    mgr = logs.manager
    by_dir: dict[str, list] = {d: [] for d in mgr.log_dirs}
    for tp in mgr.partitions():
        d = mgr.dir_of(*tp)
        if d in by_dir and (not topics or tp[0] in topics):
            by_dir[d].append(tp)
    moving = node.log_dir_moves
    for d in mgr.log_dirs:
        offline = d in mgr.offline_dirs
        total, free = usage.get(d, (-1, -1))
        desc = out.log_dirs.add(
            path=d, error_code=KAFKA_STORAGE_ERROR if offline else NONE,
            state="offline" if offline else ("low-space" if node.space.is_low(d) else "online"),
            total_bytes=total if not offline else -1, free_bytes=free if not offline else -1)
        size = 0
        if offline:
            for tp in mgr.offline_dirs[d]:
                if not topics or tp[0] in topics:
                    desc.replicas.add(topic=tp[0], partition=tp[1], size_bytes=-1,
                                      offset_lag=-1, log_end_offset=-1)
            desc.size_bytes = -1
            continue
        for tp in sorted(by_dir[d]):
            plog = mgr.get(*tp)
            if plog is None or plog.closed:
                continue
            r = node.core.get(tp)
            leo = plog.log_end_offset
            hw = r.high_watermark if r is not None else logs.high_watermark_checkpoint(tp)
            role = "" if r is None else ("leader" if r.role is Role.LEADER else "follower")
            nbytes = plog.size_bytes
            size += nbytes
            desc.replicas.add(topic=tp[0], partition=tp[1], size_bytes=nbytes,
                              offset_lag=max(hw - leo, 0), log_end_offset=leo, role=role)
        for tp, mv in sorted(moving.items()):
            if mv.target_dir == d and (not topics or tp[0] in topics):
                desc.replicas.add(topic=tp[0], partition=tp[1], size_bytes=mv.copied_bytes,
                                  offset_lag=-1, log_end_offset=-1, is_future=True,
                                  role="")
        desc.size_bytes = size
    return out


class Move:
    __slots__ = ("target_dir", "copied_bytes")

    def __init__(self, target_dir: str):
        self.target_dir = target_dir
        self.copied_bytes = 0


async def alter_replica_log_dirs(node, req: Request) -> Reply:
    body: admin_ops_pb2.AlterReplicaLogDirsRequest = req.body
    resp = admin_ops_pb2.AlterReplicaLogDirsResponse(error_code=NONE)
    for mv in body.moves:
        code, message = await move_replica(node, (mv.topic, mv.partition), mv.log_dir)
        resp.results.add(broker_id=node.cfg.broker_id, topic=mv.topic, partition=mv.partition,
                         error_code=code, error_message=message)
    return Reply(resp)


async def move_replica(node, tp: tuple[str, int], log_dir: str) -> tuple[int, str]:
    """Move `tp`'s replica on this node to `log_dir`: (error code, message)."""
    logs = node.logs
    name = f"{tp[0]}-{tp[1]}"
    if logs is None:
        return KAFKA_STORAGE_ERROR, "the node's logs are not open"
    mgr = logs.manager
    target = os.path.abspath(log_dir) if log_dir else ""
    if target not in mgr.log_dirs:
        return LOG_DIR_NOT_FOUND, (f"{log_dir!r} is not a log dir of node {node.cfg.broker_id} "
                                   f"(log.dirs: {','.join(mgr.log_dirs)})")
    if target in mgr.offline_dirs:
        return KAFKA_STORAGE_ERROR, f"log dir {target} is offline"
    if node.space.is_low(target):
        return KAFKA_STORAGE_ERROR, f"log dir {target} is below log.dir.free.bytes.min"
    moves = node.log_dir_moves
    if tp in moves:
        if moves[tp].target_dir == target:
            return NONE, f"{name} is already moving to {target}"
        return REASSIGNMENT_IN_PROGRESS, f"{name} is moving to {moves[tp].target_dir}"
    source = mgr.dir_of(*tp)
    if source is None:
        mgr.preferred_dirs[tp] = target
        return NONE, f"{name} is not hosted here yet: it will be created in {target}"
    if source == target:
        return NONE, f"{name} is already in {target}"
    move = moves[tp] = Move(target)
    future = mgr.future_path(tp[0], tp[1], target)
    copied: dict = {}
    try:
        plog = mgr.get(*tp)
        truncations = plog.truncations
        for _ in range(MAX_PASSES):
            n = await asyncio.to_thread(copy_tree, plog.dir, future, copied)
            move.copied_bytes += n
            plog = mgr.get(*tp)
            if plog is None or plog.closed or mgr.dir_of(*tp) != source:
                raise _Gone()
            if n < SWAP_WHEN_BELOW_BYTES:
                break
        store = logs.store(tp)
        # (a truncation since the first pass makes the swap copy the replica whole again)
        moved = mgr.swap_in_future(tp[0], tp[1], future, copied, truncations)
        if store is not None:
            store.log = moved
    except _Gone:
        shutil.rmtree(future, ignore_errors=True)
        return KAFKA_STORAGE_ERROR, f"{name} left {source} while it was being copied"
    except OSError as e:
        shutil.rmtree(future, ignore_errors=True)
        log.error("[node %d] moving %s from %s to %s failed: %s; it stays in %s",
                  node.cfg.broker_id, name, source, target, e, source)
        if mgr.get(*tp) is not None and logs.store(tp) is not None:
            logs.store(tp).log = mgr.get(*tp)
        return KAFKA_STORAGE_ERROR, f"moving {name} to {target} failed: {e}"
    finally:
        moves.pop(tp, None)
    log.info("[node %d] moved %s from %s to %s (%d bytes copied)", node.cfg.broker_id, name,
             source, target, move.copied_bytes)
    return NONE, f"{name} moved to {target}"


class _Gone(Exception):
    """The replica was deleted, or its dir failed, while it was being copied."""
