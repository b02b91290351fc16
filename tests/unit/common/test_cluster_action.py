"""The ClusterAction policy (services.common.cluster_action): which requests need it, who holds it."""
from riverbed._proto.v1 import (controller_pb2, fetch_pb2, metadata_pb2, produce_pb2,
                                replication_pb2)
from riverbed.wire.apis import ApiKey
from services.common.cluster_action import (holds_cluster_action, parse_super_users,
                                            requires_cluster_action)


def test_inter_service_apis_need_cluster_action():
    for api, body in [(ApiKey.LEADER_AND_ISR, controller_pb2.LeaderAndIsrRequest()),
                      (ApiKey.STOP_REPLICA, controller_pb2.StopReplicaRequest()),
                      (ApiKey.UPDATE_METADATA, metadata_pb2.UpdateMetadataRequest()),
                      (ApiKey.CONTROLLED_SHUTDOWN, replication_pb2.ControlledShutdownRequest()),
                      (ApiKey.ALTER_PARTITION, replication_pb2.AlterPartitionRequest())]:
        assert requires_cluster_action(api, body), api


def test_follower_fetch_needs_it_consumer_fetch_does_not():
    assert requires_cluster_action(ApiKey.FETCH, fetch_pb2.FetchRequest(replica_id=0))
    assert requires_cluster_action(ApiKey.FETCH, fetch_pb2.FetchRequest(replica_id=3))
    assert not requires_cluster_action(ApiKey.FETCH, fetch_pb2.FetchRequest(replica_id=-1))


def test_produce_to_internal_topic_needs_it():
    req = produce_pb2.ProduceRequest()
    req.topics.add(name="orders")
    assert not requires_cluster_action(ApiKey.PRODUCE, req)
    req.topics.add(name="__consumer_offsets")
    assert requires_cluster_action(ApiKey.PRODUCE, req)


def test_client_apis_do_not():
    assert not requires_cluster_action(ApiKey.METADATA, metadata_pb2.MetadataRequest())
    assert not requires_cluster_action(ApiKey.CREATE_TOPICS, controller_pb2.CreateTopicsRequest())


def test_holders_are_services_and_super_users():
    services = {"User:storage-1", "User:controller-1"}
    supers = parse_super_users("User:admin; ops ;")
    assert supers == {"User:admin", "User:ops"}
    assert holds_cluster_action("User:storage-1", services, supers)
    assert holds_cluster_action("User:ops", services, supers)
    assert not holds_cluster_action("User:client", services, supers)
    assert not holds_cluster_action("User:ANONYMOUS", services, supers)
