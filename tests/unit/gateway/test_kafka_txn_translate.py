"""The Kafka listener's translation of transactions (services/gateway/kafka/translate.py): each
Kafka request becomes its Riverbed twin (transaction.proto, Kafka's number + 100) with Kafka's
fields, and the answers come back with Kafka's codes; the version-dependent ones (PRODUCER_FENCED
for clients that predate it) as Kafka's brokers answer."""
from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from riverbed._proto.v1 import (
    fetch_pb2, group_pb2, list_offsets_pb2, offset_pb2, producer_id_pb2, transaction_pb2 as tx,
)
from services.gateway.kafka import protocol as kp
from services.gateway.kafka import translate as tr
from tests.unit.gateway.test_kafka_admin_translate import drive, req_of
from tests.unit.gateway.test_kafka_protocol import VIEW, as_kio, fetch_request, encode_request

FENCED = ErrorCode.producer_fenced.value
MINUTE = datetime.timedelta(minutes=1)


def one(body):
    return lambda call: tr.Outcome(body=body)


def test_init_producer_id_with_a_transactional_id_goes_to_its_coordinator():
    req = req_of(kp.INIT_PRODUCER_ID, 4, transactional_id="app-1", transaction_timeout=MINUTE,
                 producer_id=17, producer_epoch=3)
    resp, (call,) = drive(tr.plan(req, VIEW), {tr.R.INIT_PRODUCER_ID: one(
        producer_id_pb2.InitProducerIdResponse(producer_id=17, producer_epoch=4))})
    assert (call.api_version, call.body.transactional_id, call.body.transaction_timeout_ms,
            call.body.producer_id, call.body.producer_epoch) == (1, "app-1", 60000, 17, 3)
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (ErrorCode.none, 17, 4)
    # an idempotent producer's (no transactional id) stays INIT_PRODUCER_ID v0 at the controller
    req = req_of(kp.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout=MINUTE,
                 producer_id=-1, producer_epoch=-1)
    _, (call,) = drive(tr.plan(req, VIEW), {tr.R.INIT_PRODUCER_ID: one(
        producer_id_pb2.InitProducerIdResponse(producer_id=5))})
    assert (call.api_version, call.body.transactional_id) == (0, "")


def test_producer_fenced_reaches_older_clients_as_invalid_producer_epoch():
    fenced = one(producer_id_pb2.InitProducerIdResponse(error_code=FENCED, producer_id=-1,
                                                        producer_epoch=-1))
    for version, code in ((3, ErrorCode.invalid_producer_epoch), (4, ErrorCode.producer_fenced)):
        req = req_of(kp.INIT_PRODUCER_ID, version, transactional_id="a",
                     transaction_timeout=MINUTE, producer_id=1, producer_epoch=0)
        resp, _ = drive(tr.plan(req, VIEW), {tr.R.INIT_PRODUCER_ID: fenced})
        assert resp.error_code == code
    for version, code in ((1, ErrorCode.invalid_producer_epoch), (2, ErrorCode.producer_fenced)):
        req = req_of(kp.END_TXN, version, transactional_id="a", producer_id=1, producer_epoch=0,
                     committed=True)
        resp, _ = drive(tr.plan(req, VIEW), {tr.R.END_TXN: one(tx.EndTxnResponse(
            error_code=FENCED))})
        assert resp.error_code == code
        req = req_of(kp.ADD_OFFSETS_TO_TXN, version, transactional_id="a", producer_id=1,
                     producer_epoch=0, group_id="g")
        resp, _ = drive(tr.plan(req, VIEW), {tr.R.ADD_OFFSETS_TO_TXN: one(
            tx.AddOffsetsToTxnResponse(error_code=FENCED))})
        assert resp.error_code == code


def test_find_coordinator_for_a_transactional_id_names_the_gateway_of_its_shard():
    from kio.schema.find_coordinator.v4 import request as m
    req = kp.decode_request(encode_request(m.FindCoordinatorRequest(
        key_type=1, coordinator_keys=("app-1", "app-2"))))
    shards = {"app-1": 4, "app-2": 5}
    resp, calls = drive(tr.plan(req, VIEW), {tr.R.FIND_COORDINATOR: lambda c: tr.Outcome(
        body=group_pb2.FindCoordinatorResponse(shard=shards[c.body.key]))})
    assert [(c.body.key, c.body.key_type, c.api_version) for c in calls] == [
        ("app-1", group_pb2.TRANSACTION, 1), ("app-2", group_pb2.TRANSACTION, 1)]
    ids = VIEW.broker_ids
    assert [(c.key, c.node_id) for c in resp.coordinators] == [
        ("app-1", ids[4 % len(ids)]), ("app-2", ids[5 % len(ids)])]
    # Kafka 4's share-group key type (2) is not a coordinator here
    req = req_of(kp.FIND_COORDINATOR, 6, key_type=2, coordinator_keys=("g:t:0",))
    resp, calls = drive(tr.plan(req, VIEW), {})
    assert calls == [] and resp.coordinators[0].error_code == ErrorCode.invalid_request


