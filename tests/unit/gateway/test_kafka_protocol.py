"""The Kafka listener's pure parts: framing and the API table (protocol.py), the gateways as
brokers (brokers.py), the listener configs (listeners.py) and the translation core
(translate.py), for every API and version served; random and truncated bytes into the decoder.
"""
from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as H1
from kio.schema.request_header.v2.header import RequestHeader as H2
from kio.serial import entity_reader, entity_writer

from riverbed._proto.v1 import fetch_pb2, group_pb2, metadata_pb2, produce_pb2
from riverbed.wire.apis import APIS
from services.common.config import ConfigError
from services.gateway.config import GatewayConfig
from services.gateway.kafka import brokers as bk
from services.gateway.kafka import fast
from services.gateway.kafka import protocol as kp
from services.gateway.kafka import translate as tr
from services.gateway.kafka.brokers import KafkaBroker
from services.gateway.kafka.listeners import ListenerError, resolve

VIEW = tr.ClusterView(brokers=(KafkaBroker(1, "127.0.0.1", 9092), KafkaBroker(2, "127.0.0.1", 9093),
                               KafkaBroker(3, "127.0.0.1", 9094)), gateway_id=1,
                      client_host="127.0.0.1")
BATCH = bytes(range(61)) + b"records"        # opaque: the core never looks inside


# -- building any request entity ----------------------------------------------------------------

