"""The Kafka listener's SASL shell on real sockets, without a fleet: a KafkaListener on
127.0.0.1 (SASL_PLAINTEXT, SCRAM and PLAIN enabled, credentials from a dict) and raw Kafka frames
from this test: SaslHandshake v0 with bare token frames, v1 with SaslAuthenticate, PLAIN, a wrong
password, a request before authentication, random tokens; the listener serves on after each.
"""
from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading

import pytest
import scramp
from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as H1
from kio.schema.request_header.v2.header import RequestHeader as H2
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

from services.common.acl import scram as sc
from services.gateway.kafka.listener import KafkaListener, ListenerSecurity
from services.gateway.kafka.listeners import Listener

pytestmark = pytest.mark.integration

PASSWORD = "s3cret"
CREDS = {"alice": {m: sc.make_credential(m, PASSWORD, os.urandom(24))
                   for m in (sc.SCRAM_SHA_256, sc.SCRAM_SHA_512)}}


@pytest.fixture(scope="module")
def listener():
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box = {}

    async def main():
        bind = Listener("SASL_PLAINTEXT", "127.0.0.1", 0, "SASL_PLAINTEXT")
        k = KafkaListener(bind, bind, gateway_id=1, handlers={}, brokers=lambda name: (),
                          socket_request_max_bytes=1 << 20, connections_max_idle_ms=30000,
                          queued_max_requests=10, security=ListenerSecurity(
                              sasl_mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"),
                              credentials=lambda u, m: CREDS.get(u, {}).get(m),
                              sasl_max_receive_size=4096))
        await k.start()
        box["k"] = k
        box["task"] = asyncio.current_task()
        started.set()
        await k.serve()

    def run():
        try:
            loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert started.wait(10)
    yield box["k"]
    loop.call_soon_threadsafe(box["task"].cancel)
    t.join(10)


def request(api_key: int, version: int, corr: int, body) -> bytes:
    import io
    schema = load_request_schema(api_key, version)
    buf = io.BytesIO()
    if schema.__header_schema__ is H2:
        entity_writer(H2)(buf, H2(request_api_key=api_key, request_api_version=version,
                                  correlation_id=corr, client_id="t"))
    else:
        entity_writer(H1)(buf, H1(request_api_key=api_key, request_api_version=version,
                                  correlation_id=corr, client_id="t"))
    entity_writer(schema)(buf, body)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def recv_frame(s: socket.socket) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    size = struct.unpack(">i", head)[0]
    data = b""
    while len(data) < size:
        chunk = s.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def response(api_key: int, version: int, frame: bytes):
    schema = load_response_schema(api_key, version)
    offset = 4 + (1 if schema.__header_schema__ is ResponseHeaderV1 else 0)   # tagged fields
    return entity_reader(schema)(frame, offset)[0]


def connect(listener) -> socket.socket:
    return socket.create_connection(("127.0.0.1", listener.bound_port), timeout=10)


def handshake(s, mechanism: str, version: int = 1):
    body = load_request_schema(17, version)(mechanism=mechanism)
    s.sendall(request(17, version, 1, body))
    return response(17, version, recv_frame(s))


def authenticate(s, token: bytes, version: int = 2, corr: int = 2):
    s.sendall(request(36, version, corr, load_request_schema(36, version)(auth_bytes=token)))
    frame = recv_frame(s)
    return None if frame is None else response(36, version, frame)


def metadata_answered(s) -> bool:
    """A Metadata v1 request (all topics) gets an answer (past the SASL gate) or a close."""
    s.sendall(request(3, 1, 9, load_request_schema(3, 1)(topics=None)))
    frame = recv_frame(s)
    return frame is not None and struct.unpack(">i", frame[:4])[0] == 9


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_sasl_authenticate(listener, mechanism):
    s = connect(listener)
    assert handshake(s, mechanism).error_code.value == 0
    c = scramp.ScramClient([mechanism], "alice", PASSWORD)
    r = authenticate(s, c.get_client_first().encode())
    assert r.error_code.value == 0
    c.set_server_first(r.auth_bytes.decode())
    r = authenticate(s, c.get_client_final().encode(), corr=3)
    assert r.error_code.value == 0
    c.set_server_final(r.auth_bytes.decode())      # the server proved it knows the key
    assert metadata_answered(s)
    s.close()


def test_scram_after_a_v0_handshake_uses_bare_token_frames(listener):
    s = connect(listener)
    assert handshake(s, "SCRAM-SHA-512", version=0).error_code.value == 0
    c = scramp.ScramClient(["SCRAM-SHA-512"], "alice", PASSWORD)
    token = c.get_client_first().encode()
    s.sendall(struct.pack(">i", len(token)) + token)
    c.set_server_first(recv_frame(s).decode())
    token = c.get_client_final().encode()
    s.sendall(struct.pack(">i", len(token)) + token)
    c.set_server_final(recv_frame(s).decode())
    assert metadata_answered(s)
    s.close()


def test_plain_right_and_wrong(listener):
    s = connect(listener)
    assert handshake(s, "PLAIN").error_code.value == 0
    assert authenticate(s, b"\0alice\0" + PASSWORD.encode()).error_code.value == 0
    assert metadata_answered(s)
    s.close()
    before = listener.failed_authentications.get("PLAIN", 0)
    s = connect(listener)
    handshake(s, "PLAIN")
    r = authenticate(s, b"\0alice\0wrong")
    assert r.error_code.value == 58 and "PLAIN" in r.error_message
    assert recv_frame(s) is None                      # closed
    assert listener.failed_authentications["PLAIN"] == before + 1
    s.close()


def test_requests_before_authentication_close_the_connection(listener):
    s = connect(listener)
    assert not metadata_answered(s)
    s.close()
    s = connect(listener)
    handshake(s, "SCRAM-SHA-512")
    assert not metadata_answered(s)                   # mid-handshake too
    s.close()
    s = connect(listener)
    r = handshake(s, "GSSAPI")
    assert r.error_code.value == 33 and set(r.mechanisms) == {"SCRAM-SHA-256", "SCRAM-SHA-512",
                                                              "PLAIN"}
    assert recv_frame(s) is None
    s.close()
    s = connect(listener)                             # past sasl.server.max.receive.size
    s.sendall(struct.pack(">i", 5000) + b"\0" * 100)
    assert recv_frame(s) is None
    s.close()
    s = connect(listener)                             # ApiVersions is allowed first
    s.sendall(request(18, 3, 4, load_request_schema(18, 3)(client_software_name="t",
                                                          client_software_version="1")))
    assert response(18, 3, recv_frame(s)).error_code.value == 0
    s.close()


def test_random_tokens_fail_and_the_listener_serves_on(listener):
    import random
    rnd = random.Random(25)
    for i in range(40):
        s = connect(listener)
        mech = rnd.choice(["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
        handshake(s, mech, version=rnd.choice([0, 1]))
        token = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
        if rnd.random() < 0.5:
            token = b"n,,n=alice,r=" + token
        s.sendall(request(36, 2, 2, load_request_schema(36, 2)(auth_bytes=token)))
        recv_frame(s)
        s.close()
    test_scram_with_sasl_authenticate(listener, "SCRAM-SHA-256")
