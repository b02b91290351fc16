"""kafka-python's public names exist in riverbed with the same meaning (issue 16, item 2).
kafka-python (a dev dependency) is the oracle for error names and codes."""
from __future__ import annotations

import inspect

import kafka.errors as kafka_errors
import pytest

import riverbed
from riverbed import admin as riverbed_admin
from riverbed import errors
from riverbed._proto.v1 import metadata_pb2
from riverbed.structs import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from riverbed.wire.apis import ApiKey

from sdk_fakes import FakeGateway


def test_top_level_names():
    for name in ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient", "TopicPartition",
                 "OffsetAndMetadata", "ConsumerRebalanceListener"):
        assert name in riverbed.__all__ and hasattr(riverbed, name), name
    # kafka-python's names are the clients, with kafka-python's eager constructor check
    assert issubclass(riverbed.KafkaProducer, riverbed.Producer)
    assert issubclass(riverbed.KafkaConsumer, riverbed.Consumer)
    assert issubclass(riverbed.KafkaAdminClient, riverbed.Admin)
    assert riverbed_admin.KafkaAdminClient is riverbed.KafkaAdminClient
    for name in ("KafkaAdminClient", "NewTopic", "NewPartitions", "ConfigResource",
                 "ConfigResourceType"):
        assert hasattr(riverbed_admin, name), name


def test_kafka_python_error_names_map_to_the_same_codes():
    known = set(errors.ErrorCode.values())
    checked = 0
    for name, cls in vars(kafka_errors).items():
        errno = getattr(cls, "errno", None)
        if not inspect.isclass(cls) or not isinstance(errno, int) or errno not in known \
                or errno == 0:
            continue
        ours = getattr(errors, name, None)
        assert ours is not None, f"riverbed.errors lacks kafka-python's {name}"
        assert ours.code == errno, (name, ours.code, errno)
        checked += 1
    assert checked > 40


@pytest.mark.parametrize("name", ["NoBrokersAvailable", "KafkaTimeoutError", "CommitFailedError",
                                  "TopicAlreadyExistsError", "IllegalStateError",
                                  "KafkaConfigurationError", "NoOffsetForPartitionError",
                                  "BrokerResponseError", "IllegalArgumentError"])
def test_client_side_kafka_python_names(name):
    assert issubclass(getattr(errors, name), errors.RiverbedError)


def test_no_brokers_available_is_a_request_timeout():
    assert issubclass(errors.NoBrokersAvailable, errors.RequestTimedOutError)


def test_new_topic_takes_kafka_python_keywords():
    t = NewTopic(name="t", num_partitions=2, replication_factor=1,
                 topic_configs={"retention.ms": "1"}, replica_assignments={0: [1]})
    assert t.configs == {"retention.ms": "1"} and t.replica_assignment == {0: [1]}
    assert t == NewTopic("t", 2, 1, {"retention.ms": "1"}, {0: [1]})
    with pytest.raises(ValueError, match="topic_configs"):
        NewTopic("t", 1, 1, configs={"a": "1"}, topic_configs={"b": "2"})


def test_config_resource_types():
    assert ConfigResource("topic", "t").resource_type is ConfigResourceType.TOPIC
    assert ConfigResource(2, "t").resource_type is ConfigResourceType.TOPIC
    with pytest.raises(ValueError, match="resource_type"):
        ConfigResource("cluster", "t")
    assert NewPartitions(3).new_assignments is None


