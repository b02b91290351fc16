"""The gateway's transaction routing core: Kafka's ACLs per API, error answers shaped as each
API's response, and the merges of DescribeTransactions and ListTransactions."""
from riverbed._proto.v1 import header_pb2, producer_id_pb2, transaction_pb2 as tx
from riverbed.errors import ErrorCode as E
from services.common.acl.authorizer import Operation as O, ResourceType as R
from services.gateway.core import txn_routing as tr

ApiKey = header_pb2.ApiKey


def may_only(*allowed):
    return lambda op, rtype, name: (op, rtype, name) in allowed


def add_req():
    return tx.AddPartitionsToTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0,
                                        topics=[tx.TxnTopic(name="a", partitions=[0, 1]),
                                                tx.TxnTopic(name="b", partitions=[0])])


def test_transactional_id_write_is_needed():
    resp = tr.denied(ApiKey.END_TXN, tx.EndTxnRequest(transactional_id="t"), may_only())
    assert resp.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert tr.denied(ApiKey.END_TXN, tx.EndTxnRequest(transactional_id="t"),
                     may_only((O.WRITE, R.TRANSACTIONAL_ID, "t"))) is None


def test_add_partitions_refuses_unwritable_topics_and_does_not_attempt_the_rest():
    resp = tr.denied(ApiKey.ADD_PARTITIONS_TO_TXN, add_req(),
                     may_only((O.WRITE, R.TRANSACTIONAL_ID, "t"), (O.WRITE, R.TOPIC, "a")))
    codes = {(t.name, p.partition_index): p.error_code for t in resp.results for p in t.results}
    assert codes == {("a", 0): E.OPERATION_NOT_ATTEMPTED, ("a", 1): E.OPERATION_NOT_ATTEMPTED,
                     ("b", 0): E.TOPIC_AUTHORIZATION_FAILED}
    assert tr.response_codes(ApiKey.ADD_PARTITIONS_TO_TXN, resp) == {
        E.OPERATION_NOT_ATTEMPTED, E.TOPIC_AUTHORIZATION_FAILED}


def test_add_offsets_needs_read_on_the_group():
    body = tx.AddOffsetsToTxnRequest(transactional_id="t", group_id="g")
    resp = tr.denied(ApiKey.ADD_OFFSETS_TO_TXN, body, may_only((O.WRITE, R.TRANSACTIONAL_ID, "t")))
    assert resp.error_code == E.GROUP_AUTHORIZATION_FAILED


def test_txn_offset_commit_splits_unreadable_topics():
    body = tx.TxnOffsetCommitRequest(transactional_id="t", group_id="g", topics=[
        tx.TxnOffsetCommitTopic(name="a", partitions=[tx.TxnOffsetCommitPartition(
            partition_index=0, committed_offset=5)]),
        tx.TxnOffsetCommitTopic(name="b", partitions=[tx.TxnOffsetCommitPartition(
            partition_index=0, committed_offset=6)])])
    may = may_only((O.WRITE, R.TRANSACTIONAL_ID, "t"), (O.READ, R.GROUP, "g"),
                   (O.READ, R.TOPIC, "a"))
    whole, refused = tr.txn_offset_commit_denied(body, may)
    assert whole is None and refused == ("b",)
    forward = tr.txn_offset_commit_split(body, refused)
    assert [t.name for t in forward.topics] == ["a"]
    resp = tr.txn_offset_commit_response(body, None, refused)
    assert [(t.name, t.partitions[0].error_code) for t in resp.topics] == [
        ("b", E.TOPIC_AUTHORIZATION_FAILED)]
    whole, _ = tr.txn_offset_commit_denied(body, may_only())
    assert {p.error_code for t in whole.topics for p in t.partitions} == {
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


def test_error_bodies_have_each_apis_shape():
    init = tr.error_body(ApiKey.INIT_PRODUCER_ID, producer_id_pb2.InitProducerIdRequest(),
                         E.COORDINATOR_NOT_AVAILABLE, "x")
    assert (init.error_code, init.producer_id, init.producer_epoch) == \
        (E.COORDINATOR_NOT_AVAILABLE, -1, -1)
    add = tr.error_body(ApiKey.ADD_PARTITIONS_TO_TXN, add_req(), E.NOT_COORDINATOR, "x")
    assert tr.response_codes(ApiKey.ADD_PARTITIONS_TO_TXN, add) == {E.NOT_COORDINATOR}
    assert sum(len(t.results) for t in add.results) == 3


def test_merges():
    a = tx.TransactionStateDescription(transactional_id="a", transaction_state="Ongoing")
    merged = tr.merge_described(["a", "b"], {"a": a})
    assert [(d.transactional_id, d.error_code) for d in merged.transaction_states] == [
        ("a", E.NONE), ("b", E.COORDINATOR_NOT_AVAILABLE)]
    one = tx.ListTransactionsResponse(transaction_states=[
        tx.ListedTransaction(transactional_id="z"), tx.ListedTransaction(transactional_id="x")])
    two = tx.ListTransactionsResponse(error_code=E.COORDINATOR_LOAD_IN_PROGRESS,
                                      unknown_state_filters=["Bogus"],
                                      transaction_states=[tx.ListedTransaction(transactional_id="y")])
    listed = tr.merge_listed([one, two, (E.COORDINATOR_NOT_AVAILABLE, "down")],
                             lambda op, rt, name: name != "y")
    assert [t.transactional_id for t in listed.transaction_states] == ["x", "z"]
    assert listed.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert list(listed.unknown_state_filters) == ["Bogus"]
    assert tr.merge_listed([], lambda *a: True).error_code == E.COORDINATOR_NOT_AVAILABLE
