"""The APIs Riverbed speaks: which protobuf messages each ApiKey carries and which versions it serves.

One row per API (Kafka's `ApiKeys` with `validVersions`). Adding an API is one `_api(...)` line;
serving a new version of an existing API means appending it to `versions` — a released version is
frozen (STYLE.md §3), new behaviour gets a new number.
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
)

ApiKey = header_pb2.ApiKey


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int                        # header_pb2.ApiKey value
    name: str                       # Kafka's name, e.g. "PRODUCE"
    request_type: type[Message]
    response_type: type[Message]
    valid_versions: tuple[int, ...]

    def supports(self, version: int) -> bool:
        return version in self.valid_versions


APIS: dict[int, ApiSpec] = {}


def _api(key: int, request_type: type[Message], response_type: type[Message],
         versions: tuple[int, ...] = (0,)) -> ApiSpec:
    spec = ApiSpec(key, ApiKey.Name(key), request_type, response_type, versions)
    assert key not in APIS, f"api {spec.name} registered twice"
    APIS[key] = spec
    return spec


_api(ApiKey.PRODUCE, produce_pb2.ProduceRequest, produce_pb2.ProduceResponse)
_api(ApiKey.FETCH, fetch_pb2.FetchRequest, fetch_pb2.FetchResponse)
_api(ApiKey.LIST_OFFSETS, list_offsets_pb2.ListOffsetsRequest, list_offsets_pb2.ListOffsetsResponse)
_api(ApiKey.OFFSET_FOR_LEADER_EPOCH, list_offsets_pb2.OffsetForLeaderEpochRequest,
     list_offsets_pb2.OffsetForLeaderEpochResponse)
_api(ApiKey.METADATA, metadata_pb2.MetadataRequest, metadata_pb2.MetadataResponse)
_api(ApiKey.UPDATE_METADATA, metadata_pb2.UpdateMetadataRequest, metadata_pb2.UpdateMetadataResponse)
_api(ApiKey.DESCRIBE_CLUSTER, metadata_pb2.DescribeClusterRequest, metadata_pb2.DescribeClusterResponse)
_api(ApiKey.LEADER_AND_ISR, controller_pb2.LeaderAndIsrRequest, controller_pb2.LeaderAndIsrResponse)
_api(ApiKey.STOP_REPLICA, controller_pb2.StopReplicaRequest, controller_pb2.StopReplicaResponse)
_api(ApiKey.CREATE_TOPICS, controller_pb2.CreateTopicsRequest, controller_pb2.CreateTopicsResponse)
_api(ApiKey.DELETE_TOPICS, controller_pb2.DeleteTopicsRequest, controller_pb2.DeleteTopicsResponse)
_api(ApiKey.CREATE_PARTITIONS, controller_pb2.CreatePartitionsRequest,
     controller_pb2.CreatePartitionsResponse)
_api(ApiKey.DESCRIBE_CONFIGS, controller_pb2.DescribeConfigsRequest,
     controller_pb2.DescribeConfigsResponse)
_api(ApiKey.ALTER_CONFIGS, controller_pb2.AlterConfigsRequest, controller_pb2.AlterConfigsResponse)
_api(ApiKey.INIT_PRODUCER_ID, producer_id_pb2.InitProducerIdRequest,
     producer_id_pb2.InitProducerIdResponse)
_api(ApiKey.ALTER_PARTITION, replication_pb2.AlterPartitionRequest,
     replication_pb2.AlterPartitionResponse)
_api(ApiKey.CONTROLLED_SHUTDOWN, replication_pb2.ControlledShutdownRequest,
     replication_pb2.ControlledShutdownResponse)
_api(ApiKey.BROKER_HEARTBEAT, replication_pb2.BrokerHeartbeatRequest,
     replication_pb2.BrokerHeartbeatResponse)
_api(ApiKey.ELECT_LEADERS, admin_ops_pb2.ElectLeadersRequest, admin_ops_pb2.ElectLeadersResponse)
_api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, admin_ops_pb2.AlterPartitionReassignmentsRequest,
     admin_ops_pb2.AlterPartitionReassignmentsResponse)
_api(ApiKey.LIST_PARTITION_REASSIGNMENTS, admin_ops_pb2.ListPartitionReassignmentsRequest,
     admin_ops_pb2.ListPartitionReassignmentsResponse)
_api(ApiKey.FIND_COORDINATOR, group_pb2.FindCoordinatorRequest, group_pb2.FindCoordinatorResponse)
# v1: client assignment (the leader assigns, Kafka's classic protocol; group.proto)
_api(ApiKey.JOIN_GROUP, group_pb2.JoinGroupRequest, group_pb2.JoinGroupResponse, (0, 1))
_api(ApiKey.HEARTBEAT, group_pb2.HeartbeatRequest, group_pb2.HeartbeatResponse)
_api(ApiKey.LEAVE_GROUP, group_pb2.LeaveGroupRequest, group_pb2.LeaveGroupResponse)
_api(ApiKey.SYNC_GROUP, group_pb2.SyncGroupRequest, group_pb2.SyncGroupResponse, (0, 1))
_api(ApiKey.DESCRIBE_GROUPS, group_pb2.DescribeGroupsRequest, group_pb2.DescribeGroupsResponse)
_api(ApiKey.LIST_GROUPS, group_pb2.ListGroupsRequest, group_pb2.ListGroupsResponse)
_api(ApiKey.OFFSET_COMMIT, offset_pb2.OffsetCommitRequest, offset_pb2.OffsetCommitResponse)
_api(ApiKey.OFFSET_FETCH, offset_pb2.OffsetFetchRequest, offset_pb2.OffsetFetchResponse)
_api(ApiKey.OFFSET_DELETE, offset_pb2.OffsetDeleteRequest, offset_pb2.OffsetDeleteResponse)
_api(ApiKey.DELETE_GROUPS, group_pb2.DeleteGroupsRequest, group_pb2.DeleteGroupsResponse)
_api(ApiKey.DELETE_RECORDS, delete_records_pb2.DeleteRecordsRequest,
     delete_records_pb2.DeleteRecordsResponse)
_api(ApiKey.DESCRIBE_ACLS, acl_pb2.DescribeAclsRequest, acl_pb2.DescribeAclsResponse)
_api(ApiKey.CREATE_ACLS, acl_pb2.CreateAclsRequest, acl_pb2.CreateAclsResponse)
_api(ApiKey.DELETE_ACLS, acl_pb2.DeleteAclsRequest, acl_pb2.DeleteAclsResponse)
_api(ApiKey.DESCRIBE_LOG_DIRS, admin_ops_pb2.DescribeLogDirsRequest,
     admin_ops_pb2.DescribeLogDirsResponse)
_api(ApiKey.ALTER_REPLICA_LOG_DIRS, admin_ops_pb2.AlterReplicaLogDirsRequest,
     admin_ops_pb2.AlterReplicaLogDirsResponse)


def api_name(key: int) -> str:
    """Kafka's name for an api key, or "API_<n>" for a number this build does not know."""
    spec = APIS.get(key)
    if spec is not None:
        return spec.name
    try:
        return ApiKey.Name(key)
    except ValueError:
        return f"API_{key}"
