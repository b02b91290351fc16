"""`make docs` builds (issue 27): the site builds with --strict (no broken link, anchor or
reference, every page in the nav), and its reference pages are complete — every configuration
key the services read, every command, every series the Grafana dashboard queries — and the SDK
API renders from the docstrings. One build for the module (about 15-30 s)."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib
import re
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
DOCS = REPO / "docs"

pytestmark = pytest.mark.timeout(600)


def _load(name: str):
    key = f"riverbed_docs_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, DOCS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("site")
    pages = _load("build_docs").build(out, strict=True)
    assert pages
    return out


def _page(site: pathlib.Path, path: str) -> str:
    """The HTML of the page built from docs/<path> (use_directory_urls: x.md -> x/index.html)."""
    md = pathlib.PurePosixPath(path)
    html = site / (md.parent / "index.html" if md.stem == "index" else md.with_suffix("") /
                   "index.html")
    return html.read_text(encoding="utf-8")


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">") \
        .replace("&amp;", "&").replace("&quot;", '"').replace("&#39;", "'")


def test_every_config_key_a_service_reads_is_in_the_reference(site):
    ref = _load("config_reference")
    for role in (*ref.ROLES, ref.SECURITY):
        text = _text(_page(site, f"reference/configuration/{role.slug}.md"))
        cls = ref.config_class(role)
        keys = [f.name.replace("_", ".") for f in dataclasses.fields(cls)]
        missing = [k for k in keys if k not in text]
        assert not missing, f"{role.slug}: keys missing from the page: {missing}"
    from services.common.rpc.security import SECURITY_KEYS
    text = _text(_page(site, "reference/configuration/security.md"))
    assert all(k in text for k in SECURITY_KEYS)
    from services.controller.core.topic_config import TOPIC_CONFIGS
    text = _text(_page(site, "reference/configuration/topics.md"))
    assert all(k in text for k in TOPIC_CONFIGS)
    clients = _text(_page(site, "reference/configuration/clients.md"))
    for setting in ("linger_ms", "group_id", "api_version_auto_timeout_ms", "curve_server_keys_dir"):
        assert setting in clients


def test_every_command_has_a_page_with_its_help(site):
    cli = _load("cli_reference")
    commands = cli.commands()
    scripts = cli.console_scripts()
    assert set(scripts) <= set(commands)
    from riverbed.cli import build_parser
    top = {name for name, _, _ in cli._subcommands(build_parser())}
    assert {"fleet", "acls", "configs", "topics", "produce", "consume"} <= top
    assert {f"riverbed {name}" for name in top} <= set(commands)
    index = _text(_page(site, "reference/cli/index.md"))
    for command, entries in commands.items():
        text = _text(_page(site, f"reference/cli/{command.replace(' ', '-')}.md"))
        for words, _, _ in entries:
            assert "usage: " + " ".join(words) in text or " ".join(words) in text, words
        assert command in index
    topics = _text(_page(site, "reference/cli/riverbed-topics.md"))
    assert "usage: riverbed topics create" in topics and "--replication-factor" in topics
    assert "--config-override" in _text(_page(site, "reference/cli/riverbed-fleet.md"))
    assert "riverbed-bench run" in _text(_page(site, "reference/cli/riverbed-bench.md"))


def test_every_series_the_dashboard_queries_is_in_the_metrics_reference(site):
    text = _text(_page(site, "reference/metrics.md"))
    dashboard = (REPO / "deploy" / "grafana" / "riverbed-dashboard.json").read_text()
    queried = set(re.findall(r"riverbed_[a-z0-9_]+", json.dumps(json.loads(dashboard))))
    assert queried and not [s for s in sorted(queried) if s not in text]
    for series in ("riverbed_server_bytes_in_bytes_total", "riverbed_group_lag",
                   "riverbed_process_cpu_time_seconds_total", "riverbed_producer_record_send_total"):
        assert series in text, series
    # labels are there too
    assert re.search(r"riverbed\.server\.bytes_in.*?topic", text, re.S)


# a Prometheus series of a service or of the SDK (Ansible variables such as riverbed_node_id and
# fixtures such as riverbed_bootstrap are not)
SERIES = (r"riverbed_(?:server|controller|gateway|group|group_coordinator|offset_manager|process|"
          r"log|log_dir|producer|consumer)_[a-z0-9_]*[a-z0-9]")


def test_the_hand_written_pages_name_only_series_that_exist():
    text = _load("metrics_reference").page()
    named: dict[str, list[str]] = {}
    for page in DOCS.rglob("*.md"):
        for series in re.findall(SERIES, page.read_text()):
            if f"`{series}`" not in text:
                named.setdefault(series, []).append(page.name)
    assert not named, f"series the docs name that no service registers: {named}"


def test_the_sdk_api_renders_from_the_docstrings(site):
    producer = _text(_page(site, "reference/api/producer.md"))
    assert "linger_ms" in producer and "send_many" in producer and "KafkaProducer" in producer
    assert "riverbed_fleet" in _text(_page(site, "reference/api/testing.md"))
    assert "Channel" in _text(_page(site, "reference/api/wire.md"))
    admin = _text(_page(site, "reference/api/admin.md"))
    assert "describe_group_offsets" in admin          # Riverbed's Admin
    assert "list_group_offsets" in admin and "list_consumer_groups" in admin   # the facade


def test_the_benchmarks_page_is_generated_from_the_results(site):
    text = _text(_page(site, "benchmarks/index.md"))
    assert "riverbed-bench:" not in text                 # every marker was replaced
    from loadgen import bench_results
    from loadgen.bench_suites import SUITES
    best = bench_results.latest(bench_results.load_results(bench_results.default_results_dir()))
    for rec in best.values():
        assert f"commit {rec['commit'][:10]}" in text
    assert ("No result recorded yet" in text) == (len(best) < len(SUITES))


def test_the_placeholders_left_for_the_lead_are_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text()
    for page in ("transactions.md", "kafka-protocol.md", "operations/restarts-and-elr.md"):
        assert page in nav, page
