"""Fan-out of the log-dir APIs (KIP-113) over storage nodes: which node gets which part of a
DESCRIBE_LOG_DIRS or ALTER_REPLICA_LOG_DIRS, and one answer from theirs. Pure: the shell sends.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from riverbed import errors
from riverbed._proto.v1 import admin_ops_pb2

E = errors.ErrorCode


def describe_targets(body: admin_ops_pb2.DescribeLogDirsRequest,
                     live: Iterable[int]) -> tuple[list[int], list[int]]:
    """(live nodes to ask, named nodes that are not live). No ids named = every live node."""
    live = sorted(set(live))
    if not body.broker_ids:
        return live, []
    named = sorted(set(body.broker_ids))
    return [n for n in named if n in live], [n for n in named if n not in live]


def node_describe_request(body: admin_ops_pb2.DescribeLogDirsRequest
                          ) -> admin_ops_pb2.DescribeLogDirsRequest:
    return admin_ops_pb2.DescribeLogDirsRequest(topics=body.topics)


def merge_describe(answers: Mapping[int, tuple[int, str, admin_ops_pb2.DescribeLogDirsResponse | None]],
                   dead: Iterable[int]) -> admin_ops_pb2.DescribeLogDirsResponse:
    """answers: node id -> (error code, message, its response or None)."""
    out = admin_ops_pb2.DescribeLogDirsResponse(error_code=E.NONE)
    for node in sorted(set(answers) | set(dead)):
        if node not in answers:
            out.brokers.add(broker_id=node, error_code=E.BROKER_NOT_AVAILABLE,
                            error_message=f"node {node} is not live")
            continue
        code, message, resp = answers[node]
        if code != E.NONE or resp is None:
            out.brokers.add(broker_id=node, error_code=code, error_message=message)
            continue
        mine = [b for b in resp.brokers if b.broker_id == node] or list(resp.brokers)
        for b in mine[:1]:
            out.brokers.append(b)
    return out


def split_moves(body: admin_ops_pb2.AlterReplicaLogDirsRequest, live: Iterable[int]
                ) -> tuple[dict[int, admin_ops_pb2.AlterReplicaLogDirsRequest],
                           list[admin_ops_pb2.ReplicaLogDirResult]]:
    """Per live node the moves it is asked for; results for those that cannot be sent."""
    live = set(live)
    per: dict[int, admin_ops_pb2.AlterReplicaLogDirsRequest] = {}
    failed = []
    for mv in body.moves:
        if mv.broker_id not in live:
            failed.append(admin_ops_pb2.ReplicaLogDirResult(
                broker_id=mv.broker_id, topic=mv.topic, partition=mv.partition,
                error_code=E.BROKER_NOT_AVAILABLE,
                error_message=f"node {mv.broker_id} is not live"))
            continue
        per.setdefault(mv.broker_id, admin_ops_pb2.AlterReplicaLogDirsRequest()).moves.append(mv)
    return per, failed


def merge_moves(sent: Mapping[int, admin_ops_pb2.AlterReplicaLogDirsRequest],
                answers: Mapping[int, tuple[int, str, admin_ops_pb2.AlterReplicaLogDirsResponse | None]],
                failed: Iterable[admin_ops_pb2.ReplicaLogDirResult]
                ) -> admin_ops_pb2.AlterReplicaLogDirsResponse:
    out = admin_ops_pb2.AlterReplicaLogDirsResponse(error_code=E.NONE)
    out.results.extend(failed)
    for node in sorted(sent):
        code, message, resp = answers[node]
        if code == E.NONE and resp is not None:
            out.results.extend(resp.results)
            continue
        for mv in sent[node].moves:
            out.results.add(broker_id=node, topic=mv.topic, partition=mv.partition,
                            error_code=code, error_message=message)
    return out
