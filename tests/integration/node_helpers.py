"""Helpers shared by the integration tests that run real service processes and play the
controller themselves (test_storage_node, test_replication_node, test_idempotence, test_gateway).

- `ServiceProcess`: one `python -m <module> --config <name>.properties` subprocess, its output in
  `<name>.log` under the test's tmp dir; `StorageNodeProcess` adds a storage node's keys.
- `wait_registered`: until /brokers/ids/<id> of a live node appears (from a new session).
- `leader_and_isr`, `produce`, `fetch`, `fetch_all`: the test-side controller and client calls
  over riverbed.wire.client.Channel.
- `wait_until`: poll a condition, bounded (modules bind their own timeout with functools.partial).

The fixtures that start and stop these processes are in conftest.py (`processes`,
`storage_nodes`, `zk`).
"""
from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from riverbed._proto.v1 import controller_pb2, fetch_pb2, produce_pb2
from riverbed.records import decode_batches
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel

from deploy.process import stop_all
from services.common import znodes

REPO = pathlib.Path(__file__).resolve().parents[2]
NONE = 0


class ServiceProcess:
    """One service subprocess; `stop` raises AssertionError (after SIGKILL) if it outlives
    `stop_timeout_s`."""

    def __init__(self, tmp: pathlib.Path, module: str, name: str, props: dict, *,
                 stop_timeout_s: float = 30):
        self.module = module
        self.name = name
        self.stop_timeout_s = stop_timeout_s
        self.out = tmp / f"{name}.log"
        self.config = tmp / f"{name}.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen | None = None

    def start(self):
        with open(self.out, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, "--config", str(self.config)],
                stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        return self

    def stop(self, sig=signal.SIGTERM, timeout_s: float | None = None) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(self.stop_timeout_s if timeout_s is None else timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"{self.name} did not stop on {signal.Signals(sig).name}:\n"
                                 f"{self.log_tail()}") from None

    def signal(self, sig) -> None:
        self.proc.send_signal(sig)

    def log_tail(self) -> str:
        return self.out.read_text(errors="replace")[-6000:] if self.out.exists() else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def stop_processes(started: list[ServiceProcess]) -> None:
    """SIGKILL every process a test started (a SIGSTOPped one is continued first)."""
    for p in started:
        if p.alive():
            p.signal(signal.SIGCONT)
    stop_all([(p.proc.pid, p.proc) for p in started if p.proc is not None], grace_s=5,
             kill_only=True)


class StorageNodeProcess(ServiceProcess):
    """One storage-node subprocess (node-<id>.log, logs in logs-<id>/); `extra` adds or
    overrides config keys."""

    def __init__(self, tmp: pathlib.Path, broker_id: int, port: int, zk_connect: str, *,
                 stop_timeout_s: float = 30, **extra):
        self.broker_id = broker_id
        self.port = port
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.log_dir = tmp / f"logs-{broker_id}"
        props = {"broker.id": broker_id, "port": port, "host.name": "127.0.0.1",
                 "log.dirs": self.log_dir, "zookeeper.connect": zk_connect,
                 "replica.fetch.wait.max.ms": 200, "replica.fetch.backoff.ms": 100,
                 "zookeeper.session.timeout.ms": 4000, **extra}
        super().__init__(tmp, "services.storage_node", f"node-{broker_id}", props,
                         stop_timeout_s=stop_timeout_s)


@dataclass(frozen=True)
class Registration:
    stat: ZnodeStat              # czxid, ephemeralOwner (the registering session)
    info: znodes.BrokerInfo


def wait_registered(zk, node: StorageNodeProcess, timeout_s: float = 30,
                    not_session: int | None = None) -> Registration:
    """Wait for /brokers/ids/<id> with a payload, from a session other than `not_session` (a
    killed process's znode lingers until its session expires); fails if the node exits."""
    path = znodes.broker_path(node.broker_id)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert node.alive(), f"node exited early:\n{node.log_tail()}"
        try:
            data, stat = zk.get(path)
        except NoNodeError:
            data, stat = b"", None
        if data and stat.ephemeralOwner != not_session:
            return Registration(stat, znodes.decode_broker(node.broker_id, data))
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared:\n{node.log_tail()}")


def leader_and_isr(ch: Channel, cepoch: int, parts, live_leaders=()):
    """LEADER_AND_ISR from controller 100: `parts` are (topic, partition, leader, leader_epoch,
    isr, replicas); `live_leaders` the StorageNodeProcesses to name as live leaders."""
    req = controller_pb2.LeaderAndIsrRequest(controller_id=100, controller_epoch=cepoch)
    for topic, partition, leader, lepoch, isr, replicas in parts:
        req.partitions.add(topic=topic, partition=partition, controller_epoch=cepoch,
                           leader=leader, leader_epoch=lepoch, isr=isr, replicas=replicas)
    for node in live_leaders:
        req.live_leaders.add(node_id=node.broker_id, host="127.0.0.1", port=node.port,
                             endpoint=node.endpoint)
    return ch.call(ApiKey.LEADER_AND_ISR, req, timeout_ms=10000).body


def produce(ch: Channel, topic, partition, payload, acks=1, timeout_ms=5000):
    """One batch; the partition's answer (None for acks=0)."""
    req = produce_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
    req.topics.add(name=topic).partitions.add(partition=partition)
    if acks == 0:
        ch.send(ApiKey.PRODUCE, req, payloads=[payload], expect_response=False)
        return None
    resp = ch.call(ApiKey.PRODUCE, req, payloads=[payload], timeout_ms=timeout_ms + 5000)
    return resp.body.topics[0].partitions[0]


def fetch(ch: Channel, topic, partition, offset, *, max_wait_ms=0, min_bytes=0,
          max_bytes=1 << 20):
    """A consumer FETCH: (the partition's answer, its record bytes)."""
    req = fetch_pb2.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes)
    req.topics.add(name=topic).partitions.add(partition=partition, fetch_offset=offset,
                                              partition_max_bytes=max_bytes)
    resp = ch.call(ApiKey.FETCH, req, timeout_ms=max_wait_ms + 10000)
    return resp.body.topics[0].partitions[0], bytes(resp.payloads[0])


def fetch_all(ch: Channel, topic, partition, offset=0):
    """Every record up to the high watermark (consumer fetches), and the last answer."""
    out = []
    while True:
        part, data = fetch(ch, topic, partition, offset)
        assert part.error_code == NONE, part.error_message
        recs = decode_batches(data)
        if not recs:
            return out, part
        out += recs
        offset = recs[-1].offset + 1


def wait_until(pred, what: str, timeout_s: float = 60.0, interval_s: float = 0.2,
               tolerate: tuple[type[BaseException], ...] = ()):
    """pred() until it returns something true (returned), every interval_s; an AssertionError
    naming `what` after timeout_s. An exception in `tolerate` counts as not yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = pred()
        except tolerate:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval_s)
