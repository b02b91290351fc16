"""Helpers for the Spark tests: a local SparkSession that cleans up after itself, the SDK's
view of a topic to compare Spark's against, and Spark processes started by PID.

- `spark_env()`: the environment Spark's Python workers need here (this venv's python, loopback).
- `start_session(tmp)` / `stop_session(spark)`: local[2], small shuffles, UTC, state under tmp;
  stopping also ends the JVM Spark started (by its PID).
- `sdk_records(bootstrap, tps)`: every record of these partitions from offset 0 to the high
  watermark, read by one SDK Consumer.
- `wait_for(cond, timeout_s, what)`: a bounded wait.
"""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Callable, Iterable

from riverbed import Admin, Consumer, TopicPartition, errors

REPO = pathlib.Path(__file__).resolve().parents[2]


def spark_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC"})
    env.update(extra or {})
    return env


def start_session(tmp: pathlib.Path, app: str = "riverbed-tests"):
    os.environ.update(spark_env())
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.local.dir", str(tmp / "local"))
             .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
             .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={tmp / 'derby'}")
             .config("spark.sql.streaming.stopTimeout", "30s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    from riverbed.spark import register
    register(spark)
    return spark


def stop_session(spark) -> None:
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        for q in spark.streams.active:
            q.stop()
        spark.stop()
    finally:
        if gateway is not None:
            gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            stop_process(proc)


def stop_process(proc: subprocess.Popen, timeout_s: float = 30) -> None:
    """SIGTERM then SIGKILL one process we started (and its process group if it leads one)."""
    if proc.poll() is not None:
        return
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        return
    group = pgid == proc.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig) if group else proc.send_signal(sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout_s)
            if group:
                try:
                    os.killpg(pgid, signal.SIGKILL)   # children left in the group
                except ProcessLookupError:
                    pass
            return
        except subprocess.TimeoutExpired:
            continue


