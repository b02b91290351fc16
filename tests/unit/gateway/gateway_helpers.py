"""Builders shared by the gateway's unit tests."""
from __future__ import annotations

from riverbed._proto.v1 import common_pb2, metadata_pb2

from services.gateway.core.metadata_cache import MetadataCache


def broker(node_id: int) -> common_pb2.Broker:
    return common_pb2.Broker(node_id=node_id, host="127.0.0.1", port=9100 + node_id,
                             endpoint=f"tcp://127.0.0.1:{9100 + node_id}")


def topic(name: str, leaders: list[int], epoch: int = 0) -> metadata_pb2.TopicMetadata:
    t = metadata_pb2.TopicMetadata(name=name)
    for p, leader in enumerate(leaders):
        t.partitions.add(partition=p, leader=leader, leader_epoch=epoch,
                         replicas=[leader] if leader >= 0 else [], isr=[leader] if leader >= 0 else [])
    return t


def update(epoch: int = 1, version: int = 1, brokers=(1, 2, 3), topics=None,
           controller_id: int = 100, cluster_id: str = "c1") -> metadata_pb2.UpdateMetadataRequest:
    if topics is None:
        topics = [topic("orders", [1, 2, 1]), topic("logs", [2, -1]), topic("ghost", [9])]
    u = metadata_pb2.UpdateMetadataRequest(controller_id=controller_id, controller_epoch=epoch,
                                           metadata_version=version, cluster_id=cluster_id)
    u.live_brokers.extend(broker(b) for b in brokers)
    u.topics.extend(topics)
    return u


def cache_with(**kw) -> MetadataCache:
    c = MetadataCache()
    assert c.apply_update(update(**kw), now_ms=0)
    return c
