"""Leader-epoch truncation (KIP-101) with divergence detected in FETCH (KIP-320 / KIP-595).

Pure functions over an epoch cache's entries: a list of (epoch, start offset), both strictly
increasing (`core.leader_epoch.LeaderEpochCache.entries`, persisted as `leader-epoch-checkpoint`).

    follower                                     leader
    FETCH(fetch_offset = its LEO,
          last_fetched_epoch = its latest epoch,
          current_leader_epoch = the epoch it follows)
                                                 check_current_leader_epoch  -> FENCED / UNKNOWN
                                                 diverging_epoch: the end offset of that epoch
                                                 in ITS cache; beyond it (or the epoch unknown)
                                                 -> answer (diverging_epoch, end offset), no data
    follower_truncation_offset(...)  <-----------
    truncate, refetch

This replaces truncation to the follower's own high watermark, which loses committed data or
keeps divergent data (the 2013 Jepsen result, KIP-101's scenarios).
"""
from __future__ import annotations

from collections.abc import Sequence

from riverbed import errors

NONE = 0
FENCED_LEADER_EPOCH = errors.FencedLeaderEpochError.code
UNKNOWN_LEADER_EPOCH = errors.UnknownLeaderEpochError.code

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

EpochEntries = Sequence[tuple[int, int]]


def latest_epoch(entries: EpochEntries) -> int:
    """The epoch of the last batch in the log (UNDEFINED_EPOCH for a log without epochs)."""
    return entries[-1][0] if entries else UNDEFINED_EPOCH


def epoch_end_offset(entries: EpochEntries, requested_epoch: int,
                     log_end_offset: int) -> tuple[int, int]:
    """Kafka's LeaderEpochFileCache.endOffsetFor: (largest epoch <= requested, the start offset
    of the first epoch above it), or the log end offset when requested is the latest epoch.

    - requested is UNDEFINED, or larger than every epoch known -> (UNDEFINED, UNDEFINED)
    - requested is smaller than every epoch known -> (requested, start of the first epoch): the
      data before it is gone, the follower must not keep anything past that point.
    - a cache without entries (an empty log) -> (UNDEFINED, log end offset): nothing to keep
      beyond where this log ends.
    """
    if requested_epoch == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if not entries:
        return UNDEFINED_EPOCH, log_end_offset
    if requested_epoch == entries[-1][0]:
        return requested_epoch, log_end_offset
    if requested_epoch > entries[-1][0]:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    floor = None
    for epoch, start in entries:
        if epoch > requested_epoch:
            return (floor if floor is not None else requested_epoch), start
        floor = epoch
    raise AssertionError("unreachable: requested epoch below the latest has a higher entry")


def check_current_leader_epoch(current_leader_epoch: int, leader_epoch: int) -> int:
    """A follower's (or client's) view of the leader epoch against this leader's:
    older -> FENCED_LEADER_EPOCH (it must learn the new state), newer -> UNKNOWN_LEADER_EPOCH
    (this node has not learned it yet), -1 = not given."""
    if current_leader_epoch < 0:
        return NONE
    if current_leader_epoch < leader_epoch:
        return FENCED_LEADER_EPOCH
    if current_leader_epoch > leader_epoch:
        return UNKNOWN_LEADER_EPOCH
    return NONE


def diverging_epoch(entries: EpochEntries, log_end_offset: int, last_fetched_epoch: int,
                    fetch_offset: int, high_watermark: int) -> tuple[int, int] | None:
    """The leader's check of a follower's FETCH (Kafka Partition.fetchRecords): None if the
    follower's log agrees with this one up to fetch_offset, else (diverging_epoch,
    diverging_end_offset) to answer with (and no data).

    An epoch newer than every epoch here has no end offset; Kafka then answers "undefined" and
    the follower falls back to its own high watermark. The wire cannot tell (-1, -1) from "no
    divergence" (proto3), so the answer is (UNDEFINED_EPOCH, this leader's high watermark):
    the follower keeps only what is committed here. (Unreachable while controller epochs and
    the current_leader_epoch check hold: such a follower is answered UNKNOWN_LEADER_EPOCH.)"""
    if last_fetched_epoch < 0:
        return None      # a follower with no epochs: only the offset range check applies
    epoch, end = epoch_end_offset(entries, last_fetched_epoch, log_end_offset)
    if end == UNDEFINED_OFFSET:
        return UNDEFINED_EPOCH, high_watermark
    if end < fetch_offset or epoch < last_fetched_epoch:
        return epoch, end
    return None


def follower_truncation_offset(entries: EpochEntries, log_end_offset: int, high_watermark: int,
                               div_epoch: int, div_end_offset: int) -> int:
    """Where a follower truncates after the leader answered (div_epoch, div_end_offset)
    (Kafka AbstractFetcherThread.getOffsetTruncationState):

    - the leader gave no end offset: fall back to the high watermark (nothing better known);
    - the leader gave no epoch: its end offset, capped by ours;
    - we know the leader's epoch: min(its end offset, our end offset for that epoch, our LEO);
    - we do not: our end offset for the largest epoch below it (the next fetch asks again);
    - we have no epoch at or below it: the leader's end offset, capped by ours.
    """
    if div_end_offset == UNDEFINED_OFFSET:
        return min(high_watermark, log_end_offset)
    if div_epoch == UNDEFINED_EPOCH:
        return min(div_end_offset, log_end_offset)
    own_epoch, own_end = epoch_end_offset(entries, div_epoch, log_end_offset)
    if own_epoch == UNDEFINED_EPOCH or own_end == UNDEFINED_OFFSET:
        return min(div_end_offset, log_end_offset)
    if own_epoch != div_epoch:
        return min(own_end, log_end_offset)
    return min(own_end, div_end_offset, log_end_offset)
