"""Group states (Kafka's GroupState) and the one table of allowed transitions (STYLE §4).

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                  │  ▲                                                  │
      └──no members left─┘  └──leave, expiry, new member, metadata, failed write┤
                            ◀────────────────────── Stable ◀──generation written┘
    any ──shard unloaded / group expired──▶ Dead

Riverbed: CompletingRebalance = the new generation and its assignment are computed and being
written to __consumer_offsets; joins and syncs are answered once the write is acknowledged.
"""
from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState

# from-state -> the states it may move to.
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.PREPARING_REBALANCE: frozenset({_S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.DEAD}),
    _S.STABLE: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.DEAD: frozenset({_S.DEAD}),
}


class IllegalTransition(AssertionError):
    """A bug: the core tried a transition the table does not allow."""


def check_transition(src: GroupState, dst: GroupState) -> None:
    if dst not in TRANSITIONS[src]:
        raise IllegalTransition(f"group state {src.value} -> {dst.value} is not allowed")
