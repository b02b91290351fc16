"""Codecs of services/common/znodes.py: round trips, Kafka's JSON shapes, tolerance, garbage."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common import znodes as zn

ids = st.integers(min_value=0, max_value=2**31 - 1)
int_lists = st.lists(ids, max_size=6).map(tuple)
text = st.text(min_size=1, max_size=20)


def test_paths_follow_kafka_layout():
    assert zn.broker_path(3) == "/brokers/ids/3"
    assert zn.topic_path("orders") == "/brokers/topics/orders"
    assert zn.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert zn.topic_config_path("orders") == "/config/topics/orders"
    assert zn.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zn.gateway_path(1) == "/riverbed/gateways/1"
    assert (zn.CONTROLLER, zn.CONTROLLER_EPOCH, zn.CLUSTER_ID) == (
        "/controller", "/controller_epoch", "/cluster/id")


@pytest.mark.parametrize("bad", ["", "a/b", ".", ".."])
def test_paths_refuse_names_that_escape(bad):
    with pytest.raises(ValueError):
        zn.topic_path(bad)


@pytest.mark.parametrize("bad", [-1, True, "1"])
def test_paths_refuse_bad_ids(bad):
    with pytest.raises(ValueError):
        zn.broker_path(bad)


def test_registry_lists_every_znode_once():
    names = [s.name for s in zn.ZNODES]
    assert len(names) == len(set(names)) == 20
    assert {s.path for s in zn.ZNODES if s.ephemeral} == {
        "/brokers/ids/<id>", "/controller", "/riverbed/gateways/<id>",
        "/riverbed/group_coordinators/ids/<id>", "/riverbed/group_coordinators/shards/<shard>",
        "/riverbed/offset_managers/ids/<id>", "/riverbed/offset_managers/shards/<shard>",
        "/riverbed/transaction_coordinators/ids/<id>",
        "/riverbed/transaction_coordinators/shards/<shard>"}


def test_broker_json_shape_and_round_trip():
    info = zn.BrokerInfo(2, "127.0.0.1", 9102, ("tcp://127.0.0.1:9102",), "r1", 1700000000000)
    obj = json.loads(zn.encode_broker(info))
    assert obj == {"version": 1, "host": "127.0.0.1", "port": 9102,
                   "endpoints": ["tcp://127.0.0.1:9102"], "rack": "r1",
                   "timestamp": "1700000000000"}
    assert zn.decode_broker(2, zn.encode_broker(info)) == info


def test_broker_offline_partitions_round_trip_and_are_absent_when_none():
    info = zn.BrokerInfo(2, "h", 1, ("tcp://h:1",), None, 5, offline_partitions=(("t", 0), ("u", 3)))
    obj = json.loads(zn.encode_broker(info))
    assert obj["offline_partitions"] == [["t", 0], ["u", 3]]
    assert zn.decode_broker(2, zn.encode_broker(info)) == info
    bare = zn.BrokerInfo(2, "h", 1, ("tcp://h:1",), None, 5)
    assert "offline_partitions" not in json.loads(zn.encode_broker(bare))
    with pytest.raises(zn.ZnodeDataError):
        zn.decode_broker(2, b'{"version":1,"host":"h","port":1,"offline_partitions":[["t"]]}')


def test_log_dir_event_is_kafkas_shape():
    assert json.loads(zn.encode_log_dir_event(3)) == {"version": 1, "broker": 3, "event": 1}
    assert zn.decode_log_dir_event(zn.encode_log_dir_event(3)) == 3


def test_topic_assignment_shape():
    data = zn.encode_topic_assignment({1: [2, 3, 1], 0: [1, 2, 3]})
    assert json.loads(data) == {"version": 1, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}}
    assert zn.decode_topic_assignment(data) == {0: (1, 2, 3), 1: (2, 3, 1)}


def test_partition_state_shape():
    s = zn.PartitionState(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=9)
    assert json.loads(zn.encode_partition_state(s)) == {
        "version": 1, "controller_epoch": 9, "leader": 1, "leader_epoch": 4, "isr": [1, 2]}


def test_controller_shape():
    c = zn.ControllerInfo(2, "tcp://127.0.0.1:9103", "tcp://127.0.0.1:9113", 5)
    obj = json.loads(zn.encode_controller(c))
    assert obj["brokerid"] == 2 and obj["version"] == 1 and obj["pub_endpoint"].endswith("9113")
    assert zn.decode_controller(zn.encode_controller(c)) == c


def test_cluster_id_writes_version_as_string_like_kafka():
    assert json.loads(zn.encode_cluster_id("abc")) == {"version": "1", "id": "abc"}
    assert zn.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"


def test_controller_epoch_is_text():
    assert zn.encode_controller_epoch(12) == b"12"
    assert zn.decode_controller_epoch(b"12") == 12
    for bad in (b"", b"-1", b"x", b"\xff", b"1.5"):
        with pytest.raises(zn.ZnodeDataError):
            zn.decode_controller_epoch(bad)


def test_decoders_tolerate_extra_fields_and_newer_versions():
    data = (b'{"version":3,"controller_epoch":1,"leader":2,"leader_epoch":0,"isr":[2],'
            b'"leader_recovery_state":0,"new":{"x":1}}')
    assert zn.decode_partition_state(data) == zn.PartitionState(2, 0, (2,), 1)
    assert zn.decode_broker(1, b'{"version":5,"host":"h","port":1,"jmx_port":-1}').endpoints == ()


def test_kafka_style_broker_with_numeric_timestamp_decodes():
    b = zn.decode_broker(1, b'{"version":1,"host":"h","port":1,"endpoints":[],"timestamp":42}')
    assert b.timestamp_ms == 42 and b.rack is None


@pytest.mark.parametrize("data", [
    b"", b"\xff\xfe", b"[]", b"null", b"{}", b'{"version":0,"partitions":{}}',
    b'{"version":"x","partitions":{}}', b'{"version":1}', b'{"version":1,"partitions":[]}',
    b'{"version":1,"partitions":{"a":[1]}}', b'{"version":1,"partitions":{"0":["1"]}}',
    b'{"version":1,"partitions":{"-1":[1]}}', b'{"version":true,"partitions":{}}',
])
def test_topic_assignment_garbage_is_typed_error(data):
    with pytest.raises(zn.ZnodeDataError):
        zn.decode_topic_assignment(data)


@pytest.mark.parametrize("data", [
    b'{"version":1,"leader":"1","leader_epoch":0,"isr":[],"controller_epoch":0}',
    b'{"version":1,"leader":1,"leader_epoch":0,"isr":[true],"controller_epoch":0}',
    b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0}',
    b'{"version":1,"leader":true,"leader_epoch":0,"isr":[],"controller_epoch":0}',
])
def test_partition_state_garbage_is_typed_error(data):
    with pytest.raises(zn.ZnodeDataError):
        zn.decode_partition_state(data)


@given(st.builds(zn.BrokerInfo, ids, text, st.integers(0, 65535), st.lists(text, max_size=3).map(tuple),
                 st.none() | text, st.integers(0, 2**62)))
def test_broker_round_trip(info):
    assert zn.decode_broker(info.broker_id, zn.encode_broker(info)) == info


@given(st.dictionaries(st.integers(0, 10_000), int_lists, max_size=8))
def test_assignment_round_trip(parts):
    assert zn.decode_topic_assignment(zn.encode_topic_assignment(parts)) == dict(sorted(parts.items()))


@given(st.builds(zn.PartitionState, st.integers(-1, 1000), ids, int_lists, ids))
def test_partition_state_round_trip(s):
    assert zn.decode_partition_state(zn.encode_partition_state(s)) == s


@given(st.dictionaries(text, st.text(max_size=20), max_size=5))
def test_topic_config_round_trip(cfg):
    assert zn.decode_topic_config(zn.encode_topic_config(cfg)) == cfg


@given(st.lists(st.builds(zn.PartitionReassignment, text, ids, int_lists), max_size=4),
       st.lists(st.builds(zn.TopicPartition, text, ids), max_size=4))
def test_admin_round_trips(reassign, election):
    assert zn.decode_reassign_partitions(zn.encode_reassign_partitions(reassign)) == reassign
    assert zn.decode_preferred_replica_election(
        zn.encode_preferred_replica_election(election)) == election


@given(st.builds(zn.GatewayInfo, ids, text, st.integers(0, 2**62)), text)
def test_gateway_and_cluster_round_trip(gw, cid):
    assert zn.decode_gateway(gw.gateway_id, zn.encode_gateway(gw)) == gw
    assert zn.decode_cluster_id(zn.encode_cluster_id(cid)) == cid


DECODERS = [lambda d: zn.decode_broker(1, d), zn.decode_topic_assignment, zn.decode_partition_state,
            zn.decode_controller, zn.decode_controller_epoch, zn.decode_topic_config,
            zn.decode_reassign_partitions, zn.decode_preferred_replica_election,
            lambda d: zn.decode_gateway(1, d), zn.decode_cluster_id]


@settings(max_examples=200)
@given(st.binary(max_size=64) | st.from_regex(rb'\{"version":1[^}]{0,40}\}', fullmatch=True))
def test_random_bytes_only_decode_or_raise_typed_error(data):
    for decode in DECODERS:
        try:
            decode(data)
        except zn.ZnodeDataError:
            pass
