"""Admin group methods and `riverbed groups` against a scripted gateway (no sockets)."""
from __future__ import annotations

import io
import contextlib

import pytest
from sdk_fakes import FakeGateway

from riverbed import errors
from riverbed._proto.v1 import group_pb2, header_pb2, list_offsets_pb2, metadata_pb2, offset_pb2
from riverbed.admin import Admin
from riverbed.structs import TopicPartition
from riverbed.tools import groups as groups_tool

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
LOG_END = {0: 100, 1: 50, 2: 0}
LOG_START = {0: 10, 1: 0, 2: 0}
BY_TIME = {0: 60, 1: -1, 2: -1}


class FakeGroups:
    def __init__(self, state="Empty", members=()):
        self.state = state
        self.members = list(members)
        self.committed = {("t", 0): 40, ("t", 1): 50}
        self.commits = []
        self.fetch_errors = []
        self.gw = FakeGateway({
            ApiKey.METADATA: self.metadata, ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.LIST_GROUPS: self.list_groups, ApiKey.DESCRIBE_GROUPS: self.describe,
            ApiKey.OFFSET_FETCH: self.offset_fetch, ApiKey.OFFSET_COMMIT: self.commit,
        })

    def admin(self):
        return Admin(["tcp://gw:1"], _channel_factory=self.gw.factory, retry_backoff_ms=1)

    def metadata(self, body, payloads):
        resp = metadata_pb2.MetadataResponse()
        t = resp.topics.add(name="t")
        for p in LOG_END:
            t.partitions.add(partition=p, leader=1, replicas=[1], isr=[1])
        return resp, []

    def list_offsets(self, body, payloads):
        resp = list_offsets_pb2.ListOffsetsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                off = {-1: LOG_END, -2: LOG_START}.get(p.timestamp, BY_TIME)[p.partition]
                rt.partitions.add(partition=p.partition, offset=off, timestamp=p.timestamp)
        return resp, []

    def list_groups(self, body, payloads):
        resp = group_pb2.ListGroupsResponse()
        resp.groups.add(group_id="g", protocol_type="consumer", group_state=self.state)
        resp.groups.add(group_id="a", protocol_type="consumer", group_state="Stable")
        return resp, []

    def describe(self, body, payloads):
        resp = group_pb2.DescribeGroupsResponse()
        g = resp.groups.add(group_id=body.groups[0], group_state=self.state, protocol_type="consumer",
                            protocol_data="range" if self.members else "", generation_id=3,
                            leader=self.members[0][0] if self.members else "")
        for mid, cid, parts in self.members:
            m = g.members.add(member_id=mid, client_id=cid, client_host="/127.0.0.1")
            m.assignment.partitions.add(topic="t", partitions=parts)
            m.subscription.topics.append("t")
        return resp, []

    def offset_fetch(self, body, payloads):
        if self.fetch_errors:
            return offset_pb2.OffsetFetchResponse(error_code=self.fetch_errors.pop(0)), []
        resp = offset_pb2.OffsetFetchResponse()
        wanted = {(t.name, p) for t in body.topics for p in t.partition_indexes} or set(self.committed)
        by_topic = {}
        for t, p in sorted(wanted):
            by_topic.setdefault(t, []).append(p)
        for t, parts in by_topic.items():
            rt = resp.topics.add(name=t)
            for p in parts:
                rt.partitions.add(partition_index=p, committed_offset=self.committed.get((t, p), -1))
        return resp, []

    def commit(self, body, payloads):
        self.commits.append(body)
        for t in body.topics:
            for p in t.partitions:
                self.committed[(t.name, p.partition_index)] = p.committed_offset
        return offset_pb2.OffsetCommitResponse(), []


def run_cli(fake, argv, monkeypatch):
    monkeypatch.setattr("riverbed.admin.Admin", lambda *a, **k: fake.admin())
    parser = groups_tool.argparse.ArgumentParser()
    sub = parser.add_subparsers()
    groups_tool.add_command(sub)
    args = parser.parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = args.func(args)
    return code, out.getvalue(), err.getvalue()


