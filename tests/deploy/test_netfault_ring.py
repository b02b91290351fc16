"""The network-fault ring (issue 24): network faults between the deployment test bed's hosts
(deployment.py's fleet, deployed by site.yml; shared with test_deploy_hosts.py when both run),
each under an acks=all idempotent verifying producer.

Per case: the topic's ISRs full and its preferred leaders leading; a fresh verifying producer
(ring_agent.py, in the client namespace) writing 200 records/s over the six partitions; the
fault for HOLD_S; healed; every ISR full again; the producer stopped and everything it had
acknowledged read back. Asserted: nothing acknowledged lost, no duplicate, order kept. Reported
(never asserted: the machine is shared): the longest gap between two acknowledgements (any
partition, and within one partition), the seconds from the heal until every ISR was full, the
smallest ISR seen. The figures go into the run's terminal summary ("netfault ring") and, with
RIVERBED_NETFAULT_REPORT=FILE, into FILE as JSON.

Topic `ring`, min.insync.replicas 2, replicas placed by hand (storage node: host) so that each
case cuts what it names: 1: h2, 2: h3, 3: h4, 4: h5, 5: h2 (h2 runs two storage-node processes).
Node 3 leads p0 and p1 with followers only on h3 and h5; node 4 (h5) leads nothing and follows
five partitions; no partition has two replicas on h2.

| case | fault |
|---|---|
| follower_isolated | h5 (storage 4, a follower only) cut off from everyone |
| leader_cut_from_followers | h4 (storage 3, leader of p0, p1) cut off from h3 and h5, its followers' hosts; it still reaches ZooKeeper 1-2, both controllers and gateway 1 |
| leader_isolated | h4 cut off from everyone |
| gateway_cut_from_leader | h1 (gateway 1, the producer's) cut off from h4 (the leader of p0, p1), with the active controller on h2 (ZooKeeper 1 on h1 is cut off from h4 too: h4 keeps ZooKeeper 2-3) |
| one_way_cut | h5 (a follower of p0, p1) cannot send to h4 (their leader); h4's packets still reach h5 |
| slow_follower_link | h5's link at 256 kbit/s both ways (tc tbf) |
| zookeeper_member_isolated | the ZooKeeper leader's ports (2181, 2888, 3888) dropped on its host: only that member is cut off |

Skips with one line why without root, network namespaces, loop devices or nft.
"""
from __future__ import annotations

import json
import os
import pathlib
import sys
import time

import pytest

import netfaults
from deploy_testbed import unavailable_reason
from json_lines import LineClient

pytestmark = [pytest.mark.deploy, pytest.mark.netfault, pytest.mark.timeout(1800)]

_REASON = unavailable_reason() or netfaults.unavailable_reason()
if _REASON:
    pytestmark.append(pytest.mark.skip(reason=f"network-fault ring unavailable: {_REASON}"))

HERE = pathlib.Path(__file__).resolve().parent
TOPIC = "ring"
ASSIGNMENT = {0: [3, 4, 2], 1: [3, 2, 4], 2: [2, 1, 4], 3: [1, 3, 4], 4: [5, 4, 2], 5: [2, 5, 3]}
RATE = 200.0
HOLD_S = 15.0
HEAL_WAIT_S = 180.0
RESULTS: list[dict] = []      # conftest.py prints them in the terminal summary


def start_agent(deployment, log: pathlib.Path) -> LineClient:
    """ring_agent.py in the client namespace (json_lines.py: one JSON line each way a command)."""
    proc = deployment.bed.client_popen_pipes(
        [sys.executable, str(HERE / "ring_agent.py"), "--bootstrap", deployment.bootstrap,
         "--zk", deployment.zk_connect], log)
    return LineClient(proc, log, ready_timeout_s=120)


