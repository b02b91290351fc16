"""The soak's final check: pure functions over what the run recorded and read back (no I/O), so
they are tested directly (tests/unit/soak/test_soak_check.py).

    records   = check_logs(logs, [produced])               # tests/fault/verifiers.py: lost,
                                                           # duplicated, out of order
    commits   = check_commits(logs, commits, final_committed, consumed)
    processes = check_processes(deaths, down_windows, dead_at_end)
    verdict(records_json(records), commits.to_json(), processes, consumer_caught_up)

- records: every acknowledged record is in the log at its acknowledged offset, once, and
  acknowledged records' offsets grow with their sequence numbers (the producer is idempotent,
  so a duplicate is a failure too);
- commits: every offset the group consumer committed (and had acknowledged) is readable: at most
  the log's end, and the record before it is in the log; the group's committed offsets at the
  end (asked of the offset manager) are not behind the last acknowledged commit (a commit was
  not lost); every record the consumer was given is the one the log holds at that offset (it
  never read something that was later truncated away);
- processes: no process died except those the schedule killed, while it had them down, and
  every process runs at the end.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["CommitCheck", "ProcessCheck", "check_commits", "check_processes", "parse_seq",
           "records_json", "verdict"]

# a death seen this long around the schedule's own kill still counts as the kill's (the
# monitor polls; the runner records its times around the signal and the restart)
DEATH_SLACK_S = 2.0


def parse_seq(value: bytes | None) -> tuple[str, int] | None:
    """(run id, seq) of a verifying producer's value `b"<run>:<partition>:<seq>:..."`."""
    try:
        run, _, seq, _ = value.split(b":", 3)   # type: ignore[union-attr]
        return run.decode(), int(seq)
    except (AttributeError, ValueError, UnicodeDecodeError):
        return None


@dataclasses.dataclass
class CommitCheck:
    commits: int = 0                                             # acknowledged commits checked
    unreadable: list = dataclasses.field(default_factory=list)   # (partition, offset, why)
    lost: list = dataclasses.field(default_factory=list)         # (partition, last acked, final)
    consumed: int = 0                                            # records the consumer was given
    consumed_mismatch: list = dataclasses.field(default_factory=list)  # (partition, offset, saw, log)

    @property
    def ok(self) -> bool:
        return not self.unreadable and not self.lost and not self.consumed_mismatch

    def to_json(self) -> dict:
        return {"ok": self.ok, "commits": self.commits, "consumed": self.consumed,
                "unreadable": len(self.unreadable), "unreadable_first": self.unreadable[:5],
                "lost": len(self.lost), "lost_first": self.lost[:5],
                "consumed_mismatch": len(self.consumed_mismatch),
                "consumed_mismatch_first": self.consumed_mismatch[:5]}


def check_commits(logs: Mapping[int, Sequence[tuple[int, bytes | None]]],
                  commits: Iterable[Mapping[int, int]],
                  final_committed: Mapping[int, int],
                  consumed: Mapping[int, Iterable[tuple[int, tuple[str, int] | None]]]) -> CommitCheck:
    """`logs`: partition -> [(offset, value)] read from the beginning to the high watermark at
    the end; `commits`: the acknowledged commits in order (partition -> next offset to read);
    `final_committed`: the group's committed offsets asked at the end; `consumed`: partition ->
    [(offset, (run id, seq) of the value)] in the order the consumer was given them."""
    out = CommitCheck()
    at: dict[int, dict[int, tuple[str, int] | None]] = {}
    end: dict[int, int] = {}
    for p, log in logs.items():
        at[p] = {off: parse_seq(v) for off, v in log}
        end[p] = (log[-1][0] + 1) if log else 0
    last: dict[int, int] = {}
    for commit in commits:
        out.commits += 1
        for p, off in commit.items():
            if off > end.get(p, 0):
                out.unreadable.append((p, off, f"beyond the log's end {end.get(p, 0)}"))
            elif off > 0 and (off - 1) not in at.get(p, {}):
                out.unreadable.append((p, off, f"offset {off - 1} is not in the log"))
            last[p] = off
    for p, off in sorted(last.items()):
        final = final_committed.get(p, -1)
        if final < off:
            out.lost.append((p, off, final))
    for p, records in consumed.items():
        log = at.get(p, {})
        for off, seen in records:
            out.consumed += 1
            if off not in log or log[off] != seen:
                out.consumed_mismatch.append((p, off, seen, log.get(off, "missing")))
    return out


@dataclasses.dataclass
class ProcessCheck:
    deaths: int = 0                                               # deaths seen in all
    unexpected: list = dataclasses.field(default_factory=list)    # (t, name)
    dead_at_end: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unexpected and not self.dead_at_end

    def to_json(self) -> dict:
        return {"ok": self.ok, "deaths": self.deaths, "unexpected": self.unexpected,
                "dead_at_end": self.dead_at_end}


def check_processes(deaths: Iterable[tuple[float, str]],
                    down_windows: Iterable[tuple[str, float, float]],
                    dead_at_end: Iterable[str]) -> ProcessCheck:
    """`deaths`: (time, name) each time the monitor found a process gone; `down_windows`:
    (name, from, to) while the schedule had that process down (killed, not yet started again);
    a death outside every window of its process (with DEATH_SLACK_S) was not the schedule's."""
    windows: dict[str, list[tuple[float, float]]] = {}
    for name, t0, t1 in down_windows:
        windows.setdefault(name, []).append((t0 - DEATH_SLACK_S, t1 + DEATH_SLACK_S))
    out = ProcessCheck(dead_at_end=sorted(dead_at_end))
    for t, name in deaths:
        out.deaths += 1
        if not any(a <= t <= b for a, b in windows.get(name, ())):
            out.unexpected.append((t, name))
    return out


def records_json(v) -> dict:
    """A verifiers.Verification as the report's JSON; ok needs no duplicate either (the
    producer is idempotent)."""
    return {"acked": v.acked, "read": v.read, "lost": len(v.lost),
            "lost_first": [list(map(str, x)) for x in v.lost[:5]], "duplicates": v.duplicates,
            "out_of_order": len(v.out_of_order), "non_increasing_offsets": v.non_increasing_offsets,
            "unacked_written": v.unacked_written, "foreign": v.foreign,
            "ok": v.ok and v.duplicates == 0}


def verdict(records: Mapping, commits: Mapping, processes: ProcessCheck,
            consumer_caught_up: bool) -> dict:
    """One verdict from records_json(...), CommitCheck.to_json() and the process check."""
    ok = bool(records["ok"]) and bool(commits["ok"]) and processes.ok and consumer_caught_up
    return {"ok": ok, "records": dict(records), "commits": dict(commits),
            "processes": processes.to_json(), "consumer_caught_up": consumer_caught_up}
