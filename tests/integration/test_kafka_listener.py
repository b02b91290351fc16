"""The Kafka listener's shell in-process on 127.0.0.1, with stand-in handlers for the gateway's:
answers in request order whatever order the handlers finish in, requests reaching the handlers
in arrival order, acks=0 unanswered, the size limit, the idle timeout, a failing handler."""
from __future__ import annotations

import asyncio
import datetime
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md_req
from kio.schema.produce.v9 import request as pr_req

from riverbed import errors
from riverbed._proto.v1 import header_pb2, metadata_pb2, produce_pb2
from services.common.rpc import Reply
from services.gateway.kafka import protocol as kp
from services.gateway.kafka.brokers import KafkaBroker
from services.gateway.kafka.listener import KafkaListener
from services.gateway.kafka.listeners import Listener
from tests.unit.gateway.test_kafka_protocol import BATCH, decode_response, encode_request

pytestmark = pytest.mark.integration
R = header_pb2.ApiKey


def produce(acks: int, partition: int) -> pr_req.ProduceRequest:
    return pr_req.ProduceRequest(transactional_id=None, acks=acks,
                                 timeout=datetime.timedelta(seconds=5), topic_data=(
                                     pr_req.TopicProduceData(name="t", partition_data=(
                                         pr_req.PartitionProduceData(index=partition,
                                                                     records=BATCH),)),))


METADATA = md_req.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False)


class Stand:
    """Handlers: PRODUCE to partition 0 waits for `release`; others answer at once."""

    def __init__(self):
        self.release = asyncio.Event()
        self.seen: list[int] = []

    async def produce(self, req):
        p = req.body.topics[0].partitions[0].partition
        self.seen.append(p)
        if p == 0:
            await self.release.wait()
        if p == 9:
            raise RuntimeError("a bug")
        if p == 8:
            raise errors.NotLeaderForPartitionError("moved")
        if req.body.acks == 0:
            return None
        resp = produce_pb2.ProduceResponse()
        resp.topics.add(name="t").partitions.add(partition=p, base_offset=100 + p,
                                                  log_append_time_ms=-1)
        return Reply(resp)

    async def metadata(self, req):
        return Reply(metadata_pb2.MetadataResponse(cluster_id="c"))


async def start(stand: Stand, **kw) -> KafkaListener:
    listener = KafkaListener(
        Listener("PLAINTEXT", "127.0.0.1", 0), Listener("PLAINTEXT", "127.0.0.1", 0),
        gateway_id=1, handlers={R.PRODUCE: stand.produce, R.METADATA: stand.metadata},
        brokers=lambda name: (), socket_request_max_bytes=kw.get("max_bytes", 1 << 20),
        connections_max_idle_ms=kw.get("idle_ms", 60000), queued_max_requests=16)
    await listener.start()
    return listener


async def send(writer, body, corr):
    frame = encode_request(body, corr)
    writer.write(struct.pack(">i", len(frame)) + frame)
    await writer.drain()


async def recv(reader, api_key, version):
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return decode_response(api_key, version, struct.pack(">i", size) + await reader.readexactly(size))


def test_answers_in_request_order_and_requests_reach_handlers_in_order():
    async def main():
        stand = Stand()
        listener = await start(stand)
        serving = asyncio.create_task(listener.serve())
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
        await send(writer, produce(-1, 0), 1)       # held until released
        await send(writer, produce(0, 5), 2)        # acks=0: never answered
        await send(writer, produce(1, 1), 3)
        await send(writer, produce(1, 8), 4)        # a KafkaError: per partition
        await send(writer, produce(1, 9), 5)        # a bug: UNKNOWN_SERVER_ERROR
        await send(writer, METADATA, 6)
        while len(stand.seen) < 5:
            await asyncio.sleep(0.01)
        assert stand.seen == [0, 5, 1, 8, 9]         # arrival order
        await asyncio.sleep(0.1)
        stand.release.set()
        answers = [await recv(reader, kp.PRODUCE, 9) for _ in range(4)]
        assert [c for c, _ in answers] == [1, 3, 4, 5]
        codes = [b.responses[0].partition_responses[0].error_code for _, b in answers]
        assert codes == [ErrorCode.none, ErrorCode.none, ErrorCode.not_leader_or_follower,
                         ErrorCode.unknown_server_error]
        assert answers[0][1].responses[0].partition_responses[0].base_offset == 100
        corr, md = await recv(reader, kp.METADATA, 12)
        assert corr == 6 and [b.node_id for b in md.brokers] == [1] and md.cluster_id == "c"
        writer.close()
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        assert listener.handler_failures == 1
    asyncio.run(main())


def test_oversize_frames_and_idle_connections_are_closed():
    async def main():
        listener = await start(Stand(), max_bytes=1000, idle_ms=300)
        serving = asyncio.create_task(listener.serve())
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
        writer.write(struct.pack(">i", 1001))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""
        assert listener.closed_oversize == 1
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
        await send(writer, METADATA, 1)
        await recv(reader, kp.METADATA, 12)
        assert await asyncio.wait_for(reader.read(), 10) == b""     # idle: closed
        assert listener.closed_idle == 1
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    asyncio.run(main())
