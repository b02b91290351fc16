"""`riverbed fleet` comes in through the `riverbed.cli_plugins` entry point, never an import of
deploy/ by the SDK (issue 16)."""
from __future__ import annotations

from importlib.metadata import EntryPoint

from riverbed import cli


def test_the_checkout_declares_the_fleet_plugin():
    names = {ep.name: ep.value for ep in cli.entry_points(group=cli.PLUGIN_GROUP)}
    assert names.get("fleet") == "deploy.fleet_cli:add_fleet_commands"
    assert cli.build_parser().parse_args(["fleet", "status", "--data-dir", "d"]).command == "fleet"


def test_without_the_plugin_fleet_says_why(monkeypatch, capsys):
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    assert cli.main(["fleet", "up"]) == 2
    assert "source checkout" in capsys.readouterr().err


def test_a_plugin_that_cannot_be_imported_says_so(monkeypatch, capsys):
    broken = EntryPoint("fleet", "no_such_package.cli:add", cli.PLUGIN_GROUP)
    monkeypatch.setattr(cli, "entry_points", lambda group: [broken])
    assert cli.main(["fleet", "up"]) == 2
    assert "no_such_package" in capsys.readouterr().err
