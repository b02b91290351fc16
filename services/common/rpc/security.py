"""A process's transport security: its CURVE keypair, the trusted keys its ZAP handler admits,
and the options its server and client sockets get.

Config keys (every service; `service_main` reads them from the role's properties, so no role
config declares them):

    security.protocol               NONE | CURVE (default NONE; the fleet launcher writes CURVE)
    curve.secret.key.file           this process's `.key_secret` (zmq.auth format)
    curve.trusted.keys.dir          public certificates (`*.key`) admitted by the ZAP handler;
                                    servers' certificates also name their `endpoints`
    curve.trusted.keys.reload.ms    how often the directory is checked for changes (and SIGHUP)
    socket.handshake.timeout.ms     ZMQ_HANDSHAKE_IVL: a peer that has not finished its CURVE
                                    handshake by then is disconnected (default 10000)
    num.network.threads             ZeroMQ I/O threads of the process's context (Kafka's name;
                                    default 2): they frame, encrypt and decrypt every message;
                                    accepted connections use the first half, the connections
                                    the process makes the rest (services.common.rpc.affinity)
    max.connections.per.ip          Kafka's: connections one IP may hold to one process's
                                    server sockets; the ZAP handler refuses the handshake of one
                                    more (counted from socket monitor events; CURVE only)
    super.users                     `User:a;User:b`: principals that hold every operation,
                                    ClusterAction included (shared with the authorizer)
    zookeeper.set.acl               create znodes writable only by the fleet (services.common.zk)
    zookeeper.credentials.file      `user:password` for ZooKeeper digest authentication

With CURVE, every server socket is a CURVE server with the process's key and ZAP domain
"riverbed" (ZMQ_ZAP_ENFORCE_DOMAIN: no handler, no connection). The ZAP handler (one thread per
ZeroMQ context) admits a client whose public key is in the trusted directory and hands libzmq
its principal, `User:<name>`; libzmq attaches it to every message from that connection as the
`User-Id` property, which the RpcServer reads into `Request.principal`. A key removed from the
directory is refused at its next handshake; a key added is admitted at the next check, so old
and new client keys both work during a rotation.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Mapping

import zmq

from riverbed.wire.liveness import close_monitor, unbounded_monitor
from riverbed.wire.security import (
    ANONYMOUS,
    ZAP_DOMAIN,
    ClientSecurity,
    SecurityConfigError,
    check_protocol,
    read_certificate,
    read_certificates,
)
from services.common.cluster_action import holds_cluster_action, parse_super_users

__all__ = ["SECURITY_KEYS", "SecurityConfig", "ServerSecurity", "TrustStore", "install",
           "process_security", "split_security_properties", "NO_SECURITY"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SecurityConfig:
    security_protocol: str = "NONE"
    curve_secret_key_file: str = ""
    curve_trusted_keys_dir: str = ""
    curve_trusted_keys_reload_ms: int = 5000
    socket_handshake_timeout_ms: int = 10000
    super_users: str = ""
    max_connections_per_ip: int = 2147483647
    num_network_threads: int = 2
    zookeeper_set_acl: bool = False
    zookeeper_credentials_file: str = ""

    def __post_init__(self):
        object.__setattr__(self, "security_protocol", check_protocol(self.security_protocol))
        if self.security_protocol == "CURVE":
            if not self.curve_secret_key_file:
                raise ValueError("security.protocol=CURVE needs curve.secret.key.file")
            if not self.curve_trusted_keys_dir:
                raise ValueError("security.protocol=CURVE needs curve.trusted.keys.dir")
        if self.curve_trusted_keys_reload_ms < 100:
            raise ValueError("curve.trusted.keys.reload.ms must be >= 100")
        if self.zookeeper_set_acl and not self.zookeeper_credentials_file:
            raise ValueError("zookeeper.set.acl=true needs zookeeper.credentials.file")
        if not 1 <= self.num_network_threads <= 64:
            raise ValueError("num.network.threads must be 1..64")
        if self.max_connections_per_ip < 1:
            raise ValueError("max.connections.per.ip must be >= 1")
        if self.socket_handshake_timeout_ms < 0:
            raise ValueError("socket.handshake.timeout.ms must be >= 0")


SECURITY_KEYS = frozenset(f.name.replace("_", ".") for f in dataclasses.fields(SecurityConfig))


def split_security_properties(props: Mapping[str, str], role_fields: set[str]) -> tuple[dict, dict]:
    """(security keys, the rest). A key the role's own config also declares (super.users for
    the authorizer) goes to both."""
    sec, rest = {}, {}
    for k, v in props.items():
        norm = k.strip()
        if norm in SECURITY_KEYS:
            sec[norm] = v
            if norm.replace(".", "_") in role_fields:
                rest[k] = v
        else:
            rest[k] = v
    return sec, rest


class TrustStore:
    """The trusted public keys of one directory: key -> principal, and which principals are the
    fleet's services. Re-read when the directory's listing or a file's mtime changes."""

    def __init__(self, directory: str):
        self.directory = directory
        self._lock = threading.Lock()
        self._stamp: tuple = ()
        self.principals: dict[bytes, str] = {}
        self.service_principals: frozenset[str] = frozenset()
        self.reload()

    def _listing(self) -> tuple:
        try:
            entries = sorted(os.scandir(self.directory), key=lambda e: e.name)
        except OSError:
            return ()
        out = []
        for e in entries:
            if not e.name.endswith(".key"):
                continue
            try:
                st = e.stat()
            except OSError:     # removed since the listing (a key rotation): not there
                continue
            out.append((e.name, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def reload(self, force: bool = False) -> bool:
        """Re-read the directory if it changed (or `force`); True when it was re-read."""
        with self._lock:
            stamp = self._listing()
            if not force and stamp == self._stamp:
                return False
            try:
                certs = read_certificates(self.directory)
            except SecurityConfigError as e:
                log.warning("trusted keys not re-read: %s", e)
                return False
            self.principals = {c.public_key: c.principal for c in certs}
            self.service_principals = frozenset(c.principal for c in certs if c.kind == "service")
            self._stamp = stamp
            log.info("trusted keys from %s: %d keys, %d service principals", self.directory,
                     len(self.principals), len(self.service_principals))
            return True


class ConnectionCounter:
    """Live connections per peer IP, from socket monitor events (pure: no sockets)."""

    def __init__(self) -> None:
        self._by_fd: dict[tuple[int, int], str] = {}    # (socket, fd) -> ip
        self.per_ip: dict[str, int] = {}

    def accepted(self, sock_id: int, fd: int, ip: str) -> None:
        self.closed(sock_id, fd)        # an fd reused before its close event was seen
        self._by_fd[(sock_id, fd)] = ip
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1

    def closed(self, sock_id: int, fd: int) -> None:
        ip = self._by_fd.pop((sock_id, fd), None)
        if ip is not None:
            n = self.per_ip.get(ip, 0) - 1
            if n > 0:
                self.per_ip[ip] = n
            else:
                self.per_ip.pop(ip, None)

    def over(self, ip: str, limit: int) -> bool:
        """The connection being handshaked is counted already: refuse above `limit`."""
        return self.per_ip.get(ip, 0) > limit


def _peer_ip(fd: int) -> str | None:
    import socket as _socket
    try:
        with _socket.socket(fileno=os.dup(fd)) as s:
            return s.getpeername()[0]
    except OSError:
        return None


# values are the connection's fd (a refused handshake ends with DISCONNECTED too)
_MONITOR_EVENTS = zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CLOSED


class _ZapHandler(threading.Thread):
    """ZAP (RFC 27) for one context: REP on inproc://zeromq.zap.01, in its own thread, so a
    handshake never waits on the service's event loop."""

    def __init__(self, ctx: zmq.Context, security: "ServerSecurity"):
        super().__init__(name="riverbed-zap", daemon=True)
        self._ctx = ctx
        self._security = security
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.admitted = 0
        self.refused = 0
        self.connections = ConnectionCounter()
        self._new_monitors: list[tuple[int, zmq.Socket]] = []   # handed over by apply_server
        self._monitors: dict[zmq.Socket, int] = {}
        self._stopped = False       # run() has ended: add_monitor closes what it made
        self._poller = zmq.Poller()

    def add_monitor(self, server: zmq.Socket) -> None:
        """Count `server`'s connections per IP (call before it binds)."""
        # unbounded: a full pipe would stall the I/O thread; thread-owned: see run()
        mon = unbounded_monitor(server, _MONITOR_EVENTS, thread_owned=True)
        with self._security._lock:
            if not self._stopped:
                self._new_monitors.append((id(server), mon))
                return
        close_monitor(server, mon)      # the context is terminating: nobody would close it

    def _take_monitors(self) -> None:
        if not self._new_monitors:
            return
        with self._security._lock:
            new, self._new_monitors = self._new_monitors, []
        for sid, mon in new:
            self._monitors[mon] = sid
            self._poller.register(mon, zmq.POLLIN)

    def _drain_monitors(self) -> None:
        from zmq.utils.monitor import parse_monitor_message
        self._take_monitors()
        for mon, sid in self._monitors.items():
            while True:
                try:
                    ev = parse_monitor_message(mon.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
                if ev["event"] == zmq.EVENT_ACCEPTED:
                    ip = _peer_ip(ev["value"])
                    if ip is not None:
                        self.connections.accepted(sid, ev["value"], ip)
                else:
                    self.connections.closed(sid, ev["value"])

    def start_and_wait(self) -> None:
        self.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error

    def run(self) -> None:
        try:
            # Not self._ctx.socket(): a socket made that way is on the context's list, and
            # Context.destroy() in another thread (a service's or a test's teardown) would close
            # it under this thread's poll, which crashes the process. Left off the list, this
            # thread closes it itself once the context's term() ends the poll with ETERM.
            sock = zmq.Socket(self._ctx, zmq.REP)
            sock.linger = 0
            sock.bind("inproc://zeromq.zap.01")
        except BaseException as e:  # noqa: BLE001 - reported to start_and_wait
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        sec = self._security
        poller = self._poller
        poller.register(sock, zmq.POLLIN)
        try:
            while True:
                events = dict(poller.poll(min(sec.reload_ms, 1000)))
                try:
                    self._drain_monitors()   # connections first: a ZAP request counts its own
                    if sock not in events:
                        sec.trust.reload()
                except zmq.ZMQError:
                    raise
                except Exception:  # noqa: BLE001 - as in _answer: ZAP must go on
                    log.exception("ZAP housekeeping failed")
                if sock not in events:
                    continue
                msg = sock.recv_multipart()
                sock.send_multipart(self._answer(msg))
        except zmq.ZMQError as e:   # the context is terminated or destroyed: the process ends
            log.debug("ZAP handler stops: %s", e)
        finally:
            with sec._lock:     # and the monitors handed over but not yet taken: term() waits
                self._stopped = True        # for every socket of the context to be closed
                untaken, self._new_monitors = self._new_monitors, []
            for mon in [*self._monitors, *(m for _, m in untaken)]:
                if not mon.closed:
                    mon.close(linger=0)
            if not sock.closed:
                sock.close(linger=0)

    def _answer(self, msg: list[bytes]) -> list[bytes]:
        """_reply, or ZAP's 500 (internal error) when it fails: the one handshake is refused,
        and this thread, which every later handshake of the process waits on, lives on."""
        try:
            return self._reply(msg)
        except Exception:  # noqa: BLE001 - a bug or a file-system error must not end ZAP
            log.exception("ZAP request failed; the handshake is refused")
            self.refused += 1
            request_id = msg[1] if len(msg) > 1 else b""
            return [b"1.0", request_id, b"500", b"internal error", b"", b""]

    def _reply(self, msg: list[bytes]) -> list[bytes]:
        if len(msg) < 6:
            return [b"1.0", msg[1] if len(msg) > 1 else b"", b"400", b"malformed ZAP request", b"", b""]
        version, request_id, domain, address, _identity, mechanism = msg[:6]
        sec = self._security
        sec.trust.reload()          # cheap: a directory listing, re-read only when it changed
        ip = address.decode(errors="replace")
        limit = sec.config.max_connections_per_ip
        if self._monitors and self.connections.over(ip, limit):
            self.refused += 1
            log.info("ZAP refused %s: more than max.connections.per.ip=%d", ip, limit)
            return [b"1.0", request_id, b"400", b"too many connections", b"", b""]
        principal = None
        if mechanism == b"CURVE" and len(msg) >= 7 and domain == ZAP_DOMAIN.encode():
            import zmq.utils.z85
            principal = sec.trust.principals.get(zmq.utils.z85.encode(msg[6]))
        if principal is None:
            self.refused += 1
            log.info("ZAP refused %s from %s", mechanism.decode(errors="replace"),
                     address.decode(errors="replace"))
            return [b"1.0", request_id, b"400", b"unknown key", b"", b""]
        self.admitted += 1
        return [b"1.0", request_id, b"200", b"OK", principal.encode(), b""]


class ServerSecurity:
    """What a process's sockets need: `apply_server(sock)` before bind, `client` for DEALER and
    SUB sockets, `holds_cluster_action(principal)` for the RPC dispatch."""

    def __init__(self, cfg: SecurityConfig | None = None):
        cfg = cfg or SecurityConfig()
        self.config = cfg
        self.protocol = cfg.security_protocol
        self.reload_ms = cfg.curve_trusted_keys_reload_ms
        self.super_users = parse_super_users(cfg.super_users)
        self._zap: dict[int, _ZapHandler] = {}
        self._lock = threading.Lock()
        if self.protocol == "CURVE":
            cert = read_certificate(cfg.curve_secret_key_file)
            if cert.secret_key is None:
                raise SecurityConfigError(f"{cfg.curve_secret_key_file} holds no secret key")
            self.public_key, self.secret_key = cert.public_key, cert.secret_key
            self.principal = cert.principal
            self.trust = TrustStore(cfg.curve_trusted_keys_dir)
            self.client = ClientSecurity("CURVE", cert.public_key, cert.secret_key, b"",
                                         cfg.curve_trusted_keys_dir, cert.principal)
        else:
            self.public_key = self.secret_key = b""
            self.principal = ANONYMOUS
            self.trust = None
            self.client = ClientSecurity()

    @property
    def curve(self) -> bool:
        return self.protocol == "CURVE"

    def apply_server(self, sock: zmq.Socket, context: Any) -> None:
        """Make a server socket (not yet bound) a CURVE server; starts the context's ZAP
        handler first. No-op for NONE."""
        if not self.curve:
            return
        zap = self._ensure_zap(context)
        if self.config.max_connections_per_ip < 2147483647:
            zap.add_monitor(sock)
        sock.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN.encode())
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret_key)
        if self.config.socket_handshake_timeout_ms:
            sock.setsockopt(zmq.HANDSHAKE_IVL, self.config.socket_handshake_timeout_ms)

    def _ensure_zap(self, context: zmq.Context) -> "_ZapHandler":
        with self._lock:
            handler = self._zap.get(id(context))
            if handler is None or not handler.is_alive():
                handler = _ZapHandler(context, self)
                handler.start_and_wait()
                self._zap[id(context)] = handler
            return handler

    def reload_trusted_keys(self) -> bool:
        return self.trust.reload(force=True) if self.trust is not None else False

    def holds_cluster_action(self, principal: str) -> bool:
        if not self.curve:
            return True     # NONE: nobody is authenticated, nothing can be told apart
        return holds_cluster_action(principal, self.trust.service_principals, self.super_users)

    def zap_statistics(self) -> tuple[int, int]:
        """(handshakes admitted, refused) over this process's ZAP handlers."""
        return (sum(h.admitted for h in self._zap.values()),
                sum(h.refused for h in self._zap.values()))


NO_SECURITY = ServerSecurity()
_process: ServerSecurity = NO_SECURITY


def install(cfg: SecurityConfig) -> ServerSecurity:
    """Set this process's security (service_main does it before the role starts)."""
    global _process
    _process = ServerSecurity(cfg)
    return _process


def process_security() -> ServerSecurity:
    """The process's security: what `install` set, else NONE."""
    return _process
