"""`riverbed-bench`: one front door to the benchmarks (loadgen.bench_suites).

    riverbed-bench list                       # the suites, what each measures, how long it takes
    riverbed-bench run records log --quick    # run suites; each run's result as JSON
    riverbed-bench run --all                  # every suite, one after the other
    riverbed-bench run scale --args "--skip-throughput"   # arguments for the suite's module
    riverbed-bench show [SUITE ...]           # the latest results, as the Benchmarks page has them
    riverbed-bench machine                    # the machine description a result records

A run executes `python -m loadgen.<module> ... --json FILE` with this interpreter, shows its
output as it comes, and writes `<results dir>/<suite>/<UTC start>.json`: the command, the
machine (cores, CPU model, memory, kernel, OS, Python, load average at the start and the end),
the commit, the duration, the exit code, the figures the suite wrote and its report
(loadgen.bench_results). The docs' Benchmarks page is generated from the latest results.
`riverbed-perf` (Kafka's perf tool shape) is the command most suites run; it stays as it is.
"""
from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from typing import IO, Any

import click

from loadgen import bench_results as results
from loadgen.bench_suites import ORDER, SUITES, Suite, suite

__all__ = ["main", "cli", "run_suite"]


def _needs_met(s: Suite) -> str | None:
    """Why `s` cannot run here, or None."""
    if "spark" in s.needs:
        import importlib.util
        if importlib.util.find_spec("pyspark") is None:
            return "pyspark is not installed (pip install 'riverbed[spark]')"
    return None


def _pump(stream: IO[bytes], echo: IO[str], keep: deque[str] | list[str]) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        keep.append(line)
        echo.write(line)
        echo.flush()
    stream.close()


