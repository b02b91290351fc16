"""Local process control for the launcher: spawn in a new session, identify by /proc, stop.

Every process the launcher starts runs in its own session (so a Ctrl-C in the launcher's terminal
never reaches it directly; the launcher sends SIGTERM itself, once). A PID is only trusted while
`/proc/<pid>/cmdline` still equals the argv we started it with: PIDs are reused, and several
engineers' fleets share this machine, so we never signal a process we cannot prove is ours.
"""
from __future__ import annotations

import errno
import os
import pathlib
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence

POLL_INTERVAL_S = 0.05


class LaunchError(RuntimeError):
    """A process did not start or did not become ready; the message carries its log's tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel says is free now (it may be taken again before use: bind soon)."""
    return free_ports(1, host)[0]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct free TCP ports, held open together so they cannot repeat."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def spawn(argv: Sequence[str], log_path: pathlib.Path, *, cwd: pathlib.Path | None = None,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `argv` in a new session with stdout+stderr appended to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab", buffering=0) as log:
        log.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        return subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=cwd, env=env, start_new_session=True, close_fds=True)


def _proc_state(pid: int) -> str | None:
    """The one-letter state from /proc/<pid>/stat, or None if there is no such process."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return None
    # comm is in parentheses and may contain spaces; the state follows the last ')'.
    return stat[stat.rfind(")") + 2:].split(" ", 1)[0]


def cmdline(pid: int) -> list[str] | None:
    try:
        raw = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None  # zombie or kernel thread
    return raw.rstrip(b"\0").decode(errors="replace").split("\0")


def is_alive(pid: int | None) -> bool:
    """True if `pid` is a live process (zombies are dead)."""
    if not pid or pid <= 0:
        return False
    state = _proc_state(pid)
    return state is not None and state not in ("Z", "X")


def is_ours(pid: int | None, argv: Sequence[str]) -> bool:
    """True if `pid` is alive and still runs exactly `argv` (guards against PID reuse)."""
    if not is_alive(pid):
        return False
    return cmdline(pid) == list(argv)  # type: ignore[arg-type]


def tail(path: pathlib.Path, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def port_accepts(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_for(ready: Callable[[], bool], alive: Callable[[], bool], *, timeout_s: float,
             what: str, log_path: pathlib.Path | None) -> None:
    """Poll `ready()` until true; raise LaunchError if `alive()` turns false or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if ready():
            return
        if not alive():
            raise LaunchError(f"{what} exited before it was ready; last lines of {log_path}:\n"
                              + (tail(log_path) if log_path else ""))
        if time.monotonic() >= deadline:
            raise LaunchError(f"{what} was not ready after {timeout_s:.0f} s; last lines of "
                              f"{log_path}:\n" + (tail(log_path) if log_path else ""))
        time.sleep(POLL_INTERVAL_S)


def _signal(pid: int, sig: int) -> None:
    """Signal the process group when `pid` leads one (our spawns do), else the process."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as e:
        if e.errno != errno.EPERM:
            raise


def send_signal(pid: int, sig: int) -> None:
    _signal(pid, sig)


def stop_all(procs: Iterable[tuple[int, subprocess.Popen | None]], *, grace_s: float,
             kill_only: bool = False) -> list[int]:
    """SIGTERM every pid (SIGKILL if `kill_only`), wait up to `grace_s`, SIGKILL stragglers,
    and wait until all are gone. Popen handles, when given, are reaped. Returns the PIDs that
    needed SIGKILL after the grace period."""
    items = [(pid, p) for pid, p in procs if pid]
    for pid, _ in items:
        if is_alive(pid):
            _signal(pid, signal.SIGKILL if kill_only else signal.SIGTERM)

    def gone(pid: int, p: subprocess.Popen | None) -> bool:
        if p is not None:
            return p.poll() is not None
        return not is_alive(pid)

    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and not all(gone(pid, p) for pid, p in items):
        time.sleep(POLL_INTERVAL_S)
    killed = []
    for pid, p in items:
        if not gone(pid, p):
            killed.append(pid)
            _signal(pid, signal.SIGKILL)
    for pid, p in items:
        if p is not None:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        else:
            end = time.monotonic() + 10
            while is_alive(pid) and time.monotonic() < end:
                time.sleep(POLL_INTERVAL_S)
    return killed


def ephemeral_port_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int | None:
    """The first port the kernel hands out for outgoing connections, or None if unknown."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_port_block(span: int, host: str = "127.0.0.1", *, low: int = 20000, high: int = 60000,
                    attempts: int = 100, seed: int | None = None,
                    ephemeral_low: int | None = None) -> int:
    """A base port P such that P..P+span-1 are all free now (for a fleet's port plan). Below
    the kernel's ephemeral range when there is room for a few blocks there: a port of the plan
    that is free now could otherwise be taken by any process's outgoing connection before the
    service binds it (a fleet's storage node once failed with "Address already in use")."""
    import random
    eph = ephemeral_port_low() if ephemeral_low is None else ephemeral_low
    if eph is not None and eph - low >= 8 * span:
        high = min(high, eph)
    rng = random.Random(seed)
    for _ in range(attempts):
        base = rng.randrange(low, high - span)
        socks = []
        try:
            for port in range(base, base + span):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise LaunchError(f"no block of {span} free ports found on {host}")
