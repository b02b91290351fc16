"""The no-network baseline: a Channel whose "server" is a null sink inside the same thread.

`riverbed-perf produce --null-sink` (and `make bench`'s baseline column) runs the very same
Producer — send()/send_many, accumulator, sender thread, request encoding, response decoding,
futures — with this channel in place of the DEALER to a gateway. Every request is encoded to
frames exactly as for the wire, then dropped; the answer is made at once from the request objects
(METADATA: the topic with the asked partition count, leader 1; INIT_PRODUCER_ID: id 1 epoch 0;
PRODUCE: success, offsets counted from the batch headers), encoded, and sent back through an
inproc PAIR socket so the sender's poll/recv path is the real one.

What it leaves out is exactly "the network": the sockets to the gateway, the gateway, the storage
node and their CPU.
"""
from __future__ import annotations

import uuid

import zmq

from riverbed.wire.security import ClientSecurity

from riverbed._proto.v1 import header_pb2, metadata_pb2, produce_pb2, producer_id_pb2
from riverbed.records import iter_batches
from riverbed.wire.client import Channel
from riverbed.wire.framing import UNSUPPORTED_VERSION, encode_response, error_response

__all__ = ["NullSinkChannel", "null_sink_factory", "NULL_ENDPOINT"]

ApiKey = header_pb2.ApiKey
NULL_ENDPOINT = "tcp://null-sink:0"


class NullSinkChannel(Channel):
    """A Channel answered in-thread by a null sink with `partitions` per topic (module doc)."""

    def __init__(self, endpoint: str, *, client_id: str = "", partitions: int = 1, **kw):
        addr = f"inproc://riverbed-null-{uuid.uuid4().hex}"
        ctx = zmq.Context.instance()
        server = ctx.socket(zmq.PAIR)
        server.bind(addr)
        # the base class's DEALER connects to an address nobody binds; it is swapped out below
        # (no connection monitor: nothing real is connected; riverbed.wire.liveness)
        # (and no CURVE, whatever RIVERBED_* says: the peer is in this process)
        kw["security"] = ClientSecurity()
        kw["fail_fast"] = False
        super().__init__(addr + "-unused", client_id=client_id, context=ctx, **kw)
        # swap the DEALER for a PAIR peer of the in-thread server
        self._poller.unregister(self._sock)
        self._sock.close(0)
        client = ctx.socket(zmq.PAIR)
        client.connect(addr)
        self._sock = client
        self._poller.register(client, zmq.POLLIN)
        self._server = server
        self.endpoint = endpoint
        self.partitions = partitions
        self._offsets: dict[tuple[str, int], int] = {}
        self._answer = None     # (api, response body or None for an envelope error)

    def send(self, api: int, body, *, payloads=(), timeout_ms: int = 30000, api_version: int = 0,
             expect_response: bool = True) -> int:
        # The answer is made from the request objects (no parsing of our own frames: a real
        # server's work is not the baseline's); the base class still encodes the request.
        handler = _HANDLERS.get(api)
        if expect_response:
            self._answer = (api, None if handler is None else handler(self, body, payloads))
        return super().send(api, body, payloads=payloads, timeout_ms=timeout_ms,
                            api_version=api_version, expect_response=expect_response)

    def _try_send(self, frames: list) -> bool:
        # the request frames are dropped; the answer goes back through the inproc PAIR
        if self._answer is not None:
            api, resp = self._answer
            self._answer = None
            corr = header_pb2.RequestHeader.FromString(frames[0]).correlation_id
            self._server.send_multipart(
                error_response(corr, api, UNSUPPORTED_VERSION, "null sink") if resp is None
                else encode_response(corr, api, resp), copy=False)
        return True

    def close(self) -> None:
        super().close()
        self._server.close(0)

    # -- answers --------------------------------------------------------------------------
    def _metadata(self, body, payloads):
        resp = metadata_pb2.MetadataResponse(controller_id=1, cluster_id="null-sink")
        resp.brokers.add(node_id=1, host="null-sink", port=0)
        for name in body.topics:
            t = resp.topics.add(name=name)
            for p in range(self.partitions):
                t.partitions.add(partition=p, leader=1, replicas=[1], isr=[1])
        resp.gateways.add(gateway_id=1, endpoint=self.endpoint)
        return resp

    def _init_producer_id(self, body, payloads):
        return producer_id_pb2.InitProducerIdResponse(producer_id=1, producer_epoch=0)

    def _produce(self, body, payloads):
        resp = produce_pb2.ProduceResponse()
        frames = iter(payloads)
        offsets = self._offsets
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                frame = next(frames)
                key = (t.name, p.partition)
                base = offsets.get(key, 0)
                n = sum(h.last_offset_delta + 1 for _, h in iter_batches(frame))
                offsets[key] = base + n
                rt.partitions.add(partition=p.partition, base_offset=base, log_append_time_ms=-1)
        return resp


_HANDLERS = {ApiKey.METADATA: NullSinkChannel._metadata,
             ApiKey.INIT_PRODUCER_ID: NullSinkChannel._init_producer_id,
             ApiKey.PRODUCE: NullSinkChannel._produce}


def null_sink_factory(partitions: int = 1):
    """A channel_factory for Producer(_channel_factory=...) answering with `partitions`."""
    def factory(endpoint: str, client_id: str = ""):
        return NullSinkChannel(endpoint, client_id=client_id, partitions=partitions)
    return factory
