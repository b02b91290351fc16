"""docs/configuration.md lists every Producer, Consumer and Admin setting with its Kafka name and
default, and is what docs/config_reference.py generates from the clients' signatures."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

import riverbed

DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs"


def _reference():
    spec = importlib.util.spec_from_file_location("config_reference", DOCS / "config_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("client", ["Producer", "Consumer", "Admin"])
def test_every_setting_is_described(client):
    ref = _reference()
    names = [n for n, _ in ref.settings(getattr(riverbed, client))]
    missing = [n for n in names if n not in ref.TABLES[client]]
    assert not missing, (f"{client} settings without a row in docs/config_reference.py: "
                         f"{missing} (add them, then `make docs`)")
    stale = [n for n in ref.TABLES[client] if n not in names]
    assert not stale, f"docs/config_reference.py describes settings {client} lacks: {stale}"


def test_configuration_md_is_fresh():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert text == _reference().render(), "docs/configuration.md is stale: run `make docs`"
    for row in ("| `linger_ms` | `linger.ms` | `0` |", "| `group_id` | `group.id` | `None` |",
                "| `request_timeout_ms` | `request.timeout.ms` | `30000` |"):
        assert row in text
