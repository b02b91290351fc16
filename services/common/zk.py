"""ZooKeeper sessions through kazoo: connecting with a chroot, and connection-state listening.

`zookeeper.connect` is Kafka's connect string, optionally with a chroot suffix:
`127.0.0.1:2181,127.0.0.1:2182/riverbed`. As Kafka does (`KafkaZkClient.createChrootIfNecessary`),
`connect()` first creates the chroot path with a chroot-less client if it is missing, then returns
a started client rooted at the chroot.

Connection states (kazoo `protocol/states.py`, `recipe/lock.py`):
- SUSPENDED: the connection dropped; the session may still be alive. Stop acting as leader
  (stop writing as controller) until CONNECTED.
- CONNECTED after SUSPENDED with the same session id: resumed; ephemerals and watches are intact.
- CONNECTED with a new session id (after LOST): ephemerals are gone; re-register them.
- LOST: the session expired (or the client was stopped); ephemerals and locks are gone.

kazoo calls listeners on its connection thread, where they must not block nor call ZooKeeper.
`SessionWatcher` only enqueues there and runs your callbacks on its own thread, in order.

Reconnecting (issue 24): kazoo's default connection retry doubles its delay from 0.1 s up to an
hour, so after a network cut of a minute a client could wait up to another minute before its
next attempt: a storage node that was cut off re-registered (and got its replicas back) that
much later than the network returned. `connection_retry()` caps the delay at
RECONNECT_DELAY_MAX_S, as ZooKeeper's own client, which waits at most a second between attempts.

Security (Kafka's `zookeeper.set.acl`): a process that installed a `ZkAuth` (service_main does,
from `zookeeper.credentials.file` = a file holding `user:password`) authenticates every session
with ZooKeeper's digest scheme and, with `set_acl`, creates every znode with the ACL
`digest:<user>:<hash>` ALL + `world:anyone` READ: anyone may read the cluster's public metadata,
only the fleet's services (who share the credentials) may change it. `secure_tree` sets that
ACL on an existing tree (the migration step for a cluster that ran without it).
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import queue
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NodeExistsError
from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

log = logging.getLogger(__name__)

__all__ = ["ZkConnectError", "split_chroot", "connect", "close", "SessionState", "SessionChange",
           "SessionWatcher", "ZkAuth", "install_auth", "secure_tree", "connection_retry",
           "RECONNECT_DELAY_MAX_S"]

# Longest wait between two attempts to reach a ZooKeeper server (see the module doc).
RECONNECT_DELAY_MAX_S = 1.0


def connection_retry() -> KazooRetry:
    """kazoo's retry policy for (re)connecting: forever, from 0.1 s doubling up to
    RECONNECT_DELAY_MAX_S (plus kazoo's jitter of up to 40%)."""
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=RECONNECT_DELAY_MAX_S)


@dataclasses.dataclass(frozen=True)
class ZkAuth:
    """Digest credentials for ZooKeeper and whether to create znodes with the fleet's ACL."""
    user: str = ""
    password: str = ""
    set_acl: bool = False

    @classmethod
    def from_file(cls, path: str, *, set_acl: bool = False) -> "ZkAuth":
        """`user:password` from a file (first line); "" -> no credentials."""
        if not path:
            return cls(set_acl=False)
        with open(path) as f:
            line = f.readline().strip()
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise ValueError(f"zookeeper.credentials.file {path}: expected one line user:password")
        return cls(user, password, set_acl)

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        return [("digest", f"{self.user}:{self.password}")] if self.user else []

    @property
    def acl(self) -> list | None:
        """The ACL new znodes get (None: ZooKeeper's open default)."""
        if not (self.set_acl and self.user):
            return None
        return [make_digest_acl(self.user, self.password, all=True),
                make_acl("world", "anyone", read=True)]


_auth = ZkAuth()


def install_auth(auth: ZkAuth) -> None:
    """Set this process's ZooKeeper credentials (service_main, before any session)."""
    global _auth
    _auth = auth


