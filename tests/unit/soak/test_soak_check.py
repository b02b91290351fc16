"""The soak's final check (tests/soak/soak_check.py, on tests/fault/verifiers.check_logs)."""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "soak"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "fault"))

from soak_check import (DEATH_SLACK_S, check_commits, check_processes, parse_seq,  # noqa: E402
                        records_json, verdict)
from verifiers import check_logs  # noqa: E402


class Produced:
    """What check_logs needs of a VerifyingProducer."""

    def __init__(self, acked: dict[int, dict[int, int]], run_id: str = "r1"):
        self.run_id, self.acked, self.partitions = run_id, acked, sorted(acked)

    def value(self, p: int, seq: int) -> bytes:
        return b"%s:%d:%d:" % (self.run_id.encode(), p, seq)


def _log(p: int, seqs: list[int], run: str = "r1") -> list[tuple[int, bytes]]:
    return [(off, b"%s:%d:%d:" % (run.encode(), p, s)) for off, s in enumerate(seqs)]


def test_a_clean_run_passes():
    logs = {0: _log(0, [0, 1, 2]), 1: _log(1, [0, 1])}
    prod = Produced({0: {0: 0, 1: 1, 2: 2}, 1: {0: 0, 1: 1}})
    rec = records_json(check_logs(logs, [prod]))
    consumed = {0: [(0, ("r1", 0)), (1, ("r1", 1)), (2, ("r1", 2))], 1: [(0, ("r1", 0))]}
    commits = check_commits(logs, [{0: 2}, {0: 3, 1: 1}], {0: 3, 1: 1}, consumed)
    procs = check_processes([(100.0, "storage-1")], [("storage-1", 99.0, 104.0)], [])
    v = verdict(rec, commits.to_json(), procs, True)
    assert v["ok"], v
    assert v["records"]["acked"] == 5 and v["commits"]["commits"] == 2 and v["commits"]["consumed"] == 4


def test_lost_duplicated_and_reordered_records_fail():
    logs = {0: _log(0, [0, 2, 1, 1])}                      # 1 twice; 1 after 2
    prod = Produced({0: {0: 0, 1: 2, 2: 1, 3: 3}})         # seq 3 acked at 3: a copy of 1 is there
    rec = records_json(check_logs(logs, [prod]))
    assert rec["lost"] == 1 and rec["duplicates"] == 1 and rec["out_of_order"] == 1
    assert not rec["ok"]
    assert not verdict(rec, check_commits(logs, [], {}, {}).to_json(),
                       check_processes([], [], []), True)["ok"]


def test_duplicates_alone_fail_an_idempotent_run():
    logs = {0: _log(0, [0, 0])}
    rec = records_json(check_logs(logs, [Produced({0: {0: 0}})]))
    assert rec["lost"] == 0 and rec["duplicates"] == 1 and not rec["ok"]


def test_committed_offsets_must_be_readable_and_not_lost():
    logs = {0: _log(0, [0, 1, 2]), 1: [(5, b"r1:1:0:"), (6, b"r1:1:1:")]}   # p1 starts at 5
    c = check_commits(logs, [{0: 4}, {1: 3}, {1: 6}, {0: 3}], {0: 2, 1: 6}, {})
    assert c.unreadable == [(0, 4, "beyond the log's end 3"), (1, 3, "offset 2 is not in the log")]
    assert c.lost == [(0, 3, 2)]                           # the group went back behind a commit
    assert not c.ok and not c.to_json()["ok"]
    assert check_commits(logs, [{1: 7}], {1: 9}, {}).ok      # ahead of the last acked one: fine


def test_what_the_consumer_was_given_must_be_the_logs_record():
    logs = {0: _log(0, [0, 1])}
    c = check_commits(logs, [], {}, {0: [(0, ("r1", 0)), (1, ("r1", 7)), (2, ("r1", 2))]})
    assert c.consumed == 3
    assert c.consumed_mismatch == [(0, 1, ("r1", 7), ("r1", 1)), (0, 2, ("r1", 2), "missing")]


def test_only_the_schedules_kills_may_kill_and_everything_runs_at_the_end():
    windows = [("storage-1", 100.0, 105.0), ("gateway-2", 200.0, 203.0)]
    deaths = [(100.2, "storage-1"), (105.0 + DEATH_SLACK_S - 0.1, "storage-1"), (150.0, "storage-2"),
              (201.0, "storage-1")]
    p = check_processes(deaths, windows, ["offset-manager-1"])
    assert p.deaths == 4
    assert p.unexpected == [(150.0, "storage-2"), (201.0, "storage-1")]
    assert p.dead_at_end == ["offset-manager-1"] and not p.ok
    v = verdict({"ok": True}, {"ok": True}, p, True)
    assert not v["ok"] and v["processes"]["unexpected"]
    assert not verdict({"ok": True}, {"ok": True}, check_processes([], [], []), False)["ok"]


def test_parse_seq():
    assert parse_seq(b"ab12:3:45:....") == ("ab12", 45)
    assert parse_seq(b"junk") is None and parse_seq(None) is None