class Ring:
    def __init__(self, deployment, agent: LineClient):
        self.d = deployment
        self.bed = deployment.bed
        self.agent = agent

    def host(self, name: str):
        return self.d.host(name)

    def state(self) -> dict:
        return self.agent.call("state")

    def wait(self, pred, what: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.state()
            if pred(st):
                return st
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout_s:.0f} s; {st}")
            time.sleep(0.2)

    def ready(self) -> None:
        """Every ISR full and every preferred leader leading."""
        self.wait(_full, "every ISR of the ring topic full", HEAL_WAIT_S)
        self.agent.call("elect_preferred", topic=TOPIC)

    def make_controller(self, controller_id: int) -> None:
        """Move the active controller to `controller_id` (restart the active one: the other
        takes over)."""
        st = self.state()
        if st["controller"] == controller_id:
            return
        active = st["controller"]
        host = {1: "h1", 2: "h2"}[active]
        self.bed.ssh(self.host(host), f"/opt/riverbed/bin/riverbedctl restart controller-{active}")
        self.wait(lambda s: s["controller"] == controller_id, f"controller {controller_id} active", 60)


def _full(st: dict) -> bool:
    parts = st["partitions"].values()
    return len(parts) == len(ASSIGNMENT) and all(
        p["leader"] >= 0 and set(p["isr"]) == set(p["replicas"]) for p in parts)


# --- the cases -------------------------------------------------------------------------------------

def _follower_isolated(ring: Ring):
    return netfaults.isolate(ring.bed, ring.host("h5")), "h5 (storage 4) cut off from everyone"


def _leader_cut_from_followers(ring: Ring):
    return (netfaults.cut(ring.bed, [ring.host("h4")], [ring.host("h3"), ring.host("h5")]),
            "h4 (storage 3, leader of p0, p1) cut off from h3 and h5")


def _leader_isolated(ring: Ring):
    return netfaults.isolate(ring.bed, ring.host("h4")), "h4 (storage 3, leader of p0, p1) cut off from everyone"


def _gateway_cut_from_leader(ring: Ring):
    ring.make_controller(2)      # controller 1 shares h1 with the gateway: not the one cut
    return (netfaults.cut(ring.bed, [ring.host("h1")], [ring.host("h4")]),
            "h1 (gateway 1) cut off from h4 (storage 3, leader of p0, p1); controller 2 active")


def _one_way_cut(ring: Ring):
    return (netfaults.one_way(ring.bed, ring.host("h5"), ring.host("h4")),
            "h5 (storage 4) cannot send to h4 (storage 3, its leader of p0, p1)")


def _slow_follower_link(ring: Ring):
    return (netfaults.slow_link(ring.bed, ring.host("h5"), "256kbit"),
            "h5 (storage 4, a follower of five partitions) at 256 kbit/s both ways")


def _zookeeper_member_isolated(ring: Ring):
    servers = [f"{ring.host(h).address}:2181" for h in ("h1", "h2", "h3")]
    modes = ring.agent.call("zk_modes", servers=servers)
    leader = next((s for s in servers if modes.get(s) == "leader"), servers[2])
    name = {f"{ring.host(h).address}:2181": h for h in ("h1", "h2", "h3")}[leader]
    return (netfaults.ports_dropped(ring.bed, ring.host(name), [2181, 2888, 3888]),
            f"ZooKeeper {name[1:]} (on {name}, {modes.get(leader)}) cut off: its ports dropped")


CASES = {
    "follower_isolated": (_follower_isolated, HOLD_S),
    "leader_cut_from_followers": (_leader_cut_from_followers, HOLD_S),
    "leader_isolated": (_leader_isolated, HOLD_S),
    "gateway_cut_from_leader": (_gateway_cut_from_leader, HOLD_S),
    "one_way_cut": (_one_way_cut, HOLD_S),
    "slow_follower_link": (_slow_follower_link, 20.0),
    "zookeeper_member_isolated": (_zookeeper_member_isolated, HOLD_S),
}


# --- figures -------------------------------------------------------------------------------------

def longest_gaps(ack_times: dict[str, list[float]], start: float, end: float) -> dict:
    """The longest gap between two acknowledgements over all partitions, and within each
    partition, between `start` and `end` (a partition with no ack in the window: the whole
    window)."""
    every = sorted(t for ts in ack_times.values() for t in ts if start <= t <= end)
    series = [start] + every + [end]
    overall = max(b - a for a, b in zip(series, series[1:]))
    per = {}
    for p, ts in ack_times.items():
        s = [start] + [t for t in ts if start <= t <= end] + [end]
        per[p] = max(b - a for a, b in zip(s, s[1:]))
    worst = max(per, key=per.get)
    return {"longest_ack_gap_s": round(overall, 2),
            "longest_partition_ack_gap_s": round(per[worst], 2), "worst_partition": int(worst)}


