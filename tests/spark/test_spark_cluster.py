"""The clickstream job the way users run it: a standalone Spark cluster (a master and two workers
from the pyspark package's bin/spark-class, on loopback), `spark-submit` in client mode with the
SDK shipped as a packed virtualenv (`--archives`, made by jobs/pack_env.py), so executors are
separate processes that find Riverbed only in what was submitted.

- The job to Parquet, once through.
- The job to an output topic with the sink's exactly-once mode: its executors SIGKILLed while a
  batch's transactions are open, then its driver SIGKILLed while they are open, then restarted
  from the checkpoint: read with read_committed, the output topic holds each (page, minute)
  exactly once with the right counts, and the dead-letter topic each bad event once.
"""
from __future__ import annotations

import collections
import datetime
import json
import os
import signal
import subprocess
import sys
import zipfile

import pytest

from riverbed import Admin, Consumer, NewTopic, TopicPartition, errors
from spark_helpers import (
    JOBS,
    REPO,
    StandaloneCluster,
    batch_files,
    generate_clicks,
    kill_group,
    output_counts,
    spark_submit,
    truth_counts,
    wait_exit,
    wait_for,
    wait_for_leaders,
)


def unpack(packed_env, tmp_path):
    """Client mode: the driver plans the Python data source with spark.pyspark.python too, so
    the archive is unpacked where spark-submit runs, as executors unpack it in theirs."""
    with zipfile.ZipFile(packed_env) as z:
        z.extractall(tmp_path / "environment")
    for exe in (tmp_path / "environment" / "bin").glob("python*"):
        exe.chmod(0o755)                    # zipfile does not restore modes; unzip(1) does


def submit_to(cluster, packed_env, log, job_args):
    """jobs/clickstream.py on the cluster, client mode, the SDK from the packed environment."""
    return spark_submit(
        ["--deploy-mode", "client", "--archives", f"{packed_env}#environment",
         str(JOBS / "clickstream.py"), *job_args],
        log, master=cluster.master_url,
        conf={"spark.pyspark.python": "./environment/bin/python",
              "spark.pyspark.driver.python": sys.executable,
              "spark.executor.cores": "1", "spark.executor.memory": "768m",
              "spark.cores.max": "2"},
        env={"PYSPARK_PYTHON": "./environment/bin/python"})


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory):
    out = tmp_path_factory.mktemp("packed") / "riverbed-spark-env.zip"
    subprocess.run([sys.executable, "-m", "jobs.pack_env", "--output", str(out), "--store"],
                   cwd=str(REPO), check=True, timeout=900)
    return out


@pytest.mark.timeout(1200)
def test_clickstream_job_on_a_standalone_cluster(spark, bootstrap, bootstrap_option, tmp_path,
                                                 packed_env):
    # the machine's own python cannot import the SDK: executors get it from the archive only
    probe = subprocess.run(["/usr/bin/env", "-i", "python3", "-c", "import riverbed"],
                           capture_output=True)
    assert probe.returncode != 0
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("clicks-cluster", 4, 2), NewTopic("clicks-cluster-dlq", 1, 2)])
    wait_for_leaders(bootstrap, "clicks-cluster", 4)
    wait_for_leaders(bootstrap, "clicks-cluster-dlq", 1)
    truth_path = tmp_path / "truth.json"
    generate_clicks(bootstrap_option, "clicks-cluster", truth_path, "--events", "20000",
                    "--step-ms", "20", "--close-windows-ms", "300000", "--seed", "11")
    out, chk = tmp_path / "out", tmp_path / "chk"
    unpack(packed_env, tmp_path)
    with StandaloneCluster(tmp_path / "cluster", workers=2) as cluster:
        log = tmp_path / "submit.log"
        job = submit_to(cluster, packed_env, log, [
            "--bootstrap-servers", bootstrap_option,
            "--topic", "clicks-cluster", "--dead-letter-topic", "clicks-cluster-dlq",
            "--output", str(out), "--checkpoint", str(chk), "--trigger", "available-now",
            "--max-offsets-per-trigger", "8000"])
        assert wait_exit(job, 900, log) == 0, log.read_text(errors="replace")[-4000:]
        apps = cluster.state()["completedapps"] + cluster.state()["activeapps"]
        assert apps, "the job did not run on the cluster"
        # executors ran in the workers' folders, from the unpacked archive
        unpacked = list((tmp_path / "cluster").glob("worker-*/app-*/*/environment"))
        assert len(unpacked) >= 2, unpacked
    truth = json.loads(truth_path.read_text())
    got = {k: v for k, v in output_counts(spark, out).items() if k[0] != "/heartbeat"}
    assert got == truth_counts(truth)


def minute_ms(text: str) -> int:
    t = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return int(t.timestamp() * 1000)


def read_topic(bootstrap, topic, partitions, committed=True):
    with Consumer(bootstrap_servers=bootstrap, consumer_timeout_ms=3000, fetch_max_wait_ms=100,
                  isolation_level="read_committed" if committed else "read_uncommitted") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        return list(c)


