"""The clickstream job the way users run it: a standalone Spark cluster (a master and two workers
from the pyspark package's bin/spark-class, on loopback), `spark-submit` in client mode with the
SDK shipped as a packed virtualenv (`--archives`, made by jobs/pack_env.py), so executors are separate processes that find
Riverbed only in what was submitted."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from riverbed import Admin, NewTopic
from spark_helpers import (
    JOBS,
    REPO,
    StandaloneCluster,
    generate_clicks,
    output_counts,
    spark_submit,
    truth_counts,
    wait_exit,
    wait_for_leaders,
)


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
    # client mode: the driver plans the Python data source with spark.pyspark.python too, so
    # the archive is unpacked where spark-submit runs, as executors unpack it in theirs
    with zipfile.ZipFile(packed_env) as z:
        z.extractall(tmp_path / "environment")
    for exe in (tmp_path / "environment" / "bin").glob("python*"):
        exe.chmod(0o755)                    # zipfile does not restore modes; unzip(1) does
    with StandaloneCluster(tmp_path / "cluster", workers=2) as cluster:
        log = tmp_path / "submit.log"
        job = spark_submit(
            ["--deploy-mode", "client", "--archives", f"{packed_env}#environment",
             str(JOBS / "clickstream.py"), "--bootstrap-servers", bootstrap_option,
             "--topic", "clicks-cluster", "--dead-letter-topic", "clicks-cluster-dlq",
             "--output", str(out), "--checkpoint", str(chk), "--trigger", "available-now",
             "--max-offsets-per-trigger", "8000"],
            log, master=cluster.master_url,
            conf={"spark.pyspark.python": "./environment/bin/python",
                  "spark.pyspark.driver.python": sys.executable,
                  "spark.executor.cores": "1", "spark.executor.memory": "768m",
                  "spark.cores.max": "2"},
            env={"PYSPARK_PYTHON": "./environment/bin/python"})
        assert wait_exit(job, 900, log) == 0, log.read_text(errors="replace")[-4000:]
        apps = cluster.state()["completedapps"] + cluster.state()["activeapps"]
        assert apps, "the job did not run on the cluster"
        # executors ran in the workers' folders, from the unpacked archive
        unpacked = list((tmp_path / "cluster").glob("worker-*/app-*/*/environment"))
        assert len(unpacked) >= 2, unpacked
    truth = json.loads(truth_path.read_text())
    got = {k: v for k, v in output_counts(spark, out).items() if k[0] != "/heartbeat"}
    assert got == truth_counts(truth)
