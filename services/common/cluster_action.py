"""Which requests need Kafka's ClusterAction operation on the cluster resource, and who holds it:
a pure policy (no sockets, no files), applied in one place, the RpcServer's dispatch.

ClusterAction is what a storage node, the controller and the coordinators do to each other:
LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN, ALTER_PARTITION,
BROKER_HEARTBEAT, a FETCH
with replica_id >= 0 (a follower's fetch), and a PRODUCE to an internal topic
(`__consumer_offsets`). It is held only by the fleet's service principals (keys whose
certificate says `kind = service`) and by `super.users`; anybody else gets
CLUSTER_AUTHORIZATION_FAILED before a handler runs, so nothing changes.
"""
from __future__ import annotations

from typing import Any, Collection

from riverbed.wire.apis import ApiKey

__all__ = ["CLUSTER_ACTION_APIS", "INTERNAL_TOPICS", "requires_cluster_action",
           "holds_cluster_action", "parse_super_users"]

CLUSTER_ACTION_APIS = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION,
    ApiKey.BROKER_HEARTBEAT,          # a node keeping itself (or another) alive at the controller
})
INTERNAL_TOPICS = frozenset({"__consumer_offsets"})


def requires_cluster_action(api: int, body: Any) -> bool:
    """Whether the request (its api key and decoded body) needs ClusterAction."""
    if api in CLUSTER_ACTION_APIS:
        return True
    if api == ApiKey.FETCH:
        return body.replica_id >= 0
    if api == ApiKey.PRODUCE:
        return any(t.name in INTERNAL_TOPICS for t in body.topics)
    return False


def holds_cluster_action(principal: str, service_principals: Collection[str],
                         super_users: Collection[str]) -> bool:
    return principal in service_principals or principal in super_users


def parse_super_users(value: str) -> frozenset[str]:
    """Kafka's `super.users`: `User:a;User:b` (a bare name means `User:<name>`)."""
    out = set()
    for part in (value or "").split(";"):
        p = part.strip()
        if p:
            out.add(p if ":" in p else f"User:{p}")
    return frozenset(out)
