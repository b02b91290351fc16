"""CPU time of processes, split into ZeroMQ's I/O threads and everything else (Linux /proc).

A process's ZeroMQ I/O threads are named `ZMQbg/IO/<n>` by libzmq: they frame every message
and, with CURVE, encrypt and decrypt it; the rest of a service's CPU is its Python (the event
loop, handlers, protobuf) plus its other threads. Used by `loadgen.bench --security` to show
where each row's CPU goes.

    before = snapshot({"gateway": pid, ...})
    ... run a row ...
    used = delta(before, snapshot({...}))     # {"gateway": Cpu(io=0.8, other=2.1), ...}

The process total comes from /proc/<pid>/stat, which keeps the time of threads that have ended;
`io` sums the live I/O threads (they live as long as the ZeroMQ context), `other` is the rest.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

__all__ = ["CPU_GROUPS", "Cpu", "Sample", "cpu_of", "fleet_pids", "parse_stat", "is_io_thread",
           "process_cpu", "process_pids", "snapshot", "delta"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Cpu:
    io: float = 0.0         # CPU seconds in ZeroMQ I/O threads
    other: float = 0.0      # the rest of the process(es)
    io_busiest: float = 0.0  # the busiest single I/O thread's share of `io`

    @property
    def total(self) -> float:
        return self.io + self.other


@dataclass(frozen=True)
class Sample:
    """One group's CPU so far: process totals and each live thread's (comm, seconds)."""
    total: float
    threads: Mapping[tuple[int, int], tuple[str, float]]


def parse_stat(text: str, tick: int = _TICK) -> tuple[str, float]:
    """(comm, user + system CPU seconds) of one /proc/<pid>[/task/<tid>]/stat line. The comm is
    between the first '(' and the last ')' (it may hold spaces and parentheses)."""
    lp, rp = text.index("("), text.rindex(")")
    comm = text[lp + 1:rp]
    fields = text[rp + 2:].split()
    # fields[0] is the state (field 3 of proc(5)); utime and stime are fields 14 and 15
    return comm, (int(fields[11]) + int(fields[12])) / tick


def is_io_thread(comm: str) -> bool:
    return comm.startswith("ZMQbg/IO")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _sample_pid(pid: int) -> tuple[float, dict[tuple[int, int], tuple[str, float]]] | None:
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    _, total = parse_stat(text)
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        t = _read(f"/proc/{pid}/task/{tid}/stat")
        if t is not None:
            threads[(pid, int(tid))] = parse_stat(t)
    return total, threads


def process_cpu(pid: int) -> Cpu | None:
    """The process's CPU so far, or None when it is gone."""
    got = _sample_pid(pid)
    if got is None:
        return None
    return cpu_of(Sample(got[0], got[1]))


def cpu_of(sample: Sample, before: Sample | None = None) -> Cpu:
    """The CPU of `sample` (since `before`, when given): I/O threads, the rest, and the busiest
    I/O thread. A thread new since `before` counts from zero."""
    prev_threads = before.threads if before else {}
    io = busiest = 0.0
    for key, (comm, secs) in sample.threads.items():
        if not is_io_thread(comm):
            continue
        used = secs - prev_threads.get(key, (comm, 0.0))[1]
        io += used
        busiest = max(busiest, used)
    total = sample.total - (before.total if before else 0.0)
    return Cpu(io=io, other=max(0.0, total - io), io_busiest=busiest)


def snapshot(groups: Mapping[str, list[int]]) -> dict[str, Sample]:
    """CPU so far per group of processes (e.g. "storage-node" -> the storage nodes' pids)."""
    out = {}
    for name, pids in groups.items():
        total, threads = 0.0, {}
        for pid in pids:
            got = _sample_pid(pid)
            if got is not None:
                total += got[0]
                threads.update(got[1])
        out[name] = Sample(total, threads)
    return out


def delta(before: Mapping[str, Sample], after: Mapping[str, Sample]) -> dict[str, Cpu]:
    """CPU used between two snapshots, per group present in both."""
    return {k: cpu_of(after[k], before[k]) for k in after if k in before}


# CPU groups of a benchmark row: the perf client (this process) and the fleet's roles
CPU_GROUPS = ("client", "gateway", "storage-node", "other")


def _services(fleet):
    """(name, role, pid) of a deploy.fleet.Fleet's running Python services (ZooKeeper left out)."""
    for name in fleet.names():
        rec = fleet.process(name)
        if rec.pid and rec.role != "zookeeper":
            yield name, rec.role, rec.pid


def fleet_pids(fleet) -> dict[str, list[int]]:
    """A deploy.fleet.Fleet's Python services by CPU group (ZooKeeper left out), plus this
    process as "client"."""
    groups: dict[str, list[int]] = {"client": [os.getpid()], "gateway": [],
                                    "storage-node": [], "other": []}
    for _, role, pid in _services(fleet):
        role = role.replace("_", "-")
        groups[role if role in groups else "other"].append(pid)
    return groups


def process_pids(fleet) -> dict[str, list[int]]:
    """A deploy.fleet.Fleet's Python services, each its own CPU group named after the process
    ("gateway-1", "storage-2", ...; ZooKeeper left out)."""
    return {name: [pid] for name, _, pid in _services(fleet)}
