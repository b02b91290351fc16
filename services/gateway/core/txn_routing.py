"""Routing of the transaction APIs (pure): which role serves each, what the principal needs from
the ACLs (Kafka's), error answers built at the gateway, and the merges.

- INIT_PRODUCER_ID v1 with a transactional id, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN,
  END_TXN: the transaction coordinator owning shard(transactional id)
  (`/riverbed/transaction_coordinators/shards/<s>`);
- DESCRIBE_TRANSACTIONS: the owners of each id's shard, merged in request order;
- LIST_TRANSACTIONS: every live transaction coordinator, merged;
- TXN_OFFSET_COMMIT: the offset manager owning shard(group) (group_routing.PER_GROUP_APIS);
- FIND_COORDINATOR key_type TRANSACTION (v1): answered by the gateway itself.

shard(transactional id) = riverbed.coordinator.transaction_log.partition_for(id, partitions of
__transaction_state), the count from the metadata cache.

ACLs (Kafka's): Write on the TransactionalId for InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn and TxnOffsetCommit (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); plus Write
on each topic added (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED), Read on
the group for AddOffsetsToTxn and TxnOffsetCommit (GROUP_AUTHORIZATION_FAILED) and Read on each
topic committed; Describe on the TransactionalId for DescribeTransactions (per id) and
ListTransactions (only those listed).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from riverbed import errors
from riverbed._proto.v1 import header_pb2, transaction_pb2 as tx
from services.common.acl.authorizer import Operation, ResourceType
from services.common.txn_errors import error_response as error_body

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
O = Operation
TXN_ID, TOPIC, GROUP = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP
May = Callable[[Operation, ResourceType, str], bool]

TRANSACTION_COORDINATOR = "transaction_coordinator"
# api -> served by the transaction coordinator of the request's transactional id
PER_TXN_ID_APIS = frozenset({ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN,
                             ApiKey.END_TXN, ApiKey.INIT_PRODUCER_ID})


def response_codes(api: int, body) -> set[int]:
    """Every error code an answer carries (top-level or per partition): a NOT_COORDINATOR among
    them makes the gateway re-read the owners and try once more."""
    if api == ApiKey.ADD_PARTITIONS_TO_TXN:
        return {p.error_code for t in body.results for p in t.results}
    if api == ApiKey.TXN_OFFSET_COMMIT:
        return {p.error_code for t in body.topics for p in t.partitions}
    if api == ApiKey.DESCRIBE_TRANSACTIONS:
        return {d.error_code for d in body.transaction_states}
    return {body.error_code}


def transactional_id_of(api: int, body) -> str:
    return body.transactional_id


def denied(api: int, body, may: May):
    """The whole answer when the principal may not do this (nothing is forwarded), else None.
    ADD_PARTITIONS_TO_TXN: topics without Write are refused, the rest not attempted."""
    tid = body.transactional_id
    if not may(O.WRITE, TXN_ID, tid):
        return error_body(api, body, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                          f"not authorized to write transactional id {tid!r}")
    if api == ApiKey.ADD_PARTITIONS_TO_TXN:
        refused = {t.name for t in body.topics if not may(O.WRITE, TOPIC, t.name)}
        if refused:
            resp = tx.AddPartitionsToTxnResponse()
            for t in body.topics:
                tr = resp.results.add(name=t.name)
                for p in t.partitions:
                    if t.name in refused:
                        tr.results.add(partition_index=p, error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                       error_message=f"not authorized to write topic {t.name!r}")
                    else:
                        tr.results.add(partition_index=p, error_code=E.OPERATION_NOT_ATTEMPTED)
            return resp
    if api == ApiKey.ADD_OFFSETS_TO_TXN and not may(O.READ, GROUP, body.group_id):
        return error_body(api, body, E.GROUP_AUTHORIZATION_FAILED,
                          f"not authorized to read group {body.group_id!r}")
    return None


def txn_offset_commit_denied(body: tx.TxnOffsetCommitRequest, may: May):
    """TXN_OFFSET_COMMIT: (the whole answer when denied, or None; the topics denied Read)."""
    if not may(O.WRITE, TXN_ID, body.transactional_id):
        return error_body(ApiKey.TXN_OFFSET_COMMIT, body, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                          f"not authorized to write transactional id {body.transactional_id!r}"), ()
    if not may(O.READ, GROUP, body.group_id):
        return error_body(ApiKey.TXN_OFFSET_COMMIT, body, E.GROUP_AUTHORIZATION_FAILED,
                          f"not authorized to read group {body.group_id!r}"), ()
    return None, tuple(n for n in dict.fromkeys(t.name for t in body.topics)
                       if not may(O.READ, TOPIC, n))


def txn_offset_commit_split(body: tx.TxnOffsetCommitRequest, refused: Sequence[str]):
    """(the request without the refused topics, or None when none is left)."""
    if not refused:
        return body
    out = tx.TxnOffsetCommitRequest()
    out.CopyFrom(body)
    del out.topics[:]
    for t in body.topics:
        if t.name not in refused:
            out.topics.add().CopyFrom(t)
    return out if out.topics else None


def txn_offset_commit_response(body: tx.TxnOffsetCommitRequest, forwarded,
                               refused: Sequence[str]) -> tx.TxnOffsetCommitResponse:
    resp = tx.TxnOffsetCommitResponse()
    if forwarded is not None:
        resp.CopyFrom(forwarded)
    for t in body.topics:
        if t.name in refused:
            tr = resp.topics.add(name=t.name)
            for p in t.partitions:
                tr.partitions.add(partition_index=p.partition_index,
                                  error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                  error_message=f"not authorized to read topic {t.name!r}")
    return resp


def merge_described(ids: Sequence[str],
                    answers: Mapping[str, tx.TransactionStateDescription]
                    ) -> tx.DescribeTransactionsResponse:
    resp = tx.DescribeTransactionsResponse()
    for tid in ids:
        d = answers.get(tid)
        if d is None:
            resp.transaction_states.add(transactional_id=tid,
                                        error_code=E.COORDINATOR_NOT_AVAILABLE,
                                        error_message="no transaction coordinator answered",
                                        producer_id=-1, producer_epoch=-1,
                                        transaction_start_time_ms=-1)
        else:
            resp.transaction_states.add().CopyFrom(d)
    return resp


def merge_listed(answers: Sequence[tx.ListTransactionsResponse | tuple[int, str]],
                 may: May) -> tx.ListTransactionsResponse:
    """The union over every coordinator, only the ids the principal may describe; the first
    error is kept (the list may be partial)."""
    resp = tx.ListTransactionsResponse()
    if not answers:
        resp.error_code = E.COORDINATOR_NOT_AVAILABLE
        resp.error_message = "no live transaction coordinator"
        return resp
    seen: set[str] = set()
    unknown: set[str] = set()
    for a in answers:
        if isinstance(a, tuple):
            code, msg, listed = a[0], a[1], ()
        else:
            code, msg, listed = a.error_code, a.error_message, a.transaction_states
            unknown.update(a.unknown_state_filters)
        if code != E.NONE and resp.error_code == E.NONE:
            resp.error_code, resp.error_message = code, msg
        for t in listed:
            if t.transactional_id not in seen and may(O.DESCRIBE, TXN_ID, t.transactional_id):
                seen.add(t.transactional_id)
                resp.transaction_states.add().CopyFrom(t)
    resp.unknown_state_filters.extend(sorted(unknown))
    resp.transaction_states.sort(key=lambda t: t.transactional_id)
    return resp


__all__ = ["TRANSACTION_COORDINATOR", "PER_TXN_ID_APIS", "error_body", "response_codes",
           "denied", "txn_offset_commit_denied", "txn_offset_commit_split",
           "txn_offset_commit_response", "merge_described", "merge_listed"]
