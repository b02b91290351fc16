"""The gateway's authorization decisions per API (pure): what is forwarded, what is answered."""
from __future__ import annotations

from riverbed._proto.v1 import (
    controller_pb2,
    errors_pb2,
    group_pb2,
    header_pb2,
    metadata_pb2,
    offset_pb2,
    produce_pb2,
    producer_id_pb2,
)

from gateway_helpers import cache_with
from services.common.acl.authorizer import (
    AclEntry,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from services.gateway.core import authorization as authz
from services.gateway.core.routing import merge, split

E = errors_pb2.ErrorCode
ApiKey = header_pb2.ApiKey
O = Operation
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALICE = "User:alice"


def may_for(*rules, principal=ALICE):
    """rules: (resource type, name, operation[, pattern type])."""
    acls: dict = {}
    for rt, name, op, *pt in rules:
        p = ResourcePattern(rt, name, pt[0] if pt else PatternType.LITERAL)
        acls.setdefault(p, set()).add(AclEntry(principal, "*", op, Permission.ALLOW))
    a = Authorizer(acls)
    return (lambda op, rt, name: a.authorize(principal, "", op, rt, name),
            lambda op, rt: a.authorize_any(principal, "", op, rt))


def test_denied_produce_partitions_are_answered_and_never_forwarded():
    may, _ = may_for((T, "orders", O.WRITE))
    body = produce_pb2.ProduceRequest(acks=1)
    body.topics.add(name="orders").partitions.add(partition=0)
    body.topics.add(name="logs").partitions.add(partition=0)
    denied = authz.denied_routed_topics(ApiKey.PRODUCE, body, may)
    assert denied == {"logs"}
    plan = split(ApiKey.PRODUCE, body, [b"a", b"b"], cache_with(), denied)
    forwarded = {t.name for s in plan.sub_requests for t in s.body.topics}
    assert forwarded == {"orders"}
    resp = merge(plan, {}).body
    assert resp.topics[1].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    # An unknown topic the principal may not write: denied too (existence is not revealed).
    body.topics.add(name="nosuch").partitions.add(partition=0)
    denied = authz.denied_routed_topics(ApiKey.PRODUCE, body, may)
    plan = split(ApiKey.PRODUCE, body, [b"a", b"b", b"c"], cache_with(), denied)
    assert plan.unknown_topics == ()
    assert plan.slots[2].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_a_transactional_produce_needs_write_on_its_transactional_id():
    may, _ = may_for((T, "orders", O.WRITE), (ResourceType.TRANSACTIONAL_ID, "app", O.WRITE))
    body = produce_pb2.ProduceRequest(acks=-1, transactional_id="other")
    body.topics.add(name="orders").partitions.add(partition=0)
    refused = authz.routed_request_denied(ApiKey.PRODUCE, body, may)
    assert refused is not None and refused[0] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    plan = split(ApiKey.PRODUCE, body, [b"a"], cache_with(), frozenset(), refused)
    assert plan.sub_requests == ()                          # nothing forwarded
    assert merge(plan, {}).body.topics[0].partitions[0].error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    body.transactional_id = "app"
    assert authz.routed_request_denied(ApiKey.PRODUCE, body, may) is None
    body.transactional_id = ""                               # the SDK's: not checked
    assert authz.routed_request_denied(ApiKey.PRODUCE, body, may) is None


def test_metadata_hides_or_refuses_and_auto_creation_needs_create():
    may, _ = may_for((T, "orders", O.READ))        # Read implies Describe
    resp = metadata_pb2.MetadataResponse()
    resp.topics.add(name="orders")
    resp.topics.add(name="logs")
    all_topics = authz.filter_metadata(resp, metadata_pb2.MetadataRequest(), may)
    assert [t.name for t in all_topics.topics] == ["orders"]
    named = authz.filter_metadata(resp, metadata_pb2.MetadataRequest(topics=["orders", "logs"]), may)
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("orders", E.NONE), ("logs", E.TOPIC_AUTHORIZATION_FAILED)]
    req = metadata_pb2.MetadataRequest(topics=["new"], allow_auto_topic_creation=True)
    assert not authz.metadata_request(req, may, ["new"]).allow_auto_topic_creation
    may2, _ = may_for((T, "new", O.CREATE), (T, "new", O.DESCRIBE))
    assert authz.metadata_request(req, may2, ["new"]).allow_auto_topic_creation


