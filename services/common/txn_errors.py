"""Answers of the transaction APIs that carry one error everywhere a client looks for it (pure):
built by gateways (routing, authorization) and transaction coordinators (while
__transaction_state is being created) alike."""
from __future__ import annotations

from riverbed._proto.v1 import header_pb2, producer_id_pb2, transaction_pb2 as tx

ApiKey = header_pb2.ApiKey


def error_response(api: int, request, code: int, message: str):
    """The response to `request` answering `code` wherever a client looks for it."""
    if api == ApiKey.INIT_PRODUCER_ID:
        return producer_id_pb2.InitProducerIdResponse(error_code=code, error_message=message,
                                                      producer_id=-1, producer_epoch=-1)
    if api == ApiKey.ADD_PARTITIONS_TO_TXN:
        resp = tx.AddPartitionsToTxnResponse()
        for t in request.topics:
            tr = resp.results.add(name=t.name)
            for p in t.partitions:
                tr.results.add(partition_index=p, error_code=code, error_message=message)
        return resp
    if api == ApiKey.ADD_OFFSETS_TO_TXN:
        return tx.AddOffsetsToTxnResponse(error_code=code, error_message=message)
    if api == ApiKey.END_TXN:
        return tx.EndTxnResponse(error_code=code, error_message=message)
    if api == ApiKey.TXN_OFFSET_COMMIT:
        resp = tx.TxnOffsetCommitResponse()
        for t in request.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partitions:
                tr.partitions.add(partition_index=p.partition_index, error_code=code,
                                  error_message=message)
        return resp
    if api == ApiKey.DESCRIBE_TRANSACTIONS:
        resp = tx.DescribeTransactionsResponse()
        for tid in request.transactional_ids:
            resp.transaction_states.add(transactional_id=tid, error_code=code,
                                        error_message=message, producer_id=-1,
                                        producer_epoch=-1, transaction_start_time_ms=-1)
        return resp
    if api == ApiKey.LIST_TRANSACTIONS:
        return tx.ListTransactionsResponse(error_code=code, error_message=message)
    raise ValueError(f"not a transaction api: {api}")
