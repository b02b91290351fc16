"""What the machine gave this run, printed in pytest's header and again in its summary.

A run that fails on another machine (CI) leaves only its output behind; these lines say whether
it ran short of open files, processes or CPU: the open-files limit, the cgroup's process and CPU
limits, cores, load, and the open files and threads of this test process at the end.
"""
from __future__ import annotations

import os
import pathlib
import resource
import threading


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
