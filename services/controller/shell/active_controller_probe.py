"""A standby's connection to the active controller, watched for the process going away
(core/active_controller_watch.py decides; this is its I/O).

A thread of its own, like the storage node's heartbeat sender: it holds one DEALER to the
endpoint /controller names, with ZMTP heartbeats and libzmq's socket monitor
(riverbed.wire.liveness), sends nothing on it, and reads the monitor's events. After the
connection breaks, each failed reconnect is classified with a plain TCP connect (libzmq's
CONNECT_RETRIED does not carry the errno): ECONNREFUSED means nothing listens there. When the
watch judges the process gone, `on_gone(target)` is called on this thread (the service hands it
to its loop).
"""
from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

import zmq

from zmq.utils.monitor import recv_monitor_message

from riverbed.wire.dealer import configure_dealer
from riverbed.wire.liveness import close_monitor, configure_heartbeats, unbounded_monitor
from services.common.rpc.security import process_security
from services.controller.core.active_controller_watch import (
    ActiveController, ActiveControllerWatch)

log = logging.getLogger(__name__)

POLL_MS = 50
RECONNECT_IVL_MS = 100
RECONNECT_IVL_MAX_MS = 500
TCP_PROBE_TIMEOUT_S = 0.5
_EVENTS = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED
           | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
           | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


def connect_refused(endpoint: str) -> bool | None:
    """True when a TCP connect to `endpoint` is refused (nothing listens), False when it
    succeeds, None when it fails otherwise (timeout, unreachable) or is not TCP."""
    parts = urlsplit(endpoint)
    if parts.scheme != "tcp" or not parts.hostname or parts.port is None:
        return None
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=TCP_PROBE_TIMEOUT_S):
            return False
    except ConnectionRefusedError:
        return True
    except OSError as e:
        return True if e.errno == errno.ECONNREFUSED else None


class ActiveControllerProbe:
    def __init__(self, on_gone: Callable[[ActiveController], None], *, name: str = "",
                 max_message_bytes: int = 1 << 20):
        self._on_gone = on_gone
        self._name = name
        self._max_message_bytes = max_message_bytes
        self._lock = threading.Lock()
        self._wanted: ActiveController | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.watch = ActiveControllerWatch()
        self.judged_gone = 0
        self._up_for: ActiveController | None = None     # the target we logged as connected

    def start(self) -> "ActiveControllerProbe":
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"active-controller-probe{self._name}")
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def set_target(self, target: ActiveController | None) -> None:
        """Watch `target` (the active controller /controller names), or nobody."""
        with self._lock:
            self._wanted = target

    def _run(self) -> None:
        ctx = zmq.Context.instance()
        sock = monitor = None
        poller = zmq.Poller()
        try:
            while not self._stop.is_set():
                with self._lock:
                    wanted = self._wanted
                if self.watch.watch(wanted):
                    if monitor is not None:
                        poller.unregister(monitor)
                        close_monitor(sock, monitor)
                        sock.close(linger=0)
                        sock = monitor = None
                    if wanted is not None:
                        try:
                            sock, monitor = self._open(ctx, wanted.endpoint)
                            poller.register(monitor, zmq.POLLIN)
                        except Exception as e:  # noqa: BLE001 - e.g. no key for it: no probe
                            log.warning("cannot watch controller %d at %s: %r",
                                        wanted.controller_id, wanted.endpoint, e)
                if monitor is None:
                    self._stop.wait(POLL_MS / 1000)
                    continue
                if poller.poll(POLL_MS):
                    self._read(monitor, wanted)
        except Exception:  # noqa: BLE001 - the probe is an optimisation: log, stop probing
            log.exception("active controller probe stopped")
        finally:
            if monitor is not None:     # the monitor stopped before its reader goes
                close_monitor(sock, monitor)
            if sock is not None:
                sock.close(linger=0)

    def _open(self, ctx, endpoint: str) -> tuple[zmq.Socket, zmq.Socket]:
        sock = ctx.socket(zmq.DEALER)
        try:
            configure_dealer(sock, max_message_bytes=self._max_message_bytes, linger_ms=0,
                             reconnect_ivl_ms=RECONNECT_IVL_MS,
                             reconnect_ivl_max_ms=RECONNECT_IVL_MAX_MS)
            configure_heartbeats(sock)
            process_security().client.apply(sock, endpoint)
            monitor = unbounded_monitor(sock, _EVENTS)
            sock.connect(endpoint)
        except Exception:
            sock.close(linger=0)
            raise
        return sock, monitor

    def _read(self, monitor: zmq.Socket, target: ActiveController) -> None:
        watch = self.watch
        while True:
            try:
                ev = recv_monitor_message(monitor, zmq.NOBLOCK)
            except (zmq.Again, zmq.ZMQError):
                break
            kind = ev["event"]
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                if self._up_for != target:
                    self._up_for = target
                    log.info("watching the active controller %d at %s (connected)",
                             target.controller_id, target.endpoint)
                watch.connected()
            elif kind == zmq.EVENT_DISCONNECTED:
                watch.connection_lost()
            elif kind == zmq.EVENT_CONNECT_RETRIED:
                refused = connect_refused(target.endpoint)
                if refused:
                    watch.connect_refused()
                elif refused is None:
                    watch.connect_failed()
            else:                      # a failed handshake proves nothing about the process
                watch.connect_failed()
        gone = watch.gone()
        if gone is not None:
            self.judged_gone += 1
            log.warning("controller %d at %s is gone (connection lost, reconnects refused): "
                        "taking over without waiting for its ZooKeeper session to expire",
                        gone.controller_id, gone.endpoint)
            self._on_gone(gone)
