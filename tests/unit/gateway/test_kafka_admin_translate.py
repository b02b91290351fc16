"""The Kafka listener's translation of the admin APIs and of Kafka's group protocol
(services/gateway/kafka/translate.py): what is asked of Riverbed, and what the client gets."""
from __future__ import annotations

import datetime

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from riverbed._proto.v1 import admin_ops_pb2, controller_pb2, group_pb2
from services.gateway.kafka import protocol as kp
from services.gateway.kafka import translate as tr
from services.gateway.kafka.brokers import KafkaBroker
from tests.unit.gateway.test_kafka_protocol import VIEW, encode_request

TOPIC = 2


def req_of(api_key: int, version: int, **kw):
    return kp.decode_request(encode_request(load_request_schema(api_key, version)(**kw)))


def drive(step, answers):
    """Run a plan, answering each call with answers[Riverbed api](call) -> Outcome."""
    calls = []
    while isinstance(step, tr.Plan):
        calls.extend(step.calls)
        step = step.finish([answers[c.api](c) for c in step.calls])
    return step.response, calls


def described(entries: dict[str, tuple[str, bool]]):
    def answer(call):
        resp = controller_pb2.DescribeConfigsResponse()
        for t in call.body.topics:
            r = resp.results.add(topic=t)
            for k, (v, d) in entries.items():
                r.entries.add(name=k, value=v, is_default=d)
        return tr.Outcome(body=resp)
    return answer


def altered(call):
    resp = controller_pb2.AlterConfigsResponse()
    for t in call.body.topics:
        resp.topics.add(name=t.name)
    return tr.Outcome(body=resp)


def test_legacy_alter_configs_replaces_the_whole_set():
    from kio.schema.alter_configs.v2 import request as m
    req = req_of(kp.ALTER_CONFIGS, 2, validate_only=False, resources=(
        m.AlterConfigsResource(resource_type=TOPIC, resource_name="orders", configs=(
            m.AlterableConfig(name="retention.ms", value="1000"),)),
        m.AlterConfigsResource(resource_type=4, resource_name="1", configs=())))
    current = {"retention.ms": ("604800000", True), "cleanup.policy": ("compact", False),
               "segment.ms": ("10", False)}
    resp, calls = drive(tr.plan(req, VIEW), {tr.R.DESCRIBE_CONFIGS: described(current),
                                             tr.R.ALTER_CONFIGS: altered})
    alter = calls[1].body.topics[0]
    assert dict(alter.set) == {"retention.ms": "1000"}
    assert sorted(alter.delete) == ["cleanup.policy", "segment.ms"]   # back to defaults
    codes = [(r.resource_name, r.error_code) for r in resp.responses]
    assert codes == [("orders", ErrorCode.none), ("1", ErrorCode.invalid_request)]


def test_incremental_alter_configs_appends_subtracts_and_refuses_what_it_must():
    from kio.schema.incremental_alter_configs.v1 import request as m

    def res(name, *ops):
        return m.AlterConfigsResource(resource_type=TOPIC, resource_name=name, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops))
    req = req_of(kp.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=True, resources=(
        res("a", ("cleanup.policy", 2, "compact"), ("retention.ms", 0, "5"),
            ("segment.ms", 1, None)),
        res("b", ("cleanup.policy", 3, "delete")),
        res("c", ("segment.ms", 2, "1")),                       # not a list config
        res("d", ("x", 0, "1"), ("x", 1, None))))               # named twice
    resp, calls = drive(tr.plan(req, VIEW), {
        tr.R.DESCRIBE_CONFIGS: described({"cleanup.policy": ("delete", True)}),
        tr.R.ALTER_CONFIGS: altered})
    assert calls[0].body.topics == ["a", "b"]                 # only what APPEND/SUBTRACT needs
    alter = {t.name: (dict(t.set), list(t.delete)) for t in calls[1].body.topics}
    assert alter == {"a": ({"cleanup.policy": "delete,compact", "retention.ms": "5"},
                           ["segment.ms"]),
                     "b": ({"cleanup.policy": ""}, [])}
    assert calls[1].body.validate_only
    codes = {r.resource_name: r.error_code for r in resp.responses}
    assert codes == {"a": ErrorCode.none, "b": ErrorCode.none, "c": ErrorCode.invalid_config,
                     "d": ErrorCode.invalid_request}


