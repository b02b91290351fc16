"""The APIs Riverbed speaks: which protobuf messages each ApiKey carries and which versions it serves.

One row per API (Kafka's `ApiKeys` with `validVersions`). Adding an API is one `_api(...)` line;
serving a new version of an existing API means appending it to `versions` — a released version is
frozen (STYLE.md §3), new behaviour gets a new number.
"""
from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from riverbed._proto.v1 import (
    controller_pb2,
    fetch_pb2,
    header_pb2,
    list_offsets_pb2,
    metadata_pb2,
    produce_pb2,
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
# Later APIs (groups, offsets, ...) are one line each, e.g.
# _api(ApiKey.JOIN_GROUP, group_pb2.JoinGroupRequest, group_pb2.JoinGroupResponse)


def api_name(key: int) -> str:
    """Kafka's name for an api key, or "API_<n>" for a number this build does not know."""
    spec = APIS.get(key)
    if spec is not None:
        return spec.name
    try:
        return ApiKey.Name(key)
    except ValueError:
        return f"API_{key}"
