"""One bootstrap spelling (issue 16, item 3): `bootstrap_servers` in the SDK clients with
`bootstrap` kept as an alias, `--bootstrap-server` on every command, RIVERBED_BOOTSTRAP honoured
by all of them."""
from __future__ import annotations

import inspect

import pytest
from sdk_fakes import FakeGateway

from loadgen import options as perf_options
from riverbed import Admin, Consumer, Producer, errors
from riverbed.cluster import GatewayConnection, resolve_bootstrap
from riverbed.tools import build_parser as tools_parser


def test_bootstrap_servers_is_the_first_spelling_and_bootstrap_an_alias():
    for cls in (Producer, Consumer, Admin):
        params = inspect.signature(cls).parameters
        assert "bootstrap_servers" in params and "bootstrap" in params, cls
    assert list(inspect.signature(Producer).parameters)[0] == "bootstrap_servers"
    assert list(inspect.signature(Admin).parameters)[0] == "bootstrap_servers"


def test_resolve_bootstrap():
    assert resolve_bootstrap("tcp://a:1", None) == "tcp://a:1"
    assert resolve_bootstrap(None, ["b:2"]) == ["b:2"]
    assert resolve_bootstrap("b:2", "tcp://b:2") == "tcp://b:2"       # the same, spelt twice
    assert resolve_bootstrap(None, None) is None
    with pytest.raises(errors.ClientError, match="disagree"):
        resolve_bootstrap("tcp://a:1", "tcp://b:2")


def test_clients_use_riverbed_bootstrap_when_given_none(monkeypatch):
    monkeypatch.setenv("RIVERBED_BOOTSTRAP", "gw1:7001,tcp://gw2:7002")
    assert GatewayConnection(None).bootstrap == ["tcp://gw1:7001", "tcp://gw2:7002"]
    gw = FakeGateway()
    with Admin(_channel_factory=gw.factory) as admin:
        assert admin._conn.bootstrap == ["tcp://gw1:7001", "tcp://gw2:7002"]
    with Admin(bootstrap="tcp://x:1", _channel_factory=gw.factory) as admin:
        assert admin._conn.bootstrap == ["tcp://x:1"]


COMMANDS = [["topics", "list"], ["produce", "--topic", "t"], ["consume", "--topic", "t"],
            ["groups", "list"], ["groups", "describe", "g"], ["leaders", "elect-preferred", "--all"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_tool_takes_bootstrap_server(argv, monkeypatch):
    from riverbed.tools.common import bootstrap_of
    parser = tools_parser()
    args = parser.parse_args(argv + ["--bootstrap-server", "tcp://h:1"])
    assert bootstrap_of(args) == "tcp://h:1"
    monkeypatch.setenv("RIVERBED_BOOTSTRAP", "tcp://env:2")
    assert bootstrap_of(parser.parse_args(argv)) == "tcp://env:2"


@pytest.mark.parametrize("mode", ["produce", "consume", "e2e"])
def test_riverbed_perf_takes_bootstrap_server_or_the_environment(mode, monkeypatch):
    base = [mode, "--topic", "t", "--num-records", "5"]
    if mode == "produce":
        base += ["--record-size", "10"]
    if mode == "e2e":
        base += ["--throughput", "10"]
    assert perf_options.parse_args(base + ["--bootstrap-server", "tcp://h:1"]).bootstrap == \
        ["tcp://h:1"]
    monkeypatch.setenv("RIVERBED_BOOTSTRAP", "tcp://env:2")
    assert perf_options.parse_args(base).bootstrap == ["tcp://env:2"]
    monkeypatch.delenv("RIVERBED_BOOTSTRAP")
    assert perf_options.parse_args(base).bootstrap == ["tcp://127.0.0.1:9092"]
