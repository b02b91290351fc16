"""A driver started the way a user starts a script, `.venv/bin/python job.py`, with the venv NOT
on the PATH and no PYSPARK_PYTHON (issue 27, item 5): before riverbed.spark.register checked the
workers' interpreter, Spark's Python workers ran the machine's `python3` and failed with
ModuleNotFoundError: riverbed. Now register() moves them to the driver's interpreter and the read
counts every record. (tests/unit/spark/test_spark_worker_python.py has the decision's table.)"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from riverbed import Admin, NewTopic, Producer
from spark_helpers import wait_exit, wait_for_leaders

JOB = """
import sys
from pyspark.sql import SparkSession
from riverbed.spark import register

bootstrap, topic, local_dir = sys.argv[1:4]
spark = (SparkSession.builder.master("local[1]").appName("worker-python")
         .config("spark.ui.enabled", "false").config("spark.local.dir", local_dir).getOrCreate())
try:
    register(spark)
    n = (spark.read.format("riverbed").option("bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest").load().count())
    print("COUNT", n, "WORKERS", spark.sparkContext.pythonExec, flush=True)
finally:
    spark.stop()
"""


@pytest.mark.timeout(600)
def test_a_driver_started_without_the_venv_on_path_reads(bootstrap, bootstrap_option, tmp_path):
    plain_path = "/usr/bin:/bin"
    probe = subprocess.run(["/usr/bin/env", "-i", f"PATH={plain_path}", "python3", "-c",
                            "import riverbed"], capture_output=True)
    assert probe.returncode != 0, "the machine's python3 imports riverbed: nothing to show"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("worker-python", 2, 1)])
    wait_for_leaders(bootstrap, "worker-python", 2)
    with Producer(bootstrap, acks="all") as producer:
        for i in range(25):
            producer.send("worker-python", b"record-%d" % i)
    job = tmp_path / "job.py"
    job.write_text(JOB)
    env = {"PATH": plain_path, "HOME": str(tmp_path), "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC",
           # the fleet's CURVE client settings (Fleet.up() exported them here)
           **{k: v for k, v in os.environ.items() if k.startswith(("RIVERBED_", "JAVA_HOME"))}}
    log = tmp_path / "driver.log"
    with open(log, "wb") as out:
        driver = subprocess.Popen([sys.executable, str(job), bootstrap_option, "worker-python",
                                   str(tmp_path / "local")], stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                  cwd=str(tmp_path), start_new_session=True)
    started = time.monotonic()
    assert wait_exit(driver, 480, log) == 0, log.read_text(errors="replace")[-4000:]
    text = log.read_text(errors="replace")
    assert f"COUNT 25 WORKERS {sys.executable}" in text, (time.monotonic() - started, text[-4000:])
    assert "ModuleNotFoundError" not in text
