"""The ZooKeeper shell of ACLs and quota configs: conditional writes with change notifications
(used by the `riverbed acls` / `riverbed configs` tools) and a watching cache (used by every
enforcing process). Paths and payloads are in layout.py.

Caches: a ChildrenWatch on each change directory only wakes a worker thread (kazoo's callback
thread never blocks on ZooKeeper here); the worker re-reads everything under the ACL (or quota
config) roots and hands an immutable snapshot to `on_change`. A re-read per change costs one get
per resource: changes are operator actions, rare next to the requests that read the snapshot.
The first snapshot is read before `start()` returns, so a process never serves requests with an
empty ACL set by accident.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from services.common.acl import layout
from services.common.acl.authorizer import AclEntry, ResourcePattern

log = logging.getLogger(__name__)

AclSnapshot = dict[ResourcePattern, frozenset[AclEntry]]
ConfigSnapshot = dict[tuple[str, str], dict[str, str]]   # (entity type, name) -> config


# --- writes (tools) -----------------------------------------------------------------------------

def _notify(zk, directory: str, prefix: str, data: bytes) -> None:
    zk.create(f"{directory}/{prefix}", data, sequence=True, makepath=True)
    _prune_notifications(zk, directory)


def _prune_notifications(zk, directory: str, now_ms: int | None = None) -> None:
    """Delete notifications older than CHANGE_EXPIRATION_MS (ctime is ZooKeeper's clock)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    for child in zk.get_children(directory):
        path = f"{directory}/{child}"
        try:
            _, stat = zk.get(path)
            if now_ms - stat.ctime > layout.CHANGE_EXPIRATION_MS:
                zk.delete(path)
        except NoNodeError:
            continue


def update_acls(zk, pattern: ResourcePattern,
                change: Callable[[frozenset[AclEntry]], frozenset[AclEntry]]) -> bool:
    """Apply `change` to a pattern's entries with a version check (retrying when someone else
    changed it meanwhile), then notify. False when nothing changed."""
    path = layout.acl_path(pattern)
    while True:
        try:
            data, stat = zk.get(path)
            current, version = layout.decode_acls(data), stat.version
        except NoNodeError:
            current, version = frozenset(), None
        new = change(current)
        if new == current:
            return False
        try:
            if version is None:
                zk.create(path, layout.encode_acls(new), makepath=True)
            elif new:
                zk.set(path, layout.encode_acls(new), version=version)
            else:
                zk.delete(path, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue   # a concurrent writer: read again
        directory, payload = layout.encode_acl_change(pattern)
        _notify(zk, directory, layout.ACL_CHANGE_PREFIX, payload)
        return True


def add_acls(zk, pattern: ResourcePattern, entries: Iterable[AclEntry]) -> bool:
    entries = frozenset(entries)
    return update_acls(zk, pattern, lambda cur: cur | entries)


def remove_acls(zk, pattern: ResourcePattern, entries: Iterable[AclEntry] | None = None) -> bool:
    """Remove the given entries, or every entry of the pattern when `entries` is None."""
    gone = None if entries is None else frozenset(entries)
    return update_acls(zk, pattern, lambda cur: frozenset() if gone is None else cur - gone)


def read_acls(zk) -> AclSnapshot:
    out: AclSnapshot = {}
    for directory, rt, pt in layout.acl_type_dirs():
        try:
            names = zk.get_children(directory)
        except NoNodeError:
            continue
        for name in names:
            try:
                pattern = ResourcePattern(rt, name, pt)
                data, _ = zk.get(f"{directory}/{name}")
                entries = layout.decode_acls(data)
            except NoNodeError:
                continue
            except (layout.LayoutError, ValueError) as e:
                # Never guess: an unreadable znode is skipped loudly (its resource then has no
                # ACL of its own, so allow.everyone.if.no.acl.found=false still denies).
                log.error("skipping ACL znode %s/%s: %s", directory, name, e)
                continue
            if entries:
                out[pattern] = entries
    return out


def sensitive_acl(zk) -> list | None:
    """The ACL of a user's config znode, which may hold SCRAM credentials: the session's default
    ACL (zookeeper.set.acl: the fleet's digest user ALL + world READ) without the world READ, as
    Kafka keeps /config/users sensitive (ZkData.sensitivePath). None without a digest ACL."""
    acl = getattr(zk, "default_acl", None)
    if not acl:
        return None
    mine = [a for a in acl if a.id.scheme != "world"]
    return mine or None


def alter_config(zk, entity_type: str, name: str, *, set_: Mapping[str, str] | None = None,
                 delete: Iterable[str] = ()) -> dict[str, str]:
    """Set and delete keys of an entity's config (version-checked), notify; the new config.
    A user's znode is readable by the fleet's digest user only (sensitive_acl) when this
    session writes with one."""
    path = layout.config_path(entity_type, name)
    acl = sensitive_acl(zk) if entity_type == "users" else None
    set_ = dict(set_ or {})
    delete = list(delete)
    while True:
        try:
            data, stat = zk.get(path)
            current, version = layout.decode_config(data), stat.version
        except NoNodeError:
            current, version = {}, None
        new = {k: v for k, v in current.items() if k not in delete}
        new.update(set_)
        if new == current and version is not None:
            return new
        try:
            if version is None:
                zk.create(path, layout.encode_config(new), makepath=True, acl=acl)
            else:
                zk.set(path, layout.encode_config(new), version=version)
                if acl is not None:
                    zk.set_acls(path, acl)     # one written before credentials could be there
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        _notify(zk, layout.CONFIG_CHANGES, layout.CONFIG_CHANGE_PREFIX,
                layout.encode_config_change(entity_type, name))
        return new


def read_configs(zk) -> ConfigSnapshot:
    """Every users/ and clients/ entity's config (user+client pairs are not kept here)."""
    out: ConfigSnapshot = {}
    for entity_type, root in (("users", layout.CONFIG_USERS), ("clients", layout.CONFIG_CLIENTS)):
        try:
            names = zk.get_children(root)
        except NoNodeError:
            continue
        for raw in names:
            try:
                data, _ = zk.get(f"{root}/{raw}")
                cfg = layout.decode_config(data)
            except NoNodeError:
                continue
            except layout.LayoutError as e:
                log.error("skipping config znode %s/%s: %s", root, raw, e)
                continue
            if cfg:
                out[(entity_type, layout.desanitize(raw))] = cfg
    return out


# --- caches (enforcing processes) ---------------------------------------------------------------

class _WatchedSnapshot:
    """Re-read a snapshot whenever children change under any of `directories`."""

    def __init__(self, zk, directories: Iterable[str], read: Callable, on_change: Callable,
                 name: str):
        self._zk = zk
        self._directories = tuple(directories)
        self._read = read
        self._on_change = on_change
        self._name = name
        self._wake: queue.Queue = queue.Queue()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.reloads = 0

    def start(self) -> None:
        for d in self._directories:
            self._zk.ensure_path(d)
        self._reload()    # the first snapshot, before serving
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        for d in self._directories:
            ChildrenWatch(self._zk, d, self._changed, send_event=False)

    def _changed(self, children) -> bool:
        if self._stopped.is_set():
            return False      # ends kazoo's watch
        self._wake.put(None)
        return True

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.get()
            while not self._wake.empty():     # coalesce a burst of notifications
                self._wake.get_nowait()
            if self._stopped.is_set():
                return
            try:
                self._reload()
            except Exception as e:  # noqa: BLE001 - ZooKeeper hiccup: keep the last snapshot
                log.warning("%s: re-reading failed (keeping the last snapshot): %r", self._name, e)
                time.sleep(0.5)
                self._wake.put(None)

    def _reload(self) -> None:
        snap = self._read(self._zk)
        self.reloads += 1
        self._on_change(snap)

    def stop(self) -> None:
        self._stopped.set()
        self._wake.put(None)
        if self._thread is not None:
            self._thread.join(timeout=5)


def watch_acls(zk, on_change: Callable[[AclSnapshot], None], *, name: str = "acl-cache"
               ) -> _WatchedSnapshot:
    w = _WatchedSnapshot(zk, (layout.ACL_CHANGES, layout.ACL_EXTENDED_CHANGES), read_acls,
                         on_change, name)
    w.start()
    return w


def watch_configs(zk, on_change: Callable[[ConfigSnapshot], None], *,
                  name: str = "quota-config-cache") -> _WatchedSnapshot:
    w = _WatchedSnapshot(zk, (layout.CONFIG_CHANGES,), read_configs, on_change, name)
    w.start()
    return w


__all__ = ["add_acls", "remove_acls", "update_acls", "read_acls", "alter_config", "read_configs",
           "watch_acls", "watch_configs", "AclSnapshot", "ConfigSnapshot"]
