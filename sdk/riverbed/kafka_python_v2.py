"""kafka-python 2.x's (and aiokafka's) admin calls and result shapes, as functions over an admin.

kafka-python 2.x's KafkaAdminClient, whose shapes aiokafka's AIOKafkaAdminClient keeps, named
and returned things its own way: `list_consumer_groups()` -> [(group_id, protocol_type)],
`describe_consumer_groups()` -> [GroupInformation], `list_consumer_group_offsets()` ->
{TopicPartition: OffsetAndMetadata}, `describe_configs([ConfigResource])` -> [a response with
`.resources`], `alter_configs` with Kafka's legacy (replace-all) semantics,
`create_partitions({topic: NewPartitions})`. These functions give those shapes over Riverbed's
Admin (`riverbed.admin.Admin`, passed in: this module never imports it, so Admin can use it for
its ConfigResource forms). kafka-python 3.0's KafkaAdminClient (riverbed.admin.kafka_python)
keeps the 2.x names whose 3.0 spelling differs; riverbed.aio's admin has them all.
Errors are raised as riverbed.errors classes rather than left inside responses.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple, Protocol, Sequence

from riverbed import errors
from riverbed.structs import (
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["GroupInformation", "MemberInformation", "MemberMetadata", "MemberAssignment",
           "DescribeConfigsResponse", "AlterConfigsResponse", "ConfigResourceResult",
           "AlterConfigsResourceResult", "describe_config_resources", "alter_config_resources",
           "create_partitions_map", "list_consumer_groups", "describe_consumer_groups",
           "list_consumer_group_offsets", "alter_consumer_group_offsets"]


class _Admin(Protocol):
    """What these functions use of riverbed.admin.Admin."""

    def describe_configs(self, topic: str, include_defaults: bool = True
                         ) -> dict[str, ConfigEntry]: ...

    def alter_configs(self, topic: str, set: Mapping[str, str] | None = None,  # noqa: A002
                      delete: Iterable[str] = (), validate_only: bool = False) -> Any: ...

    def create_partitions(self, topic: str, new_total: int, *,
                          assignment: Sequence[Sequence[int]] | None = None,
                          validate_only: bool = False) -> None: ...

    def list_groups(self, states: Iterable[str] = ()) -> Any: ...

    def describe_groups(self, group_ids: Sequence[str]) -> Any: ...

    def list_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                           ) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def alter_group_offsets(self, group_id: str, offsets: dict) -> Any: ...


class MemberMetadata(NamedTuple):
    """kafka-python's ConsumerProtocolMemberMetadata: what the member subscribed to."""
    version: int
    subscription: list[str]
    user_data: bytes


class MemberAssignment(NamedTuple):
    """kafka-python's ConsumerProtocolMemberAssignment: [(topic, [partitions])]."""
    version: int
    assignment: list[tuple[str, list[int]]]
    user_data: bytes


class MemberInformation(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    member_metadata: MemberMetadata
    member_assignment: MemberAssignment


class GroupInformation(NamedTuple):
    """One entry of kafka-python 2.x's describe_consumer_groups()."""
    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberInformation]
    authorized_operations: Any


class ConfigResourceResult(NamedTuple):
    """(error_code, error_message, resource_type, resource_name, config_entries); each entry is
    (config_names, config_value, read_only, is_default, is_sensitive), as kafka-python's
    DescribeConfigsResponse v0 lays them out."""
    error_code: int
    error_message: str
    resource_type: int
    resource_name: str
    config_entries: list[tuple[str, str, bool, bool, bool]]


class DescribeConfigsResponse(NamedTuple):
    throttle_time_ms: int
    resources: list[ConfigResourceResult]


class AlterConfigsResourceResult(NamedTuple):
    error_code: int
    error_message: str
    resource_type: int
    resource_name: str


class AlterConfigsResponse(NamedTuple):
    throttle_time_ms: int
    resources: list[AlterConfigsResourceResult]


def _topic_resources(resources: Iterable[ConfigResource], call: str) -> list[ConfigResource]:
    out = []
    for r in resources:
        if not isinstance(r, ConfigResource):
            raise TypeError(f"{call}: expected ConfigResource objects, got {r!r}")
        if r.resource_type is not ConfigResourceType.TOPIC:
            raise errors.InvalidRequestError(
                f"{call}: Riverbed's configs are per topic; {r.resource_type!r} resources are "
                "not supported", topic=r.name)
        out.append(r)
    return out


