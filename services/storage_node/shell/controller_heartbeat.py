"""BROKER_HEARTBEAT from a storage node to the active controller, every
broker.heartbeat.interval.ms, beside the ZooKeeper session (Kafka's BrokerHeartbeat, KIP-631).

The controller fences a node it has not heard from in broker.session.timeout.ms: the node's
partitions get new leaders and leader epochs (so its own later writes and ISR changes are
refused), and it is unfenced, with a LEADER_AND_ISR for its partitions, at the next heartbeat
that arrives.

The sender is a thread of its own with its own socket, like kazoo's session thread: a busy
event loop (a burst of produce requests, creating a thousand partition logs on one
LEADER_AND_ISR) must not look like a dead process, or a loaded node would be fenced, lose its
leaderships, get them back with another LEADER_AND_ISR and be busier still. What it proves is
what the ZooKeeper session proves (the process runs and reaches the controller), only faster.
The controller's endpoint (the /controller znode) is read again only after a failed or refused
heartbeat.
"""
from __future__ import annotations

import logging
import threading
import time

from riverbed import errors
from riverbed._proto.v1 import replication_pb2
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel
from services.common.rpc.security import process_security
from services.common import znodes

log = logging.getLogger(__name__)


class ControllerHeartbeat:
    def __init__(self, node):
        self.node = node                 # the StorageNode: cfg, zk, broker_epoch (read only)
        self.interval_s = node.cfg.broker_heartbeat_interval_ms / 1000.0
        self._channel: Channel | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.failed = 0
        self.fenced_answers = 0

    def start(self) -> None:
        if self.interval_s <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"controller-heartbeat-{self.node.cfg.broker_id}")
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        next_at = time.monotonic()
        try:
            while not self._stop.wait(max(0.0, next_at - time.monotonic())):
                try:
                    self._beat()
                except Exception:  # noqa: BLE001 - never let the sender die: log, go on
                    log.exception("[node %d] heartbeat", self.node.cfg.broker_id)
                    self._drop()
                next_at += self.interval_s
                now = time.monotonic()
                if next_at < now:              # late (the machine was busy): keep the cadence
                    next_at = now
        finally:
            self._drop()

    def _beat(self) -> None:
        node, cfg = self.node, self.node.cfg
        if node.zk is None or node.broker_epoch < 0:
            return
        req = replication_pb2.BrokerHeartbeatRequest(broker_id=cfg.broker_id,
                                                     broker_epoch=node.broker_epoch)
        try:
            ch = self._channel or self._connect()
            # A heartbeat later than a session is worthless: never wait longer than two beats.
            resp = ch.call(ApiKey.BROKER_HEARTBEAT, req,
                           timeout_ms=max(1, int(self.interval_s * 2000)))
        except Exception as e:  # noqa: BLE001 - no controller, moved, timed out: find it again
            self.failed += 1
            log.debug("[node %d] heartbeat failed: %r", cfg.broker_id, e)
            self._drop()
            return
        self.sent += 1
        body = resp.body
        if body.error_code != 0:
            self.failed += 1
            log.info("[node %d] heartbeat refused: %s %s", cfg.broker_id,
                     errors.ErrorCode.Name(body.error_code), body.error_message)
            self._drop()
        elif body.is_fenced:
            self.fenced_answers += 1
            log.warning("[node %d] the controller had fenced this node (no heartbeat in its "
                        "broker.session.timeout.ms); unfenced now, LEADER_AND_ISR follows",
                        cfg.broker_id)

    def _connect(self) -> Channel:
        node = self.node
        data, _ = node.zk.get(znodes.CONTROLLER)
        info = znodes.decode_controller(data)
        if not info.endpoint:
            raise errors.NotControllerError(f"controller {info.controller_id} has no endpoint")
        self._channel = Channel(info.endpoint,
                                client_id=f"storage-node-{node.cfg.broker_id}-heartbeat",
                                max_message_bytes=node.cfg.socket_request_max_bytes,
                                # the node's own key (a service principal: ClusterAction)
                                security=process_security().client)
        return self._channel

    def _drop(self) -> None:
        ch, self._channel = self._channel, None
        if ch is not None:
            ch.close()
