"""Partition reassignment, seed 002's algorithm, as one pure step function.

RAR = the reassigned (target) replicas, OAR = the original ones. A reassignment moves through

    state      condition (on the partition as it is now)           what the controller does
    ---------  ---------------------------------------------------  ----------------------------
    EXPAND     RAR not all in the assignment                        assignment := OAR + (RAR-OAR),
                                                                    leader epoch +1, LEADER_AND_ISR
                                                                    to every replica (the new ones
                                                                    start fetching)
    WAIT       RAR all assigned, not all in the ISR, or no live      nothing: ISR expansions come
               RAR member in the ISR to lead                        from the leader (ALTER_PARTITION)
    COMPLETE   RAR all assigned and in the ISR                      leader from RAR if the current
                                                                    one is not in RAR (or not live),
                                                                    assignment := RAR, ISR := ISR∩RAR,
                                                                    leader epoch +1, LEADER_AND_ISR
                                                                    to RAR, STOP_REPLICA(delete) to
                                                                    OAR-RAR, entry removed
    DONE       assignment == RAR                                    entry removed

`next_step` is re-evaluated whenever something may have changed (an ISR commit, a node up or
down, the tick, a new controller), so each step is idempotent and a successor controller that
reads /admin/reassign_partitions resumes from wherever its predecessor stopped: the assignment
znode (OAR, or OAR + RAR) says which step is next.
"""
from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass

NO_LEADER = -1


class Step(enum.Enum):
    EXPAND = "expand"
    WAIT = "wait"
    COMPLETE = "complete"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Decision:
    step: Step
    assignment: tuple[int, ...] = ()     # EXPAND / COMPLETE: the assignment to write
    leader: int = NO_LEADER              # COMPLETE: the leader after the move
    isr: tuple[int, ...] = ()            # COMPLETE: the ISR after the move
    removed: tuple[int, ...] = ()        # COMPLETE: OAR - RAR (to receive STOP_REPLICA)


def next_step(current: Sequence[int], target: Sequence[int], isr: Collection[int], leader: int,
              eligible: Collection[int]) -> Decision:
    """`current` is the partition's assignment now, `target` RAR, `isr`/`leader` its state,
    `eligible` the nodes that may lead (live and not shutting down)."""
    current, target = tuple(current), tuple(target)
    if current == target:
        return Decision(Step.DONE)
    missing = tuple(r for r in target if r not in current)
    if missing:
        return Decision(Step.EXPAND, assignment=current + missing)
    if not set(target) <= set(isr):
        return Decision(Step.WAIT)
    if leader in target and leader in eligible:
        new_leader = leader
    else:
        candidates = [r for r in target if r in isr and r in eligible]
        if not candidates:
            return Decision(Step.WAIT)
        new_leader = candidates[0]
    return Decision(Step.COMPLETE, assignment=target, leader=new_leader,
                    isr=tuple(r for r in target if r in isr),
                    removed=tuple(r for r in current if r not in target))


def adding(current: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    return tuple(r for r in target if r not in current)


def removing(original: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    return tuple(r for r in original if r not in target)
