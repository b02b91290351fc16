"""The gateway's fan-out of DESCRIBE_LOG_DIRS and ALTER_REPLICA_LOG_DIRS (pure planning)."""
from riverbed import errors
from riverbed._proto.v1 import admin_ops_pb2 as pb
from services.gateway.core import log_dirs

E = errors.ErrorCode


def test_describe_asks_every_live_node_or_those_named():
    assert log_dirs.describe_targets(pb.DescribeLogDirsRequest(), [3, 1, 2]) == ([1, 2, 3], [])
    assert log_dirs.describe_targets(pb.DescribeLogDirsRequest(broker_ids=[2, 9, 2]),
                                     [1, 2, 3]) == ([2], [9])


def test_describe_merge_keeps_answers_and_names_failures():
    ok = pb.DescribeLogDirsResponse(brokers=[pb.BrokerLogDirs(
        broker_id=1, log_dirs=[pb.LogDirDescription(path="/d1", state="online")])])
    merged = log_dirs.merge_describe({1: (E.NONE, "", ok),
                                      2: (E.NETWORK_EXCEPTION, "node 2: gone", None)}, [9])
    assert [b.broker_id for b in merged.brokers] == [1, 2, 9]
    assert merged.brokers[0].log_dirs[0].path == "/d1"
    assert merged.brokers[1].error_code == E.NETWORK_EXCEPTION
    assert merged.brokers[2].error_code == E.BROKER_NOT_AVAILABLE


def test_moves_split_per_node_and_dead_nodes_fail_without_a_send():
    body = pb.AlterReplicaLogDirsRequest(moves=[
        pb.ReplicaLogDirMove(broker_id=1, topic="t", partition=0, log_dir="/a"),
        pb.ReplicaLogDirMove(broker_id=2, topic="t", partition=1, log_dir="/b"),
        pb.ReplicaLogDirMove(broker_id=1, topic="u", partition=0, log_dir="/c"),
        pb.ReplicaLogDirMove(broker_id=7, topic="t", partition=2, log_dir="/d")])
    per, failed = log_dirs.split_moves(body, [1, 2])
    assert sorted(per) == [1, 2] and len(per[1].moves) == 2
    assert [(f.broker_id, f.error_code) for f in failed] == [(7, E.BROKER_NOT_AVAILABLE)]
    answer = pb.AlterReplicaLogDirsResponse(results=[
        pb.ReplicaLogDirResult(broker_id=1, topic="t", partition=0),
        pb.ReplicaLogDirResult(broker_id=1, topic="u", partition=0,
                               error_code=E.LOG_DIR_NOT_FOUND)])
    out = log_dirs.merge_moves(per, {1: (E.NONE, "", answer),
                                     2: (E.NETWORK_EXCEPTION, "node 2: gone", None)}, failed)
    codes = {(r.broker_id, r.topic, r.partition): r.error_code for r in out.results}
    assert codes == {(7, "t", 2): E.BROKER_NOT_AVAILABLE, (1, "t", 0): E.NONE,
                     (1, "u", 0): E.LOG_DIR_NOT_FOUND, (2, "t", 1): E.NETWORK_EXCEPTION}
