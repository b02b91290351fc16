"""kafka-python's admin calls and result shapes over Riverbed's Admin (a mixin of it).

kafka-python's KafkaAdminClient (2.x) names and returns things its own way:
`list_consumer_groups()` -> [(group_id, protocol_type)], `describe_consumer_groups()` ->
[GroupInformation], `list_consumer_group_offsets()` -> {TopicPartition: OffsetAndMetadata},
`describe_configs([ConfigResource])` -> [a response with `.resources`], `alter_configs` with
Kafka's legacy (replace-all) semantics, `create_partitions({topic: NewPartitions})`. This module
gives Admin those names and shapes so that a kafka-python program runs after its imports change;
Riverbed's own calls (list_groups, describe_groups, describe_configs("topic"), ...) stay the
primary API. Errors are raised as riverbed.errors classes rather than left inside responses.
"""

from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple, Sequence, cast

from riverbed import errors
from riverbed.structs import (
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    OffsetAndMetadata,
    TopicPartition,
)

if TYPE_CHECKING:  # pragma: no cover
    from riverbed.admin import Admin

__all__ = ["KafkaPythonAdminMixin", "GroupInformation", "MemberInformation",
           "MemberMetadata", "MemberAssignment", "DescribeConfigsResponse",
           "AlterConfigsResponse", "ConfigResourceResult", "AlterConfigsResourceResult"]


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
    """One entry of kafka-python's describe_consumer_groups()."""
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


def _admin(mixin: "KafkaPythonAdminMixin") -> "Admin":
    return cast("Admin", mixin)


class KafkaPythonAdminMixin:
    """kafka-python's KafkaAdminClient calls, for Admin."""

    # -- configs -------------------------------------------------------------------------------
    def _describe_config_resources(self, resources: Sequence[ConfigResource],
                                   include_synonyms: bool = False) -> list[DescribeConfigsResponse]:
        """describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")]): one response
        whose `.resources` holds one ConfigResourceResult per resource (names filtered by the
        resource's `configs` when given)."""
        results = []
        for r in _topic_resources(resources, "describe_configs"):
            entries = _admin(self).describe_configs(r.name, include_defaults=True)
            wanted = None if r.configs is None else set(r.configs)
            results.append(ConfigResourceResult(
                0, "", int(ConfigResourceType.TOPIC), r.name,
                [(e.name, e.value, False, e.is_default, False) for e in entries.values()
                 if wanted is None or e.name in wanted]))
        return [DescribeConfigsResponse(0, results)]

    def _alter_config_resources(self, resources: Sequence[ConfigResource],
                                validate_only: bool = False) -> AlterConfigsResponse:
        """alter_configs([ConfigResource(TOPIC, "t", configs={k: v})]) with Kafka's (legacy)
        AlterConfigs meaning: the topic's overrides become exactly `configs` (others return to
        their defaults; a None value removes that key)."""
        out = []
        for r in _topic_resources(resources, "alter_configs"):
            if not isinstance(r.configs, Mapping):
                raise TypeError(f"alter_configs: {r.name}: configs must be a dict of name -> value")
            wanted = {k: str(v) for k, v in r.configs.items() if v is not None}
            current = _admin(self).describe_configs(r.name, include_defaults=False)
            delete = sorted(k for k, e in current.items() if not e.is_default and k not in wanted)
            _admin(self).alter_configs(r.name, set=wanted, delete=delete, validate_only=validate_only)
            out.append(AlterConfigsResourceResult(0, "", int(ConfigResourceType.TOPIC), r.name))
        return AlterConfigsResponse(0, out)

    # -- partitions ----------------------------------------------------------------------------
    def _create_partitions_map(self,
                               topic_partitions: Mapping[str, NewPartitions | int],
                               validate_only: bool = False) -> None:
        for topic, np in topic_partitions.items():
            if isinstance(np, int):
                np = NewPartitions(np)
            if not isinstance(np, NewPartitions):
                raise TypeError(f"create_partitions: {topic}: expected NewPartitions or an int, "
                                f"got {np!r}")
            _admin(self).create_partitions(topic, np.total_count, assignment=np.new_assignments,
                                   validate_only=validate_only)

    # -- consumer groups -----------------------------------------------------------------------
    def list_consumer_groups(self, broker_ids: Sequence[int] | None = None
                             ) -> list[tuple[str, str]]:
        """kafka-python's: [(group_id, protocol_type)] of every group (broker_ids is ignored:
        the gateway asks every coordinator)."""
        return [(g.group_id, g.protocol_type) for g in _admin(self).list_groups()]

    def describe_consumer_groups(self, group_ids: Sequence[str],
                                 group_coordinator_id: int | None = None,
                                 include_authorized_operations: bool = False
                                 ) -> list[GroupInformation]:
        """kafka-python's: one GroupInformation per group (an unknown group: state "Dead", no
        members, as Kafka answers)."""
        out = []
        for d in _admin(self).describe_groups(list(group_ids)):
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

    def list_consumer_group_offsets(self, group_id: str,
                                    group_coordinator_id: int | None = None,
                                    partitions: Iterable[TopicPartition] | None = None
                                    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """kafka-python's: {TopicPartition: OffsetAndMetadata} the group committed."""
        return _admin(self).list_group_offsets(group_id, partitions)

    def alter_consumer_group_offsets(self, group_id: str,
                                     offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                                     group_coordinator_id: int | None = None) -> None:
        """Commit offsets for a group without members (NonEmptyGroupError-like
        UNKNOWN_MEMBER_ID otherwise)."""
        _admin(self).alter_group_offsets(group_id, dict(offsets))
