"""The two ends of test_netcut_rpc.py, each run inside its own network namespace:

    python netcut_peer.py server ENDPOINT     a ROUTER answering METADATA with the routing id
                                              of the connection the request came on
    python netcut_peer.py client ENDPOINT     a services' AsyncChannel (no security), driven
                                              by lines on stdin, reporting JSON lines on stdout

Client protocol: it calls once and prints {"first": <connection id>}; on the line "send" it
starts a call with a 10-minute timeout and prints {"sent": true}; when that call is answered
it prints {"second": <connection id>, "connections_lost": n, "resent": n}.
"""
from __future__ import annotations

import asyncio
import json
import sys


def server(endpoint: str) -> int:
    import zmq

    from riverbed._proto.v1 import metadata_pb2
    from riverbed.wire.framing import decode_request, encode_response
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(endpoint)
    print(json.dumps({"listening": endpoint}), flush=True)
    while True:
        identity, *frames = sock.recv_multipart()
        req = decode_request(frames)
        body = metadata_pb2.MetadataResponse(
            topics=[metadata_pb2.TopicMetadata(name=identity.hex())])
        sock.send_multipart([identity, *encode_response(req.correlation_id, req.api, body)])


async def client(endpoint: str) -> int:
    from riverbed._proto.v1 import metadata_pb2
    from riverbed.wire.apis import ApiKey
    from riverbed.wire.security import ClientSecurity
    from services.common.rpc import AsyncChannel
    ch = AsyncChannel(endpoint, client_id="netcut", security=ClientSecurity())
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def call(timeout_ms: int) -> str:
        resp = await ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(),
                             timeout_ms=timeout_ms)
        return resp.body.topics[0].name

    print(json.dumps({"first": await call(30_000)}), flush=True)
    while (await reader.readline()).strip() != b"send":
        pass
    pending = asyncio.ensure_future(call(600_000))
    print(json.dumps({"sent": True}), flush=True)
    second = await pending
    print(json.dumps({"second": second, "connections_lost": ch.connections_lost,
                      "resent": ch.requests_resent}), flush=True)
    await ch.close()
    return 0


if __name__ == "__main__":
    role, endpoint = sys.argv[1], sys.argv[2]
    sys.exit(server(endpoint) if role == "server" else asyncio.run(client(endpoint)))