def test_list_and_describe_groups():
    fake = FakeGroups("Stable", [("c1-aaa", "c1", [0, 1]), ("c2-bbb", "c2", [2])])
    with fake.admin() as admin:
        assert [(g.group_id, g.state) for g in admin.list_groups()] == [("a", "Stable"), ("g", "Stable")]
        (d,) = admin.describe_groups(["g"])
        assert d.state == "Stable" and d.protocol == "range" and d.generation_id == 3
        assert d.members[0].assignment == (TopicPartition("t", 0), TopicPartition("t", 1))
        assert not d.is_empty


def test_describe_rows_have_committed_log_end_lag_and_owner(monkeypatch):
    fake = FakeGroups("Stable", [("c1-aaa", "c1", [0, 1]), ("c2-bbb", "c2", [2])])
    fake.fetch_errors = [E.Value("COORDINATOR_LOAD_IN_PROGRESS")]     # retried
    code, out, _ = run_cli(fake, ["groups", "describe", "g"], monkeypatch)
    assert code == 0
    lines = out.splitlines()
    assert "state Stable" in lines[0] and "2 member(s)" in lines[0]
    header = lines[2].split()
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                      "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = [line.split() for line in lines[3:]]
    assert rows[0] == ["g", "t", "0", "40", "100", "60", "c1-aaa", "/127.0.0.1", "c1"]
    assert rows[1] == ["g", "t", "1", "50", "50", "0", "c1-aaa", "/127.0.0.1", "c1"]
    assert rows[2] == ["g", "t", "2", "-", "0", "-", "c2-bbb", "/127.0.0.1", "c2"]


def test_reset_offsets_dry_run_then_execute(monkeypatch):
    fake = FakeGroups("Empty")
    code, out, err = run_cli(fake, ["groups", "reset-offsets", "--group", "g", "--topic", "t",
                                    "--to-earliest"], monkeypatch)
    assert code == 0 and "dry run" in err and fake.commits == []
    rows = [line.split() for line in out.splitlines()[1:]]
    assert rows == [["g", "t", "0", "40", "10"], ["g", "t", "1", "50", "0"], ["g", "t", "2", "-", "0"]]
    code, out, _ = run_cli(fake, ["groups", "reset-offsets", "--group", "g", "--topic", "t",
                                  "--to-earliest", "--execute"], monkeypatch)
    assert code == 0
    (c,) = fake.commits
    assert c.generation_id == -1 and c.member_id == ""
    assert fake.committed == {("t", 0): 10, ("t", 1): 0, ("t", 2): 0}


def test_reset_offsets_to_offset_clamps_and_to_datetime_falls_back_to_latest():
    fake = FakeGroups("Empty")
    with fake.admin() as admin:
        plan = admin.reset_offsets("g", "t", 70)
        assert {tp.partition: new for tp, (_, new) in plan.items()} == {0: 70, 1: 50, 2: 0}
        plan = admin.reset_offsets("g", "t", 5, partitions=[0])
        assert {tp.partition: new for tp, (_, new) in plan.items()} == {0: 10}
        plan = admin.reset_offsets("g", "t", ("datetime", groups_tool.parse_datetime_ms("2026-11-21T10:00:00Z")))
        assert {tp.partition: new for tp, (_, new) in plan.items()} == {0: 60, 1: 50, 2: 0}
    assert fake.commits == []
    assert groups_tool.parse_datetime_ms("1970-01-01T00:00:01+00:00") == 1000


def test_reset_offsets_refuses_a_group_with_members(monkeypatch):
    fake = FakeGroups("Stable", [("c1-aaa", "c1", [0, 1, 2])])
    with fake.admin() as admin:
        with pytest.raises(errors.NonEmptyGroupError, match="inactive"):
            admin.reset_offsets("g", "t", "latest", execute=True)
    code, _, _ = run_cli(fake, ["groups", "list"], monkeypatch)
    assert code == 0
    assert fake.commits == []
