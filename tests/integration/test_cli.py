"""The CLI tools against a real fleet: topics create/describe, produce | consume round trip."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from deploy.fleet import Fleet, free_base_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("cli-fleet"), free_base_port(), storage_nodes=3,
              controllers=2, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


def tool(fleet, *args, stdin=None, timeout=60):
    env = dict(os.environ, RIVERBED_BOOTSTRAP=fleet.gateway_endpoint)
    return subprocess.run([sys.executable, "-m", "riverbed.tools", *args], input=stdin,
                          capture_output=True, env=env, timeout=timeout)


def test_topics_and_produce_consume_round_trip(fleet):
    r = tool(fleet, "topics", "create", "--topic", "cli", "--partitions", "2",
             "--replication-factor", "3", "--config", "retention.ms=3600000")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 30
    while True:
        r = tool(fleet, "topics", "describe", "--topic", "cli")
        lines = r.stdout.decode().splitlines()
        if r.returncode == 0 and len(lines) == 3 and "Leader: none" not in r.stdout.decode():
            break
        assert time.monotonic() < deadline, r.stdout + r.stderr
        time.sleep(0.2)
    assert lines[0].startswith("Topic:cli\tPartitionCount:2\tReplicationFactor:3\tConfigs:")
    assert "retention.ms=3600000" in lines[0]
    assert lines[1].startswith("\tTopic: cli\tPartition: 0\tLeader: ")
    assert "\tReplicas: " in lines[1] and "\tIsr: " in lines[1]
    assert "cli" in tool(fleet, "topics", "list").stdout.decode().split()

    lines_in = b"".join(b"k%d:line %d\n" % (i % 5, i) for i in range(200))
    r = tool(fleet, "produce", "--topic", "cli", "--parse-key", "--key-separator", ":",
             "--acks", "all", stdin=lines_in)
    assert r.returncode == 0, r.stderr
    r = tool(fleet, "consume", "--topic", "cli", "--from-beginning", "--max-messages", "200",
             "--print-key", "--key-separator", ":", "--timeout-ms", "20000")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert sorted(out) == sorted(lines_in.splitlines())
    # per key (one partition each) the order is kept
    for k in range(5):
        mine = [line for line in out if line.startswith(b"k%d:" % k)]
        assert mine == [line for line in lines_in.splitlines() if line.startswith(b"k%d:" % k)]
    r = tool(fleet, "consume", "--topic", "cli", "--partition", "0", "--offset", "0",
             "--max-messages", "3", "--timeout-ms", "10000")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 3


def test_describe_unknown_topic_fails_clearly(fleet):
    r = tool(fleet, "topics", "describe", "--topic", "no-such-topic")
    assert r.returncode == 1
    assert b"no-such-topic" in r.stderr
