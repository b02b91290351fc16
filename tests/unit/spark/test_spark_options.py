"""The riverbed data source's options, parsed with no Spark and no network."""
import inspect

import pytest

from riverbed import Consumer, Producer, TopicPartition
from riverbed.spark.options import (
    CONSUMER_SETTINGS,
    PRODUCER_SETTINGS,
    OptionError,
    parse_partition_offsets,
    parse_read_options,
    parse_write_options,
)

BOOT = {"bootstrap.servers": "tcp://127.0.0.1:9092, tcp://127.0.0.1:9093"}


def read(streaming=False, **opts):
    return parse_read_options({**BOOT, **opts}, streaming=streaming)


def test_defaults_are_sparks_kafka_defaults():
    batch = read(subscribe="a, b,a")
    assert batch.bootstrap == ("tcp://127.0.0.1:9092", "tcp://127.0.0.1:9093")
    assert batch.subscription.topics == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and batch.min_partitions is None
    assert batch.poll_timeout_ms == 120_000
    stream = read(streaming=True, subscribePattern="clicks-.*")
    assert stream.starting.kind == "latest" and stream.ending is None
    assert stream.subscription.matches("clicks-1") and not stream.subscription.matches("x-clicks-1")


def test_option_names_are_case_insensitive_as_spark_hands_them_over():
    o = parse_read_options({"BOOTSTRAP.SERVERS": "tcp://h:1", "subscribepattern": "t.*",
                            "MAXOFFSETSPERTRIGGER": "10", "failondataloss": "False"},
                           streaming=True)
    assert o.subscription.pattern == "t.*" and o.max_offsets_per_trigger == 10
    assert not o.fail_on_data_loss


def test_json_offsets_timestamps_and_assign():
    o = read(assign='{"t":[1,0],"u":[2]}', startingOffsets='{"t":{"0":23,"1":-2},"u":{"2":5}}',
             endingOffsets='{"t":{"0":-1,"1":40},"u":{"2":9}}')
    assert o.subscription.partitions == (TopicPartition("t", 0), TopicPartition("t", 1),
                                         TopicPartition("u", 2))
    assert o.starting.offsets == {TopicPartition("t", 0): 23, TopicPartition("t", 1): -2,
                                  TopicPartition("u", 2): 5}
    assert o.ending.offsets[TopicPartition("t", 0)] == -1
    o = read(subscribe="t", startingTimestamp="1000", startingOffsets="earliest",
             endingOffsetsByTimestamp='{"t":{"0":5000}}')
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 1000)   # timestamp wins
    assert o.ending.kind == "timestamps" and o.ending.offsets == {TopicPartition("t", 0): 5000}


@pytest.mark.parametrize("opts, message", [
    ({}, "one of the options subscribe, subscribePattern or assign must be given"),
    ({"subscribe": "a", "subscribePattern": "a.*"},
     "only one of the options subscribe, subscribePattern and assign"),
    ({"subscribe": " , "}, "no topics to subscribe to"),
    ({"subscribePattern": "a("}, "not a regular expression"),
    ({"assign": '{"t":[0,"1"]}'}, "assign=.*expected Spark's form"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":1'}, "startingOffsets: malformed JSON"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"x":1}}'}, "partition 'x' of topic 't'"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-3}}'}, "offset -3"),
    ({"subscribe": "t", "startingOffsets": '{"u":{"0":1}}'}, "names topic 'u'"),
    ({"subscribe": "t", "startingOffsets": "newest"}, "expected earliest, latest"),
    ({"subscribe": "t", "startingOffsets": "latest"}, "startingOffsets=latest is not valid"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, "starts at latest"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, "endingOffsets=earliest is not valid"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, "ends at earliest"),
    ({"subscribe": "t", "startingTimestamp": "yesterday"}, "startingTimestamp='yesterday'"),
    ({"subscribe": "t", "minPartitions": "0"}, "minPartitions='0': expected a positive"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss='maybe'"),
    ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "closest"}, "error or latest"),
    ({"subscribe": "t", "startingOffset": "earliest"}, "did you mean startingOffsets"),
    ({"subscribe": "t", "riverbed.group.id": "g"}, "riverbed.group.id is not supported"),
    ({"subscribe": "t", "riverbed.fetch.max.wait.ms": "soon"}, "riverbed.fetch.max.wait.ms='soon'"),
    ({"subscribe": "t", "riverbed.no.such.setting": "1"}, "unknown SDK setting"),
])
def test_bad_read_options_name_the_option(opts, message):
    with pytest.raises(OptionError, match=message):
        read(**opts)