def secure_tree(client: KazooClient, path: str = "/", *, acl: list | None = None) -> int:
    """Set `acl` (default: the installed credentials' ACL; OPEN_ACL_UNSAFE when none) on `path`
    and every znode under it (Kafka's zookeeper-security-migration). Returns how many."""
    acl = acl if acl is not None else (_auth.acl or OPEN_ACL_UNSAFE)
    count = 0
    stack = [path]
    while stack:
        p = stack.pop()
        if p == "/zookeeper" or p.startswith("/zookeeper/"):
            continue
        try:
            client.set_acls(p, acl)
            count += 1
            children = client.get_children(p)
        except NoNodeError:
            continue
        stack.extend(f"{p.rstrip('/')}/{c}" for c in children)
    return count


class ZkConnectError(ConnectionError):
    """ZooKeeper did not answer within the timeout, or the connect string is malformed."""


def split_chroot(connect_string: str) -> tuple[str, str | None]:
    """'h1:1,h2:2/riverbed/x' -> ('h1:1,h2:2', '/riverbed/x'); no chroot -> (hosts, None)."""
    s = connect_string.strip()
    if not s:
        raise ZkConnectError("empty zookeeper.connect")
    slash = s.find("/")
    if slash < 0:
        return s, None
    hosts, chroot = s[:slash], s[slash:].rstrip("/")
    if not hosts:
        raise ZkConnectError(f"zookeeper.connect {connect_string!r} names no host")
    return hosts, (chroot or None)


def _start(client: KazooClient, timeout_s: float, connect_string: str) -> None:
    try:
        client.start(timeout=timeout_s)
    except (KazooTimeoutError, OSError) as e:
        close(client)
        raise ZkConnectError(f"could not connect to ZooKeeper at {connect_string} "
                             f"within {timeout_s:g} s: {e}") from None


def connect(connect_string: str, *, timeout_s: float = 15.0, session_timeout_ms: int = 6000,
            create_chroot: bool = True, read_only: bool = False,
            logger: logging.Logger | None = None, auth: ZkAuth | None = None) -> KazooClient:
    """A started KazooClient for `connect_string` (chroot suffix allowed).

    `timeout_s` bounds connecting (each of the two connects); `session_timeout_ms` is Kafka's
    `zookeeper.session.timeout.ms`. With `create_chroot` the chroot path is created first if
    missing. Raises ZkConnectError; the caller owns the client: `close(client)` when done.
    `auth` defaults to the process's (install_auth): digest credentials and the znode ACL.
    """
    hosts, chroot = split_chroot(connect_string)
    auth = auth if auth is not None else _auth
    kw = dict(timeout=session_timeout_ms / 1000.0, read_only=read_only,
              logger=logger or logging.getLogger("kazoo.client"),
              auth_data=auth.auth_data or None, default_acl=auth.acl)
    if chroot and create_chroot:
        root = KazooClient(hosts=hosts, connection_retry=connection_retry(), **kw)
        _start(root, timeout_s, hosts)
        try:
            root.ensure_path(chroot)
        finally:
            close(root)
    client = KazooClient(hosts=hosts + (chroot or ""), connection_retry=connection_retry(), **kw)
    _start(client, timeout_s, connect_string)
    return client


def close(client: KazooClient) -> None:
    """Stop and close a client, never raising (for finally blocks)."""
    try:
        client.stop()
    except Exception:  # noqa: BLE001 - best effort on shutdown
        log.debug("kazoo stop failed", exc_info=True)
    try:
        client.close()
    except Exception:  # noqa: BLE001
        log.debug("kazoo close failed", exc_info=True)


class EphemeralHeldError(RuntimeError):
    """Another live session still holds an ephemeral node this process must own."""


