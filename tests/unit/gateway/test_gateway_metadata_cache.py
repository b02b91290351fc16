from riverbed._proto.v1 import errors_pb2, metadata_pb2

from gateway_helpers import cache_with, topic, update
from services.gateway.core.metadata_cache import Leader, MetadataCache, NoLeader

E = errors_pb2.ErrorCode


def test_leader_lookup_routes_to_live_leaders_and_explains_the_rest():
    c = cache_with()
    assert c.leader_for("orders", 1) == Leader(2, "tcp://127.0.0.1:9102", 0)
    assert c.leader_for("orders", 3).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert c.leader_for("nope", 0).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert c.leader_for("logs", 1).error_code == E.LEADER_NOT_AVAILABLE       # leader -1
    assert c.leader_for("ghost", 0).error_code == E.LEADER_NOT_AVAILABLE      # leader not live
    assert isinstance(c.leader_for("ghost", 0), NoLeader)


def test_keeps_the_newest_epoch_and_version():
    c = cache_with(epoch=2, version=5)
    assert not c.apply_update(update(epoch=2, version=4, topics=[]), now_ms=1)
    assert not c.apply_update(update(epoch=1, version=99, topics=[]), now_ms=1)
    assert c.has_topic("orders") and c.stamp == (2, 5)
    assert c.snapshots_ignored == 2
    # a new controller (higher epoch) restarts versions and wins
    assert c.apply_update(update(epoch=3, version=1, topics=[topic("new", [1])]), now_ms=2)
    assert c.stamp == (3, 1) and c.topic_names == ["new"] and not c.has_topic("orders")


def test_same_stamp_refreshes_age_only():
    c = cache_with(epoch=1, version=1)
    assert c.is_stale(now_ms=1000, max_age_ms=1000)
    assert c.apply_update(update(epoch=1, version=1, topics=[]), now_ms=900)
    assert c.has_topic("orders")                      # content unchanged
    assert not c.is_stale(now_ms=1000, max_age_ms=1000)


def test_empty_cache_is_stale_and_answers_with_no_topics():
    c = MetadataCache()
    assert c.is_stale(0, 10**9)
    resp, missing = c.metadata_response(metadata_pb2.MetadataRequest(topics=["a"]))
    assert missing == ["a"] and resp.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert resp.controller_id == -1


def test_metadata_response_from_snapshot_response():
    resp = metadata_pb2.MetadataResponse(controller_id=7, controller_epoch=4, metadata_version=2,
                                         cluster_id="x")
    resp.brokers.extend(update().live_brokers)
    resp.topics.extend([topic("t", [1, 2])])
    c = MetadataCache()
    assert c.apply_metadata_response(resp, now_ms=0)
    assert c.controller_id == 7 and c.leader_for("t", 1).node_id == 2


def test_metadata_answer_lists_topics_gateways_and_errors_in_request_order():
    c = cache_with()
    c.set_gateways([(2, "tcp://g2"), (1, "tcp://g1"), (1, "tcp://g1")])
    req = metadata_pb2.MetadataRequest(topics=["logs", "bad name", "missing", "logs", "orders"])
    resp, missing = c.metadata_response(req)
    assert [t.name for t in resp.topics] == ["logs", "bad name", "missing", "orders"]
    assert [t.error_code for t in resp.topics] == [
        E.NONE, E.INVALID_TOPIC_EXCEPTION, E.UNKNOWN_TOPIC_OR_PARTITION, E.NONE]
    assert missing == ["missing"]
    assert [(g.gateway_id, g.endpoint) for g in resp.gateways] == [(1, "tcp://g1"), (2, "tcp://g2")]
    assert [b.node_id for b in resp.brokers] == [1, 2, 3]
    assert (resp.controller_epoch, resp.metadata_version, resp.cluster_id) == (1, 1, "c1")
    everything, none = c.metadata_response(metadata_pb2.MetadataRequest())
    assert sorted(t.name for t in everything.topics) == ["ghost", "logs", "orders"] and none == []


def test_describe_cluster_and_controller_answer_get_our_gateways():
    c = cache_with()
    c.set_gateways([(5, "tcp://g5")])
    d = c.describe_cluster()
    assert d.cluster_id == "c1" and d.controller_id == 100 and len(d.brokers) == 3
    assert [g.gateway_id for g in d.gateways] == [5]
    theirs = metadata_pb2.MetadataResponse(controller_id=100)
    theirs.gateways.add(gateway_id=9, endpoint="tcp://stale")
    ours = c.with_gateways(theirs)
    assert [g.gateway_id for g in ours.gateways] == [5]
    assert [g.gateway_id for g in theirs.gateways] == [9]   # input untouched


def test_broken_topics_from_the_controller_are_unknown():
    bad = topic("oops", [1])
    bad.error_code = E.LEADER_NOT_AVAILABLE
    c = cache_with(topics=[bad, topic("ok", [1])])
    assert not c.has_topic("oops") and c.has_topic("ok")


def test_controller_hint_until_a_snapshot_names_one():
    c = MetadataCache()
    c.set_controller_hint(3)
    assert c.controller_id == 3
    c.apply_update(update(controller_id=4), 0)
    c.set_controller_hint(5)
    assert c.controller_id == 4


def test_node_endpoints_follow_the_live_set():
    """The gateway drops its connections to nodes that leave this set (dead or fenced)."""
    c = cache_with(epoch=1, version=1)
    assert c.node_endpoints() == {f"tcp://127.0.0.1:{9100 + i}" for i in (1, 2, 3)}
    assert c.apply_update(update(epoch=1, version=2, brokers=(1, 3), topics=[]), now_ms=1)
    assert c.node_endpoints() == {"tcp://127.0.0.1:9101", "tcp://127.0.0.1:9103"}
    assert MetadataCache().node_endpoints() == frozenset()