def test_add_partitions_to_txn_answers_each_partition_as_the_coordinator_did():
    from kio.schema.add_partitions_to_txn.v3 import request as m
    req = kp.decode_request(encode_request(m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="app-1", v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=2, v3_and_below_topics=(
            m.AddPartitionsToTxnTopic(name="orders", partitions=(0, 2)),
            m.AddPartitionsToTxnTopic(name="audit", partitions=(1,))))))
    answer = tx.AddPartitionsToTxnResponse(throttle_time_ms=30)
    t = answer.results.add(name="orders")
    t.results.add(partition_index=0)
    t.results.add(partition_index=2, error_code=ErrorCode.concurrent_transactions.value)
    a = answer.results.add(name="audit")
    a.results.add(partition_index=1, error_code=ErrorCode.topic_authorization_failed.value)
    resp, (call,) = drive(tr.plan(req, VIEW), {tr.R.ADD_PARTITIONS_TO_TXN: one(answer)})
    assert (call.body.transactional_id, call.body.producer_id, call.body.producer_epoch) == \
        ("app-1", 7, 2)
    assert [(t.name, list(t.partitions)) for t in call.body.topics] == \
        [("orders", [0, 2]), ("audit", [1])]
    got = as_kio(req, resp)
    assert got.throttle_time == datetime.timedelta(milliseconds=30)
    assert [(t.name, [(p.partition_index, p.partition_error_code)
                      for p in t.results_by_partition])
            for t in got.results_by_topic_v3_and_below] == [
        ("orders", [(0, ErrorCode.none), (2, ErrorCode.concurrent_transactions)]),
        ("audit", [(1, ErrorCode.topic_authorization_failed)])]
    # a coordinator that did not answer: every partition carries the error
    resp, _ = drive(tr.plan(req, VIEW), {tr.R.ADD_PARTITIONS_TO_TXN: lambda c: tr.Outcome(
        error_code=ErrorCode.coordinator_not_available.value)})
    assert {p.partition_error_code for t in resp.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {ErrorCode.coordinator_not_available}


def test_txn_offset_commit_carries_the_group_metadata_kip_447():
    from kio.schema.txn_offset_commit.v3 import request as m
    req = kp.decode_request(encode_request(m.TxnOffsetCommitRequest(
        transactional_id="app-1", group_id="g", producer_id=7, producer_epoch=2,
        generation_id=5, member_id="m-1", group_instance_id=None, topics=(
            m.TxnOffsetCommitRequestTopic(name="in", partitions=(
                m.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                                  committed_leader_epoch=3,
                                                  committed_metadata=None),)),))))
    answer = tx.TxnOffsetCommitResponse()
    answer.topics.add(name="in").partitions.add(
        partition_index=0, error_code=ErrorCode.illegal_generation.value)
    resp, (call,) = drive(tr.plan(req, VIEW), {tr.R.TXN_OFFSET_COMMIT: one(answer)})
    b = call.body
    assert (b.transactional_id, b.group_id, b.producer_id, b.producer_epoch, b.generation_id,
            b.member_id) == ("app-1", "g", 7, 2, 5, "m-1")
    p = b.topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.committed_metadata) == (42, 3, "")
    assert resp.topics[0].partitions[0].error_code == ErrorCode.illegal_generation


def test_read_committed_fetch_is_fetch_v1_with_the_aborted_transactions():
    req = kp.decode_request(encode_request(fetch_request()))          # isolation_level 1
    step = tr.plan(req, VIEW)
    (call,) = step.calls
    assert (call.api_version, call.body.isolation_level) == (1, 1)
    answer = fetch_pb2.FetchResponse()
    t = answer.topics.add(name="orders")
    p0 = t.partitions.add(partition=0, high_watermark=20, last_stable_offset=12,
                          log_start_offset=0)
    p0.aborted_transactions.add(producer_id=9, first_offset=3)
    p0.aborted_transactions.add(producer_id=11, first_offset=7)
    t.partitions.add(partition=1, high_watermark=4, last_stable_offset=4, log_start_offset=0)
    resp = as_kio(req, step.finish([tr.Outcome(body=answer, payloads=[b"batches", b""])]).response)
    a, b = resp.responses[0].partitions
    assert (a.high_watermark, a.last_stable_offset, a.records) == (20, 12, b"batches")
    assert [(x.producer_id, x.first_offset) for x in a.aborted_transactions] == [(9, 3), (11, 7)]
    assert (b.last_stable_offset, b.aborted_transactions) == (4, ())