def sample(tp: typing.Any, name: str = "") -> typing.Any:
    """A value of a kio field type: one element in every array, so every nested field is used."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return sample(args[0], name)
    if origin is tuple:
        return (sample(typing.get_args(tp)[0], name),)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp)
    if isinstance(tp, type) and issubclass(tp, ErrorCode):
        return ErrorCode.none
    if tp is bool:
        return False
    if isinstance(tp, type) and issubclass(tp, datetime.timedelta):
        return datetime.timedelta(milliseconds=1000)
    if tp is uuid.UUID:
        return uuid.UUID(int=0)
    if isinstance(tp, type) and issubclass(tp, bytes):
        return BATCH if name == "records" else b""
    if isinstance(tp, type) and issubclass(tp, str):
        return "orders" if name in ("name", "topic") else "x"
    if isinstance(tp, type) and issubclass(tp, int):
        return {"acks": -1, "replica_id": -1, "session_epoch": -1, "timestamp": -1,
                "key_type": 0, "endpoint_type": 1, "resource_type": 2,
                "producer_id": -1, "producer_epoch": -1, "num_partitions": 1,
                "replication_factor": 1, "count": 2}.get(name, 0)
    raise AssertionError(f"no sample for {tp!r} ({name})")


def build(cls: type) -> typing.Any:
    hints = typing.get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        if name_is_assignment(cls, f.name):
            kw[f.name] = ()
        elif f.name == "transactional_id":
            kw[f.name] = None
        else:
            kw[f.name] = sample(hints[f.name], f.name)
    return cls(**kw)


def name_is_assignment(cls: type, field: str) -> bool:
    return field == "assignments" and cls.__name__ in ("CreatableTopic", "CreatePartitionsTopic")


def encode_request(body: typing.Any, correlation_id: int = 7) -> bytes:
    buf = io.BytesIO()
    header_cls = body.__header_schema__
    entity_writer(header_cls)(buf, header_cls(request_api_key=body.__api_key__,
                                              request_api_version=body.__version__,
                                              correlation_id=correlation_id, client_id="test"))
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, typing.Any]:
    size = struct.unpack_from(">i", frame)[0]
    assert size == len(frame) - 4
    cls = load_response_schema(api_key, version)
    corr = struct.unpack_from(">i", frame, 4)[0]
    offset = 8 + (1 if cls.__header_schema__.__flexible__ else 0)
    body, used = entity_reader(cls)(frame, offset)
    assert offset + used == len(frame)
    return corr, body


def riverbed_answer(call: tr.Call) -> tr.Outcome:
    """A well-formed Riverbed answer to `call`, with one entry per partition it asked for."""
    spec = APIS[call.api]
    resp = spec.response_type()
    body = call.body
    if isinstance(body, (produce_pb2.ProduceRequest, fetch_pb2.FetchRequest)) or \
            "topics" in resp.DESCRIPTOR.fields_by_name and hasattr(body, "topics") and \
            body.DESCRIPTOR.fields_by_name["topics"].message_type is not None and \
            "partitions" in body.DESCRIPTOR.fields_by_name["topics"].message_type.fields_by_name:
        frames = []
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                rp = rt.partitions.add()
                pfield = "partition" if "partition" in rp.DESCRIPTOR.fields_by_name else "partition_index"
                setattr(rp, pfield, getattr(p, pfield, getattr(p, "partition", 0)))
                frames.append(b"fetched-batch")
        return tr.Outcome(body=resp, payloads=frames if call.api == spec.key and
                          isinstance(body, fetch_pb2.FetchRequest) else ())
    if isinstance(body, group_pb2.FindCoordinatorRequest):
        resp.shard = 4
    if isinstance(body, group_pb2.DescribeGroupsRequest):
        for g in body.groups:
            resp.groups.add(group_id=g, group_state="Stable")
    if isinstance(body, metadata_pb2.MetadataRequest):
        t = resp.topics.add(name="orders")
        for p in range(4):
            t.partitions.add(partition=p, leader=1, leader_epoch=3, replicas=[1, 2, 3],
                             isr=[1, 2, 3])
    return tr.Outcome(body=resp)


def as_kio(req: kp.KafkaRequest, response: typing.Any) -> typing.Any:
    """The response as kio reads it from the wire (Produce and Fetch answers are bytes)."""
    return decode_response(req.api_key, req.api_version, kp.encode_response(1, response))[1]


def run(step: tr.Step, answer) -> typing.Any:
    calls = []
    while isinstance(step, tr.Plan):
        calls.extend(step.calls)
        step = step.finish([answer(c) for c in step.calls])
    return step.response, calls


SERVED_VERSIONS = [(k, v) for k, (lo, hi) in sorted(kp.SERVED.items()) for v in range(lo, hi + 1)]


@pytest.mark.parametrize("api_key,version", SERVED_VERSIONS,
                         ids=[f"{kp.API_NAMES[k]}-v{v}" for k, v in SERVED_VERSIONS])
def test_every_served_version_decodes_translates_and_answers(api_key, version):
    body = build(load_request_schema(api_key, version))
    frame = encode_request(body)
    req = kp.decode_request(frame)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == \
        (api_key, version, 7, "test")
    for answer in (riverbed_answer,
                   lambda c: tr.Outcome(error_code=ErrorCode.not_coordinator.value,
                                        error_message="moved")):
        response, calls = run(tr.plan(req, VIEW), answer)
        for c in calls:       # every call is a request the SDK path serves, well formed
            assert c.api in APIS and isinstance(c.body, APIS[c.api].request_type)
        if response is None:
            assert api_key == kp.PRODUCE and body.acks == 0
            continue
        corr, decoded = decode_response(api_key, version, kp.encode_response(7, response))
        # (Produce and Fetch answers are encoded by fast.py: kio reads them whole above)
        assert corr == 7 and (type(decoded) is type(response)
                              or isinstance(response, fast.EncodedResponse))


def test_api_versions_lists_produce_from_v0_and_answers_unknown_versions_with_v0():
    req = kp.decode_request(encode_request(build(load_request_schema(kp.API_VERSIONS, 3))))
    response, _ = run(tr.plan(req, VIEW), riverbed_answer)
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys[kp.PRODUCE] == (0, kp.SERVED[kp.PRODUCE][1])       # KAFKA-18659
    assert keys[kp.FETCH] == kp.SERVED[kp.FETCH]
    assert keys[kp.SASL_HANDSHAKE] == (0, 1) and keys[kp.SASL_AUTHENTICATE] == (0, 2)
    frame = struct.pack(">hhih", kp.API_VERSIONS, 77, 9, 4) + b"test" + b"\xff" * 5
    req = kp.decode_request(frame)
    response, _ = run(tr.plan(req, VIEW), riverbed_answer)
    corr, decoded = decode_response(kp.API_VERSIONS, 0, kp.encode_response(9, response))
    assert decoded.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.max_version) for k in decoded.api_keys] == [(18, 4)]


@pytest.mark.parametrize("api_key,version", [(kp.PRODUCE, 2), (kp.FETCH, 3), (kp.FETCH, 13),
                                             (17, 2), (36, 3), (999, 0), (kp.METADATA, -1)])
def test_apis_and_versions_not_served_are_refused(api_key, version):
    frame = struct.pack(">hhih", api_key, version, 5, -1) + b"\0" * 16
    with pytest.raises(kp.BadRequest) as e:
        kp.decode_request(frame)
    assert e.value.correlation_id == 5


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_are_refused(data):
    try:
        req = kp.decode_request(data)
    except kp.BadRequest:
        return
    assert kp.is_served(req.api_key, req.api_version) or req.api_key == kp.API_VERSIONS


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SERVED_VERSIONS), st.data())
def test_truncated_and_corrupted_requests_decode_or_are_refused(key_version, data):
    frame = bytearray(encode_request(build(load_request_schema(*key_version))))
    cut = data.draw(st.integers(0, len(frame)))
    frame = frame[:cut]
    if frame and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    try:
        req = kp.decode_request(bytes(frame))
    except kp.BadRequest:
        return
    run(tr.plan(req, VIEW), riverbed_answer)       # whatever decodes translates


# -- produce and fetch: record batches pass as bytes ---------------------------------------------

def produce_request(acks: int, records: list[bytes | None], transactional_id=None):
    from kio.schema.produce.v9 import request as m
    return m.ProduceRequest(transactional_id=transactional_id, acks=acks,
                            timeout=datetime.timedelta(seconds=30), topic_data=(
                                m.TopicProduceData(name="orders", partition_data=tuple(
                                    m.PartitionProduceData(index=i, records=r)
                                    for i, r in enumerate(records))),))


def test_produce_forwards_batches_untouched_and_answers_bad_partitions_itself():
    req = kp.decode_request(encode_request(produce_request(-1, [BATCH, b"short", None, BATCH])))
    step = tr.plan(req, VIEW)
    (call,) = step.calls
    assert call.payloads == (BATCH, BATCH)
    assert [p.partition for t in call.body.topics for p in t.partitions] == [0, 3]
    answer = produce_pb2.ProduceResponse(throttle_time_ms=250)
    t = answer.topics.add(name="orders")
    t.partitions.add(partition=0, base_offset=10, log_append_time_ms=-1, log_start_offset=0)
    t.partitions.add(partition=3, error_code=ErrorCode.not_leader_or_follower.value,
                     base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
    resp = as_kio(req, step.finish([tr.Outcome(body=answer)]).response)
    parts = resp.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [
        (0, ErrorCode.none, 10), (1, ErrorCode.corrupt_message, -1),
        (2, ErrorCode.corrupt_message, -1), (3, ErrorCode.not_leader_or_follower, -1)]
    assert resp.throttle_time == datetime.timedelta(milliseconds=250)


def test_produce_acks_0_has_no_answer_and_transactions_are_refused_locally():
    req = kp.decode_request(encode_request(produce_request(0, [BATCH])))
    response, calls = run(tr.plan(req, VIEW), lambda c: tr.Outcome())
    assert response is None and len(calls) == 1
    req = kp.decode_request(encode_request(produce_request(-1, [BATCH], transactional_id="tx")))
    response, calls = run(tr.plan(req, VIEW), riverbed_answer)
    assert calls == [] and as_kio(req, response).responses[0].partition_responses[0].error_code \
        == ErrorCode.invalid_request


def fetch_request(session_id=0, session_epoch=-1):
    from kio.schema.fetch.v12 import request as m
    return m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(milliseconds=500),
                          min_bytes=1, max_bytes=1 << 20, isolation_level=1,
                          session_id=session_id, session_epoch=session_epoch, topics=(
                              m.FetchTopic(topic="orders", partitions=(
                                  m.FetchPartition(partition=0, current_leader_epoch=3,
                                                   fetch_offset=5, partition_max_bytes=1000),
                                  m.FetchPartition(partition=1, current_leader_epoch=3,
                                                   fetch_offset=0, partition_max_bytes=1000))),),
                          forgotten_topics_data=(), rack_id="")


def test_fetch_is_sessionless_and_passes_segment_bytes_as_records():
    req = kp.decode_request(encode_request(fetch_request(session_epoch=0)))   # asks for one
    step = tr.plan(req, VIEW)
    (call,) = step.calls
    assert (call.body.max_wait_ms, call.body.min_bytes, call.body.session_epoch) == (500, 1, -1)
    assert [(p.partition, p.fetch_offset, p.current_leader_epoch)
            for p in call.body.topics[0].partitions] == [(0, 5, 3), (1, 0, 3)]
    answer = fetch_pb2.FetchResponse()
    t = answer.topics.add(name="orders")
    t.partitions.add(partition=0, high_watermark=9, last_stable_offset=-1, log_start_offset=0)
    t.partitions.add(partition=1, error_code=ErrorCode.fenced_leader_epoch.value,
                     high_watermark=-1, last_stable_offset=-1, log_start_offset=-1)
    resp = step.finish([tr.Outcome(body=answer, payloads=[memoryview(b"segment-bytes"), b""])])
    resp = as_kio(req, resp.response)
    assert resp.session_id == 0 and resp.error_code == ErrorCode.none     # no session made
    p0, p1 = resp.responses[0].partitions
    assert (p0.records, p0.high_watermark, p0.last_stable_offset) == (b"segment-bytes", 9, 9)
    assert p1.error_code == ErrorCode.fenced_leader_epoch


def test_incremental_fetch_in_an_unknown_session_is_refused_without_forwarding():
    req = kp.decode_request(encode_request(fetch_request(session_id=12, session_epoch=3)))
    response, calls = run(tr.plan(req, VIEW), riverbed_answer)
    assert calls == [] and response.error_code == ErrorCode.fetch_session_id_not_found
    req = kp.decode_request(encode_request(fetch_request(session_id=0, session_epoch=3)))
    response, _ = run(tr.plan(req, VIEW), riverbed_answer)
    assert response.error_code == ErrorCode.invalid_fetch_session_epoch


# -- metadata: the gateways are the brokers -------------------------------------------------------

def test_metadata_names_gateways_as_leaders_spread_evenly():
    from kio.schema.metadata.v12 import request as m
    req = kp.decode_request(encode_request(m.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)))
    response, calls = run(tr.plan(req, VIEW), riverbed_answer)
    assert calls[0].body.topics == []                     # all topics
    assert [b.node_id for b in response.brokers] == [1, 2, 3] and response.controller_id == 1
    parts = response.topics[0].partitions
    leaders = [p.leader_id for p in parts]
    assert sorted(leaders[:3]) == [1, 2, 3]                 # consecutive partitions: round
    for p in parts:
        assert p.replica_nodes[0] == p.leader_id and len(set(p.replica_nodes)) == 3
        assert p.leader_epoch == 3                          # the storage leader's epoch
    m1 = load_request_schema(kp.METADATA, 1)
    req = kp.decode_request(encode_request(m1(topics=())))   # v1+: empty = no topics
    response, calls = run(tr.plan(req, VIEW), riverbed_answer)
    assert calls[0].api == tr.R.DESCRIBE_CLUSTER and response.topics == ()


def test_encoded_metadata_is_reused_while_what_it_is_made_of_is_the_same():
    cache = tr.EncodedCache(max_entries=2)
    view = dataclasses.replace(VIEW, encoded=cache)
    m12 = load_request_schema(kp.METADATA, 12)
    req = kp.decode_request(encode_request(m12(topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False)))
    first, _ = run(tr.plan(req, view), riverbed_answer)
    again, _ = run(tr.plan(req, view), riverbed_answer)
    assert again is first and (cache.hits, cache.misses) == (1, 1)
    assert as_kio(req, first) == run(tr.plan(req, VIEW), riverbed_answer)[0]   # what kio writes

    def moved(call):                                # a leader moved: a new answer is encoded
        o = riverbed_answer(call)
        o.body.topics[0].partitions[0].leader_epoch = 4
        return o
    third, _ = run(tr.plan(req, view), moved)
    assert third is not first and as_kio(req, third).topics[0].partitions[0].leader_epoch == 4
    other = dataclasses.replace(view, brokers=VIEW.brokers[:2])   # a gateway left: new answer
    assert run(tr.plan(req, other), riverbed_answer)[0] is not first
    assert len(cache._entries) == 2                 # bounded: least recently used evicted


def test_placement_is_even_stable_and_the_same_everywhere():
    ids = [1, 2, 3, 5]
    for topic in ("orders", "clicks", "a"):
        leaders = [bk.placement(topic, p, ids, 3)[0] for p in range(40)]
        assert sorted(leaders.count(i) for i in ids) == [10, 10, 10, 10]
        assert leaders == [bk.placement(topic, p, list(ids), 3)[0] for p in range(40)]
    assert bk.placement("orders", 0, [], 3) == (-1, ())
    assert bk.placement("orders", 0, [7], 3) == (7, (7,))
    assert bk.coordinator(13, [1, 2, 3]) == 2 and bk.controller([4, 2, 9]) == 2


def test_list_groups_at_each_broker_answers_the_groups_it_coordinates():
    """Kafka's ListGroups lists the groups the broker coordinates, and clients (kafka-python's
    list_groups, librdkafka's list_consumer_groups) ask every broker and add up the answers:
    each group is listed by the one gateway FindCoordinator names for it."""
    from riverbed.coordinator.offsets_topic import partition_for
    listed = group_pb2.ListGroupsResponse()
    names = [f"group-{i}" for i in range(40)]
    for g in names:
        listed.groups.add(group_id=g, protocol_type="consumer", group_state="Empty")
    lg = load_request_schema(kp.LIST_GROUPS, 4)
    req = kp.decode_request(encode_request(lg(states_filter=())))

    def at(gateway_id: int, offsets_partitions: int) -> list[str]:
        view = dataclasses.replace(VIEW, gateway_id=gateway_id,
                                   offsets_partitions=offsets_partitions)
        response, calls = run(tr.plan(req, view), lambda call: tr.Outcome(body=listed))
        assert [c.api for c in calls] == [tr.R.LIST_GROUPS]
        return [g.group_id for g in response.groups]

    by_gateway = {gw: at(gw, 50) for gw in VIEW.broker_ids}
    assert sorted(sum(by_gateway.values(), [])) == sorted(names)            # each once
    assert all(len(gs) >= 5 for gs in by_gateway.values())                  # spread
    for gw, gs in by_gateway.items():    # the coordinator FindCoordinator names (shard % n)
        assert all(bk.coordinator(partition_for(g, 50), VIEW.broker_ids) == gw for g in gs)
    # __consumer_offsets not in this gateway's metadata yet: the controller broker lists them
    assert at(1, 0) == names and at(2, 0) == at(3, 0) == []
    assert bk.lists_group(None, [4, 2, 9], 2) and not bk.lists_group(None, [4, 2, 9], 4)


def test_subscriptions_and_assignments_survive_the_consumer_protocol():
    sub = group_pb2.ConsumerSubscription(topics=["a", "b"], user_data=b"u")
    sub.owned_partitions.add(topic="a", partitions=[0, 2])
    back = tr.decode_subscription(tr.encode_subscription(sub))
    assert back == sub
    plain = group_pb2.ConsumerSubscription(topics=["a"])
    assert tr.encode_subscription(plain)[:2] == b"\x00\x00"
    assert tr.decode_subscription(tr.encode_subscription(plain)) == plain
    assert tr.decode_subscription(b"\x00") is None and tr.decode_subscription(b"\x00\x00\xff") is None
    a = group_pb2.ConsumerAssignment()
    a.partitions.add(topic="a", partitions=[1])
    from kio.schema.consumer_protocol_assignment.v0 import data as m
    decoded, _ = entity_reader(m.ConsumerProtocolAssignment)(tr.encode_assignment(a), 2)
    assert [(tp.topic, tp.partitions) for tp in decoded.assigned_partitions] == [("a", (1,))]


# -- configs ------------------------------------------------------------------------------------

def test_listener_configs_are_kafkas():
    bind, adv = resolve("PLAINTEXT://:9092", "", "PLAINTEXT:PLAINTEXT", "gw1.example")
    assert [str(li) for li in bind] == ["PLAINTEXT://:9092"]
    assert [str(li) for li in adv] == ["PLAINTEXT://gw1.example:9092"]
    bind, adv = resolve("INTERNAL://127.0.0.1:0", "INTERNAL://lb.example:19092",
                        "INTERNAL:PLAINTEXT", "h")
    assert bind[0].security_protocol == "PLAINTEXT" and str(adv[0]) == "INTERNAL://lb.example:19092"
    for listeners, advertised, pmap in (
            ("PLAINTEXT://127.0.0.1", "", "PLAINTEXT:PLAINTEXT"),           # no port
            ("FOO://:9093", "", "PLAINTEXT:PLAINTEXT"),                     # unmapped name
            ("PLAINTEXT://:1,PLAINTEXT://:2", "", "PLAINTEXT:PLAINTEXT"),   # named twice
            ("PLAINTEXT://:1", "OTHER://h:2", "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"),
            ("PLAINTEXT://:1", "", "PLAINTEXT:NOPE")):
        with pytest.raises(ListenerError):
            resolve(listeners, advertised, pmap, "h")
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        GatewayConfig(gateway_id=1, listeners="SSL://:9093")
    with pytest.raises(ConfigError, match="ssl.truststore.location"):
        GatewayConfig(gateway_id=1, listeners="SSL://:9093", ssl_keystore_location="k.pem",
                      ssl_client_auth="required")
    with pytest.raises(ConfigError, match="PEM"):
        GatewayConfig(gateway_id=1, listeners="SASL_SSL://:9093", ssl_keystore_location="k.jks",
                      ssl_keystore_type="JKS")
    with pytest.raises(ConfigError, match="GSSAPI"):
        GatewayConfig(gateway_id=1, listeners="SASL_PLAINTEXT://:9093",
                      sasl_enabled_mechanisms="GSSAPI")
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        GatewayConfig(gateway_id=1, ssl_client_auth="maybe")
    cfg = GatewayConfig(gateway_id=1, listeners="SASL_SSL://:9093,SSL://:9094",
                        ssl_keystore_location="k.pem", ssl_truststore_location="ca.pem",
                        ssl_client_auth="required")
    assert [li.security_protocol for li in cfg.kafka_listeners[0]] == ["SASL_SSL", "SSL"]
    assert cfg.sasl_mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    with pytest.raises(ConfigError, match="connections.max.idle.ms"):
        GatewayConfig(gateway_id=1, connections_max_idle_ms=0)
    assert GatewayConfig(gateway_id=1).kafka_listeners == ((), ())


def test_a_null_where_the_schema_allows_none_is_a_bad_request():
    """kio reads a compact array of length -1 (a null) into None even where the schema says the
    field is not nullable; such a request is malformed (Kafka refuses it) and never reaches a
    handler. Found by the truncation fuzz above (DeleteAcls v2 with null `filters`)."""
    import struct
    header = struct.pack(">hhih", kp.DELETE_ACLS, 2, 7, 4) + b"test" + b"\x00"   # v2: tags
    with pytest.raises(kp.BadRequest, match="filters is null"):
        kp.decode_request(header + b"\x00" + b"\x00")          # filters: null; no tags
    ok = kp.decode_request(header + b"\x01" + b"\x00")         # filters: empty
    assert ok.body.filters == ()
