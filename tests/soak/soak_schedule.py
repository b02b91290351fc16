"""The soak's fault schedule: pure and seeded (no clock, no I/O), so a run is replayed by its seed.

    faults = generate(seed=7, duration_s=600, targets={"sigkill": ["storage-1", ...], ...})

One fault at a time: fault i starts `gap` seconds after fault i-1 started (gap uniform in
`gap_s`, 10-20 s by default; the first one gap after the start) and lasts a duration drawn from
its kind's range, cut so that at least SETTLE_S seconds of calm follow it before the next one
(the cluster recovers between faults, as an operator's incidents come one after another). No
fault starts so late that it would not end SETTLE_S before the soak does.

Each fault picks its kind uniformly among the kinds that have targets (a target set is what the
runner found available: a local fleet has no network cuts, a machine without loop devices no
full disks), then a target uniformly among that kind's.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence

__all__ = ["Fault", "KINDS", "SETTLE_S", "generate", "describe"]

SETTLE_S = 5.0


@dataclasses.dataclass(frozen=True)
class KindSpec:
    what: str                        # for people: what the fault does to its target
    duration_s: tuple[float, float]  # how long it lasts before it is undone


KINDS: dict[str, KindSpec] = {
    "sigkill": KindSpec("SIGKILL a service process; start it again after the duration", (2.0, 8.0)),
    "sigstop": KindSpec("SIGSTOP a process; SIGCONT after the duration", (2.0, 8.0)),
    "gateway_kill": KindSpec("SIGKILL a gateway (the clients' way in); start it again after the "
                             "duration", (2.0, 8.0)),
    "full_disk": KindSpec("fill a storage node's data disk past log.dir.free.bytes.min; free it "
                          "after the duration", (3.0, 10.0)),
    "network_cut": KindSpec("cut a host off from every other host and the clients (blackhole "
                            "routes); heal after the duration", (3.0, 10.0)),
    "slow_link": KindSpec("a host's link through a 256 kbit/s token bucket both ways (tc tbf); "
                          "removed after the duration", (5.0, 12.0)),
}


@dataclasses.dataclass(frozen=True)
class Fault:
    index: int           # 0-based place in the schedule
    at_s: float          # planned start, seconds after the soak's start
    kind: str            # a key of KINDS
    target: str          # a process name (sigkill, sigstop, gateway_kill, full_disk) or a host
    duration_s: float    # how long the fault holds before it is undone

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def to_json(self) -> dict:
        return {"index": self.index, "at_s": round(self.at_s, 3), "kind": self.kind,
                "target": self.target, "duration_s": round(self.duration_s, 3)}


def generate(seed: int, duration_s: float, targets: Mapping[str, Sequence[str]], *,
             gap_s: tuple[float, float] = (10.0, 20.0)) -> list[Fault]:
    """The schedule for a soak of `duration_s` seconds over `targets` (kind -> targets; kinds
    with none are left out). Same arguments, same schedule. Raises ValueError on an unknown
    kind or a gap range that leaves no room for a fault after SETTLE_S."""
    unknown = sorted(set(targets) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    lo, hi = gap_s
    if not 0 < lo <= hi:
        raise ValueError(f"gap_s={gap_s}: expected 0 < low <= high")
    if lo <= SETTLE_S:
        raise ValueError(f"gap_s={gap_s}: the shortest gap must exceed the {SETTLE_S:.0f} s of calm "
                         "after each fault")
    if duration_s < 0:
        raise ValueError(f"duration_s={duration_s}: must be >= 0")
    kinds = sorted(k for k, ts in targets.items() if ts)
    rng = random.Random(seed)
    faults: list[Fault] = []
    t = rng.uniform(lo, hi)
    while kinds:
        gap = rng.uniform(lo, hi)          # to the next fault's start
        kind = rng.choice(kinds)
        target = rng.choice(sorted(targets[kind]))
        d_lo, d_hi = KINDS[kind].duration_s
        duration = min(rng.uniform(d_lo, d_hi), gap - SETTLE_S)
        if t + duration > duration_s - SETTLE_S:
            break
        faults.append(Fault(len(faults), t, kind, target, duration))
        t += gap
    return faults


def describe(faults: Sequence[Fault]) -> dict[str, int]:
    """How many faults of each kind."""
    out: dict[str, int] = {}
    for f in faults:
        out[f.kind] = out.get(f.kind, 0) + 1
    return dict(sorted(out.items()))
