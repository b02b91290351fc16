"""RpcServer and Publisher with CURVE and a ZAP handler, on real sockets with real keys (one
process, its own ZeroMQ context per test).

- A client with no key or an unknown key gets nothing through: no handler runs, and the server
  keeps serving a client with a trusted key.
- The handler sees the principal from the ZAP User-Id (`User:<name>`) and the peer's IP, never
  anything from the body.
- A connection that never completes its handshake is dropped after socket.handshake.timeout.ms.
- A key added to the trusted directory is admitted (old and new keys both work: a rotation).
- The metadata publisher: a trusted subscriber receives, an unknown one does not.
"""
from __future__ import annotations

import asyncio
import pathlib
import socket
import time

import pytest
import zmq
import zmq.asyncio

from riverbed import errors
from riverbed._proto.v1 import metadata_pb2
from riverbed.wire.apis import ApiKey
from riverbed.wire.security import ClientSecurity, client_security, create_keypair
from services.common.rpc import AsyncChannel, Publisher, Reply, RpcServer, Subscriber
from services.common.rpc.security import SecurityConfig, ServerSecurity

pytestmark = pytest.mark.integration


def keys(tmp: pathlib.Path, port: int) -> tuple[ServerSecurity, dict[str, ClientSecurity]]:
    trust = tmp / "trusted"
    _, server_secret = create_keypair(trust, "server", kind="service", secret_dir=tmp / "private",
                                      endpoints=(f"tcp://127.0.0.1:{port}",))
    _, alice = create_keypair(trust, "alice", secret_dir=tmp / "private")
    _, mallory = create_keypair(tmp / "untrusted", "mallory", secret_dir=tmp / "private")
    server = ServerSecurity(SecurityConfig(security_protocol="CURVE",
                                           curve_secret_key_file=str(server_secret),
                                           curve_trusted_keys_dir=str(trust),
                                           socket_handshake_timeout_ms=500))

    def client(secret):
        return client_security(security_protocol="CURVE", curve_secret_key_file=str(secret),
                               curve_server_keys_dir=str(trust), env={})
    return server, {"alice": client(alice), "mallory": client(mallory), "none": ClientSecurity()}


@pytest.fixture
def ctx():
    c = zmq.asyncio.Context()
    yield c
    c.destroy(linger=0)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_only_trusted_keys_reach_handlers(tmp_path, free_ports, ctx):
    port = free_ports(1)[0]
    server_sec, clients = keys(tmp_path, port)
    seen: list[tuple[str, str]] = []

    async def metadata(req):
        seen.append((req.principal, req.host))
        return Reply(metadata_pb2.MetadataResponse())

    async def main():
        server = RpcServer(f"tcp://127.0.0.1:{port}", {ApiKey.METADATA: metadata}, name="t",
                           context=ctx, security=server_sec)
        serving = asyncio.create_task(server.serve())
        try:
            for who in ("none", "mallory"):
                ch = AsyncChannel(server.bound_endpoint, context=ctx, security=clients[who])
                with pytest.raises(errors.RequestTimedOutError):
                    await ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(), timeout_ms=1500)
                await ch.close()
            assert seen == []
            assert server.statistics().requests_received == 0
            ch = AsyncChannel(server.bound_endpoint, context=ctx, security=clients["alice"])
            resp = await ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(), timeout_ms=20000)
            await ch.close()
            assert resp.ok
            assert seen == [("User:alice", "127.0.0.1")]
            admitted, refused = server_sec.zap_statistics()
            assert admitted >= 1 and refused >= 1      # mallory was refused by the ZAP handler
        finally:
            await server.close()
            serving.cancel()
    run(main())


def test_stalled_handshake_is_dropped(tmp_path, free_ports, ctx):
    port = free_ports(1)[0]
    server_sec, _ = keys(tmp_path, port)

    async def main():
        server = RpcServer(f"tcp://127.0.0.1:{port}", {}, name="t", context=ctx,
                           security=server_sec)
        serving = asyncio.create_task(server.serve())
        try:
            loop = asyncio.get_running_loop()

            def stall() -> bytes:
                with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                    # send nothing: libzmq's greeting waits, then ZMQ_HANDSHAKE_IVL (500 ms)
                    # expires and the server closes the connection
                    t0 = time.monotonic()
                    while time.monotonic() - t0 < 60:
                        data = s.recv(4096)
                        if data == b"":
                            return b"closed"
                    return b"open"
            assert await loop.run_in_executor(None, stall) == b"closed"
        finally:
            await server.close()
            serving.cancel()
    run(main())