def test_list_offsets_and_offset_fetch_carry_the_isolation_level_and_require_stable():
    from kio.schema.list_offsets.v6 import request as lo
    req = kp.decode_request(encode_request(lo.ListOffsetsRequest(
        replica_id=-1, isolation_level=1, topics=(lo.ListOffsetsTopic(name="orders", partitions=(
            lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                    timestamp=-1),)),))))
    answer = list_offsets_pb2.ListOffsetsResponse()
    answer.topics.add(name="orders").partitions.add(partition=0, offset=12, timestamp=-1,
                                                    leader_epoch=2)
    resp, (call,) = drive(tr.plan(req, VIEW), {tr.R.LIST_OFFSETS: one(answer)})
    assert (call.api_version, call.body.isolation_level) == (1, 1)
    assert resp.topics[0].partitions[0].offset == 12
    from kio.schema.offset_fetch.v7 import request as of
    req = kp.decode_request(encode_request(of.OffsetFetchRequest(
        group_id="g", require_stable=True, topics=(of.OffsetFetchRequestTopic(
            name="in", partition_indexes=(0,)),))))
    answer = offset_pb2.OffsetFetchResponse()
    answer.topics.add(name="in").partitions.add(
        partition_index=0, committed_offset=-1, committed_leader_epoch=-1,
        error_code=ErrorCode.unstable_offset_commit.value)
    resp, (call,) = drive(tr.plan(req, VIEW), {tr.R.OFFSET_FETCH: one(answer)})
    assert (call.api_version, call.body.require_stable) == (1, True)
    assert resp.topics[0].partitions[0].error_code == ErrorCode.unstable_offset_commit


def test_describe_and_list_transactions():
    req = req_of(kp.DESCRIBE_TRANSACTIONS, 0, transactional_ids=("app-1", "gone"))
    answer = tx.DescribeTransactionsResponse()
    d = answer.transaction_states.add(transactional_id="app-1", transaction_state="Ongoing",
                                      transaction_timeout_ms=60000,
                                      transaction_start_time_ms=1_700_000_000_000,
                                      producer_id=7, producer_epoch=2)
    d.topics.add(name="orders", partitions=[0, 2])
    answer.transaction_states.add(transactional_id="gone", producer_id=-1, producer_epoch=-1,
                                  transaction_start_time_ms=-1,
                                  error_code=ErrorCode.transactional_id_not_found.value)
    resp, _ = drive(tr.plan(req, VIEW), {tr.R.DESCRIBE_TRANSACTIONS: one(answer)})
    got = as_kio(req, resp).transaction_states
    assert (got[0].transaction_state, got[0].transaction_timeout, got[0].producer_id,
            got[0].producer_epoch) == ("Ongoing", MINUTE, 7, 2)
    assert got[0].transaction_start_time == datetime.datetime(2023, 11, 14, 22, 13, 20,
                                                              tzinfo=datetime.timezone.utc)
    assert [(t.topic, t.partitions) for t in got[0].topics] == [("orders", (0, 2))]
    assert got[1].error_code == ErrorCode.transactional_id_not_found
    req = req_of(kp.LIST_TRANSACTIONS, 1, state_filters=("Ongoing",), producer_id_filters=(7,),
                 duration_filter=5000)
    answer = tx.ListTransactionsResponse(unknown_state_filters=["Nope"])
    answer.transaction_states.add(transactional_id="app-1", producer_id=7,
                                  transaction_state="Ongoing")
    resp, (call,) = drive(tr.plan(req, VIEW), {tr.R.LIST_TRANSACTIONS: one(answer)})
    assert (list(call.body.state_filters), list(call.body.producer_id_filters),
            call.body.duration_filter_ms, call.api_version) == (["Ongoing"], [7], 5000, 1)
    assert [(t.transactional_id, t.producer_id, t.transaction_state)
            for t in resp.transaction_states] == [("app-1", 7, "Ongoing")]
    assert resp.unknown_state_filters == ("Nope",)
    req = req_of(kp.LIST_TRANSACTIONS, 0, state_filters=(), producer_id_filters=())
    _, (call,) = drive(tr.plan(req, VIEW), {tr.R.LIST_TRANSACTIONS: one(answer)})
    assert not call.body.HasField("duration_filter_ms")      # v0: no filter
