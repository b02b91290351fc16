"""The client side of the network-fault ring (test_netfault_ring.py), one long-lived process in
the test bed's client namespace, driven by JSON lines on stdin, answering JSON lines on stdout:

    python ring_agent.py --bootstrap tcp://H1:9092 --zk H1:2181,.../riverbed

It keeps a ZooKeeper session (read-only: the fleet's znodes are world-readable) polling the
active controller and the watched topic's partition states every 50 ms into a timeline (one
entry per change, wall-clock time), and runs one verifying acks=all idempotent producer
(tests/fault/verifiers.py) at a time. One process for the whole ring: no interpreter start or
SDK import per case.

    {"op": "topic", "name": T, "assignment": {"0": [3, 4, 2], ...}, "configs": {...}}
    {"op": "watch", "topic": T}                 -> the poller follows T
    {"op": "state"}                             -> {"t", "controller", "partitions": {p: {leader, isr, replicas, elr}}}
    {"op": "timeline", "since": t}              -> {"entries": [{"t", "controller", "partitions"}...]}
    {"op": "elect_preferred", "topic": T}       -> every partition led by its first replica again
    {"op": "produce_start", "topic": T, "partitions": N, "rate": R, "sdk_defaults": bool}
    {"op": "produce_stop"}                      -> {"acked", "lost", "duplicates", "out_of_order",
                                                    "failed", "ack_times": {p: [t...]}, ...}
    {"op": "zk_modes", "servers": ["host:2181", ...]}  -> {"host:2181": "leader"|"follower"|error}
    {"op": "quit"}

Every answer carries "ok"; a failed command answers {"ok": false, "error": "..."} and the agent
goes on.
"""
from __future__ import annotations

import argparse
import pathlib
import socket
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fault"))

POLL_S = 0.05


class Poller:
    """The active controller and the partition states of one topic, from ZooKeeper."""

    def __init__(self, zk_connect: str):
        from services.common import zk as zkmod
        self.zk = zkmod.connect(zk_connect, timeout_s=30, create_chroot=False)
        self.topic: str | None = None
        self.lock = threading.Lock()
        self.entries: list[dict] = []
        self.current: dict | None = None
        self.errors = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="zk-poller", daemon=True)
        self.thread.start()

    def read(self) -> dict:
        from kazoo.exceptions import NoNodeError

        from services.common import znodes as zn
        controller = None
        try:
            controller = zn.decode_controller(self.zk.get(zn.CONTROLLER)[0]).controller_id
        except NoNodeError:
            pass
        parts: dict[str, dict] = {}
        if self.topic is not None:
            try:
                assignment = zn.decode_topic_assignment(self.zk.get(zn.topic_path(self.topic))[0])
            except NoNodeError:
                assignment = {}
            for p, replicas in sorted(assignment.items()):
                st = zn.decode_partition_state(self.zk.get(zn.partition_state_path(self.topic, p))[0])
                parts[str(p)] = {"leader": st.leader, "isr": sorted(st.isr),
                                 "replicas": list(replicas),
                                 "elr": sorted(st.elr)}
        return {"controller": controller, "partitions": parts}

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                now = self.read()
            except Exception as e:  # noqa: BLE001 - ZooKeeper moving: note it and go on
                self.errors += 1
                print(f"poll error: {e!r}", file=sys.stderr, flush=True)
                self._stop.wait(0.5)
                continue
            with self.lock:
                if now != self.current:
                    self.current = now
                    self.entries.append({"t": time.time(), **now})
            self._stop.wait(POLL_S)

    def state(self) -> dict:
        with self.lock:
            return {"t": time.time(), **(self.current or {"controller": None, "partitions": {}})}

    def timeline(self, since: float) -> list[dict]:
        with self.lock:
            before = [e for e in self.entries if e["t"] < since][-1:]   # the state at `since`
            return before + [e for e in self.entries if e["t"] >= since]

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        from services.common import zk as zkmod
        zkmod.close(self.zk)


def _full(state: dict) -> bool:
    parts = state["partitions"].values()
    return bool(parts) and all(p["leader"] >= 0 and set(p["isr"]) == set(p["replicas"]) for p in parts)