def test_key_added_to_trust_dir_is_admitted(tmp_path, free_ports, ctx):
    port = free_ports(1)[0]
    server_sec, clients = keys(tmp_path, port)

    async def echo(req):
        return Reply(metadata_pb2.MetadataResponse(cluster_id=req.principal))

    async def main():
        server = RpcServer(f"tcp://127.0.0.1:{port}", {ApiKey.METADATA: echo}, name="t",
                           context=ctx, security=server_sec)
        serving = asyncio.create_task(server.serve())
        try:
            # rotation: bob's key joins the trusted directory; alice's keeps working
            pub, secret = create_keypair(tmp_path / "new", "bob", secret_dir=tmp_path / "private")
            (tmp_path / "trusted" / "bob.key").write_text(pub.read_text())
            server_sec.reload_trusted_keys()        # what SIGHUP does
            bob = client_security(security_protocol="CURVE", curve_secret_key_file=str(secret),
                                  curve_server_keys_dir=str(tmp_path / "trusted"), env={})
            for who, sec in (("User:alice", clients["alice"]), ("User:bob", bob)):
                ch = AsyncChannel(server.bound_endpoint, context=ctx, security=sec)
                resp = await ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(),
                                     timeout_ms=20000)
                await ch.close()
                assert resp.body.cluster_id == who
        finally:
            await server.close()
            serving.cancel()
    run(main())


def test_publisher_serves_trusted_subscribers_only(tmp_path, free_ports, ctx):
    port = free_ports(1)[0]
    server_sec, clients = keys(tmp_path, port)

    async def main():
        pub = Publisher(f"tcp://127.0.0.1:{port}", context=ctx, security=server_sec)
        good = Subscriber(pub.bound_endpoint, context=ctx, security=clients["alice"])
        bad = Subscriber(pub.bound_endpoint, context=ctx, security=clients["mallory"])
        try:
            got = None
            deadline = time.monotonic() + 60
            while got is None and time.monotonic() < deadline:
                await pub.publish(b"m", [b"snapshot"])
                try:
                    got = await asyncio.wait_for(good.recv(), 0.2)
                except TimeoutError:
                    pass
            assert got == (b"m", [b"snapshot"])
            await pub.publish(b"m", [b"snapshot"])
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(bad.recv(), 1.0)
        finally:
            await good.close()
            await bad.close()
            await pub.close()
    run(main())


def test_connections_per_ip_are_capped(tmp_path, free_ports, ctx):
    port = free_ports(1)[0]
    _, clients = keys(tmp_path, port)
    capped = ServerSecurity(SecurityConfig(
        security_protocol="CURVE",
        curve_secret_key_file=str(tmp_path / "private" / "server.key_secret"),
        curve_trusted_keys_dir=str(tmp_path / "trusted"), max_connections_per_ip=2))

    async def ok(req):
        return Reply(metadata_pb2.MetadataResponse())

    async def main():
        server = RpcServer(f"tcp://127.0.0.1:{port}", {ApiKey.METADATA: ok}, name="t",
                           context=ctx, security=capped)
        serving = asyncio.create_task(server.serve())
        chans = []
        try:
            for _ in range(2):
                ch = AsyncChannel(server.bound_endpoint, context=ctx, security=clients["alice"])
                chans.append(ch)
                assert (await ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(),
                                      timeout_ms=20000)).ok
            third = AsyncChannel(server.bound_endpoint, context=ctx, security=clients["alice"])
            with pytest.raises(errors.RequestTimedOutError):
                await third.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(), timeout_ms=1500)
            await third.close()     # refused by ZAP: libzmq does not retry that connection
            await chans.pop().close()     # a slot frees: a new connection gets in
            deadline = time.monotonic() + 60
            while True:
                ch = AsyncChannel(server.bound_endpoint, context=ctx, security=clients["alice"])
                try:
                    assert (await ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(),
                                          timeout_ms=1000)).ok
                    chans.append(ch)
                    break
                except errors.RequestTimedOutError:
                    await ch.close()
                    assert time.monotonic() < deadline
        finally:
            for ch in chans:
                await ch.close()
            await server.close()
            serving.cancel()
    run(main())