def isr_figures(timeline: list[dict], t_cut: float, t_heal: float, t_end: float) -> dict:
    """From the poller's timeline: the smallest ISR during the fault, the seconds from the cut
    to the first shrink, from the heal until every ISR was full (0: it never stopped being),
    and how many leader changes the fault caused."""
    def at(t: float) -> dict | None:
        before = [e for e in timeline if e["t"] <= t]
        return before[-1] if before else None
    during = [e for e in timeline if t_cut <= e["t"] <= t_heal]
    start = at(t_cut)
    window = ([start] if start else []) + during
    min_isr = min((len(p["isr"]) for e in window for p in e["partitions"].values()), default=None)
    shrunk = next((e["t"] for e in during if not _full(e)), None)
    healed = at(t_heal)
    if healed is not None and _full(healed):
        full_after = 0.0
    else:
        first = next((e for e in timeline if e["t"] > t_heal and _full(e)), None)
        full_after = None if first is None else round(first["t"] - t_heal, 2)
    leaders = [{p: st["leader"] for p, st in e["partitions"].items()}
               for e in window + [e for e in timeline if t_heal < e["t"] <= t_end]]
    changes = sum(1 for a, b in zip(leaders, leaders[1:]) for p in a if a[p] != b.get(p))
    return {"min_isr_during": min_isr,
            "isr_shrank_after_s": None if shrunk is None else round(shrunk - t_cut, 2),
            "full_isr_after_heal_s": full_after, "leader_changes": changes}


# --- the tests -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ring(deployment):
    deployment.ensure_deployed()
    agent = start_agent(deployment, deployment.workdir / "ring-agent.log")
    try:
        agent.call("topic", name=TOPIC, assignment={str(p): r for p, r in ASSIGNMENT.items()},
                   configs={"min.insync.replicas": "2"})
        yield Ring(deployment, agent)
    finally:
        agent.close()
        path = os.environ.get("RIVERBED_NETFAULT_REPORT")
        if path:
            pathlib.Path(path).write_text(json.dumps({"repo": str(deployment.repo), "cases": RESULTS},
                                                     indent=2) + "\n")


@pytest.mark.parametrize("name", list(CASES))
def test_netfault(ring: Ring, name: str):
    make_fault, hold_s = CASES[name]
    fault, description = make_fault(ring)
    ring.ready()
    t_start = time.time()
    ring.agent.call("produce_start", topic=TOPIC, partitions=len(ASSIGNMENT), rate=RATE)
    try:
        t_cut = time.time()
        with fault:
            time.sleep(hold_s)
        t_heal = time.time()
        ring.wait(_full, f"{name}: every ISR full after the heal", HEAL_WAIT_S)
    finally:
        report = ring.agent.call("produce_stop", timeout_s=600)
    t_end = time.time()
    ack_times = report.pop("ack_times")
    row = {"case": name, "fault": description, "hold_s": hold_s,
           **{k: report[k] for k in ("acked", "lost", "duplicates", "out_of_order", "failed")},
           **longest_gaps(ack_times, t_start, max(t for ts in ack_times.values() for t in ts)),
           **isr_figures(ring.agent.call("timeline", since=t_start - 1)["entries"], t_cut, t_heal, t_end)}
    RESULTS.append(row)
    print(json.dumps(row))
    assert report["lost"] == 0 and report["out_of_order"] == 0, report["describe"]
    assert report["duplicates"] == 0, report["describe"]
    assert report["verified"], report["describe"]


def test_no_process_died_in_the_ring(ring: Ring):
    """Every process of the layout still runs (a fault may move leaders, never kill a
    service)."""
    from deployment import PROCESSES
    dead = []
    for name, procs in PROCESSES.items():
        script = "; ".join(f"/opt/riverbed/bin/riverbedctl status {p} >/dev/null || echo {p}" for p in procs)
        out = ring.bed.ssh(ring.host(name), script).stdout.split()
        dead += [f"{p} on {name}" for p in out]
    assert not dead, dead