def run_suite(s: Suite, *, quick: bool, extra: tuple[str, ...], results_dir: pathlib.Path,
              python: str = sys.executable) -> tuple[int, pathlib.Path]:
    """Run one suite, echoing its output; write its result. Returns (exit code, result path)."""
    with tempfile.TemporaryDirectory(prefix=f"riverbed-bench-{s.name}-") as tmp:
        figures_path = pathlib.Path(tmp) / "figures.json"
        argv = [python, *s.command(quick=quick, extra=extra)]
        commit, dirty = results.git_state()
        machine = results.describe_machine()
        started = results.now_iso()
        t0 = time.monotonic()
        click.echo(f"== {s.name}: {' '.join(shlex.quote(a) for a in argv)}", err=True)
        proc = subprocess.Popen([*argv, "--json", str(figures_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        report: list[str] = []
        log: deque[str] = deque(maxlen=results.LOG_TAIL_LINES)
        assert proc.stdout is not None and proc.stderr is not None
        pumps = [threading.Thread(target=_pump, args=(proc.stdout, sys.stdout, report),
                                  daemon=True),
                 threading.Thread(target=_pump, args=(proc.stderr, sys.stderr, log), daemon=True)]
        for t in pumps:
            t.start()
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            proc.wait()
            raise
        for t in pumps:
            t.join()
        figures: Any = None
        if figures_path.exists():
            try:
                figures = json.loads(figures_path.read_text(encoding="utf-8"))
            except ValueError:
                figures = None
        record = {
            "suite": s.name, "module": s.module, "title": s.title,
            "command": ["python", *argv[1:]], "quick": quick, "started": started,
            "duration_s": round(time.monotonic() - t0, 1), "exit_code": code,
            "commit": commit, "dirty": dirty,
            "machine": machine, "load_average_end": list(os.getloadavg()),
            "figures": figures, "report": "".join(report), "log_tail": "".join(log),
        }
        path = results.write_result(results_dir, record)
    click.echo(f"== {s.name}: exit {code} in {record['duration_s']:.0f} s; result {path}",
               err=True)
    return code, path


# -- the command line -------------------------------------------------------------------------

_results_option = click.option(
    "--results-dir", type=click.Path(file_okay=False, path_type=pathlib.Path), default=None,
    help="where results are kept (default: bench-results/ at the top of the checkout, or "
         "$RIVERBED_BENCH_RESULTS)")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def cli() -> None:
    """Riverbed's benchmarks: list the suites, run one or all, keep each run's figures and the
    machine's description as JSON, and show the latest results.

    Each suite is a `python -m loadgen.X` benchmark that measures its figures beside a baseline
    in the same run; see `riverbed-bench list`."""


@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="the suites as JSON")
def list_suites(as_json: bool) -> None:
    """The suites: name, module and arguments, what it measures, how long a full run takes
    here, and what it needs (a fleet it starts itself, pyspark)."""
    if as_json:
        click.echo(json.dumps([{"name": s.name, "module": s.module, "args": list(s.args),
                                "quick_args": list(s.quick_args), "title": s.title,
                                "measures": s.measures, "needs": list(s.needs),
                                "duration": s.duration, "make_target": s.make_target}
                               for s in SUITES], indent=2))
        return
    width = max(len(s.name) for s in SUITES)
    for s in SUITES:
        cmd = " ".join(["python -m", s.module, *s.args])
        needs = f"; needs {', '.join(s.needs)}" if s.needs else ""
        make = f"; {s.make_target}" if s.make_target else ""
        click.echo(f"{s.name:<{width}}  {s.title}: {s.measures}")
        click.echo(f"{'':<{width}}  {cmd}  (full run: {s.duration or '?'}{needs}{make}; "
                   f"--quick: {' '.join(s.quick_args) or 'same'})")


@cli.command("run")
@click.argument("suites", nargs=-1)
@click.option("--all", "run_all", is_flag=True, help="every suite, in the order `list` shows")
@click.option("--quick", is_flag=True,
              help="each suite's small variant (smoke-test sizes; the result says quick)")
@click.option("--args", "extra", default="", metavar="'ARGS'",
              help="more arguments for the suite's module, in one quoted string (with one "
                   "suite only), e.g. --args '--rounds 3'")
@click.option("--dry-run", is_flag=True, help="print the commands, run nothing")
@_results_option
def run(suites: tuple[str, ...], run_all: bool, quick: bool, extra: str, dry_run: bool,
        results_dir: pathlib.Path | None) -> None:
    """Run SUITES (or --all), one after the other, each writing its result under the results
    directory. Exits 1 if a suite failed (the others still run), 2 on a usage error."""
    if run_all == bool(suites):
        raise click.UsageError("name one or more suites, or --all (see `riverbed-bench list`)")
    try:
        chosen = [suite(n) for n in (ORDER if run_all else suites)]
    except KeyError as e:
        raise click.UsageError(str(e.args[0])) from None
    extra_args = tuple(shlex.split(extra))
    if extra_args and len(chosen) != 1:
        raise click.UsageError("--args goes with exactly one suite")
    results_dir = results_dir or results.default_results_dir()
    failed: list[str] = []
    for s in chosen:
        why = _needs_met(s)
        if why is not None:
            click.echo(f"== {s.name}: skipped: {why}", err=True)
            if not run_all:
                failed.append(s.name)
            continue
        if dry_run:
            click.echo(" ".join(shlex.quote(a) for a in
                                [sys.executable, *s.command(quick=quick, extra=extra_args)]))
            continue
        code, _ = run_suite(s, quick=quick, extra=extra_args, results_dir=results_dir)
        if code != 0:
            failed.append(s.name)
    if failed:
        click.echo(f"failed: {', '.join(failed)}", err=True)
        sys.exit(1)


@cli.command("show")
@click.argument("suites", nargs=-1)
@_results_option
def show(suites: tuple[str, ...], results_dir: pathlib.Path | None) -> None:
    """The latest result of each suite (or of SUITES): its conditions, figures and report, as
    Markdown, as the docs' Benchmarks page shows them."""
    try:
        chosen = [suite(n) for n in suites] if suites else list(SUITES)
    except KeyError as e:
        raise click.UsageError(str(e.args[0])) from None
    best = results.latest(results.load_results(results_dir or results.default_results_dir()))
    if not suites:
        click.echo(results.summary_markdown(best, chosen) + "\n")
    for s in chosen:
        click.echo(f"## {s.name}: {s.title}\n")
        click.echo(results.suite_markdown(best.get(s.name), s.name))


@cli.command("machine")
def machine() -> None:
    """The machine's description, as a result records it (JSON)."""
    commit, dirty = results.git_state()
    click.echo(json.dumps({**results.describe_machine(), "commit": commit, "dirty": dirty},
                          indent=2))


def main(argv: list[str] | None = None) -> int:
    """The console script's entry point; returns the exit code."""
    try:
        cli.main(args=argv, prog_name="riverbed-bench", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Abort:
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