def test_describe_log_dirs_spreads_the_storage_nodes_over_the_gateways():
    def answer(call):
        resp = admin_ops_pb2.DescribeLogDirsResponse()
        for node in (1, 2, 3, 4):
            b = resp.brokers.add(broker_id=node)
            d = b.log_dirs.add(path=f"/data/{node}", total_bytes=100, free_bytes=40)
            d.replicas.add(topic="orders", partition=0, size_bytes=10 * node, offset_lag=0)
            d.replicas.add(topic="other", partition=1, size_bytes=1)
        return tr.Outcome(body=resp)
    from kio.schema.describe_log_dirs.v4 import request as m
    req = req_of(kp.DESCRIBE_LOG_DIRS, 4, topics=(m.DescribableLogDirTopic(topic="orders",
                                                                           partitions=(0,)),))
    seen = []
    for gw in (1, 2, 3):
        view = tr.ClusterView(brokers=VIEW.brokers, gateway_id=gw)
        resp, calls = drive(tr.plan(req, view), {tr.R.DESCRIBE_LOG_DIRS: answer})
        assert calls[0].body.topics == ["orders"]
        for r in resp.results:
            seen.append(r.log_dir)
            assert [t.name for t in r.topics] == ["orders"] and r.usable_bytes == 40
    assert sorted(seen) == [f"storage-node-{n}:/data/{n}" for n in (1, 2, 3, 4)]


def test_delete_groups_and_elect_leaders_answers():
    req = req_of(kp.DELETE_GROUPS, 2, groups_names=("a", "b"))

    def deleted(call):
        resp = group_pb2.DeleteGroupsResponse()
        resp.results.add(group_id="a")
        resp.results.add(group_id="b", error_code=ErrorCode.non_empty_group.value)
        return tr.Outcome(body=resp)
    resp, _ = drive(tr.plan(req, VIEW), {tr.R.DELETE_GROUPS: deleted})
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        ("a", ErrorCode.none), ("b", ErrorCode.non_empty_group)]
    from kio.schema.elect_leaders.v2 import request as m
    req = req_of(kp.ELECT_LEADERS, 2, election_type=1, timeout=datetime.timedelta(seconds=5),
                 topic_partitions=(m.TopicPartitions(topic="t", partitions=(0,)),))
    resp, calls = drive(tr.plan(req, VIEW), {})
    assert not calls                                   # unclean: refused, nothing asked
    assert resp.replica_election_results[0].partition_result[0].error_code == \
        ErrorCode.invalid_request


def test_join_and_sync_pass_kafkas_bytes_through_riverbeds_client_assignment():
    from kio.schema.join_group.v9 import request as jg
    from kio.schema.sync_group.v5 import request as sg
    req = req_of(kp.JOIN_GROUP, 9, group_id="g", session_timeout=datetime.timedelta(seconds=10),
                 rebalance_timeout=datetime.timedelta(seconds=30), member_id="",
                 group_instance_id=None, protocol_type="connect", reason=None, protocols=(
                     jg.JoinGroupRequestProtocol(name="sessioned", metadata=b"\x00\x01w1"),))
    step = tr.plan(req, VIEW)
    (call,) = step.calls
    assert call.api_version == 1 and call.body.client_assignment
    assert [(p.name, p.metadata) for p in call.body.protocols] == [("sessioned", b"\x00\x01w1")]
    answer = group_pb2.JoinGroupResponse(generation_id=3, protocol_type="connect",
                                         protocol_name="sessioned", leader="m1", member_id="m1")
    answer.members.add(member_id="m1", metadata=b"\x00\x01w1")
    resp = step.finish([tr.Outcome(body=answer)]).response
    assert [(m.member_id, m.metadata) for m in resp.members] == [("m1", b"\x00\x01w1")]
    req = req_of(kp.SYNC_GROUP, 5, group_id="g", generation_id=3, member_id="m1",
                 group_instance_id=None, protocol_type="connect", protocol_name="sessioned",
                 assignments=(sg.SyncGroupRequestAssignment(member_id="m1", assignment=b"A"),))
    step = tr.plan(req, VIEW)
    (call,) = step.calls
    assert call.api_version == 1 and [(a.member_id, a.assignment)
                                      for a in call.body.assignments] == [("m1", b"A")]
    assert (call.body.protocol_type, call.body.protocol_name) == ("connect", "sessioned")
    resp = step.finish([tr.Outcome(body=group_pb2.SyncGroupResponse(
        protocol_type="connect", protocol_name="sessioned", assignment_data=b"A"))]).response
    assert resp.assignment == b"A" and resp.error_code == ErrorCode.none