class Agent:
    def __init__(self, bootstrap: str, zk_connect: str):
        self.bootstrap = bootstrap
        self.poller = Poller(zk_connect)
        self.vp = None

    def _wait(self, pred, what: str, timeout_s: float) -> float:
        t0 = time.monotonic()
        while not pred():
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"{what}: not within {timeout_s:.0f} s; state {self.poller.state()}")
            time.sleep(0.05)
        return time.monotonic() - t0

    def op_topic(self, name: str, assignment: dict, configs: dict | None = None,
                 timeout_s: float = 120) -> dict:
        from riverbed import Admin, errors
        from riverbed.structs import NewTopic
        with Admin(self.bootstrap) as admin:
            try:
                admin.create_topics([NewTopic(name, replica_assignment={
                    int(p): list(r) for p, r in assignment.items()}, configs=dict(configs or {}))])
            except errors.TopicAlreadyExistsError:
                pass
        self.poller.topic = name
        self._wait(lambda: _full(self.poller.state()) and
                   len(self.poller.state()["partitions"]) == len(assignment),
                   f"topic {name} led with full ISRs", timeout_s)
        return self.poller.state()

    def op_watch(self, topic: str) -> dict:
        self.poller.topic = topic
        return {}

    def op_state(self) -> dict:
        return self.poller.state()

    def op_timeline(self, since: float) -> dict:
        return {"entries": self.poller.timeline(since)}

    def op_elect_preferred(self, topic: str, timeout_s: float = 120) -> dict:
        from riverbed import Admin

        def preferred() -> bool:
            parts = self.poller.state()["partitions"].values()
            return bool(parts) and all(p["leader"] == p["replicas"][0] for p in parts)
        if preferred():
            return {"elected": False}
        t0 = time.monotonic()
        with Admin(self.bootstrap) as admin:
            while not preferred():
                if time.monotonic() - t0 > timeout_s:
                    raise TimeoutError(f"preferred leaders of {topic} not back within {timeout_s:.0f} s: "
                                       f"{self.poller.state()}")
                parts = self.poller.state()["partitions"]
                admin.elect_leaders([(topic, int(p)) for p, st in parts.items()
                                     if st["leader"] != st["replicas"][0]])
                deadline = time.monotonic() + 3
                while not preferred() and time.monotonic() < deadline:
                    time.sleep(0.05)
        return {"elected": True, "s": round(time.monotonic() - t0, 2)}

    def op_produce_start(self, topic: str, partitions: int, rate: float = 200.0,
                         sdk_defaults: bool = False) -> dict:
        from verifiers import VerifyingProducer
        if self.vp is not None:
            raise RuntimeError("a producer is running")
        if sdk_defaults:   # acks=all and the SDK's defaults for everything else (idempotent)
            vp = VerifyingProducer([self.bootstrap], topic, partitions, rate_per_s=rate,
                                   sdk_defaults=True)
        else:
            vp = VerifyingProducer([self.bootstrap], topic, partitions, acks="all",
                                   enable_idempotence=True, rate_per_s=rate,
                                   max_in_flight_requests_per_connection=1,
                                   request_timeout_ms=10000, delivery_timeout_ms=120000)
        vp.start()
        self.vp = vp
        try:
            vp.wait_for_acks(50, timeout_s=120, what="before the case")
        except BaseException:
            self.vp = None
            vp.stop(timeout_s=30)
            raise
        return {"run_id": vp.run_id}

    def op_produce_stop(self, timeout_s: float = 120) -> dict:
        from verifiers import verify
        vp, self.vp = self.vp, None
        if vp is None:
            raise RuntimeError("no producer is running")
        vp.wait_for_acks(20, timeout_s=timeout_s, what="after the case")
        vp.stop(timeout_s=timeout_s)
        report = verify([self.bootstrap], vp.topic, [vp], timeout_s=timeout_s)
        wall = time.time() - time.monotonic()
        return {"verified": report.ok, "describe": report.describe(), "acked": report.acked,
                "read": report.read, "lost": len(report.lost), "out_of_order": len(report.out_of_order),
                "duplicates": report.duplicates, "failed": dict(vp.failed), "sent": vp.sent,
                "ack_times": {str(p): [round(t + wall, 4) for t in ts] for p, ts in vp.ack_times.items()}}

    def op_zk_modes(self, servers: list[str]) -> dict:
        out = {}
        for server in servers:
            host, port = server.rsplit(":", 1)
            try:
                with socket.create_connection((host, int(port)), timeout=2) as s:
                    s.sendall(b"srvr")
                    data = b""
                    while chunk := s.recv(4096):
                        data += chunk
                mode = next((ln.split(":", 1)[1].strip() for ln in data.decode().splitlines()
                             if ln.startswith("Mode:")), "unknown")
            except OSError as e:
                mode = f"error: {e}"
            out[server] = mode
        return out


def main() -> int:
    from json_lines import serve
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--zk", required=True)
    a = ap.parse_args()
    agent = Agent(a.bootstrap, a.zk)
    try:
        serve(agent)
    finally:
        if agent.vp is not None:
            agent.vp.stop(timeout_s=10)
        agent.poller.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
