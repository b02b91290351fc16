"""Splitting client requests per leader and merging the answers back (services.gateway.core.routing)."""
import pytest

from riverbed import errors
from riverbed._proto.v1 import (
    controller_pb2, errors_pb2, fetch_pb2, group_pb2, header_pb2, list_offsets_pb2, produce_pb2,
)

from gateway_helpers import cache_with
from services.gateway.core.group_routing import fit_heartbeat_wait
from services.gateway.core.routing import NodeReply, forward_timeout_ms, merge, split

E = errors_pb2.ErrorCode
A = header_pb2.ApiKey


def produce(entries, acks=1, timeout_ms=1000):
    """entries: [(topic, [partitions])] -> ProduceRequest"""
    req = produce_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms, transactional_id="")
    for name, parts in entries:
        t = req.topics.add(name=name)
        for p in parts:
            t.partitions.add(partition=p)
    return req


def fetch(entries, max_bytes=0, replica_id=-1):
    req = fetch_pb2.FetchRequest(replica_id=replica_id, max_wait_ms=500, min_bytes=1,
                                 max_bytes=max_bytes)
    for name, parts in entries:
        t = req.topics.add(name=name)
        for p, off in parts:
            t.partitions.add(partition=p, fetch_offset=off, partition_max_bytes=1 << 20,
                             current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1)
    return req


def list_offsets(entries, replica_id=-1):
    req = list_offsets_pb2.ListOffsetsRequest(replica_id=replica_id)
    for name, parts in entries:
        t = req.topics.add(name=name)
        for p, ts in parts:
            t.partitions.add(partition=p, timestamp=ts, current_leader_epoch=-1)
    return req


def flat(body):
    return [(t.name, p.partition) for t in body.topics for p in t.partitions]


def sub_for(plan, node_id):
    [sub] = [s for s in plan.sub_requests if s.node_id == node_id]
    return sub


def produce_answer(sub, base=100, code=E.NONE):
    """What a storage node answers to a produce sub-request: base offsets from the payload."""
    resp = produce_pb2.ProduceResponse()
    i = 0
    for t in sub.body.topics:
        rt = resp.topics.add(name=t.name)
        for p in t.partitions:
            rt.partitions.add(partition=p.partition, error_code=code,
                              base_offset=int(sub.payloads[i].decode().split(":")[1]) + base)
            i += 1
    return NodeReply(resp)


# --- split ---------------------------------------------------------------------------------

def test_produce_split_groups_by_leader_and_aligns_payloads():
    cache = cache_with()   # orders: 0->1, 1->2, 2->1; logs: 0->2, 1->none
    req = produce([("orders", [0, 1, 2]), ("logs", [0])])
    payloads = [b"orders:0", b"orders:1", b"orders:2", b"logs:0"]
    plan = split(A.PRODUCE, req, payloads, cache)
    assert [s.node_id for s in plan.sub_requests] == [1, 2]
    n1, n2 = sub_for(plan, 1), sub_for(plan, 2)
    assert flat(n1.body) == [("orders", 0), ("orders", 2)]
    assert flat(n2.body) == [("orders", 1), ("logs", 0)]
    assert n1.endpoint == "tcp://127.0.0.1:9101" and n2.endpoint == "tcp://127.0.0.1:9102"
    # payload objects are the client's own frames (identity, not copies), aligned with partitions
    assert n1.payloads[0] is payloads[0] and n1.payloads[1] is payloads[2]
    assert n2.payloads[0] is payloads[1] and n2.payloads[1] is payloads[3]
    assert (n1.body.acks, n1.body.timeout_ms) == (1, 1000)
    assert plan.expects_response and plan.unknown_topics == () and plan.forwarded_partitions == 4


def test_topic_interleaving_keeps_payload_order_per_leader():
    cache = cache_with()
    # orders-0 (1), logs-0 (2), orders-2 (1): the sub-request for node 1 must not reorder
    req = produce([("orders", [0]), ("logs", [0]), ("orders", [2])])
    payloads = [b"orders:0", b"logs:0", b"orders:2"]
    plan = split(A.PRODUCE, req, payloads, cache)
    n1 = sub_for(plan, 1)
    assert [t.name for t in n1.body.topics] == ["orders"]
    assert flat(n1.body) == [("orders", 0), ("orders", 2)]
    assert list(n1.payloads) == [b"orders:0", b"orders:2"]


