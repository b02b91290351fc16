"""The Kafka listener's shell: an asyncio TCP server inside the gateway process (the gateway's
own event loop and TaskGroup), reading Kafka frames and answering them through the gateway's
SDK handlers (`translate.py` says how each request maps).

Per connection:
- frames are read by frames.FrameProtocol (the kernel reads into them: one copy), one after the
  other; a size above `socket.request.max.bytes` (or negative) closes the connection without
  reading the rest, as Kafka does; so does a request that cannot be decoded, or names an API or
  version not served (Kafka's answer to both), after the answers already due are written;
- each request is handled in a task of its own, started in arrival order: a task runs until
  its first wait, and the SDK handlers send to the leaders before they wait, so one producer's
  requests reach each leader in the order they came (idempotent producers pipeline up to 5);
- answers are written in request order (Kafka's guarantee; kafka-python relies on it). acks=0
  produce requests get none. At most `queued.max.requests` requests are in flight on a
  connection; past that the connection is not read until one is answered;
- a connection idle (nothing read and nothing in flight) for `connections.max.idle.ms` is
  closed;
- the principal is set per connection and handed to the same guard (ACLs, quotas:
  throttle_time_ms reaches the Kafka answer) as SDK requests: User:ANONYMOUS on PLAINTEXT and
  on SSL without a client certificate (Kafka's), `User:<subject DN>` on SSL with one, and the
  SASL user on SASL_PLAINTEXT / SASL_SSL;
- TLS (SSL, SASL_SSL): the handshake runs right after the accept (loop.start_tls on the
  connection's transport, which reads nothing before it); a failed one closes the connection and
  counts as a failed authentication;
- SASL (SASL_PLAINTEXT, SASL_SSL; the state machine is sasl.py): until the client has
  authenticated, only ApiVersions, SaslHandshake and SaslAuthenticate are served (anything else
  closes the connection, as Kafka does), frames are bounded by sasl.server.max.receive.size,
  and a failed authentication is answered (SASL_AUTHENTICATION_FAILED), counted, logged without
  the password, and the connection closed. After a SaslHandshake v0 the tokens come as bare
  frames and go back as bare frames.
A bug in a handler or in the translation answers UNKNOWN_SERVER_ERROR (or closes the
connection when not even that can be built) and never stops the gateway.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from riverbed.wire.framing import Request
from services.gateway.kafka import protocol as kp
from services.gateway.kafka import sasl
from services.gateway.kafka import tls
from services.gateway.kafka import translate as tr
from services.gateway.kafka.brokers import KafkaBroker
from services.gateway.kafka.frames import FrameProtocol, FrameTooLarge
from services.gateway.kafka.listeners import Listener

log = logging.getLogger(__name__)
_CONNECTION_IDS = itertools.count(1)
ANONYMOUS = "User:ANONYMOUS"
UNKNOWN_SERVER_ERROR = errors.ErrorCode.Value("UNKNOWN_SERVER_ERROR")
WRITE_HIGH_WATER = 1 << 20        # bytes buffered for a connection before the writer drains
BACKLOG = 128                     # connections waiting to be accepted (Kafka's accept queue is 50+)
VIEWS_MAX = 1024                  # cluster views kept (one per client host)
SSL_MECHANISM = "SSL"             # the `mechanism` label of TLS handshake failures


@dataclass(frozen=True)
class ListenerSecurity:
    """What a listener's security protocol needs: a server SSLContext (SSL, SASL_SSL) and the
    SASL mechanisms with the credentials to check them against (SASL_*); empty for PLAINTEXT."""
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    credentials: sasl.CredentialLookup | None = None
    sasl_max_receive_size: int = 524288        # sasl.server.max.receive.size
    # Describe/AlterUserScramCredentials: (request, principal, client host) -> the kio response,
    # answered by the gateway (its ACLs and credential store; scram_admin.py)
    scram_admin: Callable[[kp.KafkaRequest, str, str], Awaitable[Any]] | None = None


class KafkaListener:
    """One listener (`listeners` entry). `handlers`: Riverbed ApiKey -> the gateway's guarded
    handler; `brokers(listener_name)`: the live gateways advertising that listener;
    `offsets_partitions()`: how many partitions __consumer_offsets has in the gateway's
    metadata (None: not known yet)."""

    def __init__(self, bind: Listener, advertised: Listener, *, gateway_id: int,
                 handlers: Mapping[int, Callable[[Request], Awaitable[Any]]],
                 brokers: Callable[[str], tuple[KafkaBroker, ...]],
                 socket_request_max_bytes: int, connections_max_idle_ms: int,
                 queued_max_requests: int, name: str = "gateway",
                 security: ListenerSecurity = ListenerSecurity(),
                 offsets_partitions: Callable[[], int | None] = lambda: None):
        self.bind = bind
        self.advertised = advertised
        self.gateway_id = gateway_id
        self._handlers = handlers
        self._brokers = brokers
        self._offsets_partitions = offsets_partitions
        self._max_bytes = socket_request_max_bytes
        self._idle_s = connections_max_idle_ms / 1000.0
        self._max_in_flight = queued_max_requests
        self._name = name
        self.security = security
        # made-up salts for unknown SCRAM users derive from this (sasl.py)
        self._unknown_user_secret = secrets.token_bytes(32)
        self._server: asyncio.base_events.Server | None = None
        # client host -> ((the brokers, the offsets partitions) it was built from, the
        # ClusterView): one per request otherwise; and the encoded answers translate.py may
        # reuse (Metadata)
        self._views: dict[str, tuple[tuple, tr.ClusterView]] = {}
        self._encoded = tr.EncodedCache()
        self._connections: set[asyncio.Task] = set()
        self.bound_port: int | None = None
        # statistics
        self.connections_accepted = 0
        self.requests = 0
        self.closed_bad_request = 0
        self.closed_oversize = 0
        self.closed_idle = 0
        self.handler_failures = 0
        self.requests_by_api: dict[str, int] = {}
        self.closed_unauthenticated = 0                   # a request before authentication
        self.authentications: dict[str, int] = {}         # mechanism -> successful
        self.failed_authentications: dict[str, int] = {}  # mechanism (or SSL) -> failed

    def new_sasl_server(self) -> sasl.SaslServer | None:
        sec = self.security
        if not sec.sasl_mechanisms:
            return None
        # no credential store: every authentication fails (never an open SASL listener)
        return sasl.SaslServer(sec.sasl_mechanisms, sec.credentials or (lambda user, mech: None),
                               nonce=secrets.token_urlsafe(18),
                               unknown_user_secret=self._unknown_user_secret)

    def count_authentication(self, mechanism: str, ok: bool) -> None:
        counts = self.authentications if ok else self.failed_authentications
        counts[mechanism] = counts.get(mechanism, 0) + 1


    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> Listener:
        """Bind (connections wait in the backlog until serve()); returns the advertised
        listener, with the bound port when it was 0."""
        # Listening from here (connections wait in the kernel's backlog), accepted from serve():
        # asyncio's start_serving=False alone would refuse them until then.
        family = socket.AF_INET6 if ":" in self.bind.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.bind.host or ("::" if family == socket.AF_INET6 else "0.0.0.0"),
                       self.bind.port))
            sock.listen(BACKLOG)
            sock.setblocking(False)
            self._server = await asyncio.get_running_loop().create_server(
                lambda: FrameProtocol(self._max_bytes, self._connected,
                                      read=self.security.ssl_context is None), sock=sock,
                start_serving=False)
        except BaseException:
            sock.close()
            raise
        self.bound_port = sock.getsockname()[1]
        if self.advertised.port == 0:
            self.advertised = Listener(self.advertised.name, self.advertised.host,
                                       self.bound_port, self.advertised.security_protocol)
        log.info("[%s] Kafka listener %s bound on port %d, advertised as %s", self._name,
                 self.bind, self.bound_port, self.advertised)
        return self.advertised

    async def serve(self) -> None:
        assert self._server is not None, "start() first"
        try:
            await self._server.serve_forever()
        finally:
            await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._connections):
            t.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    # -- connections --------------------------------------------------------------------------
    def _connected(self, proto: FrameProtocol) -> None:
        task = asyncio.get_running_loop().create_task(self._accepted(proto))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _accepted(self, proto: FrameProtocol) -> None:
        self.connections_accepted += 1
        peer = proto.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else ""
        sock = proto.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        try:
            principal = ANONYMOUS
            if self.security.ssl_context is not None:
                try:
                    await proto.start_tls(self.security.ssl_context)
                except (ssl.SSLError, OSError, TimeoutError) as e:
                    self.count_authentication(SSL_MECHANISM, False)
                    log.info("[%s] failed authentication with %s on %s: TLS handshake: %s",
                             self._name, host, self.advertised.name, e)
                    return
                ssl_object = proto.get_extra_info("ssl_object")
                principal = tls.principal_of(ssl_object.getpeercert(binary_form=True)
                                             if ssl_object is not None else None)
                if principal != ANONYMOUS:
                    self.count_authentication(SSL_MECHANISM, True)
            await Connection(self, proto, host, principal).run()
        except asyncio.CancelledError:
            raise
        except ConnectionError:
            pass
        except Exception:  # noqa: BLE001 - one connection's bug never stops the gateway
            log.exception("[%s] Kafka connection from %s failed", self._name, host)
        finally:
            proto.close()

    def view(self, client_host: str) -> tr.ClusterView:
        brokers = self._brokers(self.advertised.name)
        offsets_partitions = self._offsets_partitions() or 0
        last = self._views.get(client_host)
        seen = (brokers, offsets_partitions)
        if last is not None and last[0] == seen:
            return last[1]       # the same brokers and shards as last time: the same view
        if not any(b.node_id == self.gateway_id for b in brokers):
            me = KafkaBroker(self.gateway_id, self.advertised.host, self.advertised.port)
            brokers = tuple(sorted(brokers + (me,), key=lambda b: b.node_id))
        view = tr.ClusterView(brokers=brokers, gateway_id=self.gateway_id,
                              client_host=client_host, encoded=self._encoded,
                              offsets_partitions=offsets_partitions)
        if len(self._views) >= VIEWS_MAX:
            self._views.clear()
        self._views[client_host] = (seen, view)
        return view

    async def perform(self, call: tr.Call, kreq: kp.KafkaRequest, host: str,
                      principal: str = ANONYMOUS, connection: str = "") -> tr.Outcome:
        handler = self._handlers.get(call.api)
        if handler is None:
            return tr.Outcome(error_code=UNKNOWN_SERVER_ERROR,
                              error_message=f"{header_pb2.ApiKey.Name(call.api)} is not served")
        header = header_pb2.RequestHeader(api=call.api, api_version=call.api_version,
                                          correlation_id=kreq.correlation_id & 0xFFFFFFFF,
                                          client_id=kreq.client_id)
        req = Request(header=header, api=call.api, body=call.body, payloads=list(call.payloads),
                      principal=principal, host=host, connection=connection)
        try:
            reply = await handler(req)
        except errors.KafkaError as e:
            return tr.Outcome(error_code=e.code, error_message=e.message or e.name)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - answered UNKNOWN_SERVER_ERROR, logged
            self.handler_failures += 1
            log.exception("[%s] %s handler failed for Kafka %s (client %s)", self._name,
                          header_pb2.ApiKey.Name(call.api), kreq.name, kreq.client_id)
            return tr.Outcome(error_code=UNKNOWN_SERVER_ERROR,
                              error_message=f"{type(e).__name__} in the gateway")
        if reply is None:
            return tr.Outcome()
        return tr.Outcome(body=reply.body, payloads=reply.payloads)


class Connection:
    def __init__(self, listener: KafkaListener, frames: FrameProtocol, host: str,
                 principal: str = ANONYMOUS):
        self.l = listener
        self.frames = frames            # reads frames and writes answers (frames.py)
        self.host = host
        self.id = f"kafka-{next(_CONNECTION_IDS)}"     # this connection, for the gateway
        # Who the client is: User:ANONYMOUS on PLAINTEXT, the certificate's DN on SSL; on a
        # SASL listener the SASL user, set before any other request reaches a handler.
        self.principal = principal
        self.sasl = listener.new_sasl_server()
        if self.sasl is not None:       # frames before authentication: sasl.server.max.receive.size
            frames.max_bytes = min(listener._max_bytes, listener.security.sasl_max_receive_size)
        # answers in request order: each item awaits to the response bytes (or None)
        self.pending: asyncio.Queue = asyncio.Queue(maxsize=listener._max_in_flight)
        self.background: set[asyncio.Task] = set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        writer_task = loop.create_task(self._write_loop())
        reader_task = loop.create_task(self._read_loop())
        try:
            done, _ = await asyncio.wait({reader_task, writer_task},
                                         return_when=asyncio.FIRST_COMPLETED)
            if reader_task in done and reader_task.exception() is None:
                await self.pending.put(None)         # write what is due, then close
                await writer_task
        finally:
            reader_task.cancel()
            writer_task.cancel()
            for t in list(self.background):
                t.cancel()
            await asyncio.gather(reader_task, writer_task, *self.background,
                                 return_exceptions=True)

    async def _read_loop(self) -> None:
        l = self.l
        while True:
            try:
                # asyncio.timeout, not wait_for: no task of its own per frame
                async with asyncio.timeout(l._idle_s):
                    frame = await self.frames.read_frame()
            except TimeoutError:
                if not self.background:
                    l.closed_idle += 1
                    log.debug("closing idle Kafka connection from %s", self.host)
                    return
                continue
            except FrameTooLarge as e:
                l.closed_oversize += 1
                authenticating = self.sasl is not None and not self.sasl.complete
                log.info("closing the Kafka connection from %s: a request of %d bytes "
                         "(%s=%d)", self.host, e.size, "sasl.server.max.receive.size"
                         if authenticating else "socket.request.max.bytes", self.frames.max_bytes)
                return
            if frame is None:
                return                                   # the client closed
            l.requests += 1
            authenticating = self.sasl is not None and not self.sasl.complete
            if authenticating and self.sasl.raw_tokens:
                if not await self._raw_token(bytes(frame)):
                    return
                continue
            try:
                kreq = kp.decode_request(frame if isinstance(frame, bytes)
                                         else memoryview(frame).toreadonly())
            except kp.BadRequest as e:
                l.closed_bad_request += 1
                log.info("closing the Kafka connection from %s: %s (first bytes: %s)",
                         self.host, e, bytes(frame[:64]).hex())
                return
            except Exception:  # noqa: BLE001 - a decoder bug: this connection only
                l.closed_bad_request += 1
                log.exception("closing the Kafka connection from %s: undecodable request "
                              "(first bytes: %s)", self.host, bytes(frame[:64]).hex())
                return
            name = kreq.name
            l.requests_by_api[name] = l.requests_by_api.get(name, 0) + 1
            if authenticating:
                if not self.sasl.allows(kreq.api_key):
                    l.closed_unauthenticated += 1
                    log.info("closing the Kafka connection from %s: %s before authentication "
                             "(listener %s)", self.host, name, l.advertised.name)
                    return
                if kreq.api_key in (kp.SASL_HANDSHAKE, kp.SASL_AUTHENTICATE):
                    if not await self._sasl_request(kreq):
                        return
                    continue
            expects = not (kreq.api_key == kp.PRODUCE and kreq.body.acks == 0)
            task = asyncio.get_running_loop().create_task(self._handle(kreq))
            self.background.add(task)                # cancelled with the connection
            task.add_done_callback(self.background.discard)
            if expects:
                await self.pending.put(task)

    async def _write_loop(self) -> None:
        """Answers in request order. The answers already done behind the one awaited go out in
        the same write: on loopback a send costs tens of µs whatever its size, and pipelining
        clients (librdkafka keeps up to 5 requests in flight) get several at once."""
        w, pending = self.frames, self.pending
        held = None                     # the next item, taken from the queue but not done
        while True:
            item, held = (held, None) if held is not None else (await pending.get(), None)
            if item is None:
                await w.drain()
                return
            data = item if isinstance(item, bytes) else await item
            if data is None:
                return                                   # no answer could be built: close
            chunks, end = [data], False
            while not pending.empty():
                nxt = pending.get_nowait()
                if nxt is None or not (isinstance(nxt, bytes) or nxt.done()):
                    held, end = nxt, nxt is None
                    break
                more = nxt if isinstance(nxt, bytes) else nxt.result()
                if more is None:
                    end = True                           # no answer: write these, then close
                    break
                chunks.append(more)
            w.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
            if end and held is None:
                await w.drain()
                return
            if w.write_buffer_size() > WRITE_HIGH_WATER or (held is None and pending.empty()):
                await w.drain()

    # -- SASL (until authenticated; the reader handles these in order, one at a time) ---------
    async def _sasl_request(self, kreq: kp.KafkaRequest) -> bool:
        """Answer a SaslHandshake / SaslAuthenticate; False: close once the answer is written."""
        s = self.sasl
        if kreq.api_key == kp.SASL_HANDSHAKE:
            answer = s.handshake(kreq.body.mechanism, kreq.api_version)
            body = sasl.handshake_response(kreq.api_version, answer)
            mechanism = kreq.body.mechanism
        else:
            answer = await self._token(kreq.body.auth_bytes)
            body = sasl.authenticate_response(kreq.api_version, answer)
            mechanism = s.mechanism or ""
        await self.pending.put(kp.encode_response(kreq.correlation_id, body))
        return self._after(answer, mechanism)

    async def _raw_token(self, token: bytes) -> bool:
        """A bare token after a SaslHandshake v0: answered with a bare frame; a failure closes
        the connection without an answer (the v0 exchange has no way to say why)."""
        answer = await self._token(token)
        if not answer.close:
            await self.pending.put(struct.pack(">i", len(answer.token)) + answer.token)
        return self._after(answer, self.sasl.mechanism or "")

    async def _token(self, token: bytes) -> sasl.Answer:
        if self.sasl.mechanism == sasl.PLAIN:
            # PLAIN hashes the password (PBKDF2): off the event loop
            return await asyncio.to_thread(self.sasl.authenticate, bytes(token))
        return self.sasl.authenticate(bytes(token))

    def _after(self, answer: sasl.Answer, mechanism: str) -> bool:
        l = self.l
        if answer.principal is not None:
            self.principal = answer.principal
            self.frames.max_bytes = l._max_bytes         # authenticated: socket.request.max.bytes
            l.count_authentication(mechanism, True)
            log.debug("[%s] %s authenticated with %s from %s", l._name, answer.principal,
                      mechanism, self.host)
        if answer.close:
            # a label the client cannot make up (metrics stay bounded)
            l.count_authentication(mechanism if mechanism in sasl.SUPPORTED_MECHANISMS
                                   else "other", False)
            # who tried and why, never the password or the token
            log.info("[%s] failed authentication with %s on %s (user %r, SASL mechanism %r): "
                     "%s (%s)", l._name, self.host, l.advertised.name, answer.user, mechanism,
                     answer.error_message, answer.reason or "refused")
            return False
        return True

    async def _handle(self, kreq: kp.KafkaRequest) -> bytes | None:
        l = self.l
        view = l.view(self.host)
        try:
            if kreq.api_key in (kp.DESCRIBE_USER_SCRAM_CREDENTIALS, kp.ALTER_USER_SCRAM_CREDENTIALS) \
                    and l.security.scram_admin is not None:
                body = await l.security.scram_admin(kreq, self.principal, self.host)
                return kp.encode_response(kreq.correlation_id, body)
            step = tr.plan(kreq, view)
            while isinstance(step, tr.Plan):
                if len(step.calls) == 1:      # sent before this task first waits (see above)
                    outcomes = [await l.perform(step.calls[0], kreq, self.host, self.principal,
                                                self.id)]
                else:
                    outcomes = list(await asyncio.gather(
                        *(l.perform(c, kreq, self.host, self.principal, self.id)
                          for c in step.calls)))
                step = step.finish(outcomes)
            if step.response is None:
                return None
            return kp.encode_response(kreq.correlation_id, step.response)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a translation bug: answer it as a server error
            l.handler_failures += 1
            log.exception("translating Kafka %s v%d from %s failed", kreq.name, kreq.api_version,
                          self.host)
            try:
                return kp.encode_response(kreq.correlation_id, tr.error_response(
                    kreq, view, UNKNOWN_SERVER_ERROR, "the gateway failed"))
            except Exception:  # noqa: BLE001
                log.exception("no error answer either: closing the connection")
                return None
