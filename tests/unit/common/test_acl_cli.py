"""`riverbed acls` / `riverbed configs`: bad arguments are refused (exit 2) before ZooKeeper is
contacted (the connect string here points nowhere), and the plugins are registered."""
from __future__ import annotations

import pytest

from riverbed.cli import build_parser, main

NOWHERE = "127.0.0.1:1/none"


@pytest.mark.parametrize("argv", [
    ["--add", "--allow-principal", "User:a", "--operation", "Read"],              # no resource
    ["--add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t"],  # not a principal
    ["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
    ["--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"],  # not for groups
    ["--add", "--allow-principal", "User:a", "--topic", "*", "--resource-pattern-type", "prefixed"],
    ["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"],        # needs --group
    ["--add", "--operation", "Read", "--topic", "t"],                              # nobody
    ["--remove", "--topic", "t"],                                                  # everything: --force
])
def test_bad_acl_arguments_exit_2_without_touching_zookeeper(argv, capsys):
    assert main(["acls", "--zookeeper", NOWHERE, *argv]) == 2
    assert capsys.readouterr().err.startswith("Error: ")


@pytest.mark.parametrize("argv", [
    ["--entity-type", "users", "--entity-name", "a", "--alter", "--add-config", "bytes=1"],
    ["--entity-type", "users", "--entity-name", "a", "--alter", "--add-config",
     "producer_byte_rate=-5"],
    ["--entity-type", "clients", "--entity-default", "--alter", "--add-config", "x"],
    ["--entity-type", "clients", "--alter", "--add-config", "producer_byte_rate=1"],  # no entity
    ["--entity-type", "users", "--entity-name", "a", "--alter"],                      # nothing to do
    ["--entity-type", "users", "--entity-name", "a", "--alter", "--add-config",
     "SCRAM-SHA-512=[iterations=100,password=hunter2]"],                              # too few
    ["--entity-type", "users", "--entity-name", "a", "--alter", "--add-config",
     "SCRAM-SHA-512=hunter2"],                                                        # no [...]
    ["--entity-type", "users", "--entity-name", "a", "--alter", "--add-config",
     "SCRAM-SHA-512=[password=hunter2"],                                              # no ]
    ["--entity-type", "users", "--entity-default", "--alter", "--add-config",
     "SCRAM-SHA-512=[password=hunter2]"],                                             # a user's
    ["--entity-type", "clients", "--entity-name", "a", "--alter", "--add-config",
     "SCRAM-SHA-256=[password=hunter2]"],
    ["--entity-type", "users", "--entity-name", "a", "--alter", "--add-config",
     "SCRAM-SHA-1=[password=hunter2]"],                                               # not served
])
def test_bad_config_arguments_exit_2(argv, capsys):
    assert main(["configs", "--zookeeper", NOWHERE, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "hunter2" not in err


def test_plugins_are_registered():
    help_text = build_parser().format_help()
    assert "acls" in help_text and "configs" in help_text