def test_admin_refuses_broker_config_resources_and_bad_partition_specs():
    a = riverbed.Admin.__new__(riverbed.Admin)   # no connection needed: refused before I/O
    with pytest.raises(errors.InvalidRequestError, match="per topic"):
        a.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
    with pytest.raises(TypeError, match="NewPartitions"):
        a.create_partitions({"t": "three"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="not both"):
        a.create_partitions("t", 3, topic_partitions={"t": 3})  # type: ignore[call-overload]


# -- the constructors' check (kafka-python raises NoBrokersAvailable from them) ----------------

KAFKA_PYTHON_CLIENTS = [("KafkaProducer", ()), ("KafkaConsumer", ("t",)), ("KafkaAdminClient", ())]


def _describe_cluster(body, payloads):
    return metadata_pb2.DescribeClusterResponse(cluster_id="c"), []


@pytest.mark.parametrize("name,args", KAFKA_PYTHON_CLIENTS, ids=[c[0] for c in KAFKA_PYTHON_CLIENTS])
def test_constructor_raises_no_brokers_available_when_no_bootstrap_address_answers(name, args):
    gw = FakeGateway({})            # nothing answers: every request times out
    with pytest.raises(errors.NoBrokersAvailable) as info:
        getattr(riverbed, name)(*args, bootstrap_servers="tcp://a:1,tcp://b:2",
                                _channel_factory=gw.factory)
    message = str(info.value)
    assert "api_version_auto_timeout_ms=2000" in message
    assert "tcp://a:1" in message and "tcp://b:2" in message       # each address, and why
    probes = [api for api, _, _ in gw.requests if api == ApiKey.DESCRIBE_CLUSTER]
    assert len(probes) == 2
    assert all(ch.closed for ch in gw.channels[:2])                 # the probes' channels


@pytest.mark.parametrize("name", ["KafkaProducer", "KafkaConsumer", "KafkaAdminClient"])
def test_constructor_returns_once_a_bootstrap_address_answers(name):
    gw = FakeGateway({ApiKey.DESCRIBE_CLUSTER: _describe_cluster})
    client = getattr(riverbed, name)(bootstrap_servers="tcp://a:1", _channel_factory=gw.factory)
    try:
        assert [api for api, _, _ in gw.requests] == [ApiKey.DESCRIBE_CLUSTER]
    finally:
        client.close()


def test_a_consumer_takes_its_topics_after_the_check():
    gw = FakeGateway({ApiKey.DESCRIBE_CLUSTER: _describe_cluster})
    consumer = riverbed.KafkaConsumer("t", bootstrap_servers="tcp://a:1", group_id="g",
                                      _channel_factory=gw.factory)
    try:
        assert consumer.subscription() == {"t"}
        assert gw.requests[0][0] == ApiKey.DESCRIBE_CLUSTER
    finally:
        consumer.close(autocommit=False)


def test_the_second_address_may_answer_and_an_error_answer_counts():
    answers = iter([None, errors.ErrorCode.Value("CLUSTER_AUTHORIZATION_FAILED")])
    gw = FakeGateway({ApiKey.DESCRIBE_CLUSTER: lambda body, payloads: next(answers)})
    riverbed.KafkaAdminClient(bootstrap_servers="tcp://a:1,tcp://b:2",
                              _channel_factory=gw.factory).close()
    assert [ch.endpoint for ch in gw.channels] == ["tcp://a:1", "tcp://b:2"]


def test_api_version_given_skips_the_check_and_the_plain_clients_stay_lazy():
    gw = FakeGateway({})
    riverbed.KafkaAdminClient(bootstrap_servers="tcp://a:1", api_version=(2, 0),
                              _channel_factory=gw.factory).close()
    riverbed.Admin(bootstrap_servers="tcp://a:1", _channel_factory=gw.factory).close()
    producer = riverbed.Producer(bootstrap_servers="tcp://a:1", _channel_factory=gw.factory)
    producer.close(timeout=0)
    assert not [api for api, _, _ in gw.requests if api == ApiKey.DESCRIBE_CLUSTER]


def test_a_timeout_that_is_not_positive_is_refused_before_anything_starts():
    gw = FakeGateway({})
    with pytest.raises(errors.ClientError, match="api_version_auto_timeout_ms=0"):
        riverbed.KafkaProducer(bootstrap_servers="tcp://a:1", api_version_auto_timeout_ms=0,
                               _channel_factory=gw.factory)
    assert gw.channels == []


def test_an_address_whose_channel_cannot_be_made_is_skipped():
    """With CURVE, an address whose server key is unknown fails at the channel's creation: the
    check and the client's own calls move on to the next address (NoBrokersAvailable names it)."""
    gw = FakeGateway({ApiKey.DESCRIBE_CLUSTER: _describe_cluster})

    def factory(endpoint, client_id=""):
        if endpoint == "tcp://a:1":
            raise errors.NetworkError(f"no CURVE public key known for server {endpoint}")
        return gw.factory(endpoint, client_id)

    with riverbed.KafkaAdminClient(bootstrap_servers="tcp://a:1,tcp://b:2",
                                   _channel_factory=factory) as admin:
        assert admin.describe_cluster().cluster_id == "c"
    with pytest.raises(errors.NoBrokersAvailable, match="no CURVE public key known"):
        riverbed.KafkaAdminClient(bootstrap_servers="tcp://a:1", _channel_factory=factory)
