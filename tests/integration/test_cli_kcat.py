"""The kcat-grade console tools against a real fleet (issue 16, point 7): each test runs the real
`python -m riverbed.tools ...` command.

produce -K/-H/--partition; consume --format with kcat's tokens, --json, --partition/--offset,
--group (resuming where the previous run stopped); groups list/describe --json and an unknown
group (exit 1); reset-offsets --shift-by/--to-current/--by-duration/--all-topics; topics
list/describe --json; and the stderr notice while a partition has no leader.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from deploy.fleet import Fleet, free_base_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("kcat-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


def tool(fleet, *args, stdin=None, timeout=90):
    env = dict(os.environ, RIVERBED_BOOTSTRAP=fleet.gateway_endpoint)
    return subprocess.run([sys.executable, "-m", "riverbed.tools", *args], input=stdin,
                          capture_output=True, env=env, timeout=timeout)


def ok(r):
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout.decode()


def wait_leaders(fleet, topic, partitions, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while True:
        r = tool(fleet, "topics", "describe", "--topic", topic, "--json")
        if r.returncode == 0:
            (d,) = json.loads(r.stdout)
            if len(d["partitions"]) == partitions and \
                    all(p["leader"] is not None for p in d["partitions"]):
                return d
        assert time.monotonic() < deadline, r.stderr
        time.sleep(0.3)


def create(fleet, topic, partitions=2, rf=3):
    ok(tool(fleet, "topics", "create", "--topic", topic, "--partitions", str(partitions),
            "--replication-factor", str(rf)))
    return wait_leaders(fleet, topic, partitions)


def test_produce_headers_keys_partition_and_consume_formats(fleet):
    d = create(fleet, "kc", 2)
    assert d["name"] == "kc" and d["replication_factor"] == 3 and d["internal"] is False
    assert all(len(p["replicas"]) == 3 and len(p["isr"]) == 3 for p in d["partitions"])
    assert "kc" in json.loads(ok(tool(fleet, "topics", "list", "--json")))

    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(5))
    ok(tool(fleet, "produce", "--topic", "kc", "--partition", "1", "-K", ":",
            "-H", "src=test", "-H", "eq=a=b", "--acks", "all", stdin=lines))
    out = ok(tool(fleet, "consume", "--topic", "kc", "--from-beginning", "--max-messages", "5",
                  "--timeout-ms", "20000", "--format", "%t|%p|%o|%k|%s|%K|%S|%h\\n"))
    assert out.splitlines() == [f"kc|1|{i}|k{i}|v{i}|2|2|src=test,eq=a=b" for i in range(5)]

    out = ok(tool(fleet, "consume", "--topic", "kc", "--partition", "1", "--offset", "3",
                  "--max-messages", "2", "--timeout-ms", "20000", "--json"))
    objs = [json.loads(line) for line in out.splitlines()]
    assert [(o["offset"], o["key"], o["payload"]) for o in objs] == [(3, "k3", "v3"),
                                                                     (4, "k4", "v4")]
    assert objs[0]["headers"] == ["src", "test", "eq", "a=b"] and objs[0]["ts"] > 0

    r = tool(fleet, "consume", "--topic", "kc", "--format", "%x")
    assert r.returncode == 2 and b"%x" in r.stderr


def test_group_consume_resumes_and_groups_tools(fleet):
    create(fleet, "kg", 2)
    ok(tool(fleet, "produce", "--topic", "kg", "--acks", "all", "-K", ":",    # both partitions
            stdin=b"".join(b"key%d:r%02d\n" % (i % 10, i) for i in range(20))))
    first = ok(tool(fleet, "consume", "--topic", "kg", "--group", "cli-g", "--from-beginning",
                    "--max-messages", "8", "--timeout-ms", "30000")).split()
    # --from-beginning again: a partition the first run printed nothing from has no commit
    rest = ok(tool(fleet, "consume", "--topic", "kg", "--group", "cli-g", "--from-beginning",
                   "--max-messages", "12", "--timeout-ms", "30000")).split()
    assert len(first) == 8 and len(rest) == 12
    assert sorted(first + rest) == [f"r{i:02d}" for i in range(20)]   # nothing twice, none lost

    listing = json.loads(ok(tool(fleet, "groups", "list", "--json")))
    assert {"group_id": "cli-g", "protocol_type": "consumer", "state": "Empty"} in listing
    desc = json.loads(ok(tool(fleet, "groups", "describe", "cli-g", "--json")))
    assert desc["group_id"] == "cli-g" and desc["members"] == []
    parts = {p["partition"]: p for p in desc["partitions"] if p["topic"] == "kg"}
    assert sum(p["current_offset"] for p in parts.values()) == 20
    assert all(p["lag"] == 0 for p in parts.values())

    r = tool(fleet, "groups", "describe", "no-such-group")
    assert r.returncode == 1 and b"Consumer group 'no-such-group' does not exist." in r.stderr
    assert r.stdout == b""

    # --shift-by -3 (dry run, then executed), --to-current keeps it, --by-duration goes back
    plan = json.loads(ok(tool(fleet, "groups", "reset-offsets", "--group", "cli-g", "--topic",
                              "kg", "--shift-by", "-3", "--json")))
    assert len(plan) == 2
    assert all(p["new_offset"] == max(p["current_offset"] - 3, 0) for p in plan), plan
    desc2 = json.loads(ok(tool(fleet, "groups", "describe", "cli-g", "--json")))
    assert desc2["partitions"] == desc["partitions"]            # a dry run commits nothing
    ok(tool(fleet, "groups", "reset-offsets", "--group", "cli-g", "--topic", "kg",
            "--shift-by", "-3", "--execute"))
    after = {p["partition"]: p["current_offset"]
             for p in json.loads(ok(tool(fleet, "groups", "describe", "cli-g", "--json")))
             ["partitions"]}
    assert after == {p["partition"]: p["new_offset"] for p in plan}
    current = json.loads(ok(tool(fleet, "groups", "reset-offsets", "--group", "cli-g",
                                 "--topic", "kg", "--to-current", "--json")))
    assert {p["partition"]: p["new_offset"] for p in current} == after
    back = json.loads(ok(tool(fleet, "groups", "reset-offsets", "--group", "cli-g", "--topic",
                              "kg", "--by-duration", "PT1H", "--json")))
    assert all(p["new_offset"] == 0 for p in back)              # every record is newer
    latest = json.loads(ok(tool(fleet, "groups", "reset-offsets", "--group", "cli-g",
                                "--all-topics", "--to-latest", "--execute", "--json")))
    assert {p["topic"] for p in latest} == {"kg"}
    assert sum(p["new_offset"] for p in latest) == 20
    r = tool(fleet, "groups", "reset-offsets", "--group", "cli-g", "--topic", "kg",
             "--by-duration", "15 minutes")
    assert r.returncode == 2 and b"--by-duration" in r.stderr


def test_console_tools_say_when_a_partition_has_no_leader(fleet):
    d = create(fleet, "kl", 1, rf=1)
    leader = d["partitions"][0]["leader"]
    victim = next(n for n in fleet.names() if fleet.process(n).role == "storage_node"
                  and fleet.process(n).id == leader)
    fleet.stop(victim, kill=True)
    try:
        deadline = time.monotonic() + 60          # the controller notices (session timeout)
        while True:
            (desc,) = json.loads(ok(tool(fleet, "topics", "describe", "--topic", "kl", "--json")))
            if desc["partitions"][0]["leader"] is None:
                break
            assert time.monotonic() < deadline, desc
            time.sleep(0.5)
        r = tool(fleet, "consume", "--topic", "kl", "--timeout-ms", "4000")
        assert b"% kl [0]: no leader" in r.stderr, r.stderr
        r = tool(fleet, "produce", "--topic", "kl", "--timeout-ms", "4000", stdin=b"x\n")
        assert r.returncode != 0
        assert b"% kl [0]: no leader" in r.stderr, r.stderr
    finally:
        fleet.start(victim)
