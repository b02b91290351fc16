"""kafka-python's public names exist in riverbed with the same meaning (issue 16, item 2;
kafka-python 3.0's, issue 28). kafka-python 3.0.12 (a dev dependency) is the oracle for the
names, error classes and codes."""
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

from sdk_fakes import FakeGateway, pollable_fake_channels


# kafka-python 3.0's top-level names Riverbed does not have (yet), and why
NOT_AT_TOP = {
    "ConsumerGroupMetadata": "transactions' consumer group metadata (issue 26's work)",
    "AsyncConsumerRebalanceListener": "Riverbed's consumer calls listeners synchronously",
}


def test_top_level_names():
    import kafka
    for name in kafka.__all__:
        if name in NOT_AT_TOP:
            continue
        assert name in riverbed.__all__ and hasattr(riverbed, name), name
    # kafka-python's producer and consumer are the clients with kafka-python's defaults and
    # constructor check; its admin client is a facade over Riverbed's Admin
    assert issubclass(riverbed.KafkaProducer, riverbed.Producer)
    assert issubclass(riverbed.KafkaConsumer, riverbed.Consumer)
    assert not issubclass(riverbed.KafkaAdminClient, riverbed.Admin)
    assert riverbed_admin.KafkaAdminClient is riverbed.KafkaAdminClient


def test_kafka_admin_names():
    import kafka.admin
    for name in kafka.admin.__all__ + ["NewTopic", "NewPartitions"]:
        if name.startswith(("AbortTransaction", "PartitionProducer", "ProducerState",
                            "Transaction", "Scram", "UserScram")):
            continue        # transactions and SCRAM users: not served by the SDK yet
        assert hasattr(riverbed_admin, name), name


def test_kafka_python_enums_have_kafka_pythons_members():
    import kafka.admin
    from riverbed import kafka_python_types as ours
    for name in ("AlterConfigOp", "ConfigFilterType", "ConfigType", "ConfigSourceType",
                 "GroupState", "GroupType", "UpdateFeatureType", "ResourceType", "ACLOperation",
                 "ACLPermissionType", "ACLResourcePatternType", "OffsetSpec"):
        theirs = getattr(kafka.admin, name)
        assert {m.name: m.value for m in getattr(ours, name)} == \
            {m.name: m.value for m in theirs}, name
    assert {m.name: m.value for m in ConfigResourceType} == \
        {m.name: m.value for m in kafka.admin.ConfigResourceType}


def test_every_kafka_python_error_class_is_there_with_its_name_and_code():
    for name, cls in vars(kafka_errors).items():
        if not inspect.isclass(cls) or not issubclass(cls, Exception):
            continue
        ours = getattr(errors, name, None)
        assert ours is not None, f"riverbed.errors lacks kafka-python's {name}"
        assert issubclass(ours, errors.KafkaError), name
        errno = getattr(cls, "errno", None)
        if isinstance(errno, int):
            assert ours.errno == errno and ours.__name__ == cls.__name__, name
            assert issubclass(ours, errors.BrokerResponseError), name
            assert errors.error_class(errno).__name__ == kafka_errors.for_code(errno).__name__, name


def test_kafka_python_error_hierarchy():
    # everything a kafka-python program catches is a KafkaError, as in kafka-python 3.0
    for cls in (errors.KafkaTimeoutError, errors.CommitFailedError, errors.IllegalStateError,
                errors.IllegalArgumentError, errors.KafkaConfigurationError,
                errors.NoBrokersAvailable, errors.IncompatibleBrokerVersion):
        assert issubclass(cls, errors.KafkaError), cls
        assert not issubclass(cls, errors.BrokerResponseError) or \
            cls in (errors.NoBrokersAvailable, errors.IncompatibleBrokerVersion), cls
    assert issubclass(errors.KafkaTimeoutError, errors.RetriableError)
    assert errors.KafkaTimeoutError("t").retriable and str(errors.KafkaTimeoutError("t")) == "t"
    assert issubclass(errors.UnknownTopicOrPartitionError, errors.InvalidMetadataError)
    assert issubclass(errors.TopicAuthorizationFailedError, errors.AuthorizationError)
    assert issubclass(errors.IncompatibleBrokerVersion, errors.UnsupportedVersionError)
    assert errors.error_class(0) is errors.NoError
    # a client-side timeout met by a service is REQUEST_TIMED_OUT
    assert errors.KafkaTimeoutError.code == errors.RequestTimedOutError.code
    assert isinstance(errors.for_code(44), errors.PolicyViolationError)


def test_a_proto_code_defined_after_the_kafka_python_table_takes_over(monkeypatch):
    """Merging a branch that adds a code to errors.proto (and `X = _error("X")` anywhere in
    errors.py) keeps the module's name and for_code() on one class."""
    monkeypatch.setattr(errors, "_BY_CODE", dict(errors._BY_CODE))
    monkeypatch.setattr(errors, "_KAFKA_PYTHON_ONLY", set(errors._KAFKA_PYTHON_ONLY))
    early = errors._kafka_error("PolicyViolationError", 9044, "POLICY_VIOLATION")
    assert errors._kafka_error("Again", 9044, "POLICY_VIOLATION") is early
    later = errors._register(errors._error_class("PolicyViolationError", 9044,
                                                 "POLICY_VIOLATION", False, False, ""))
    assert errors.error_class(9044) is later is not early


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


