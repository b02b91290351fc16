"""riverbed.spark.register's check of Spark's worker interpreter (issue 27, item 5): the pure
decision (riverbed.spark.worker_python) as a table, and the shell with a stand-in SparkContext.
tests/spark/test_spark_worker_python.py runs a real driver started without the venv on PATH."""
from __future__ import annotations

import os
import sys

import pytest

from riverbed.spark import ensure_worker_python
from riverbed.spark.worker_python import WorkerPythonError, decide_worker_python

DRIVER = "/app/.venv/bin/python"
HAS_RIVERBED = {DRIVER, "/opt/env/bin/python", "python3-with-riverbed"}


def decide(python_exec="python3", conf=None, env=None, master="local[2]"):
    asked: list[str] = []

    def imports_riverbed(python):
        asked.append(python)
        return python in HAS_RIVERBED

    return decide_worker_python(python_exec=python_exec, conf_python=conf, env_python=env,
                                master=master, driver_python=DRIVER,
                                imports_riverbed=imports_riverbed), asked


def test_local_without_settings_moves_the_workers_to_the_driver_python():
    d, asked = decide()
    assert (d.python, d.changed) == (DRIVER, True) and asked == ["python3"]
    assert "cannot import riverbed" in d.why


def test_local_without_settings_keeps_a_python3_that_has_riverbed():
    d, _ = decide(python_exec="python3-with-riverbed")
    assert (d.python, d.changed) == ("python3-with-riverbed", False)


def test_the_driver_python_recorded_already_is_kept_without_running_it():
    d, asked = decide(python_exec=DRIVER, env=DRIVER)
    assert (d.python, d.changed, asked) == (DRIVER, False, [])


@pytest.mark.parametrize("master", ["local[2]", "spark://h:7077", "yarn"])
def test_a_conf_given_to_the_builder_reaches_the_workers(master):
    # spark.pyspark.python given to SparkSession.builder in a driver started as `python
    # job.py`: the SparkContext still recorded python3; the data source's workers get the conf
    d, _ = decide(conf="/opt/env/bin/python", master=master)
    assert (d.python, d.changed) == ("/opt/env/bin/python", True)


def test_the_conf_wins_over_the_environment_as_in_spark():
    d, _ = decide(python_exec="/opt/env/bin/python", conf="/opt/env/bin/python",
                  env="/usr/bin/python3")
    assert (d.python, d.changed) == ("/opt/env/bin/python", False)


def test_a_local_setting_without_riverbed_is_an_error_naming_it_and_the_fix():
    with pytest.raises(WorkerPythonError) as info:
        decide(python_exec="/usr/bin/python3", env="/usr/bin/python3")
    message = str(info.value)
    assert "PYSPARK_PYTHON=/usr/bin/python3" in message and "cannot import riverbed" in message
    assert DRIVER in message and "spark.pyspark.python" in message


def test_a_cluster_setting_is_trusted_unchecked():
    # ./environment/bin/python exists in the executors' folders (spark-submit --archives)
    d, asked = decide(python_exec="./environment/bin/python", env="./environment/bin/python",
                      conf="./environment/bin/python", master="spark://h:7077")
    assert (d.python, d.changed, asked) == ("./environment/bin/python", False, [])


def test_a_cluster_without_settings_is_an_error_saying_what_to_set():
    with pytest.raises(WorkerPythonError) as info:
        decide(master="spark://h:7077")
    message = str(info.value)
    assert "spark.pyspark.python=./environment/bin/python" in message
    assert "PYSPARK_PYTHON" in message and "spark://h:7077" in message


# -- the shell: register()'s ensure_worker_python with a stand-in SparkContext ------------------

class FakeConf:
    def __init__(self, values):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


class FakeContext:
    def __init__(self, python_exec, master="local[1]", conf=None):
        self.pythonExec = python_exec
        self.master = master
        self._conf = FakeConf(conf or {})

    def getConf(self):
        return self._conf


class FakeSession:
    def __init__(self, sc):
        self.sparkContext = sc


@pytest.fixture
def no_pyspark_python(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)


def test_shell_sets_the_context_python_when_python3_on_path_lacks_riverbed(tmp_path, monkeypatch,
                                                                           no_pyspark_python):
    # a PATH whose python3 runs this interpreter without site-packages: no riverbed
    bare = tmp_path / "python3"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    sc = FakeContext("python3")
    ensure_worker_python(FakeSession(sc))
    assert sc.pythonExec == sys.executable


def test_shell_applies_the_conf_and_refuses_a_local_python_without_riverbed(tmp_path,
                                                                             no_pyspark_python):
    sc = FakeContext("python3", conf={"spark.pyspark.python": sys.executable})
    ensure_worker_python(FakeSession(sc))
    assert sc.pythonExec == sys.executable
    sc = FakeContext("python3", conf={"spark.pyspark.python": str(tmp_path / "no-such-python")})
    with pytest.raises(WorkerPythonError, match="no-such-python"):
        ensure_worker_python(FakeSession(sc))


def test_shell_leaves_a_spark_connect_session_alone():
    class ConnectSession:
        @property
        def sparkContext(self):
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported")

    ensure_worker_python(ConnectSession())