def test_create_topics_needs_create_on_cluster_or_topic():
    body = controller_pb2.CreateTopicsRequest()
    body.topics.add(name="a-1")
    body.topics.add(name="b-1")
    may, _ = may_for((T, "a-", O.CREATE, PatternType.PREFIXED))
    fwd, denied = authz.split_admin(ApiKey.CREATE_TOPICS, body, may)
    assert [t.name for t in fwd.topics] == ["a-1"] and denied == ["b-1"]
    theirs = controller_pb2.CreateTopicsResponse()
    theirs.topics.add(name="a-1")
    out = authz.admin_response(ApiKey.CREATE_TOPICS, theirs, denied, may)
    assert [(t.name, t.error_code) for t in out.topics] == [
        ("a-1", E.NONE), ("b-1", E.TOPIC_AUTHORIZATION_FAILED)]
    may, _ = may_for((C, "kafka-cluster", O.CREATE))
    assert authz.split_admin(ApiKey.CREATE_TOPICS, body, may) == (body, [])
    # Nothing allowed: nothing forwarded.
    may, _ = may_for()
    fwd, denied = authz.split_admin(ApiKey.DELETE_TOPICS,
                                    controller_pb2.DeleteTopicsRequest(names=["a", "b"]), may)
    assert fwd is None and denied == ["a", "b"]
    assert authz.cluster_denied(ApiKey.ELECT_LEADERS, may) is not None


def test_idempotent_producer_ids_kip_679():
    body = producer_id_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1)
    may, may_any = may_for((T, "orders", O.WRITE))
    assert authz.init_producer_id_denied(body, may, may_any) is None
    may, may_any = may_for((T, "orders", O.READ))
    assert authz.init_producer_id_denied(body, may, may_any).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    may, may_any = may_for((C, "kafka-cluster", O.IDEMPOTENT_WRITE))
    assert authz.init_producer_id_denied(body, may, may_any) is None


def test_groups_and_offset_commits():
    may, _ = may_for((G, "g", O.READ), (T, "orders", O.READ))
    join = group_pb2.JoinGroupRequest(group_id="g")
    assert authz.group_denied(ApiKey.JOIN_GROUP, join, may) is None
    assert authz.group_denied(ApiKey.JOIN_GROUP, group_pb2.JoinGroupRequest(group_id="h"), may)
    assert authz.group_denied(ApiKey.FIND_COORDINATOR,
                              group_pb2.FindCoordinatorRequest(key="h"), may)
    commit = offset_pb2.OffsetCommitRequest(group_id="g")
    commit.topics.add(name="orders").partitions.add(partition_index=0, committed_offset=5)
    commit.topics.add(name="logs").partitions.add(partition_index=1, committed_offset=7)
    fwd, denied = authz.split_offsets(ApiKey.OFFSET_COMMIT, commit, may)
    assert [t.name for t in fwd.topics] == ["orders"] and denied == ["logs"]
    theirs = offset_pb2.OffsetCommitResponse()
    theirs.topics.add(name="orders").partitions.add(partition_index=0)
    out = authz.offsets_response(ApiKey.OFFSET_COMMIT, commit, theirs, denied, may)
    assert [(t.name, t.partitions[0].error_code) for t in out.topics] == [
        ("orders", E.NONE), ("logs", E.TOPIC_AUTHORIZATION_FAILED)]
    # OFFSET_FETCH of every topic: only the describable ones come back.
    fetch_all = offset_pb2.OffsetFetchRequest(group_id="g")
    theirs = offset_pb2.OffsetFetchResponse()
    theirs.topics.add(name="orders")
    theirs.topics.add(name="logs")
    out = authz.offsets_response(ApiKey.OFFSET_FETCH, fetch_all, theirs, [], may)
    assert [t.name for t in out.topics] == ["orders"]
    listed = group_pb2.ListGroupsResponse()
    listed.groups.add(group_id="g")
    listed.groups.add(group_id="h")
    assert [g.group_id for g in authz.filter_listed(listed, may).groups] == ["g"]
    assert authz.split_described(["g", "h"], may) == (["g"], ["h"])