@pytest.mark.timeout(2400)   # bounds for a loaded machine, not speed checks
def test_clickstream_to_a_topic_exactly_once_through_killed_executors_and_driver(
        bootstrap, bootstrap_option, tmp_path, packed_env):
    src, agg, dlq, prefix = "clicks-eos", "clicks-eos-agg", "clicks-eos-dlq", "eos-clickstream"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(src, 4, 2), NewTopic(agg, 3, 2), NewTopic(dlq, 2, 2)])
    for t, n in ((src, 4), (agg, 3), (dlq, 2)):
        wait_for_leaders(bootstrap, t, n)
    truth_path = tmp_path / "truth.json"
    # written before the job starts: the backlog makes a dozen batches of
    # --max-offsets-per-trigger, and the job's Python workers start on a quieter machine (the
    # driver's source runner must connect back within Spark's fixed 10 s)
    gen = generate_clicks(bootstrap_option, src, truth_path, "--events", "16000",
                          "--step-ms", "20", "--close-windows-ms", "300000", "--seed", "13")
    chk = tmp_path / "chk"
    unpack(packed_env, tmp_path)
    job_args = ["--bootstrap-servers", bootstrap_option, "--topic", src,
                "--dead-letter-topic", dlq, "--output-topic", agg, "--checkpoint", str(chk),
                "--transactional-id-prefix", prefix, "--max-offsets-per-trigger", "1500"]
    commits = chk / "aggregates" / "commits"

    def open_transactions(admin):
        """The aggregates query's transactions that are open: a batch's tasks are writing or
        have prepared, and its driver has not committed them."""
        try:
            listed = admin.list_transactions(states=["Ongoing"])
        except errors.RiverbedError as e:
            if not e.retriable:        # __transaction_state not created yet: the first batches
                raise                  # close no minute, so they write no transaction
            return []
        return [t.transactional_id for t in listed
                if t.transactional_id.startswith(f"{prefix}.aggregates-")]

    killed_executors: list[int] = []
    try:
        with StandaloneCluster(tmp_path / "cluster", workers=2) as cluster, \
                Admin(bootstrap) as admin:
            first_log = tmp_path / "first.log"
            first = submit_to(cluster, packed_env, first_log, job_args + ["--trigger", "2 seconds"])
            try:
                wait_for(lambda: len(batch_files(commits)) >= 2 or first.poll() is not None,
                         900, "two committed batches")
                assert first.poll() is None, first_log.read_text(errors="replace")[-4000:]
                # every executor SIGKILLed while a batch's transactions are open: the tasks
                # are retried on the executors the workers start again, and each retry's
                # init_transactions fences (and aborts) what the lost attempt began
                wait_for(lambda: open_transactions(admin) and len(cluster.executor_pids()) == 2,
                         600, "a batch with open transactions", interval_s=0.05)
                killed_executors = cluster.executor_pids()
                for pid in killed_executors:
                    os.kill(pid, signal.SIGKILL)
                done = len(batch_files(commits))
                wait_for(lambda: len(batch_files(commits)) >= done + 2 or first.poll() is not None,
                         900, "two more batches committed after the executors were killed")
                assert first.poll() is None, first_log.read_text(errors="replace")[-4000:]
                assert set(cluster.executor_pids()).isdisjoint(killed_executors)
                # the driver SIGKILLed while a batch's transactions are open (prepared or
                # being written): the restart re-runs that batch from its logged offsets
                wait_for(lambda: open_transactions(admin), 600,
                         "a batch with open transactions", interval_s=0.05)
                kill_group(first)
                # still open once the driver is gone (nothing else commits them): the kill
                # came before the driver's commit of that batch, so its commit-log entry is
                # missing and the restart re-runs it
                assert open_transactions(admin), "the batch committed before the kill landed"
                assert len(batch_files(chk / "aggregates" / "offsets")) > len(batch_files(commits))
            finally:
                if first.poll() is None:
                    kill_group(first)
            assert gen.wait(300) == 0
            second_log = tmp_path / "second.log"
            second = submit_to(cluster, packed_env, second_log,
                               job_args + ["--trigger", "available-now"])
            assert wait_exit(second, 900, second_log) == 0, \
                second_log.read_text(errors="replace")[-4000:]
    finally:
        if gen.poll() is None:
            kill_group(gen)
    assert killed_executors
    truth = json.loads(truth_path.read_text())
    records = read_topic(bootstrap, agg, 3)
    got: dict = {}
    for r in records:
        row = json.loads(r.value)
        assert r.key == row["page"].encode()
        k = (row["page"], minute_ms(row["minute"]))
        assert k not in got, f"{k} written twice"
        got[k] = row["views"]
    got = {k: v for k, v in got.items() if k[0] != "/heartbeat"}
    assert sum(got.values()) == truth["good"]
    assert got == truth_counts(truth)
    # what the killed attempts wrote (if they got that far) is in the log, aborted: copies of
    # committed rows (a re-run makes the same rows), never read with read_committed
    everything = read_topic(bootstrap, agg, 3, committed=False)
    assert {(r.key, r.value) for r in everything} == {(r.key, r.value) for r in records}
    # the dead letters were written exactly once too
    letters = read_topic(bootstrap, dlq, 2)
    sources = collections.Counter(dict(r.headers)["riverbed.source"] for r in letters)
    assert len(sources) == truth["bad"] and set(sources.values()) == {1}
