"""Benchmark results as files, and the tables made from them (riverbed-bench and the docs'
Benchmarks page).

A result is one JSON file per run, `<results dir>/<suite>/<UTC start>.json`:

    {"schema": 1, "suite": "records", "module": "loadgen.records_bench",
     "command": ["python", "-m", "loadgen.records_bench", ...], "quick": true,
     "started": "2026-12-01T10:15:30Z", "duration_s": 4.2, "exit_code": 0,
     "commit": "ab12cd3...", "dirty": false,
     "machine": {"cores": 2, "usable_cores": 2, "cpu_model": "...", "memory_bytes": ...,
                 "kernel": "...", "os": "...", "python": "CPython 3.11.7",
                 "load_average_start": [..], "load_average_end": [..]},
     "figures": <what the suite wrote to its --json file, or null>,
     "report": "<the suite's stdout: its own tables>", "log_tail": "<the end of its stderr>"}

The results directory is `bench-results/` at the top of the checkout (`$RIVERBED_BENCH_RESULTS`
or `--results-dir` elsewhere). The Benchmarks page shows each suite's latest successful run,
preferring a full run to a `--quick` one: its conditions, its figures as a table (a suite's
`rows`), and its report. Nothing on that page is typed by hand.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import pathlib
import platform
import subprocess
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SCHEMA", "default_results_dir", "describe_machine", "git_state", "result_path",
           "write_result", "load_results", "latest", "format_number", "figures_table",
           "column_header", "conditions_line", "suite_markdown", "summary_markdown", "REPO"]

SCHEMA = 1
REPO = pathlib.Path(__file__).resolve().parents[1]
# stderr lines a result keeps (progress and logs; the report is stdout)
LOG_TAIL_LINES = 60


def default_results_dir() -> pathlib.Path:
    env = os.environ.get("RIVERBED_BENCH_RESULTS")
    return pathlib.Path(env) if env else REPO / "bench-results"


# -- the machine ----------------------------------------------------------------------------

def _first(path: str, key: str, sep: str = ":") -> str | None:
    """The value of the first `key<sep>value` line of a text file (/proc/cpuinfo, ...)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                name, found, value = line.partition(sep)
                if found and name.strip() == key:
                    return value.strip().strip('"')
    except OSError:
        return None
    return None


