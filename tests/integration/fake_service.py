"""A test-only stand-in for a Riverbed service, to test the fleet launcher's machinery.

Run as `python fake_service.py --config FILE [--override k=v ...]`, like the real services.
It reads the role from the config's id key (broker.id, controller.id, gateway.id), binds a
ZeroMQ ROUTER on tcp://host.name:port (and a PUB on pub.port for a controller), registers in
ZooKeeper as the real role would (storage node: /brokers/ids/<id>; controller: competes for
/controller; gateway: /riverbed/gateways/<id>), and exits 0 on SIGTERM.

Selected with `Fleet(..., role_modules={"storage_node": FAKE, ...})`; never used by the product.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

import zmq
from kazoo.exceptions import NodeExistsError

from services.common import zk as zkmod
from services.common import znodes as zn
from services.common.config import load_properties, parse_overrides


def register(client, stop: threading.Event, path: str, payload: bytes) -> None:
    """Create our ephemeral node; after a kill -9 the previous session's node lingers until
    that session expires, so retry until it is gone (as a restarted Kafka broker must)."""
    while not stop.is_set():
        try:
            client.create(path, payload, ephemeral=True, makepath=True)
            return
        except NodeExistsError:
            stop.wait(0.2)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--override", action="append", default=[])
    args = ap.parse_args()
    props = {**load_properties(args.config), **parse_overrides(args.override)}
    host, port = props["host.name"], int(props["port"])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind(f"tcp://{host}:{port}")
    pub = None
    if "pub.port" in props:
        pub = ctx.socket(zmq.PUB)
        pub.bind(f"tcp://{host}:{props['pub.port']}")
    endpoint = f"tcp://{host}:{port}"
    now_ms = int(time.time() * 1000)

    print(f"fake service up on {endpoint} with {sorted(props)}", file=sys.stderr, flush=True)
    # the fleet's ZooKeeper credentials (a CURVE fleet's chroot is writable only with them)
    auth = zkmod.ZkAuth.from_file(props.get("zookeeper.credentials.file", ""),
                                  set_acl=props.get("zookeeper.set.acl") == "true")
    client = zkmod.connect(props["zookeeper.connect"], timeout_s=15, auth=auth,
                           session_timeout_ms=int(props["zookeeper.session.timeout.ms"]))
    if "broker.id" in props:
        bid = int(props["broker.id"])
        register(client, stop, zn.broker_path(bid), zn.encode_broker(zn.BrokerInfo(
            bid, host, port, (endpoint,), None, now_ms)))
    elif "gateway.id" in props:
        gid = int(props["gateway.id"])
        register(client, stop, zn.gateway_path(gid),
                 zn.encode_gateway(zn.GatewayInfo(gid, endpoint, now_ms)))
    elif "controller.id" in props:
        cid = int(props["controller.id"])
        payload = zn.encode_controller(zn.ControllerInfo(
            cid, endpoint, f"tcp://{host}:{props['pub.port']}", now_ms))
        elect = threading.Event()

        def try_elect(data, stat):
            if data is None:  # no controller: try to become it
                elect.set()
        client.DataWatch(zn.CONTROLLER, try_elect)
        while not stop.is_set():
            if elect.wait(0.1):
                elect.clear()
                try:
                    client.create(zn.CONTROLLER, payload, ephemeral=True)
                except Exception:  # noqa: BLE001 - someone else won
                    pass
    stop.wait()
    zkmod.close(client)
    router.close(0)
    if pub is not None:
        pub.close(0)
    ctx.term()
    print("fake service stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
