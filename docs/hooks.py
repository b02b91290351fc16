"""MkDocs hooks (mkdocs.yml `hooks:`): the pages generated from the code, made at every build.

- reference/configuration/*.md: docs/config_reference.py (every client setting, every key of
  every service role, topic and quota configs);
- reference/cli/*.md: docs/cli_reference.py (every command's --help), and their nav entries in
  place of the "Command line" entry of mkdocs.yml;
- reference/metrics.md: docs/metrics_reference.py (every metric, its type and labels);
- on the Benchmarks pages, `<!-- riverbed-bench: SUITE -->` becomes that suite's latest result
  and `<!-- riverbed-bench: summary -->` the table of every suite (loadgen.bench_results, from
  bench-results/).

Nothing generated is written into docs/: the files exist only in the build.
"""
from __future__ import annotations

import importlib.util
import logging
import pathlib
import re
import sys
from types import ModuleType

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.riverbed")
HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
CLI_NAV_TITLE = "Command line"
BENCH_MARK = re.compile(r"<!--\s*riverbed-bench:\s*([a-z0-9-]+)\s*-->")


def _load(name: str) -> ModuleType:
    """A generator module of docs/ (not a package: loaded by path)."""
    key = f"riverbed_docs_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def generated_pages() -> dict[str, str]:
    """Every generated page: path under docs/ -> Markdown."""
    pages: dict[str, str] = {}
    pages.update(_load("config_reference").pages())
    pages.update(_load("cli_reference").pages())
    pages["reference/metrics.md"] = _load("metrics_reference").page()
    return pages


def _expand_cli_nav(nav: list) -> bool:
    """Replace the nav entry titled CLI_NAV_TITLE by a section of every command's page."""
    for i, item in enumerate(nav):
        if isinstance(item, dict):
            (title, value), = item.items()
            if title == CLI_NAV_TITLE:
                nav[i] = {title: _load("cli_reference").nav()}
                return True
            if isinstance(value, list) and _expand_cli_nav(value):
                return True
    return False


def on_config(config):
    if config.nav is not None and not _expand_cli_nav(config.nav):
        log.warning("mkdocs.yml has no nav entry %r for the command pages", CLI_NAV_TITLE)
    return config


def on_files(files, config):
    for path, text in generated_pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=text))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "riverbed-bench:" not in markdown:
        return markdown
    sys.path.insert(0, str(REPO))
    try:
        from loadgen import bench_results as results
        from loadgen.bench_suites import SUITES, suite
    finally:
        sys.path.remove(str(REPO))
    best = results.latest(results.load_results(results.default_results_dir()))

    def replace(m: re.Match) -> str:
        name = m.group(1)
        if name == "summary":
            return results.summary_markdown(best, SUITES)
        suite(name)                       # an unknown suite name fails the build
        return results.suite_markdown(best.get(name), name)

    return BENCH_MARK.sub(replace, markdown)