def register_ephemeral(client: KazooClient, path: str, data: bytes, *, session_id: int | None,
                       timeout_s: float, retry_s: float = 0.2):
    """Create the ephemeral `path` (parents too) for session `session_id`; returns its ZnodeStat.

    The node may already exist: created by this very session (a retried create: it is ours), or
    by an earlier session of ours that has not expired yet (after a restart or a lost session:
    wait for it to vanish, retrying every `retry_s`). Still held by another session after
    `timeout_s`: EphemeralHeldError (e.g. an id configured twice). Blocking: call from a thread.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            stat = client.exists(path)
            if stat is None:
                continue                          # vanished meanwhile: create again
            if stat.ephemeralOwner == session_id:
                return stat
            if time.monotonic() > deadline:
                raise EphemeralHeldError(f"{path} is held by another live session") from None
            time.sleep(retry_s)
            continue
        stat = client.exists(path)
        if stat is not None:
            return stat


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


@dataclasses.dataclass(frozen=True)
class SessionChange:
    """One connection-state change. `new_session` is True on CONNECTED when the session id
    differs from the last one seen (the first connection, or a reconnect after LOST): ephemeral
    nodes must be created again. `resumed` is True on CONNECTED after SUSPENDED, same session."""
    state: SessionState
    session_id: int | None
    new_session: bool = False
    resumed: bool = False


Callback = Callable[[SessionChange], None]


class SessionWatcher:
    """Turns kazoo's connection states into callbacks run on a dedicated thread.

        watcher = SessionWatcher(client, on_suspended=..., on_lost=..., on_connected=...,
                                 on_change=...)   # any subset; each gets a SessionChange
        watcher.start()          # reports the current state first if the client is connected
        ...
        watcher.stop()

    Callbacks run in the order the states happened. To feed an asyncio core, pass e.g.
    `on_change=lambda ch: loop.call_soon_threadsafe(inbox.put_nowait, ch)`.
    """

    def __init__(self, client: KazooClient, *, on_connected: Callback | None = None,
                 on_suspended: Callback | None = None, on_lost: Callback | None = None,
                 on_change: Callback | None = None, name: str = "zk-session"):
        self._client = client
        self._callbacks = {SessionState.CONNECTED: on_connected,
                           SessionState.SUSPENDED: on_suspended, SessionState.LOST: on_lost}
        self._on_change = on_change
        self._queue: queue.SimpleQueue[SessionChange | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._last_session_id: int | None = None
        self._last_state: SessionState | None = None
        self._started = False

    def _session_id(self) -> int | None:
        cid = self._client.client_id  # attribute read; never blocks
        return cid[0] if cid else None

    # Runs on kazoo's connection thread: classify and enqueue, nothing else.
    def _listener(self, state: str) -> None:
        try:
            st = {KazooState.CONNECTED: SessionState.CONNECTED,
                  KazooState.SUSPENDED: SessionState.SUSPENDED,
                  KazooState.LOST: SessionState.LOST}[state]
        except KeyError:
            return
        self._enqueue(st)

    def _enqueue(self, st: SessionState) -> None:
        sid = self._session_id() if st is SessionState.CONNECTED else self._last_session_id
        change = SessionChange(
            state=st, session_id=sid,
            new_session=st is SessionState.CONNECTED and sid != self._last_session_id,
            resumed=(st is SessionState.CONNECTED and self._last_state is SessionState.SUSPENDED
                     and sid == self._last_session_id))
        if st is SessionState.CONNECTED:
            self._last_session_id = sid
        self._last_state = st
        self._queue.put(change)

    def start(self) -> "SessionWatcher":
        if self._started:
            return self
        self._started = True
        self._thread.start()
        self._client.add_listener(self._listener)
        if self._client.connected:
            self._enqueue(SessionState.CONNECTED)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        if not self._started:
            return
        self._client.remove_listener(self._listener)
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            change = self._queue.get()
            if change is None:
                return
            for cb in (self._callbacks.get(change.state), self._on_change):
                if cb is None:
                    continue
                try:
                    cb(change)
                except Exception:  # noqa: BLE001 - a bad callback must not kill the watcher
                    log.exception("session callback failed for %s", change)
