"""ReplicaFetcher.follow (services/storage_node/shell/replica_fetcher.py): when a LEADER_AND_ISR
changes what a fetcher pulls, the fetch in flight is abandoned if it no longer fits: a partition
new to it, or (issue 24) a partition whose leader epoch changed, e.g. after this node registered
again when a network cut healed; its answer could only be FENCED_LEADER_EPOCH. No sockets."""
import asyncio
from types import SimpleNamespace

from services.storage_node.core.replica_state import Role
from services.storage_node.shell.replica_fetcher import ReplicaFetcher

TP, OTHER = ("t", 0), ("t", 1)


def fetcher_with_a_fetch_in_flight(epochs):
    replicas = {tp: SimpleNamespace(leader=1, leader_epoch=e, role=Role.FOLLOWER)
                for tp, e in epochs.items()}
    node = SimpleNamespace(core=SimpleNamespace(get=replicas.get, replicas=replicas))
    f = ReplicaFetcher(node, leader_id=1, endpoint="tcp://leader:1")
    loop = asyncio.new_event_loop()
    f._call = loop.create_future()
    f._fetching = frozenset(epochs)
    f._fetch_epochs = dict(epochs)
    return f, replicas, loop


def test_same_partitions_same_epochs_the_fetch_goes_on():
    f, _, loop = fetcher_with_a_fetch_in_flight({TP: 3, OTHER: 3})
    f.follow([TP, OTHER])
    assert not f._call.cancelled() and not f._interrupted
    loop.close()


def test_a_new_leader_epoch_abandons_the_fetch_in_flight():
    f, replicas, loop = fetcher_with_a_fetch_in_flight({TP: 3, OTHER: 3})
    replicas[OTHER].leader_epoch = 4
    f.follow([TP, OTHER])
    assert f._call.cancelled() and f._interrupted
    loop.close()


def test_a_new_partition_abandons_the_fetch_in_flight():
    f, replicas, loop = fetcher_with_a_fetch_in_flight({TP: 3})
    replicas[OTHER] = SimpleNamespace(leader=1, leader_epoch=0, role=Role.FOLLOWER)
    f.follow([TP, OTHER])
    assert f._call.cancelled()
    loop.close()
