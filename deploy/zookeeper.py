"""A real standalone ZooKeeper (Debian's `zookeeper` jars) as a local subprocess.

Layout under `data_dir`: `zoo.cfg`, `log4j.properties`, `data/` (snapshots and txn logs),
`zookeeper.log` (log4j's file appender) and the JVM's stdout+stderr in `log_path`
(default `data_dir/zookeeper.out`). Started in its own session; `stop()` sends SIGTERM,
then SIGKILL after a grace period. See /work/shared/RECIPES.md.

    zk = ZooKeeperServer(tmp / "zk", find_free_port())
    zk.start(); zk.wait_ready(30)
    ... KazooClient(zk.connect_string) ...
    zk.stop()
"""
from __future__ import annotations

import pathlib
import shutil
import socket
import subprocess
import time

from deploy.process import (LaunchError, free_port, free_ports, is_alive, is_ours, spawn,
                            stop_all, tail, wait_for)

__all__ = ["ZooKeeperServer", "ZooKeeperError", "find_free_port", "find_free_ports", "ruok",
           "ZK_MAIN_CLASS", "classpath"]

ZK_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
JAVA_DIR = pathlib.Path("/usr/share/java")
# zookeeper.jar's manifest names its other dependencies; logging needs these two as well.
JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
STOP_GRACE_S = 10.0

find_free_port = free_port
find_free_ports = free_ports


class ZooKeeperError(LaunchError):
    """ZooKeeper is not installed, did not start, or did not answer `ruok`."""


def classpath(java_dir: pathlib.Path = JAVA_DIR) -> str:
    missing = [j for j in JARS if not (java_dir / j).exists()]
    if missing:
        raise ZooKeeperError(
            f"ZooKeeper's jars are missing ({', '.join(str(java_dir / j) for j in missing)}): "
            "run `make install` (it installs Debian's zookeeper package)")
    return ":".join(str(java_dir / j) for j in JARS)


def ruok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Send ZooKeeper's `ruok` four-letter word; True if it answers `imok`."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(b"ruok")
            s.shutdown(socket.SHUT_WR)
            data = b""
            while len(data) < 4:
                chunk = s.recv(16)
                if not chunk:
                    break
                data += chunk
            return data == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    def __init__(self, data_dir: str | pathlib.Path, port: int, *, host: str = "127.0.0.1",
                 java: str = "java", heap_mb: int = 256, log_path: str | pathlib.Path | None = None,
                 tick_time_ms: int = 2000):
        self.data_dir = pathlib.Path(data_dir).resolve()
        self.port = port
        self.host = host
        self.java = java
        self.heap_mb = heap_mb
        self.tick_time_ms = tick_time_ms
        self.log_path = pathlib.Path(log_path) if log_path else self.data_dir / "zookeeper.out"
        self._proc: subprocess.Popen | None = None
        self._pid: int | None = None

    # --- what the outside needs ---------------------------------------------------------
    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def config_path(self) -> pathlib.Path:
        return self.data_dir / "zoo.cfg"

    def command(self) -> list[str]:
        """The exact argv (also used to recognise the process in /proc later)."""
        java = shutil.which(self.java)
        if java is None:
            raise ZooKeeperError(f"{self.java!r} not found on PATH: run `make install` "
                                 "(it installs a JRE from Debian's packages)")
        return [java, f"-Xmx{self.heap_mb}m",
                f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}",
                "-Dzookeeper.admin.enableServer=false",
                "-cp", classpath(), ZK_MAIN_CLASS, str(self.config_path)]

    def write_config(self) -> None:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("\n".join([
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,envi",
            "maxClientCnxns=0",
            # Sessions between 2 and 20 ticks are allowed; services ask for 6 s.
            "",
        ]))
        (self.data_dir / "log4j.properties").write_text("\n".join([
            "log4j.rootLogger=INFO, FILE",
            "log4j.appender.FILE=org.apache.log4j.RollingFileAppender",
            f"log4j.appender.FILE.File={self.data_dir / 'zookeeper.log'}",
            "log4j.appender.FILE.MaxFileSize=10MB",
            "log4j.appender.FILE.MaxBackupIndex=3",
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n",
            "",
        ]))

    def start(self) -> int:
        """Write the config and start the JVM; returns its PID. Does not wait: see wait_ready."""
        if self.is_running():
            raise ZooKeeperError(f"ZooKeeper already running as pid {self._pid}")
        argv = self.command()
        self.write_config()
        self._proc = spawn(argv, self.log_path, cwd=self.data_dir)
        self._pid = self._proc.pid
        return self._pid

    def is_running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return is_alive(self._pid)

    def is_ready(self) -> bool:
        return ruok(self.host, self.port)

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Poll `ruok` until `imok`; ZooKeeperError (with the log's tail) if it dies or times out."""
        try:
            wait_for(self.is_ready, self.is_running, timeout_s=timeout_s,
                     what=f"ZooKeeper on {self.connect_string}", log_path=self.log_path)
        except LaunchError as e:
            extra = tail(self.data_dir / "zookeeper.log", 15)
            raise ZooKeeperError(f"{e}\nlast lines of {self.data_dir / 'zookeeper.log'}:\n{extra}") from None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, SIGKILL after `grace_s`, and wait until the process is gone."""
        if self._pid is None:
            return
        if self._proc is None and not is_ours(self._pid, self.command()):
            self._pid = None
            return
        stop_all([(self._pid, self._proc)], grace_s=grace_s)
        self._proc = None
        self._pid = None

    @classmethod
    def attach(cls, data_dir: str | pathlib.Path, port: int, pid: int, **kw) -> "ZooKeeperServer":
        """A handle on a server started by another process (e.g. `riverbed fleet up --detach`)."""
        zk = cls(data_dir, port, **kw)
        zk._pid = pid
        return zk

    def __enter__(self) -> "ZooKeeperServer":
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({self.connect_string}, pid={self._pid}, dir={self.data_dir})"


def wait_until_gone(host: str, port: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not ruok(host, port, 0.2):
            return True
        time.sleep(0.05)
    return False
