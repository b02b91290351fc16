"""The APIs Riverbed speaks: which protobuf messages each ApiKey carries and which versions it serves.

One row per API (Kafka's `ApiKeys` with `validVersions`). Adding an API is one `_api(...)` line;
serving a new version of an existing API means appending it to `versions` — a released version is
frozen (STYLE.md §3), new behaviour gets a new number.

`safe_to_repeat`: a request of this API may reach its server twice with the effect of once, so a
channel may send it again on a new connection when the one it went out on broke before its
answer came (services.common.rpc.channel): reads, and changes fenced by epochs or versions whose
repeat is answered with the state the first one made (LEADER_AND_ISR, ALTER_PARTITION). Not
PRODUCE (a batch of a producer without idempotence would be appended twice), nor changes a repeat
would answer differently (CREATE_TOPICS: TOPIC_ALREADY_EXISTS) or could undo (OFFSET_COMMIT after
a later commit): those fail at once with NETWORK_EXCEPTION and their caller decides.
"""
from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from riverbed._proto.v1 import (
    acl_pb2,
    admin_ops_pb2,
    controller_pb2,
    delete_records_pb2,
    fetch_pb2,
    group_pb2,
    header_pb2,
    list_offsets_pb2,
    metadata_pb2,
    offset_pb2,
    produce_pb2,
    producer_id_pb2,
    replication_pb2,
    transaction_pb2,
)

ApiKey = header_pb2.ApiKey


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int                        # header_pb2.ApiKey value
    name: str                       # Kafka's name, e.g. "PRODUCE"
    request_type: type[Message]
    response_type: type[Message]
    valid_versions: tuple[int, ...]
    safe_to_repeat: bool = False

    def supports(self, version: int) -> bool:
        return version in self.valid_versions


APIS: dict[int, ApiSpec] = {}


def _api(key: int, request_type: type[Message], response_type: type[Message],
         versions: tuple[int, ...] = (0,), *, safe_to_repeat: bool = False) -> ApiSpec:
    spec = ApiSpec(key, ApiKey.Name(key), request_type, response_type, versions, safe_to_repeat)
    assert key not in APIS, f"api {spec.name} registered twice"
    APIS[key] = spec
    return spec


_api(ApiKey.PRODUCE, produce_pb2.ProduceRequest, produce_pb2.ProduceResponse)
# FETCH v1 and LIST_OFFSETS v1: isolation_level (read_committed, transactions).
_api(ApiKey.FETCH, fetch_pb2.FetchRequest, fetch_pb2.FetchResponse, (0, 1), safe_to_repeat=True)
_api(ApiKey.LIST_OFFSETS, list_offsets_pb2.ListOffsetsRequest, list_offsets_pb2.ListOffsetsResponse,
     (0, 1), safe_to_repeat=True)
_api(ApiKey.OFFSET_FOR_LEADER_EPOCH, list_offsets_pb2.OffsetForLeaderEpochRequest,
     list_offsets_pb2.OffsetForLeaderEpochResponse, safe_to_repeat=True)
_api(ApiKey.METADATA, metadata_pb2.MetadataRequest, metadata_pb2.MetadataResponse,
     safe_to_repeat=True)
_api(ApiKey.UPDATE_METADATA, metadata_pb2.UpdateMetadataRequest, metadata_pb2.UpdateMetadataResponse,
     safe_to_repeat=True)
_api(ApiKey.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest, metadata_pb2.DescribeClusterResponse,
     safe_to_repeat=True)
_api(ApiKey.LEADER_AND_ISR, controller_pb2.LeaderAndIsrRequest, controller_pb2.LeaderAndIsrResponse,
     safe_to_repeat=True)
_api(ApiKey.STOP_REPLICA, controller_pb2.StopReplicaRequest, controller_pb2.StopReplicaResponse,
     safe_to_repeat=True)
_api(ApiKey.CREATE_TOPICS, controller_pb2.CreateTopicsRequest, controller_pb2.CreateTopicsResponse)
_api(ApiKey.DELETE_TOPICS, controller_pb2.DeleteTopicsRequest, controller_pb2.DeleteTopicsResponse)
_api(ApiKey.CREATE_PARTITIONS, controller_pb2.CreatePartitionsRequest,
     controller_pb2.CreatePartitionsResponse)
_api(ApiKey.DESCRIBE_CONFIGS, controller_pb2.DescribeConfigsRequest,
     controller_pb2.DescribeConfigsResponse, safe_to_repeat=True)
_api(ApiKey.ALTER_CONFIGS, controller_pb2.AlterConfigsRequest, controller_pb2.AlterConfigsResponse)
# INIT_PRODUCER_ID v1: with a transactional_id (served by the transaction coordinator).
_api(ApiKey.INIT_PRODUCER_ID, producer_id_pb2.InitProducerIdRequest,
     producer_id_pb2.InitProducerIdResponse, (0, 1))
_api(ApiKey.ALTER_PARTITION, replication_pb2.AlterPartitionRequest,
     replication_pb2.AlterPartitionResponse, safe_to_repeat=True)
_api(ApiKey.CONTROLLED_SHUTDOWN, replication_pb2.ControlledShutdownRequest,
     replication_pb2.ControlledShutdownResponse, safe_to_repeat=True)
