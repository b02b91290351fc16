"""The consumer protocol's subscriptions and assignments in group.proto's messages, and back.

Pure conversions used by the group coordinator core (JoinGroup brings subscriptions,
JoinGroup/SyncGroup/DescribeGroups answer assignments); `services.group_coordinator.core.
coordinator` re-exports them.
"""
from __future__ import annotations

from riverbed._proto.v1 import group_pb2
from riverbed.coordinator.consumer_protocol import Subscription, group_by_topic

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_from_pb(pb: group_pb2.ConsumerSubscription) -> Subscription:
    owned = tuple((tp.topic, p) for tp in pb.owned_partitions for p in tp.partitions)
    return Subscription(tuple(pb.topics), pb.user_data or None, owned, pb.topic_pattern or None)


def subscription_to_pb(s: Subscription) -> group_pb2.ConsumerSubscription:
    return group_pb2.ConsumerSubscription(
        topics=list(s.topics), topic_pattern=s.topic_pattern or "", user_data=s.user_data or b"",
        owned_partitions=[group_pb2.TopicPartitions(topic=t, partitions=ps)
                          for t, ps in group_by_topic(s.owned_partitions)])


def assignment_to_pb(tps) -> group_pb2.ConsumerAssignment:
    return group_pb2.ConsumerAssignment(partitions=[
        group_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in group_by_topic(tps)])


EMPTY_SUBSCRIPTION = Subscription()
