"""The configuration reference (docs/config_reference.py, rendered into the site's
reference/configuration/ pages at every build) describes every Producer, Consumer and Admin
setting with its Kafka name and default, and every key each service role reads — the fields of
the roles' config dataclasses and the security keys, which are all the keys
services.common.config.build accepts — with its default and a meaning."""
from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import sys

import pytest

import riverbed

DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs"


def _reference():
    key = "riverbed_docs_config_reference"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, DOCS / "config_reference.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


@pytest.mark.parametrize("client", ["Producer", "Consumer", "Admin"])
def test_every_setting_is_described(client):
    ref = _reference()
    names = [n for n, _ in ref.settings(getattr(riverbed, client))]
    missing = [n for n in names if n not in ref.TABLES[client]]
    assert not missing, (f"{client} settings without a row in docs/config_reference.py: "
                         f"{missing} (add them)")
    stale = [n for n in ref.TABLES[client] if n not in names]
    assert not stale, f"docs/config_reference.py describes settings {client} lacks: {stale}"


def test_the_clients_page_has_each_setting_with_its_kafka_name_and_default():
    text = _reference().render_clients()
    for row in ("| `linger_ms` | `linger.ms` | `0` |", "| `group_id` | `group.id` | `None` |",
                "| `request_timeout_ms` | `request.timeout.ms` | `30000` |",
                "| `bootstrap_timeout_ms` | 30000 |", "| `KafkaProducer` | `acks` | `'all'` |"):
        assert row in text


def test_every_key_of_every_role_has_a_meaning():
    missing = _reference().missing_meanings()
    assert not missing, ("config keys without a meaning: add a comment above the field in its "
                         f"config dataclass, or a line in MEANINGS: {missing}")


def test_every_key_a_role_reads_is_on_its_page_with_its_default():
    ref = _reference()
    pages = ref.pages()
    for role in (*ref.ROLES, ref.SECURITY):
        text = pages[f"reference/configuration/{role.slug}.md"]
        for f in dataclasses.fields(ref.config_class(role)):
            key = f.name.replace("_", ".")
            row = f"| `{key}` | {ref.service_default(key, f.default)} |"
            assert row in text, (role.slug, row)
    from services.common.rpc.security import SECURITY_KEYS
    assert {k for k, *_ in ref.role_keys(ref.SECURITY)} == set(SECURITY_KEYS)


def test_defaults_read_as_in_a_properties_file():
    ref = _reference()
    assert ref.service_default("log.segment.bytes", 1073741824) == "`1073741824` (1 GiB)"
    assert ref.service_default("replica.lag.time.max.ms", 10000) == "`10000` (10 s)"
    assert ref.service_default("log.roll.ms", None) == "unset"
    assert ref.service_default("controlled.shutdown.enable", True) == "`true`"
    assert ref.service_default("super.users", "") == "empty"


def test_a_field_comment_is_its_meaning():
    ref = _reference()
    keys = {k: m for k, _, _, m in ref.role_keys(ref.ROLES[1])}        # the controller
    assert keys["broker.session.timeout.ms"].startswith("A storage node not heard from")
    assert keys["num.partitions"] == ref.MEANINGS["num.partitions"]


def test_every_role_the_fleet_starts_has_a_configuration_page():
    from deploy.fleet import ROLES as FLEET_ROLES
    ref = _reference()
    described = {role.module.split(".")[1] for role in ref.ROLES}
    started = {spec.module.split(".")[1] for spec in FLEET_ROLES.values()}
    assert started <= described, f"roles without a configuration page: {started - described}"
