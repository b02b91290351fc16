"""Consumer.offsets_for_times (kafka-python's API) over a fake gateway."""
import pytest
from sdk_fakes import FakeGateway

from riverbed import Consumer, OffsetAndTimestamp, TopicPartition
from riverbed._proto.v1 import header_pb2, list_offsets_pb2

ApiKey = header_pb2.ApiKey

# partition -> [(timestamp, offset), ...]: the log's time index
LOG = {0: [(1000, 0), (2000, 5), (3000, 9)], 1: []}


def list_offsets(body, payloads):
    resp = list_offsets_pb2.ListOffsetsResponse()
    for t in body.topics:
        rt = resp.topics.add(name=t.name)
        for p in t.partitions:
            hit = [(ts, off) for ts, off in LOG[p.partition] if ts >= p.timestamp]
            ts, off = hit[0] if hit else (-1, -1)
            rt.partitions.add(partition=p.partition, offset=off, timestamp=ts)
    return resp, []


def test_offsets_for_times_finds_the_first_record_at_or_after_the_time():
    gw = FakeGateway({ApiKey.LIST_OFFSETS: list_offsets})
    with Consumer(bootstrap="127.0.0.1:1", _channel_factory=gw.factory) as c:
        got = c.offsets_for_times({TopicPartition("t", 0): 1500, ("t", 1): 0,
                                   TopicPartition("t", 0)._replace(partition=0): 1500})
        assert got == {TopicPartition("t", 0): OffsetAndTimestamp(5, 2000, 0),
                       TopicPartition("t", 1): None}
        assert c.offsets_for_times({TopicPartition("t", 0): 9999}) == {TopicPartition("t", 0): None}
        with pytest.raises(ValueError, match="timestamp -1"):
            c.offsets_for_times({TopicPartition("t", 0): -1})