def test_errors_per_partition_are_not_forwarded():
    cache = cache_with()
    req = produce([("orders", [0, -1, 7, 0]), ("bad name!", [0]), ("logs", [1]),
                   ("ghost", [0]), ("unknown", [0, 1])])
    payloads = [f"p{i}".encode() for i in range(9)]
    plan = split(A.PRODUCE, req, payloads, cache)
    got = [(s.topic, s.partition, s.node_id, s.error_code) for s in plan.slots]
    assert got == [
        ("orders", 0, 1, E.NONE),
        ("orders", -1, -1, E.INVALID_REQUEST),
        ("orders", 7, -1, E.UNKNOWN_TOPIC_OR_PARTITION),
        ("orders", 0, -1, E.INVALID_REQUEST),            # named twice
        ("bad name!", 0, -1, E.INVALID_TOPIC_EXCEPTION),
        ("logs", 1, -1, E.LEADER_NOT_AVAILABLE),
        ("ghost", 0, -1, E.LEADER_NOT_AVAILABLE),
        ("unknown", 0, -1, E.UNKNOWN_TOPIC_OR_PARTITION),
        ("unknown", 1, -1, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert [flat(s.body) for s in plan.sub_requests] == [[("orders", 0)]]
    assert list(plan.sub_requests[0].payloads) == [b"p0"]
    assert plan.unknown_topics == ("orders", "unknown")   # partition 7 may be new: refresh too


def test_payload_count_must_match_partitions():
    cache = cache_with()
    with pytest.raises(errors.InvalidRequestError):
        split(A.PRODUCE, produce([("orders", [0, 1])]), [b"x"], cache)
    with pytest.raises(errors.InvalidRequestError):
        split(A.PRODUCE, produce([("orders", [0])]), [b"x", b"y"], cache)
    with pytest.raises(errors.InvalidRequestError):
        split(A.FETCH, fetch([("orders", [(0, 0)])]), [b"x"], cache)
    with pytest.raises(errors.InvalidRequestError):
        split(A.LIST_OFFSETS, list_offsets([("orders", [(0, -1)])]), [b"x"], cache)


def test_follower_replica_ids_are_refused():
    cache = cache_with()
    with pytest.raises(errors.InvalidRequestError, match="replica_id"):
        split(A.FETCH, fetch([("orders", [(0, 0)])], replica_id=0), [], cache)
    with pytest.raises(errors.InvalidRequestError, match="replica_id"):
        split(A.LIST_OFFSETS, list_offsets([("orders", [(0, -1)])], replica_id=2), [], cache)


def test_invalid_acks_fail_every_partition_and_forward_nothing():
    plan = split(A.PRODUCE, produce([("orders", [0, 1])], acks=2), [b"a", b"b"], cache_with())
    assert plan.sub_requests == ()
    assert {s.error_code for s in plan.slots} == {E.INVALID_REQUIRED_ACKS}
    merged = merge(plan, {})
    assert [p.error_code for p in merged.body.topics[0].partitions] == [E.INVALID_REQUIRED_ACKS] * 2


def test_acks_zero_expects_no_response():
    plan = split(A.PRODUCE, produce([("orders", [0])], acks=0), [b"a"], cache_with())
    assert not plan.expects_response and len(plan.sub_requests) == 1
    assert plan.sub_requests[0].body.acks == 0


def test_fetch_validation_and_max_bytes_shared_among_leaders():
    cache = cache_with()
    req = fetch([("orders", [(0, 5), (1, -3), (2, 0)]), ("logs", [(0, 0)])], max_bytes=1001)
    plan = split(A.FETCH, req, [], cache)
    assert [(s.partition, s.error_code) for s in plan.slots] == [
        (0, E.NONE), (1, E.OFFSET_OUT_OF_RANGE), (2, E.NONE), (0, E.NONE)]
    assert [s.body.max_bytes for s in plan.sub_requests] == [501, 501]
    n1 = sub_for(plan, 1)
    assert [p.fetch_offset for t in n1.body.topics for p in t.partitions] == [5, 0]
    assert n1.body.max_wait_ms == 500 and n1.body.replica_id == -1 and n1.payloads == ()
    one = split(A.FETCH, fetch([("orders", [(0, 0)])], max_bytes=1001), [], cache)
    assert one.sub_requests[0].body.max_bytes == 1001


def test_list_offsets_validation():
    plan = split(A.LIST_OFFSETS, list_offsets([("orders", [(0, -2), (1, -3), (2, 12345)])]), [],
                 cache_with())
    assert [s.error_code for s in plan.slots] == [E.NONE, E.INVALID_REQUEST, E.NONE]
    assert flat(sub_for(plan, 1).body) == [("orders", 0), ("orders", 2)]


def test_unrouted_api_is_refused():
    with pytest.raises(errors.InvalidRequestError):
        split(A.METADATA, produce([]), [], cache_with())


# --- merge ---------------------------------------------------------------------------------

def test_produce_merge_restores_request_order_with_errors_in_place():
    cache = cache_with()
    req = produce([("orders", [2, 1]), ("unknown", [0]), ("orders", [0])])
    payloads = [b"orders:2", b"orders:1", b"unknown:0", b"orders:0"]
    plan = split(A.PRODUCE, req, payloads, cache)
    replies = {s.node_id: produce_answer(s) for s in plan.sub_requests}
    merged = merge(plan, replies)
    got = [(t.name, p.partition, p.error_code, p.base_offset)
           for t in merged.body.topics for p in t.partitions]
    assert got == [("orders", 2, E.NONE, 102), ("orders", 1, E.NONE, 101),
                   ("unknown", 0, E.UNKNOWN_TOPIC_OR_PARTITION, -1), ("orders", 0, E.NONE, 100)]
    assert merged.payloads == [] and not merged.refresh_metadata


def test_a_silent_leader_times_out_only_its_partitions():
    cache = cache_with()
    plan = split(A.PRODUCE, produce([("orders", [0, 1, 2])]), [b"o:0", b"o:1", b"o:2"], cache)
    merged = merge(plan, {2: produce_answer(sub_for(plan, 2))})          # node 1 never answered
    codes = [(p.partition, p.error_code) for p in merged.body.topics[0].partitions]
    assert codes == [(0, E.REQUEST_TIMED_OUT), (1, E.NONE), (2, E.REQUEST_TIMED_OUT)]
    explicit = merge(plan, {1: NodeReply.failed(E.REQUEST_TIMED_OUT, "slow"),
                            2: produce_answer(sub_for(plan, 2))})
    assert [(p.partition, p.error_code) for p in explicit.body.topics[0].partitions] == codes
    assert explicit.body.topics[0].partitions[0].error_message == "slow"


def test_not_leader_from_a_node_asks_for_a_refresh():
    cache = cache_with()
    plan = split(A.PRODUCE, produce([("orders", [0, 1])]), [b"o:0", b"o:1"], cache)
    replies = {1: produce_answer(sub_for(plan, 1), code=E.NOT_LEADER_FOR_PARTITION),
               2: produce_answer(sub_for(plan, 2))}
    merged = merge(plan, replies)
    assert [p.error_code for p in merged.body.topics[0].partitions] == [
        E.NOT_LEADER_FOR_PARTITION, E.NONE]
    assert merged.refresh_metadata
    envelope = merge(plan, {1: NodeReply.failed(E.NOT_LEADER_FOR_PARTITION, "x"),
                            2: produce_answer(sub_for(plan, 2))})
    assert envelope.refresh_metadata


def test_a_node_answer_missing_a_partition_is_an_error_for_it_only():
    cache = cache_with()
    plan = split(A.PRODUCE, produce([("orders", [0, 2])]), [b"o:0", b"o:2"], cache)
    answer = produce_answer(sub_for(plan, 1))
    del answer.body.topics[0].partitions[1]
    merged = merge(plan, {1: answer})
    assert [p.error_code for p in merged.body.topics[0].partitions] == [
        E.NONE, E.UNKNOWN_SERVER_ERROR]


def fetch_answer(sub, reverse=False):
    """Answer each partition with payload b"<topic>-<p>@<offset>"; optionally in reverse order."""
    entries = [(t.name, p) for t in sub.body.topics for p in t.partitions]
    if reverse:
        entries.reverse()
    resp = fetch_pb2.FetchResponse(throttle_time_ms=3)
    payloads = []
    for name, p in entries:
        resp.topics.add(name=name).partitions.add(partition=p.partition, high_watermark=50)
        payloads.append(f"{name}-{p.partition}@{p.fetch_offset}".encode())
    return NodeReply(resp, payloads)


@pytest.mark.parametrize("reverse", [False, True])
def test_fetch_merge_aligns_payload_frames_with_partitions(reverse):
    cache = cache_with()
    req = fetch([("logs", [(0, 7)]), ("orders", [(1, 3), (0, 9), (2, -1)]), ("unknown", [(0, 0)])])
    plan = split(A.FETCH, req, [], cache)
    merged = merge(plan, {s.node_id: fetch_answer(s, reverse) for s in plan.sub_requests})
    parts = [(t.name, p.partition, p.error_code) for t in merged.body.topics for p in t.partitions]
    assert parts == [("logs", 0, E.NONE), ("orders", 1, E.NONE), ("orders", 0, E.NONE),
                     ("orders", 2, E.OFFSET_OUT_OF_RANGE), ("unknown", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert merged.payloads == [b"logs-0@7", b"orders-1@3", b"orders-0@9", b"", b""]
    assert merged.body.throttle_time_ms == 3
    errored = merged.body.topics[1].partitions[2]
    assert (errored.high_watermark, errored.log_end_offset, errored.leader_epoch) == (-1, -1, -1)


def test_fetch_answer_with_wrong_payload_count_fails_that_leader_only():
    cache = cache_with()
    plan = split(A.FETCH, fetch([("orders", [(0, 0), (1, 0)])]), [], cache)
    bad = fetch_answer(sub_for(plan, 1))
    bad = NodeReply(bad.body, [])                      # frames missing
    merged = merge(plan, {1: bad, 2: fetch_answer(sub_for(plan, 2))})
    assert [p.error_code for p in merged.body.topics[0].partitions] == [
        E.UNKNOWN_SERVER_ERROR, E.NONE]
    assert merged.payloads == [b"", b"orders-1@0"]


def test_list_offsets_round_trip():
    cache = cache_with()
    plan = split(A.LIST_OFFSETS, list_offsets([("orders", [(1, -1), (0, -2)])]), [], cache)
    replies = {}
    for s in plan.sub_requests:
        resp = list_offsets_pb2.ListOffsetsResponse()
        for t in s.body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                rt.partitions.add(partition=p.partition, offset=10 * p.partition + 1, timestamp=-1)
        replies[s.node_id] = NodeReply(resp)
    merged = merge(plan, replies)
    assert [(p.partition, p.offset) for p in merged.body.topics[0].partitions] == [(1, 11), (0, 1)]
    assert merged.payloads == []


def test_a_reply_of_the_wrong_type_is_an_error():
    cache = cache_with()
    plan = split(A.LIST_OFFSETS, list_offsets([("orders", [(0, -1)])]), [], cache)
    merged = merge(plan, {1: NodeReply(produce_pb2.ProduceResponse())})
    assert merged.body.topics[0].partitions[0].error_code == E.UNKNOWN_SERVER_ERROR


def test_empty_request_gives_empty_response():
    plan = split(A.FETCH, fetch([("orders", [])]), [], cache_with())
    merged = merge(plan, {})
    assert [t.name for t in merged.body.topics] == ["orders"] and not merged.body.topics[0].partitions


def test_forward_timeout():
    f = fetch([])
    assert forward_timeout_ms(A.FETCH, f, 0, 30000) == 30500
    assert forward_timeout_ms(A.FETCH, f, 2000, 30000) == 1600
    assert forward_timeout_ms(A.PRODUCE, produce([], acks=-1, timeout_ms=700), 0, 1000) == 1700
    assert forward_timeout_ms(A.PRODUCE, produce([], acks=1, timeout_ms=700), 0, 1000) == 1000
    assert forward_timeout_ms(A.LIST_OFFSETS, list_offsets([]), 1, 1000) == 1
    create = controller_pb2.CreateTopicsRequest(timeout_ms=250)
    assert forward_timeout_ms(A.CREATE_TOPICS, create, 0, 1000) == 1250
    assert forward_timeout_ms(A.DESCRIBE_CONFIGS, controller_pb2.DescribeConfigsRequest(), 0, 1000) == 1000


def test_a_long_polled_heartbeat_is_waited_for_and_held_no_longer_than_the_gateway_waits():
    hb = group_pb2.HeartbeatRequest(group_id="g", generation_id=3, member_id="m", max_wait_ms=3000)
    assert forward_timeout_ms(A.HEARTBEAT, hb, 0, 30000) == 33000
    # the SDK's header timeout: max_wait_ms + min(request.timeout.ms, session.timeout.ms / 2)
    timeout = forward_timeout_ms(A.HEARTBEAT, hb, 3000 + 5000, 30000)
    assert timeout == 6400 and fit_heartbeat_wait(hb, timeout) is hb      # fits: as sent
    short = fit_heartbeat_wait(hb, forward_timeout_ms(A.HEARTBEAT, hb, 4000, 30000))
    assert short.max_wait_ms == 1600 and hb.max_wait_ms == 3000             # a copy, capped
    assert (short.group_id, short.generation_id, short.member_id) == ("g", 3, "m")
    plain = group_pb2.HeartbeatRequest(group_id="g", generation_id=3, member_id="m")
    assert fit_heartbeat_wait(plain, 1) is plain
