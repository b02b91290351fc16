"""Riverbed's Admin client and kafka-python 3.0's `kafka.admin` names.

`riverbed.admin.Admin` is Riverbed's own admin client (riverbed.admin.riverbed_admin). The
rest is what `from kafka.admin import ...` gives in kafka-python 3.0, so that a kafka-python
program runs with `kafka` replaced by `riverbed` in its imports: `KafkaAdminClient` (a facade
over Admin with kafka-python 3.0's calls and result shapes, riverbed.admin.kafka_python),
`NewTopic`, `NewPartitions`, `ConfigResource`, `ConfigResourceType` and kafka-python's enums and
ACL types (riverbed.kafka_python_types).
"""
from riverbed.admin.riverbed_admin import Admin, AdminClient
from riverbed.admin.kafka_python import KafkaAdminClient
from riverbed.kafka_python_types import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    AlterConfigOp,
    ConfigFilterType,
    ConfigSourceType,
    ConfigType,
    GroupState,
    GroupType,
    MemberToRemove,
    OffsetSpec,
    OffsetTimestamp,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    UpdateFeatureType,
)
from riverbed.structs import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

__all__ = ["Admin", "AdminClient", "KafkaAdminClient", "NewTopic", "NewPartitions",
           "ConfigResource", "ConfigResourceType", "ACL", "ACLFilter", "ACLOperation",
           "ACLPermissionType", "ACLResourcePatternType", "ResourceType", "ResourcePattern",
           "ResourcePatternFilter", "AlterConfigOp", "ConfigFilterType", "ConfigType",
           "ConfigSourceType", "UpdateFeatureType", "GroupState", "GroupType", "MemberToRemove",
           "OffsetSpec", "OffsetTimestamp"]
