"""riverbed-perf's command line and the Kafka-property -> SDK keyword mapping."""
import pytest

from loadgen import options


class FakeProducer:
    def __init__(self, bootstrap=None, *, acks=1, batch_size=16384, linger_ms=0.0,
                 compression_type=None, max_in_flight_requests_per_connection=5,
                 enable_thing=False, client_id=None, key_serializer=None, _channel_factory=None):
        pass


def test_parse_props():
    assert options.parse_props(["a.b=1", "c = x=y", "a.b=2"]) == {"a.b": "2", "c": "x=y"}
    with pytest.raises(options.PropertyError):
        options.parse_props(["novalue"])
    with pytest.raises(options.PropertyError):
        options.parse_props(["=1"])


def test_kafka_names_map_to_typed_keywords():
    kw = options.client_kwargs(FakeProducer, {
        "acks": "all", "batch.size": "65536", "linger.ms": "5",
        "compression.type": "LZ4", "max.in.flight.requests.per.connection": "1",
        "enable.thing": "true", "client.id": "perf", "bootstrap.servers": "ignored"})
    assert kw == {"acks": -1, "batch_size": 65536, "linger_ms": 5.0, "compression_type": "lz4",
                  "max_in_flight_requests_per_connection": 1, "enable_thing": True,
                  "client_id": "perf"}
    assert isinstance(kw["linger_ms"], float)
    assert options.client_kwargs(FakeProducer, {"compression.type": "none"}) == \
        {"compression_type": None}


@pytest.mark.parametrize("props", [{"no.such.key": "1"}, {"key.serializer": "x"},
                                   {"_channel_factory": "x"}, {"batch.size": "big"},
                                   {"acks": "most"}, {"enable.thing": "perhaps"}])
def test_bad_properties_are_errors_naming_the_key(props):
    with pytest.raises(options.PropertyError) as e:
        options.client_kwargs(FakeProducer, props)
    assert list(props)[0].split(".")[0].lstrip("_") in str(e.value)


def test_produce_flags_override_props():
    args = options.parse_args([
        "produce", "--bootstrap-server", "tcp://h:1", "--topic", "t", "--num-records", "10",
        "--record-size", "100", "--producer-prop", "acks=0", "linger.ms=7",
        "--producer-prop", "batch.size=100", "--acks", "all", "--batch-size", "4096",
        "--compression-type", "lz4", "--max-in-flight", "2"])
    assert args.producer_prop == ["acks=0", "linger.ms=7", "batch.size=100"]
    kw = options.producer_kwargs(args, FakeProducer)
    assert kw == {"acks": -1, "linger_ms": 7.0, "batch_size": 4096, "compression_type": "lz4",
                  "max_in_flight_requests_per_connection": 2}
    assert args.throughput == -1.0 and args.processes == 1 and not args.bulk
    assert args.reporting_interval == options.DEFAULT_REPORTING_INTERVAL_MS
    assert args.bootstrap == ["tcp://h:1"]


def test_produce_needs_exactly_one_payload_source(capsys):
    base = ["produce", "--bootstrap-server", "tcp://h:1", "--topic", "t", "--num-records", "1"]
    with pytest.raises(SystemExit):
        options.parse_args(base)
    with pytest.raises(SystemExit):
        options.parse_args(base + ["--record-size", "1", "--payload-file", "f"])
    with pytest.raises(SystemExit):
        options.parse_args(base + ["--record-size", "0"])


def test_consume_defaults_from_beginning_and_can_turn_it_off():
    base = ["consume", "--bootstrap-server", "tcp://h:1", "--topic", "t", "--num-records", "5"]
    assert options.parse_args(base).from_beginning is True
    args = options.parse_args(base + ["--no-from-beginning", "--consumer-prop",
                                      "fetch.max.wait.ms=50", "--fetch-min-bytes", "1000"])
    assert args.from_beginning is False

    class FakeConsumer:
        def __init__(self, *topics, bootstrap=None, fetch_min_bytes=1, fetch_max_wait_ms=500):
            pass
    assert options.consumer_kwargs(args, FakeConsumer) == {"fetch_max_wait_ms": 50,
                                                           "fetch_min_bytes": 1000}


def test_e2e_needs_a_rate_and_room_for_the_timestamp():
    base = ["e2e", "--bootstrap-server", "tcp://h:1", "--topic", "t", "--num-records", "5"]
    with pytest.raises(SystemExit):
        options.parse_args(base + ["--throughput", "-1"])
    with pytest.raises(SystemExit):
        options.parse_args(base + ["--throughput", "10", "--record-size", "4"])
    args = options.parse_args(base + ["--throughput", "10"])
    assert args.record_size == 100 and args.throughput == 10.0


def test_topic_creation_flags():
    args = options.parse_args([
        "produce", "--bootstrap-server", "tcp://h:1", "--topic", "t", "--num-records", "1",
        "--record-size", "1", "--create-topic", "--partitions", "3", "--replication-factor", "2",
        "--topic-config", "segment.bytes=1000", "--topic-config", "retention.ms=5"])
    assert (args.create_topic, args.partitions, args.replication_factor) == (True, 3, 2)
    assert options.parse_props(args.topic_config) == {"segment.bytes": "1000", "retention.ms": "5"}


def test_real_sdk_clients_accept_the_direct_flags():
    from riverbed import Consumer, Producer
    args = options.parse_args([
        "produce", "--bootstrap-server", "tcp://h:1", "--topic", "t", "--num-records", "1",
        "--record-size", "1", "--acks", "all", "--batch-size", "1000", "--linger-ms", "1",
        "--compression-type", "none", "--max-in-flight", "1"])
    assert options.producer_kwargs(args, Producer)["acks"] == -1
    assert options.client_kwargs(Consumer, {"fetch.min.bytes": "10"}) == {"fetch_min_bytes": 10}


def test_optional_boolean_properties_become_booleans():
    from loadgen.options import client_kwargs
    from riverbed import Producer
    assert client_kwargs(Producer, {"enable.idempotence": "false"}) == {"enable_idempotence": False}
    assert client_kwargs(Producer, {"enable.idempotence": "true"}) == {"enable_idempotence": True}


def test_optional_numeric_properties_become_numbers():
    # `batch_size_max: int | None = None`: "1048576" once reached the SDK as a string (TypeError
    # in Producer.__init__)
    from loadgen.options import PropertyError, client_kwargs
    from riverbed import Producer
    assert client_kwargs(Producer, {"batch.size.max": "1048576",
                                    "delivery.timeout.ms": "30000"}) == {
        "batch_size_max": 1048576, "delivery_timeout_ms": 30000}
    with pytest.raises(PropertyError, match="batch.size.max"):
        client_kwargs(Producer, {"batch.size.max": "big"})
    assert client_kwargs(Producer, {"client.id": "perf-1"}) == {"client_id": "perf-1"}
