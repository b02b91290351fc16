"""What a channel does with the requests a broken connection took with it (issue 24): the pure
decision (services.common.rpc.channel.after_connection_lost) and the table behind it
(riverbed.wire.apis: safe_to_repeat). The sockets are exercised in
tests/integration/test_rpc.py."""
from riverbed.wire.apis import APIS, ApiKey
from services.common.rpc.channel import MAX_RESENDS, after_connection_lost, safe_to_repeat


def test_lost_requests_safe_to_repeat_are_resent_in_order_the_others_fail():
    calls = [(1, ApiKey.LEADER_AND_ISR, True, 0), (2, ApiKey.PRODUCE, True, 0),
             (3, ApiKey.FETCH, True, 0), (4, ApiKey.CREATE_TOPICS, True, 0),
             (5, ApiKey.METADATA, False, 0),        # still waiting for a connection
             (6, ApiKey.PRODUCE, False, 0)]
    assert after_connection_lost(calls) == ([1, 3], [2, 4])


def test_a_request_lost_again_and_again_fails_after_max_resends():
    calls = [(1, ApiKey.FETCH, True, MAX_RESENDS - 1), (2, ApiKey.FETCH, True, MAX_RESENDS)]
    assert after_connection_lost(calls) == ([1], [2])


def test_nothing_lost_nothing_to_do():
    assert after_connection_lost([]) == ([], [])
    assert after_connection_lost([(9, ApiKey.PRODUCE, False, 0)]) == ([], [])


def test_which_apis_are_safe_to_repeat():
    # reads, and changes whose repeat is answered with the state the first one made
    for api in (ApiKey.FETCH, ApiKey.METADATA, ApiKey.LIST_OFFSETS, ApiKey.LEADER_AND_ISR,
                ApiKey.STOP_REPLICA, ApiKey.ALTER_PARTITION, ApiKey.CONTROLLED_SHUTDOWN,
                ApiKey.BROKER_HEARTBEAT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_LOG_DIRS):
        assert safe_to_repeat(api), ApiKey.Name(api)
    # a repeat could append twice, answer differently or undo a later change
    for api in (ApiKey.PRODUCE, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
                ApiKey.CREATE_PARTITIONS, ApiKey.OFFSET_COMMIT, ApiKey.JOIN_GROUP,
                ApiKey.SYNC_GROUP, ApiKey.INIT_PRODUCER_ID, ApiKey.ALTER_REPLICA_LOG_DIRS,
                ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS):
        assert not safe_to_repeat(api), ApiKey.Name(api)
    assert not safe_to_repeat(999)                 # an api this build does not know
    assert all(isinstance(spec.safe_to_repeat, bool) for spec in APIS.values())