def test_missing_bootstrap_and_streaming_only_rules():
    with pytest.raises(OptionError, match="bootstrap.servers must be given"):
        parse_read_options({"subscribe": "t"}, streaming=False)
    with pytest.raises(OptionError, match="endingOffsets is not valid in streaming"):
        read(streaming=True, subscribe="t", endingOffsets="latest")


def test_sdk_settings_become_client_keywords():
    o = read(subscribe="t", **{"riverbed.fetch.max.wait.ms": "100", "riverbed.check_crcs": "false",
                               "riverbed.linger.ms": "5", "queryName": "ignored"})
    assert o.consumer_config == {"fetch_max_wait_ms": 100, "check_crcs": False}  # linger: producer's
    w = parse_write_options({**BOOT, "topic": "out", "riverbed.linger.ms": "2.5",
                             "riverbed.compression.type": "lz4",
                             "checkpointLocation": "/tmp/x"})
    assert w.topic == "out"
    assert w.producer_config == {"acks": "all", "linger_ms": 2.5, "compression_type": "lz4"}
    w = parse_write_options({**BOOT, "riverbed.acks": "1"})
    assert w.producer_config["acks"] == 1 and w.topic is None
    with pytest.raises(OptionError, match="riverbed.key.serializer is not supported"):
        parse_write_options({**BOOT, "riverbed.key.serializer": "x"})


def test_settings_tables_match_the_clients_signatures():
    consumer = inspect.signature(Consumer).parameters
    producer = inspect.signature(Producer).parameters
    assert all(kw in consumer for kw, _ in CONSUMER_SETTINGS.values())
    assert all(kw in producer for kw, _ in PRODUCER_SETTINGS.values())


def test_partition_offsets_json_for_timestamps():
    assert parse_partition_offsets('{"t":{"3":1700000000000}}', "x", timestamps=True) == {
        TopicPartition("t", 3): 1700000000000}
    with pytest.raises(OptionError, match="negative"):
        parse_partition_offsets('{"t":{"3":-1}}', "x", timestamps=True)
    with pytest.raises(OptionError, match="JSON object of topics"):
        parse_partition_offsets("[]", "x")


def test_exactly_once_options():
    def write(streaming=True, **opts):
        return parse_write_options({**BOOT, "topic": "out", **opts}, streaming=streaming)

    w = write(exactlyOnce="true", **{"transactional.id.prefix": "clicks-agg"})
    assert w.exactly_once and w.transactional_id_prefix == "clicks-agg"
    assert w.producer_config == {"acks": "all", "transaction_timeout_ms": 900_000}
    w = write(exactlyonce="TRUE", **{"transactional.id.prefix": "q",
                                     "riverbed.transaction.timeout.ms": "30000"})
    assert w.producer_config["transaction_timeout_ms"] == 30000
    plain = write()
    assert not plain.exactly_once and plain.transactional_id_prefix is None
    for opts, match in [
        ({"exactlyOnce": "true"}, "needs transactional.id.prefix"),
        ({"exactlyOnce": "maybe"}, "exactlyOnce='maybe'"),
        ({"transactional.id.prefix": "q"}, "only used with exactlyOnce=true"),
        ({"riverbed.transaction.timeout.ms": "1000"}, "only used with exactlyOnce=true"),
        ({"exactlyOnce": "true", "transactional.id.prefix": "a b"}, "A-Za-z0-9"),
        ({"exactlyOnce": "true", "transactional.id.prefix": "q", "riverbed.acks": "1"},
         "acks=all"),
        ({"exactlyOnce": "true", "transactional.id.prefix": "q",
          "riverbed.enable.idempotence": "false"}, "idempotence"),
        ({"riverbed.transactional.id": "x"}, "transactional.id.prefix"),
        ({"exactlyOnc": "true"}, "did you mean exactlyOnce"),
    ]:
        with pytest.raises(OptionError, match=match):
            write(**opts)
    with pytest.raises(OptionError, match="streaming writes"):
        write(streaming=False, exactlyOnce="true", **{"transactional.id.prefix": "q"})
