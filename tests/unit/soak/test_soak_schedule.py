"""The soak's schedule generator (tests/soak/soak_schedule.py): pure and seeded."""
from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "soak"))

from soak_schedule import KINDS, SETTLE_S, Fault, describe, generate  # noqa: E402

TARGETS = {"sigkill": ["controller-1", "storage-1", "storage-2"], "sigstop": ["gateway-1", "storage-3"],
           "gateway_kill": ["gateway-1", "gateway-2"], "full_disk": ["storage-1"]}


def test_same_seed_same_schedule_and_another_seed_another():
    a = generate(7, 600, TARGETS)
    assert a == generate(7, 600, TARGETS)
    assert a != generate(8, 600, TARGETS)


def test_one_fault_at_a_time_every_10_to_20_s_with_calm_after_each():
    faults = generate(1, 3600, TARGETS)
    assert 3600 / 20 - 2 <= len(faults) <= 3600 / 10
    assert 10 <= faults[0].at_s <= 20                       # a first gap before the first one
    for a, b in zip(faults, faults[1:]):
        assert 10 <= b.at_s - a.at_s <= 20
        assert b.at_s - a.end_s >= SETTLE_S - 1e-9           # undone, then calm, then the next
    assert [f.index for f in faults] == list(range(len(faults)))
    assert faults[-1].end_s <= 3600 - SETTLE_S


def test_kinds_targets_and_durations_come_from_their_tables():
    faults = generate(3, 3600, TARGETS)
    assert set(describe(faults)) == set(TARGETS)             # every kind shows up over an hour
    for f in faults:
        assert f.target in TARGETS[f.kind]
        lo, hi = KINDS[f.kind].duration_s
        # the cap (the gap less the calm) is at least 5 s, no kind's shortest is longer
        assert lo <= f.duration_s <= hi


def test_kinds_without_targets_are_left_out_and_nothing_when_too_short():
    faults = generate(5, 600, {**TARGETS, "network_cut": [], "slow_link": []})
    assert not {"network_cut", "slow_link"} & {f.kind for f in faults}
    assert generate(5, 12, TARGETS) == []                   # shorter than the first gap + calm
    assert generate(5, 600, {}) == []


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError, match="unknown fault kind"):
        generate(1, 60, {"power_cut": ["h1"]})
    with pytest.raises(ValueError, match="gap_s"):
        generate(1, 60, TARGETS, gap_s=(20, 10))
    with pytest.raises(ValueError, match="calm"):
        generate(1, 60, TARGETS, gap_s=(5, 6))


def test_to_json_and_describe():
    f = Fault(0, 12.34567, "sigkill", "storage-1", 3.21098)
    assert f.to_json() == {"index": 0, "at_s": 12.346, "kind": "sigkill", "target": "storage-1",
                           "duration_s": 3.211}
    assert describe([f, f]) == {"sigkill": 2}