_api(ApiKey.BROKER_HEARTBEAT, replication_pb2.BrokerHeartbeatRequest,
     replication_pb2.BrokerHeartbeatResponse, safe_to_repeat=True)
_api(ApiKey.ELECT_LEADERS, admin_ops_pb2.ElectLeadersRequest, admin_ops_pb2.ElectLeadersResponse)
_api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, admin_ops_pb2.AlterPartitionReassignmentsRequest,
     admin_ops_pb2.AlterPartitionReassignmentsResponse)
_api(ApiKey.LIST_PARTITION_REASSIGNMENTS, admin_ops_pb2.ListPartitionReassignmentsRequest,
     admin_ops_pb2.ListPartitionReassignmentsResponse, safe_to_repeat=True)
# FIND_COORDINATOR v1: key_type TRANSACTION.
_api(ApiKey.FIND_COORDINATOR, group_pb2.FindCoordinatorRequest, group_pb2.FindCoordinatorResponse,
     (0, 1), safe_to_repeat=True)
# v1: client assignment (the leader assigns, Kafka's classic protocol; group.proto)
_api(ApiKey.JOIN_GROUP, group_pb2.JoinGroupRequest, group_pb2.JoinGroupResponse, (0, 1))
_api(ApiKey.HEARTBEAT, group_pb2.HeartbeatRequest, group_pb2.HeartbeatResponse, safe_to_repeat=True)
_api(ApiKey.LEAVE_GROUP, group_pb2.LeaveGroupRequest, group_pb2.LeaveGroupResponse)
_api(ApiKey.SYNC_GROUP, group_pb2.SyncGroupRequest, group_pb2.SyncGroupResponse, (0, 1))
_api(ApiKey.DESCRIBE_GROUPS, group_pb2.DescribeGroupsRequest, group_pb2.DescribeGroupsResponse,
     safe_to_repeat=True)
_api(ApiKey.LIST_GROUPS, group_pb2.ListGroupsRequest, group_pb2.ListGroupsResponse,
     safe_to_repeat=True)
_api(ApiKey.OFFSET_COMMIT, offset_pb2.OffsetCommitRequest, offset_pb2.OffsetCommitResponse)
# OFFSET_FETCH v1: require_stable (KIP-447).
_api(ApiKey.OFFSET_FETCH, offset_pb2.OffsetFetchRequest, offset_pb2.OffsetFetchResponse, (0, 1),
     safe_to_repeat=True)
_api(ApiKey.OFFSET_DELETE, offset_pb2.OffsetDeleteRequest, offset_pb2.OffsetDeleteResponse)
_api(ApiKey.DELETE_GROUPS, group_pb2.DeleteGroupsRequest, group_pb2.DeleteGroupsResponse)
_api(ApiKey.DELETE_RECORDS, delete_records_pb2.DeleteRecordsRequest,
     delete_records_pb2.DeleteRecordsResponse)
_api(ApiKey.DESCRIBE_ACLS, acl_pb2.DescribeAclsRequest, acl_pb2.DescribeAclsResponse)
_api(ApiKey.CREATE_ACLS, acl_pb2.CreateAclsRequest, acl_pb2.CreateAclsResponse)
_api(ApiKey.DELETE_ACLS, acl_pb2.DeleteAclsRequest, acl_pb2.DeleteAclsResponse)
_api(ApiKey.DESCRIBE_LOG_DIRS, admin_ops_pb2.DescribeLogDirsRequest,
     admin_ops_pb2.DescribeLogDirsResponse, safe_to_repeat=True)
_api(ApiKey.ALTER_REPLICA_LOG_DIRS, admin_ops_pb2.AlterReplicaLogDirsRequest,
     admin_ops_pb2.AlterReplicaLogDirsResponse)

# Transactions (transaction.proto).
_api(ApiKey.ADD_PARTITIONS_TO_TXN, transaction_pb2.AddPartitionsToTxnRequest,
     transaction_pb2.AddPartitionsToTxnResponse)
_api(ApiKey.ADD_OFFSETS_TO_TXN, transaction_pb2.AddOffsetsToTxnRequest,
     transaction_pb2.AddOffsetsToTxnResponse)
_api(ApiKey.END_TXN, transaction_pb2.EndTxnRequest, transaction_pb2.EndTxnResponse)
_api(ApiKey.WRITE_TXN_MARKERS, transaction_pb2.WriteTxnMarkersRequest,
     transaction_pb2.WriteTxnMarkersResponse)
_api(ApiKey.TXN_OFFSET_COMMIT, transaction_pb2.TxnOffsetCommitRequest,
     transaction_pb2.TxnOffsetCommitResponse)
_api(ApiKey.DESCRIBE_TRANSACTIONS, transaction_pb2.DescribeTransactionsRequest,
     transaction_pb2.DescribeTransactionsResponse)
# LIST_TRANSACTIONS v1: duration_filter_ms (KIP-994).
_api(ApiKey.LIST_TRANSACTIONS, transaction_pb2.ListTransactionsRequest,
     transaction_pb2.ListTransactionsResponse, (0, 1))


def api_name(key: int) -> str:
    """Kafka's name for an api key, or "API_<n>" for a number this build does not know."""
    spec = APIS.get(key)
    if spec is not None:
        return spec.name
    try:
        return ApiKey.Name(key)
    except ValueError:
        return f"API_{key}"
