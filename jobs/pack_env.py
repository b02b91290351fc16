"""Pack the SDK for Spark executors: a virtualenv with Riverbed (built as a wheel from this tree)
and what executors' Python workers need (pyarrow, pandas), zipped for `spark-submit --archives`.

    python -m jobs.pack_env --output dist/riverbed-spark-env.zip     # or: make spark-env

    mkdir environment && cd environment && unzip -q ../dist/riverbed-spark-env.zip && cd ..
    spark-submit --master spark://HOST:7077 \\
        --archives dist/riverbed-spark-env.zip#environment \\
        --conf spark.pyspark.python=./environment/bin/python \\
        --conf spark.pyspark.driver.python=$(which python) \\
        jobs/clickstream.py ...

Why a zip and not venv-pack's tar.gz: Spark 4 unpacks tar archives in Java, which drops the
executable bits (bin/python could not run) and refuses links that point out of the archive (a
venv's bin/python links to the base interpreter). Its zip unpacking keeps the bits. So the
archive holds the interpreter's small executable (it still finds its standard library through
pyvenv.cfg's home: the cluster's machines need the same Python, 3.11, at the same path) and no
links.

In client mode the driver runs the Python data source's planning with spark.pyspark.python
too, so unpack the archive as ./environment where spark-submit runs (the first lines above).

The environment leaves pyspark out: executors take it from the cluster's Spark installation
(`$SPARK_HOME/python/lib/pyspark.zip`), as they always do. Versions come from
requirements.lock. Building the dependencies takes a minute; they are kept in --cache (default
.venv/spark-env-cache/<hash of requirements.lock, pyproject.toml and the Python version>) and only
Riverbed's wheel is installed anew on each run.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[1]
# What executors' Python workers need besides Riverbed and its dependencies.
EXECUTOR_PACKAGES = ("pyarrow", "pandas")


def _run(cmd: list[str], **kw) -> None:
    subprocess.run(cmd, check=True, **kw)


def _key() -> str:
    h = hashlib.sha256()
    for name in ("requirements.lock", "pyproject.toml"):
        h.update((REPO / name).read_bytes())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


def build_wheel(out_dir: pathlib.Path) -> pathlib.Path:
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(out_dir), str(REPO)])
    (wheel,) = sorted(out_dir.glob("riverbed-*.whl"))
    return wheel


def base_env(cache: pathlib.Path, wheel: pathlib.Path) -> pathlib.Path:
    """A virtualenv with Riverbed's dependencies and the executor packages (cached)."""
    env = cache / f"base-{_key()}"
    if (env / ".complete").exists():
        return env
    if env.exists():
        shutil.rmtree(env)
    env.parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", str(env)])
    _run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "-c",
          str(REPO / "requirements.lock"), str(wheel), *EXECUTOR_PACKAGES])
    _run([str(env / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "riverbed"])
    (env / ".complete").touch()
    return env


def _zip(env: pathlib.Path, output: pathlib.Path, store: bool) -> None:
    """The env as a zip with Unix modes; links are followed (files) or left out (lib64 -> lib)."""
    method = zipfile.ZIP_STORED if store else zipfile.ZIP_DEFLATED
    tmp = output.with_name(output.name + ".partial")
    with zipfile.ZipFile(tmp, "w", method, compresslevel=None if store else 1,
                         allowZip64=True) as z:
        for root, dirs, files in os.walk(env):
            here = pathlib.Path(root)
            dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink()
                             and d != "__pycache__")
            for name in sorted(files):
                path = here / name
                rel = path.relative_to(env).as_posix()
                info = zipfile.ZipInfo.from_file(path.resolve(), rel)
                info.create_system = 3                       # Unix: external_attr holds the mode
                info.compress_type = method
                with open(path, "rb") as f, z.open(info, "w", force_zip64=True) as out:
                    shutil.copyfileobj(f, out, 1 << 20)
    tmp.replace(output)


def pack(output: pathlib.Path, cache: pathlib.Path, store: bool = False) -> pathlib.Path:
    with tempfile.TemporaryDirectory(prefix="rbd-pack-env-") as tmp:
        tmp_path = pathlib.Path(tmp)
        wheel = build_wheel(tmp_path / "dist")
        base = base_env(cache, wheel)
        env = tmp_path / "env"
        shutil.copytree(base, env, symlinks=True)
        _run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
              "--no-compile", str(wheel)])
        _zip(env, output, store)
    return output


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jobs.pack_env", description=__doc__.split("\n")[0])
    p.add_argument("--output", default=str(REPO / "dist" / "riverbed-spark-env.zip"),
                   help="the zip to write (default %(default)s)")
    p.add_argument("--store", action="store_true",
                   help="no compression (faster to make, larger to ship)")
    p.add_argument("--cache", default=str(REPO / ".venv" / "spark-env-cache"),
                   help="where built dependencies are kept (default %(default)s)")
    args = p.parse_args(argv)
    out = pathlib.Path(args.output).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    pack(out, pathlib.Path(args.cache).resolve(), store=args.store)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
