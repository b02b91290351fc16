"""Faults as context managers that undo themselves (STYLE.md §8, Kafka's matrix).

    with hard_kill(fleet, "storage-2"):      # SIGKILL now; restarted (and waited up) on exit
        ...
    with paused(fleet, "storage-3"):         # SIGSTOP now; SIGCONT on exit, even on failure
        ...

| fault            | on enter                               | on exit                      |
|------------------|----------------------------------------|------------------------------|
| clean_shutdown   | SIGTERM, wait until gone               | start, wait until up         |
| hard_kill        | SIGKILL, wait until gone               | start, wait until up         |
| clean_bounce     | SIGTERM, then start at once            | make sure it is running      |
| hard_bounce      | SIGKILL, then start at once            | make sure it is running      |
| paused           | SIGSTOP                                | SIGCONT                      |
| session_expiry   | SIGSTOP, wait until ZooKeeper dropped  | SIGCONT                      |
|                  | the process's ephemeral znode          |                              |

Every signal goes through the Fleet, which only signals PIDs it started (by /proc cmdline).
"""
from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator

from deploy.fleet import Fleet

WAIT_S = 60.0


def wait_until(pred: Callable[[], object], what: str, timeout_s: float = WAIT_S,
               interval_s: float = 0.1) -> object:
    """Poll `pred` until it returns something truthy (exceptions count as not yet); bounded."""
    deadline = time.monotonic() + timeout_s
    last_exc: BaseException | None = None
    while True:
        try:
            value = pred()
        except Exception as e:  # noqa: BLE001 - services restarting: try again
            value, last_exc = None, e
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}"
                                 + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval_s)


def _ensure_running(fleet: Fleet, name: str) -> None:
    if name not in fleet.running():
        fleet.start(name)


@contextlib.contextmanager
def clean_shutdown(fleet: Fleet, name: str) -> Iterator[None]:
    """SIGTERM (a storage node does its controlled shutdown); restarted on exit."""
    fleet.stop(name, kill=False)
    try:
        yield
    finally:
        _ensure_running(fleet, name)


@contextlib.contextmanager
def hard_kill(fleet: Fleet, name: str) -> Iterator[None]:
    """SIGKILL (no flush, no controlled shutdown, the ZooKeeper session left to expire);
    restarted on the same data on exit."""
    fleet.stop(name, kill=True)
    try:
        yield
    finally:
        _ensure_running(fleet, name)


@contextlib.contextmanager
def clean_bounce(fleet: Fleet, name: str) -> Iterator[None]:
    """SIGTERM then start again at once; the block runs with the bounced process back up."""
    try:
        fleet.stop(name, kill=False)
        fleet.start(name)
        yield
    finally:
        _ensure_running(fleet, name)


@contextlib.contextmanager
def hard_bounce(fleet: Fleet, name: str) -> Iterator[None]:
    """SIGKILL then start again at once (the old ZooKeeper session may still be alive when the
    new process starts: it has to wait for the old ephemeral to expire)."""
    try:
        fleet.stop(name, kill=True)
        fleet.start(name)
        yield
    finally:
        _ensure_running(fleet, name)


@contextlib.contextmanager
def paused(fleet: Fleet, name: str) -> Iterator[None]:
    """SIGSTOP now, SIGCONT on exit (always)."""
    fleet.signal(name, signal.SIGSTOP)
    try:
        yield
    finally:
        fleet.signal(name, signal.SIGCONT)


def ephemeral_present(zk, fleet: Fleet, name: str) -> bool:
    """Does the process's ephemeral registration exist in ZooKeeper? Storage node:
    /brokers/ids/<id>; gateway: /riverbed/gateways/<id>; controller: /controller naming it."""
    from services.common import znodes
    rec = fleet.process(name)
    if rec.role == "storage_node":
        return zk.exists(znodes.broker_path(rec.id)) is not None
    if rec.role == "gateway":
        return zk.exists(znodes.gateway_path(rec.id)) is not None
    if rec.role == "controller":
        try:
            data, _ = zk.get(znodes.CONTROLLER)
        except Exception:  # noqa: BLE001 - NoNodeError: nobody is active
            return False
        return znodes.decode_controller(data).controller_id == rec.id
    raise ValueError(f"session_expiry: no ephemeral known for role {rec.role}")


@contextlib.contextmanager
def session_expiry(fleet: Fleet, name: str, zk, timeout_s: float = WAIT_S) -> Iterator[None]:
    """Forced session expiry: SIGSTOP the process until ZooKeeper has expired its session
    (its ephemeral znode is gone, see ephemeral_present), run the block, then SIGCONT. The
    resumed process finds its session expired and must re-register (a zombie until it notices).
    `zk` is a KazooClient on the fleet's chroot (the test's own session)."""
    with paused(fleet, name):
        wait_until(lambda: not ephemeral_present(zk, fleet, name),
                   f"the ZooKeeper session of paused {name} to expire", timeout_s)
        yield


# --- what the cluster says (through the gateway, as clients see it) ---------------------------

def partitions(admin, topic: str) -> dict:
    """{partition: PartitionInfo} from a fresh METADATA (admin.describe_topics)."""
    (desc,) = admin.describe_topics([topic])
    return {p.partition: p for p in desc.partitions}


def wait_partitions(admin, topic: str, pred: Callable[[dict], bool], what: str,
                    timeout_s: float = WAIT_S) -> dict:
    """Poll describe_topics until pred({partition: PartitionInfo}) holds; returns that view."""
    def check():
        ps = partitions(admin, topic)
        return ps if pred(ps) else None
    return wait_until(check, f"{topic}: {what}", timeout_s)  # type: ignore[return-value]


def wait_full_isr(admin, topic: str, n_partitions: int, timeout_s: float = WAIT_S) -> dict:
    """Every partition has a leader and its ISR holds every replica."""
    return wait_partitions(
        admin, topic, lambda ps: len(ps) == n_partitions and all(
            p.leader >= 0 and set(p.isr) == set(p.replicas) for p in ps.values()),
        "every partition led, with a full ISR", timeout_s)


def active_controller(zk) -> int | None:
    from services.common import znodes
    try:
        return znodes.decode_controller(zk.get(znodes.CONTROLLER)[0]).controller_id
    except Exception:  # noqa: BLE001 - none while an election runs
        return None
