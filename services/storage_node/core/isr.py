"""In-sync replica tracking on the leader (Kafka Partition.updateFollowerFetchState,
getOutOfSyncReplicas, isFollowerInSync). Pure: the shell passes now_ms in.

A follower is *caught up* at time t when a fetch it sent at t asked for an offset >= the
leader's log end offset at that time; or, when the fetch asked for an offset >= the leader's log
end offset at its *previous* fetch, it was caught up at the time of that previous fetch. The
leader removes from the ISR a follower whose log end differs from the leader's and that has not
been caught up for more than `replica.lag.time.max.ms`; it adds back a replica whose log end
has reached the high watermark and the start of the leader's current epoch.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = UNKNOWN_OFFSET      # its last fetch offset (-1: not heard from)
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0


def initial_follower_state(in_isr: bool, now_ms: int) -> FollowerState:
    """On becoming leader (Kafka resetReplicaState): ISR members count as caught up now, so a
    new leader does not drop them before they had a chance to fetch."""
    return FollowerState(UNKNOWN_OFFSET, now_ms if in_isr else 0, UNKNOWN_OFFSET, now_ms)


def update_follower_fetch_state(st: FollowerState, fetch_offset: int, leader_leo: int,
                                now_ms: int) -> None:
    if fetch_offset >= leader_leo:
        st.last_caught_up_ms = max(st.last_caught_up_ms, now_ms)
    elif st.last_fetch_leader_leo >= 0 and fetch_offset >= st.last_fetch_leader_leo:
        st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
    st.log_end_offset = fetch_offset
    st.last_fetch_leader_leo = leader_leo
    st.last_fetch_ms = now_ms


def out_of_sync_replicas(leader_id: int, isr: Iterable[int], leader_leo: int,
                         followers: Mapping[int, FollowerState], now_ms: int,
                         replica_lag_time_max_ms: int) -> tuple[int, ...]:
    """ISR members (the leader excluded) to drop: log end != the leader's and not caught up
    within replica_lag_time_max_ms."""
    out = []
    for node in isr:
        if node == leader_id:
            continue
        st = followers.get(node)
        if st is None:
            out.append(node)        # never known: cannot be in sync
            continue
        if st.log_end_offset != leader_leo and now_ms - st.last_caught_up_ms > replica_lag_time_max_ms:
            out.append(node)
    return tuple(out)


def is_follower_in_sync(st: FollowerState, high_watermark: int, leader_epoch_start_offset: int
                        ) -> bool:
    """May a replica outside the ISR join it? Its log end has reached the high watermark and
    the first offset of the leader's current epoch (so it has every batch of older epochs that
    the leader kept)."""
    return st.log_end_offset >= 0 and st.log_end_offset >= high_watermark \
        and st.log_end_offset >= leader_epoch_start_offset


def compute_high_watermark(leader_id: int, leader_leo: int, isr: Iterable[int],
                           followers: Mapping[int, FollowerState]) -> int:
    """min log end over the ISR, the leader's own included; a member not heard from yet counts
    as UNKNOWN_OFFSET (-1), which holds the high watermark where it is."""
    hw = leader_leo
    for node in isr:
        if node == leader_id:
            continue
        st = followers.get(node)
        hw = min(hw, st.log_end_offset if st is not None else UNKNOWN_OFFSET)
    return hw
