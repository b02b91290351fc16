import argparse
import io

import pytest
from sdk_fakes import FakeGateway

from riverbed import errors
from riverbed._proto.v1 import controller_pb2, fetch_pb2, header_pb2, list_offsets_pb2, metadata_pb2
from riverbed.admin import Admin
from riverbed.consumer import Consumer
from riverbed.records import BatchBuilder, set_base_offset
from riverbed.structs import NewTopic, TopicPartition

ApiKey = header_pb2.ApiKey
TP = TopicPartition("t", 0)


def batch(base, values):
    b = BatchBuilder()
    for v in values:
        b.append(1000, b"k" + v, v, ())
    buf = bytearray(b.build())
    set_base_offset(buf, 0, base)
    return bytes(buf)


class Log:
    """One partition's log as batches; FETCH returns whole batches from fetch_offset, the last
    one cut in half (a partial trailing batch), like a storage node cut at max bytes."""

    def __init__(self, batches):
        self.batches = batches       # list of (base, bytes, count)
        self.fetches = []

    def fetch(self, body, payloads):
        resp = fetch_pb2.FetchResponse()
        out = []
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                self.fetches.append(p.fetch_offset)
                end = self.batches[-1][0] + self.batches[-1][2]
                if p.fetch_offset > end:
                    rt.partitions.add(partition=p.partition, error_code=1)
                    out.append(b"")
                    continue
                chosen = [b for base, b, n in self.batches if base + n > p.fetch_offset][:2]
                data = b"".join(chosen)
                if len(chosen) == 2:
                    data = data[: len(chosen[0]) + len(chosen[1]) // 2]
                rt.partitions.add(partition=p.partition, high_watermark=end)
                out.append(data)
        return resp, out

    def list_offsets(self, body, payloads):
        resp = list_offsets_pb2.ListOffsetsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                off = 0 if p.timestamp == -2 else self.batches[-1][0] + self.batches[-1][2]
                rt.partitions.add(partition=p.partition, offset=off)
        return resp, []


def metadata(body, payloads):
    resp = metadata_pb2.MetadataResponse()
    t = resp.topics.add(name="t")
    t.partitions.add(partition=0, leader=1, replicas=[1, 2], isr=[1, 2])
    return resp, []


def make_log():
    batches = []
    base = 0
    for n in (3, 4, 5):
        vals = [b"v%d" % (base + i) for i in range(n)]
        batches.append((base, batch(base, vals), n))
        base += n
    return Log(batches)


def consumer(log, **kw):
    gw = FakeGateway({ApiKey.FETCH: log.fetch, ApiKey.LIST_OFFSETS: log.list_offsets,
                      ApiKey.METADATA: metadata})
    return Consumer(bootstrap="127.0.0.1:1", _channel_factory=gw.factory, **kw), gw


def read_all(c, want):
    got = []
    for _ in range(20):
        for tp, recs in c.poll(timeout_ms=0).items():
            got += recs
        if len(got) >= want:
            break
    return got


def test_constructor_topics_assign_all_partitions_and_read_from_beginning():
    log = make_log()
    c, _ = consumer(log)
    c2 = Consumer("t", bootstrap="127.0.0.1:1", _channel_factory=FakeGateway(
        {ApiKey.METADATA: metadata}).factory)
    assert c2.assignment() == {TP}
    c.assign([TP])
    c.seek_to_beginning(TP)
    got = read_all(c, 12)
    assert [r.offset for r in got] == list(range(12))
    assert [r.value for r in got] == [b"v%d" % i for i in range(12)]
    assert got[5].key == b"kv5" and got[5].topic == "t"
    assert c.position(TP) == 12


def test_seek_into_the_middle_of_a_batch_trims_earlier_records():
    log = make_log()
    c, _ = consumer(log)
    c.assign([TP])
    c.seek(TP, 5)                     # batch 2 starts at 3
    got = read_all(c, 7)
    assert [r.offset for r in got] == list(range(5, 12))
    assert log.fetches[0] == 5


def test_next_fetch_is_pipelined_while_records_are_handed_out():
    log = make_log()
    c, gw = consumer(log)
    c.assign([TP])
    c.seek(TP, 0)
    first = c.poll(timeout_ms=0, max_records=1)
    assert [r.offset for r in first[TP]] == [0]
    # the first answer held batch 0 whole (batch 1 cut): the next FETCH from 3 is already out
    assert log.fetches[:2] == [0, 3]


def test_offset_out_of_range_resets_per_policy():
    log = make_log()
    c, _ = consumer(log, auto_offset_reset="earliest")
    c.assign([TP])
    c.seek(TP, 100)
    got = read_all(c, 12)
    assert [r.offset for r in got][:3] == [0, 1, 2]
    c3, _ = consumer(make_log(), auto_offset_reset="none")
    c3.assign([TP])
    c3.seek(TP, 100)
    with pytest.raises(errors.OffsetOutOfRangeError, match="t-0"):
        read_all(c3, 1)


def test_latest_reset_and_iteration_stops_after_consumer_timeout():
    log = make_log()
    c, _ = consumer(log, consumer_timeout_ms=50)
    c.assign([TP])
    assert c.position(TP) == 12
    assert list(c) == []


def test_admin_create_describe_and_errors():
    created = []

    def create(body, payloads):
        resp = controller_pb2.CreateTopicsResponse()
        for t in body.topics:
            code = 36 if t.name in created else 0
            created.append(t.name)
            resp.topics.add(name=t.name, error_code=code, num_partitions=t.num_partitions)
        return resp, []
    gw = FakeGateway({ApiKey.CREATE_TOPICS: create, ApiKey.METADATA: metadata})
    admin = Admin("tcp://127.0.0.1:1", _channel_factory=gw.factory)
    admin.create_topics([NewTopic("t", 3, 2, {"retention.ms": "1000"})])
    req = gw.requests[0][1]
    assert req.topics[0].configs["retention.ms"] == "1000" and req.topics[0].replication_factor == 2
    with pytest.raises(errors.TopicAlreadyExistsError, match=r"\[t\]"):
        admin.create_topics([NewTopic("t", 3, 2)])
    (desc,) = admin.describe_topics(["t"])
    assert desc.partitions[0].leader == 1 and desc.replication_factor == 2
    assert admin.list_topics() == ["t"]


def test_cli_parser_and_describe_format(monkeypatch):
    from riverbed import tools
    from riverbed.structs import PartitionInfo, TopicDescription
    from riverbed.tools.common import bootstrap_of, parse_kv
    from riverbed.tools.topics import format_description

    parser = argparse.ArgumentParser()
    tools.add_commands(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["topics", "create", "--topic", "x", "--partitions", "3",
                              "--replication-factor", "2", "--config", "a=1", "--config", "b=2"])
    assert (args.topic, args.partitions, args.replication_factor) == ("x", 3, 2)
    assert parse_kv(args.config, "--config") == {"a": "1", "b": "2"}
    monkeypatch.setenv("RIVERBED_BOOTSTRAP", "tcp://10.0.0.1:9092")
    assert bootstrap_of(args) == "tcp://10.0.0.1:9092"
    args = parser.parse_args(["consume", "--topic", "x", "--from-beginning", "--max-messages", "5",
                              "--bootstrap-server", "tcp://h:1"])
    assert args.from_beginning and args.max_messages == 5 and bootstrap_of(args) == "tcp://h:1"
    args = parser.parse_args(["produce", "--topic", "x", "--parse-key", "--key-separator", ":"])
    assert args.parse_key and args.key_separator == ":" and callable(args.func)
    with pytest.raises(SystemExit):
        parser.parse_args(["topics", "create"])      # --topic is required
    desc = TopicDescription("x", (PartitionInfo("x", 0, 1, (1, 2, 3), (1, 2, 3)),
                                  PartitionInfo("x", 1, -1, (2, 3, 1), ()),
                                  PartitionInfo("x", 2, 3, (3, 1, 2), (3,), elr=(1,),
                                                last_known_elr=(2,))), {"k": "v"})
    assert format_description(desc) == [
        "Topic:x\tPartitionCount:3\tReplicationFactor:3\tConfigs:k=v",
        "\tTopic: x\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: \tLastKnownElr: ",
        "\tTopic: x\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: \tElr: \tLastKnownElr: ",
        "\tTopic: x\tPartition: 2\tLeader: 3\tReplicas: 3,1,2\tIsr: 3\tElr: 1\tLastKnownElr: 2",
    ]
    with pytest.raises(SystemExit) as e:
        tools.main(["--help"])
    assert e.value.code == 0
