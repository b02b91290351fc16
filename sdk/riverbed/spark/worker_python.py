"""Which Python Spark's workers run for the `riverbed` data source, decided on the driver when
`riverbed.spark.register(spark)` is called. Pure: what the interpreters can import is asked
through `imports_riverbed`, which the caller implements (riverbed.spark runs each candidate).

Spark's Python workers (the data source's planner and the executors' tasks) run the interpreter
the SparkContext recorded when it started, `sc.pythonExec`: `$PYSPARK_PYTHON`, else `python3`
from the PATH. `spark.pyspark.python` reaches it only through spark-submit (which exports it as
`PYSPARK_PYTHON`); set with `SparkSession.builder.config(...)` in a driver started as
`python job.py` it changes nothing. So a driver started as `.venv/bin/python job.py` without the
venv on the PATH gets workers running the system's `python3`, which fails with
`ModuleNotFoundError: No module named 'riverbed'` inside Spark's logs.

The decision, in order:
1. `spark.pyspark.python` or `$PYSPARK_PYTHON` is set (the conf wins, as in Spark): that is
   the workers' Python. On a local master (the workers run on this machine) it must import
   riverbed, else WorkerPythonError says so. If the context recorded something else (the conf
   given to the builder), the data source's workers get the setting.
2. Nothing set, local master: the workers run `sc.pythonExec` (`python3` from the PATH); if it
   cannot import riverbed they run the driver's own interpreter instead.
3. Nothing set, a cluster master (spark://, yarn, k8s://): what the executors' `python3` can
   import cannot be seen from here, so WorkerPythonError names what to set.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["WorkerPython", "WorkerPythonError", "decide_worker_python"]


class WorkerPythonError(RuntimeError):
    """Spark's workers would run a Python that cannot import riverbed (or one that cannot be
    checked): the message says what to set."""


@dataclass(frozen=True, slots=True)
class WorkerPython:
    """The workers' interpreter: `python`; `changed` when it differs from what the SparkContext
    recorded (the caller sets `sc.pythonExec`); `why` for the log."""
    python: str
    changed: bool
    why: str


_HOW = ("set spark.pyspark.python (spark-submit --conf) or PYSPARK_PYTHON to a Python with "
        "riverbed installed")


def decide_worker_python(*, python_exec: str, conf_python: str | None, env_python: str | None,
                         master: str, driver_python: str,
                         imports_riverbed: Callable[[str], bool]) -> WorkerPython:
    """See the module doc. `python_exec`: the context's `sc.pythonExec`; `conf_python`: the
    `spark.pyspark.python` conf; `env_python`: `$PYSPARK_PYTHON`; `driver_python`:
    `sys.executable` (it imports riverbed: it is running this)."""
    local = master.startswith("local")
    wanted, source = ((conf_python, "spark.pyspark.python") if conf_python else
                      (env_python, "PYSPARK_PYTHON") if env_python else (None, ""))
    if wanted:
        if local and wanted != driver_python and not imports_riverbed(wanted):
            raise WorkerPythonError(
                f"{source}={wanted}: Spark's Python workers would run that interpreter, which "
                f"cannot import riverbed (or is not there); {_HOW}, e.g. {driver_python}")
        if python_exec != wanted:
            return WorkerPython(wanted, True, f"{source}={wanted} (the SparkContext had "
                                              f"recorded {python_exec})")
        return WorkerPython(wanted, False, f"{source}={wanted}")
    if local:
        if python_exec == driver_python or imports_riverbed(python_exec):
            return WorkerPython(python_exec, False, f"{python_exec} imports riverbed")
        return WorkerPython(driver_python, True,
                            f"neither spark.pyspark.python nor PYSPARK_PYTHON is set and "
                            f"{python_exec} (from the PATH) cannot import riverbed: the "
                            f"workers run the driver's interpreter")
    raise WorkerPythonError(
        f"neither spark.pyspark.python nor PYSPARK_PYTHON is set, so Spark's executors on "
        f"{master} would run {python_exec!r} from their PATH, which may not have riverbed "
        f"(ModuleNotFoundError in the executors): {_HOW} on the workers, e.g. spark-submit "
        f"--archives dist/riverbed-spark-env.zip#environment --conf "
        f"spark.pyspark.python=./environment/bin/python (make spark-env builds the archive), "
        f"or PYSPARK_PYTHON=python3 when the workers' own python3 has riverbed")