def wait_for(cond: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def wait_for_leaders(bootstrap, topic: str, partitions: int, timeout_s: float = 60) -> None:
    with Admin(bootstrap) as admin:
        def ready():
            try:
                (desc,) = admin.describe_topics([topic])
            except errors.RiverbedError:
                return False
            return len(desc.partitions) == partitions and all(p.leader >= 0
                                                              for p in desc.partitions)
        wait_for(ready, timeout_s, f"leaders of {topic}")


def sdk_records(bootstrap, tps: Iterable[TopicPartition], timeout_s: float = 120) -> list:
    """Every record of `tps` from the log start to the high watermark, in (topic, partition,
    offset) order, as the SDK's Consumer returns them."""
    tps = sorted(tps)
    out = []
    with Consumer(bootstrap=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100) as c:
        ends = c.end_offsets(tps)
        c.assign(tps)
        c.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError("SDK consumer did not reach the high watermarks")
            for recs in c.poll(timeout_ms=500, max_records=50_000).values():
                out += recs
    out = [r for r in out if r.offset < ends[TopicPartition(r.topic, r.partition)]]
    return sorted(out, key=lambda r: (r.topic, r.partition, r.offset))


# -- jobs and spark-submit ----------------------------------------------------------------------

JOBS = REPO / "jobs"


def load_job(name: str):
    """A job module of jobs/ (its siblings importable, as spark-submit makes them)."""
    import importlib
    if str(JOBS) not in sys.path:
        sys.path.insert(0, str(JOBS))
    return importlib.import_module(name)


def spark_submit(args: list[str], log_path: pathlib.Path, conf: dict | None = None,
                 env: dict | None = None, master: str = "local[2]") -> subprocess.Popen:
    """Start `spark-submit` (this venv's pyspark) in a process group of its own (so a test can
    kill the driver and everything it started), output to log_path."""
    cmd = [str(pathlib.Path(sys.executable).parent / "spark-submit"), "--master", master,
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4"]
    for k, v in (conf or {}).items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += args
    log = open(log_path, "ab")
    try:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=spark_env(env), cwd=str(log_path.parent),
                                start_new_session=True)
    finally:
        log.close()


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process started with start_new_session and everything in its group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


def wait_exit(proc: subprocess.Popen, timeout_s: float, log_path: pathlib.Path) -> int:
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        tail = log_path.read_text(errors="replace")[-3000:]
        raise AssertionError(f"{proc.args[0]} did not finish in {timeout_s} s:\n{tail}") from None


def batch_files(folder) -> list[int]:
    """The batch ids a checkpoint's offsets/ or commits/ log holds."""
    return sorted(int(p.name) for p in folder.glob("[0-9]*")) if folder.exists() else []


def generate_clicks(bootstrap_option: str, topic: str, truth: pathlib.Path, *extra: str,
                    wait: bool = True) -> subprocess.Popen:
    """loadgen.clickstream as a process (a synthetic clock from 2026-11-25T00:00:00Z)."""
    cmd = [sys.executable, "-m", "loadgen.clickstream", "--bootstrap-server", bootstrap_option,
           "--topic", topic, "--start", "2026-11-25T00:00:00Z", "--truth", str(truth), *extra]
    proc = subprocess.Popen(cmd, cwd=str(REPO), stdin=subprocess.DEVNULL, start_new_session=True)
    if wait:
        try:
            assert proc.wait(300) == 0, f"{cmd} failed"
        finally:
            if proc.poll() is None:
                kill_group(proc)
    return proc


def output_counts(spark, path) -> dict:
    """(page, minute start in ms) -> views, read through Spark (it follows _spark_metadata)."""
    rows = spark.read.parquet(str(path)).selectExpr(
        "page", "unix_millis(minute) AS minute_ms", "views").collect()
    out: dict = {}
    for r in rows:
        k = (r["page"], r["minute_ms"])
        assert k not in out, f"{k} written twice"
        out[k] = r["views"]
    return out


def truth_counts(truth: dict) -> dict:
    return {(c["page"], c["minute_ms"]): c["views"] for c in truth["per_page_minute"]}


# -- a standalone cluster ------------------------------------------------------------------------

class StandaloneCluster:
    """A Spark standalone master and workers on 127.0.0.1, started from the pyspark package's
    own bin/spark-class (pip's pyspark has no sbin/start-*.sh), each in a process group of its
    own; `stop()` ends them (and the executors they started) by PID."""

    def __init__(self, tmp: pathlib.Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        from deploy.process import free_ports
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port, *self.worker_ui_ports = free_ports(2 + workers)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.procs: list[subprocess.Popen] = []
        import pyspark
        self.env = spark_env({"SPARK_HOME": str(pathlib.Path(pyspark.__file__).parent),
                              "SPARK_LOG_DIR": str(tmp / "logs"), "SPARK_PID_DIR": str(tmp),
                              "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=false"})
        # executors must find the SDK only in what the job ships
        for k in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            self.env.pop(k, None)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spark_class(self, name: str, args: list[str], log: str) -> subprocess.Popen:
        cmd = [str(pathlib.Path(sys.executable).parent / "spark-class"), name, *args]
        out = open(self.tmp / log, "ab")
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.env, cwd=str(self.tmp),
                                    start_new_session=True)
        finally:
            out.close()
        self.procs.append(proc)
        return proc

    def state(self) -> dict:
        import json
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.load(r)

    def start(self, timeout_s: float = 120) -> "StandaloneCluster":
        self._spark_class("org.apache.spark.deploy.master.Master",
                          ["--host", "127.0.0.1", "--port", str(self.port),
                           "--webui-port", str(self.ui_port)], "master.log")
        for i in range(self.workers):
            work = self.tmp / f"worker-{i}"
            work.mkdir()
            self._spark_class("org.apache.spark.deploy.worker.Worker",
                              [self.master_url, "--host", "127.0.0.1", "--cores", str(self.cores),
                               "--memory", self.memory, "--webui-port",
                               str(self.worker_ui_ports[i]), "--work-dir", str(work)],
                              f"worker-{i}.log")

        def all_alive():
            if any(p.poll() is not None for p in self.procs):
                raise AssertionError(f"a Spark daemon exited; logs in {self.tmp}")
            try:
                return self.state().get("aliveworkers") == self.workers
            except OSError:
                return False
        wait_for(all_alive, timeout_s, f"{self.workers} workers registered with the master",
                 interval_s=0.5)
        return self

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers started (CoarseGrainedExecutorBackend children of the
        worker processes; spark-class execs the JVM, so a worker's PID is its JVM's)."""
        workers = {p.pid for p in self.procs[1:] if p.poll() is None}
        out = []
        for proc in pathlib.Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid in workers and b"CoarseGrainedExecutorBackend" in \
                        (proc / "cmdline").read_bytes():
                    out.append(int(proc.name))
            except (OSError, IndexError, ValueError):
                continue
        return sorted(out)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_process(proc)

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