def describe_machine() -> dict[str, Any]:
    """Cores, CPU model, memory, kernel, OS, Python and the load average now."""
    mem_kb = _first("/proc/meminfo", "MemTotal")
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:          # not Linux
        usable = os.cpu_count() or 0
    return {
        "cores": os.cpu_count() or 0,
        "usable_cores": usable,
        "cpu_model": _first("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "memory_bytes": int(mem_kb.split()[0]) * 1024 if mem_kb else None,
        "kernel": f"{platform.system()} {platform.release()}",
        "os": _first("/etc/os-release", "PRETTY_NAME", "=") or platform.platform(),
        "machine": platform.machine(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load_average": list(os.getloadavg()),
    }


def git_state(repo: pathlib.Path = REPO) -> tuple[str | None, bool | None]:
    """(HEAD's commit, whether the tree has changes), or (None, None) outside a checkout."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None, None
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                 "--untracked-files=no"], capture_output=True, text=True,
                                timeout=30)
        return head.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return None, None


# -- files ----------------------------------------------------------------------------------

def _stamp(iso: str) -> str:
    """2026-12-01T10:15:30Z -> 20261201T101530Z (a file name that sorts by time)."""
    return iso.replace("-", "").replace(":", "")


def result_path(results_dir: pathlib.Path, suite: str, started: str) -> pathlib.Path:
    return results_dir / suite / f"{_stamp(started)}.json"


def write_result(results_dir: pathlib.Path, record: Mapping[str, Any]) -> pathlib.Path:
    """Write one run's record (schema above); returns its path. Never overwrites: a second run
    started in the same second gets a suffix."""
    path = result_path(results_dir, record["suite"], record["started"])
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while path.exists():
        n += 1
        path = path.with_name(f"{_stamp(record['started'])}-{n}.json")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"schema": SCHEMA, **record}, indent=1, sort_keys=False,
                              default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load_results(results_dir: pathlib.Path) -> list[dict[str, Any]]:
    """Every readable result under `results_dir`, oldest first (by start time)."""
    out = []
    if not results_dir.is_dir():
        return out
    for path in sorted(results_dir.glob("*/*.json")):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("schema") == SCHEMA and "suite" in rec:
            rec["_path"] = str(path)
            out.append(rec)
    out.sort(key=lambda r: (r.get("started", ""), r["_path"]))
    return out


def latest(results: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per suite, the newest successful full run, else the newest successful quick one."""
    best: dict[str, dict[str, Any]] = {}
    for rec in results:
        if rec.get("exit_code") != 0:
            continue
        cur = best.get(rec["suite"])
        if cur is None or (not rec.get("quick") or cur.get("quick")):
            best[rec["suite"]] = dict(rec)
    return best


# -- tables ---------------------------------------------------------------------------------

def format_number(v: Any) -> str:
    """Figures as people read them: 1,234,567 / 12.3 / 0.123; other values as they are."""
    if isinstance(v, bool) or v is None:
        return "—" if v is None else str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != v:
            return "—"
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.3f}"
    return str(v)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


# a figure's key, as a column header: units as people write them
_HEADER_WORDS = (("m_records_per_sec", "M records/s"), ("records_per_sec", "records/s"),
                 ("mb_per_sec", "MB/s"), ("mb_per_s", "MB/s"), ("req_per_s", "requests/s"),
                 ("us_per_batch", "µs/batch"), ("cpu_s_per_gb", "CPU s/GB"), ("io_", "I/O "),
                 ("_over_", " ÷ "), ("_bytes", " (bytes)"), ("_ms", " (ms)"))


def column_header(key: str) -> str:
    for word, text in _HEADER_WORDS:
        key = key.replace(word, text)
    return key.replace("_", " ").strip()


def _cell(v: Any) -> str:
    return format_number(v).replace("|", "\\|")


def figures_table(figures: Any) -> str | None:
    """A Markdown table of a suite's figures when they hold rows: a list of flat dicts, or a
    dict whose `rows` is one (columns: the keys, as `column_header` writes them); None
    otherwise (the suite's report then carries its tables)."""
    rows = figures.get("rows") if isinstance(figures, dict) else figures
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        return None
    columns: list[str] = []
    for r in rows:
        for k, v in r.items():
            if _scalar(v) and k not in columns:
                columns.append(k)
    if not columns:
        return None
    lines = ["| " + " | ".join(column_header(c) for c in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(_cell(r.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def _gib(n: int | None) -> str:
    return "?" if not n else f"{n / 2**30:.1f} GiB"


def conditions_line(rec: Mapping[str, Any]) -> str:
    """When, which tree, how long, and on what machine a result was measured."""
    m = rec.get("machine") or {}
    load_start = m.get("load_average") or [float("nan")]
    load_end = rec.get("load_average_end") or [float("nan")]
    commit = (rec.get("commit") or "?")[:10] + (" (with local changes)" if rec.get("dirty") else "")
    cores = m.get("cores", "?")
    usable = m.get("usable_cores")
    cores_text = f"{cores} cores" + (f" ({usable} usable)" if usable and usable != cores else "")
    return (f"{rec.get('started', '?')}, commit {commit}, {rec.get('duration_s', 0):.0f} s"
            f"{' (quick run)' if rec.get('quick') else ''}; {cores_text} "
            f"({m.get('cpu_model', '?')}), {_gib(m.get('memory_bytes'))}, {m.get('kernel', '?')}, "
            f"{m.get('python', '?')}; load average {load_start[0]:.2f} at the start, "
            f"{load_end[0]:.2f} at the end")


def suite_markdown(rec: Mapping[str, Any] | None, name: str, *, how: str = "") -> str:
    """The page's section body for one suite: its latest result, or how to make one."""
    if rec is None:
        return (f"*No result recorded yet: `riverbed-bench run {name}`{how} writes one "
                f"under `bench-results/{name}/`.*")
    cmd = " ".join(["python", *rec.get("command", [])[1:]]) if rec.get("command") else name
    out = [f"Measured {conditions_line(rec)}, with `{cmd}`.", ""]
    table = figures_table(rec.get("figures"))
    if table:
        out += [table, ""]
    report = (rec.get("report") or "").rstrip()
    if report:
        out += ["```text", report, "```", ""]
    return "\n".join(out).rstrip() + "\n"


def summary_markdown(records: Mapping[str, Mapping[str, Any]], suites: Iterable[Any]) -> str:
    """One row per suite: what it measures and its latest result's date, tree and machine."""
    lines = ["| suite | what it measures | latest result |", "|---|---|---|"]
    for s in suites:
        rec = records.get(s.name)
        if rec is None:
            when = "none yet"
        else:
            m = rec.get("machine") or {}
            when = (f"{rec.get('started', '?')[:10]}, {(rec.get('commit') or '?')[:7]}"
                    f"{', quick' if rec.get('quick') else ''}, {m.get('cores', '?')} cores, "
                    f"load {(m.get('load_average') or [0])[0]:.1f}")
        lines.append(f"| `{s.name}` | {s.measures} | {when} |")
    return "\n".join(lines)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
