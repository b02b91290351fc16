"""What the machine gave this run, printed in pytest's header and again in its summary.

A run that fails on another machine (CI) leaves only its output behind; these lines say whether
it ran short of open files, processes or CPU: the open-files limit, the cgroup's process and CPU
limits, cores, load, and the open files and threads of this test process at the end.

After each test module it also checks that the process's shared ZeroMQ context
(`zmq.Context.instance()`, which SDK clients use) still delivers a message. Its single I/O thread
can block for good (a socket monitor's event with no reader: stop 22's CI), and then every later
test's client stays "not connected yet", far from the cause; the first module after which it no
longer delivers gets a teardown error that says so.
"""
from __future__ import annotations

import os
import pathlib
import resource
import sys
import threading

import pytest

_STUCK_AFTER: list[str] = []     # the module after which the shared context stopped delivering


def _read(path: str) -> str:
    try:
        return pathlib.Path(path).read_text().strip()
    except OSError:
        return "-"


def _machine() -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    load = " ".join(_read("/proc/loadavg").split()[:3])
    return (f"machine: {os.cpu_count()} cores, load {load}, open files limit {soft}/{hard}, "
            f"cgroup pids {_read('/sys/fs/cgroup/pids.current')}/{_read('/sys/fs/cgroup/pids.max')}, "
            f"cgroup cpu.max {_read('/sys/fs/cgroup/cpu.max')}")


def _this_process() -> str:
    try:
        fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        fds = -1
    threads = next((line.split()[1] for line in _read("/proc/self/status").splitlines()
                    if line.startswith("Threads:")), "-")
    return (f"this test process: {fds} open files, {threads} threads "
            f"({threading.active_count()} of them Python's)")


def pytest_report_header(config):
    return [_machine()]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    terminalreporter.write_line(_machine())
    terminalreporter.write_line(_this_process())


def _shared_context_delivers(timeout_s: float) -> bool:
    """A message from a new DEALER of zmq.Context.instance() reaches a new ROUTER of it over
    TCP on 127.0.0.1 (no CURVE: it tests the I/O thread, not a fleet's keys). A DEALER without
    ZMQ_IMMEDIATE queues the message until the connection is up."""
    import zmq
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    dealer = ctx.socket(zmq.DEALER)
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        dealer.connect(f"tcp://127.0.0.1:{port}")
        dealer.send(b"ping", zmq.NOBLOCK)
        return bool(router.poll(int(timeout_s * 1000)))
    except zmq.Again:
        return False
    finally:
        dealer.close(linger=0)
        router.close(linger=0)


@pytest.hookimpl(trylast=True)          # after the fixtures' teardown, which must run anyway
def pytest_runtest_teardown(item, nextitem):
    module = getattr(item, "module", None)
    if _STUCK_AFTER or module is None or (nextitem is not None
                                          and getattr(nextitem, "module", None) is module):
        return
    zmq = sys.modules.get("zmq")
    if zmq is None or getattr(zmq.Context, "_instance", None) is None:
        return                   # this process never made the shared context
    if not _shared_context_delivers(float(os.environ.get("RIVERBED_TEST_ZMQ_CHECK_S", "10"))):
        _STUCK_AFTER.append(module.__name__)
        pytest.fail(f"after {module.__name__}: zmq.Context.instance() no longer delivers "
                    f"a message (its I/O thread is blocked); later tests' clients in this "
                    f"process will not connect", pytrace=False)