# -- configs -----------------------------------------------------------------------------------
def describe_config_resources(admin: _Admin, resources: Sequence[ConfigResource],
                              include_synonyms: bool = False) -> list[DescribeConfigsResponse]:
    """describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")]): one response whose
    `.resources` holds one ConfigResourceResult per resource (names filtered by the resource's
    `configs` when given)."""
    results = []
    for r in _topic_resources(resources, "describe_configs"):
        entries = admin.describe_configs(r.name, include_defaults=True)
        wanted = None if r.configs is None else set(r.configs)
        results.append(ConfigResourceResult(
            0, "", int(ConfigResourceType.TOPIC), r.name,
            [(e.name, e.value, False, e.is_default, False) for e in entries.values()
             if wanted is None or e.name in wanted]))
    return [DescribeConfigsResponse(0, results)]


def alter_config_resources(admin: _Admin, resources: Sequence[ConfigResource],
                           validate_only: bool = False) -> AlterConfigsResponse:
    """alter_configs([ConfigResource(TOPIC, "t", configs={k: v})]) with Kafka's (legacy)
    AlterConfigs meaning: the topic's overrides become exactly `configs` (others return to
    their defaults; a None value removes that key)."""
    out = []
    for r in _topic_resources(resources, "alter_configs"):
        if not isinstance(r.configs, Mapping):
            raise TypeError(f"alter_configs: {r.name}: configs must be a dict of name -> value")
        wanted = {k: str(v) for k, v in r.configs.items() if v is not None}
        current = admin.describe_configs(r.name, include_defaults=False)
        delete = sorted(k for k, e in current.items() if not e.is_default and k not in wanted)
        admin.alter_configs(r.name, set=wanted, delete=delete, validate_only=validate_only)
        out.append(AlterConfigsResourceResult(0, "", int(ConfigResourceType.TOPIC), r.name))
    return AlterConfigsResponse(0, out)


# -- partitions --------------------------------------------------------------------------------
def create_partitions_map(admin: _Admin, topic_partitions: Mapping[str, NewPartitions | int],
                          validate_only: bool = False) -> None:
    """create_partitions({topic: NewPartitions(total_count)}) (an int total is taken too)."""
    for topic, np in topic_partitions.items():
        if isinstance(np, int):
            np = NewPartitions(np)
        if not isinstance(np, NewPartitions):
            raise TypeError(f"create_partitions: {topic}: expected NewPartitions or an int, "
                            f"got {np!r}")
        admin.create_partitions(topic, np.total_count, assignment=np.new_assignments,
                                validate_only=validate_only)


# -- consumer groups ---------------------------------------------------------------------------
def list_consumer_groups(admin: _Admin, broker_ids: Sequence[int] | None = None
                         ) -> list[tuple[str, str]]:
    """[(group_id, protocol_type)] of every group (broker_ids is ignored: the gateway asks
    every coordinator)."""
    return [(g.group_id, g.protocol_type) for g in admin.list_groups()]


def describe_consumer_groups(admin: _Admin, group_ids: Sequence[str],
                             group_coordinator_id: int | None = None,
                             include_authorized_operations: bool = False
                             ) -> list[GroupInformation]:
    """One GroupInformation per group (an unknown group: state "Dead", no members, as Kafka
    answers)."""
    out = []
    for d in admin.describe_groups(list(group_ids)):
        members = []
        for m in d.members:
            by_topic: dict[str, list[int]] = {}
            for tp in m.assignment:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            members.append(MemberInformation(
                m.member_id, m.client_id, m.client_host,
                MemberMetadata(0, list(m.subscribed_topics), b""),
                MemberAssignment(0, sorted((t, sorted(ps)) for t, ps in by_topic.items()), b"")))
        out.append(GroupInformation(0, d.group_id, d.state, d.protocol_type, d.protocol,
                                    members, None))
    return out


def list_consumer_group_offsets(admin: _Admin, group_id: str,
                                group_coordinator_id: int | None = None,
                                partitions: Iterable[TopicPartition] | None = None
                                ) -> dict[TopicPartition, OffsetAndMetadata]:
    """{TopicPartition: OffsetAndMetadata} the group committed."""
    return admin.list_group_offsets(group_id, partitions)


def alter_consumer_group_offsets(admin: _Admin, group_id: str,
                                 offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                                 group_coordinator_id: int | None = None) -> None:
    """Commit offsets for a group without members (UNKNOWN_MEMBER_ID otherwise)."""
    admin.alter_group_offsets(group_id, dict(offsets))