def test_no_brokers_available_is_a_request_timeout_and_a_kafka_timeout():
    assert issubclass(errors.NoBrokersAvailable, errors.RequestTimedOutError)
    assert issubclass(errors.NoBrokersAvailable, errors.KafkaTimeoutError)


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


# -- the constructors' check (kafka-python 3.0 raises KafkaTimeoutError from them) -------------

KAFKA_PYTHON_CLIENTS = [("KafkaProducer", ()), ("KafkaConsumer", ("t",)), ("KafkaAdminClient", ())]


def _describe_cluster(body, payloads):
    return metadata_pb2.DescribeClusterResponse(cluster_id="c"), []


@pytest.mark.parametrize("name,args", KAFKA_PYTHON_CLIENTS, ids=[c[0] for c in KAFKA_PYTHON_CLIENTS])
def test_constructor_raises_no_brokers_available_when_no_bootstrap_address_answers(name, args,
                                                                                monkeypatch):
    pollable_fake_channels(monkeypatch)     # KafkaProducer's sender thread polls its channel
    gw = FakeGateway({})            # nothing answers: every request times out
    with pytest.raises(errors.KafkaTimeoutError) as info:
        getattr(riverbed, name)(*args, bootstrap_servers="tcp://a:1,tcp://b:2",
                                _channel_factory=gw.factory)
    assert isinstance(info.value, errors.NoBrokersAvailable)
    message = str(info.value)
    assert "bootstrap_timeout_ms=30000" in message
    assert "tcp://a:1" in message and "tcp://b:2" in message       # each address, and why
    probes = [api for api, _, _ in gw.requests if api == ApiKey.DESCRIBE_CLUSTER]
    assert len(probes) == 2
    assert all(ch.closed for ch in gw.channels[:2])                 # the probes' channels


@pytest.mark.parametrize("name", ["KafkaProducer", "KafkaConsumer", "KafkaAdminClient"])
def test_constructor_returns_once_a_bootstrap_address_answers(name, monkeypatch):
    pollable_fake_channels(monkeypatch)
    gw = FakeGateway({ApiKey.DESCRIBE_CLUSTER: _describe_cluster})
    client = getattr(riverbed, name)(bootstrap_servers="tcp://a:1", _channel_factory=gw.factory)
    try:        # (KafkaProducer's sender asks for a producer id meanwhile: idempotence is on)
        assert [api for api, _, _ in gw.requests if api != ApiKey.INIT_PRODUCER_ID] == \
            [ApiKey.DESCRIBE_CLUSTER]
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


@pytest.mark.parametrize("name,args", KAFKA_PYTHON_CLIENTS, ids=[c[0] for c in KAFKA_PYTHON_CLIENTS])
def test_api_version_is_taken_and_the_check_still_runs_as_in_kafka_python3(name, args,
                                                                         monkeypatch):
    pollable_fake_channels(monkeypatch)
    gw = FakeGateway({})
    with pytest.raises(errors.KafkaTimeoutError):
        getattr(riverbed, name)(*args, bootstrap_servers="tcp://a:1", api_version=(2, 0),
                                _channel_factory=gw.factory)


def test_the_plain_clients_stay_lazy(monkeypatch):
    pollable_fake_channels(monkeypatch)
    gw = FakeGateway({})
    riverbed.Admin(bootstrap_servers="tcp://a:1", _channel_factory=gw.factory).close()
    producer = riverbed.Producer(bootstrap_servers="tcp://a:1", _channel_factory=gw.factory)
    producer.close(timeout=0)
    assert not [api for api, _, _ in gw.requests if api == ApiKey.DESCRIBE_CLUSTER]


@pytest.mark.parametrize("setting", ["bootstrap_timeout_ms", "api_version_auto_timeout_ms"])
@pytest.mark.parametrize("name,args", KAFKA_PYTHON_CLIENTS, ids=[c[0] for c in KAFKA_PYTHON_CLIENTS])
def test_a_timeout_that_is_not_positive_is_refused_before_anything_starts(name, args, setting):
    gw = FakeGateway({})
    with pytest.raises(errors.KafkaConfigurationError, match=f"{setting}=0"):
        getattr(riverbed, name)(*args, bootstrap_servers="tcp://a:1", **{setting: 0},
                                _channel_factory=gw.factory)
    with pytest.raises(errors.KafkaConfigurationError, match="both given"):
        getattr(riverbed, name)(*args, bootstrap_servers="tcp://a:1", bootstrap_timeout_ms=1,
                                api_version_auto_timeout_ms=1, _channel_factory=gw.factory)
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
        assert admin.describe_cluster()["cluster_id"] == "c"
    with pytest.raises(errors.NoBrokersAvailable, match="no CURVE public key known"):
        riverbed.KafkaAdminClient(bootstrap_servers="tcp://a:1", _channel_factory=factory)
