"""kafka-python's public names exist in riverbed with the same meaning (issue 16, item 2).
kafka-python (a dev dependency) is the oracle for error names and codes."""
from __future__ import annotations

import inspect

import kafka.errors as kafka_errors
import pytest

import riverbed
from riverbed import admin as riverbed_admin
from riverbed import errors
from riverbed.structs import ConfigResource, ConfigResourceType, NewPartitions, NewTopic


def test_top_level_names():
    for name in ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient", "TopicPartition",
                 "OffsetAndMetadata", "ConsumerRebalanceListener"):
        assert name in riverbed.__all__ and hasattr(riverbed, name), name
    assert riverbed.KafkaProducer is riverbed.Producer
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
