"""Eligible Leader Replicas (KIP-966, Kafka 4's "ELR"): which replicas outside the ISR may still
be elected leader without losing a committed record. Pure functions over a partition's state;
the controller applies them on every partition-state write (controller.py `_write_state`).

Why it is safe. A storage node advances a partition's high watermark only while its ISR has at
least min.insync.replicas members (KIP-966's strict min ISR; storage_node core/isr.py), and
acks=all is answered only then. So when the ISR shrinks below min.insync.replicas, every
committed record is on each replica that was in the ISR at that moment, and nothing is
committed until the ISR is back at min.insync.replicas. Those replicas stay *eligible*:

- ELR: when a write leaves the ISR below min.insync.replicas (the effective one:
  min(min.insync.replicas, replication factor), as Kafka), the replicas of the old ISR and the
  old ELR that are not in the new ISR, less those known to have shut down uncleanly (they may
  have lost what their page cache held). When the ISR is at min.insync.replicas or more, the
  ELR is empty: a replica that left an ISR that was still large enough may lack records
  committed after it left.
- LastKnownElr: the replicas that were eligible since the ISR fell below min.insync.replicas
  and no longer are (an unclean shutdown), neither in the ISR nor in the ELR: for an operator
  deciding on an unclean election. Emptied with the ELR.
- Election (`elect`): the first live replica, in replica order, of the ISR; else of the ELR
  (a clean election: the new ISR is that replica alone, which moves into it from the ELR, and
  the old leader joins the ELR); else, with unclean.leader.election.enable, any live replica
  (ISR = it, ELR and LastKnownElr emptied: what they promised no longer holds); else none.
  With no live ISR member the ISR itself is kept as it was (so its last member can lead again
  when it returns, as before ELR).
- A change of only the ELR or LastKnownElr (a member shut down uncleanly, min.insync.replicas
  changed) does not bump the leader epoch; the state znode's version moves as for any write.
- Changing a topic's min.insync.replicas empties its partitions' ELR and LastKnownElr.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

MIN_INSYNC_REPLICAS = "min.insync.replicas"


def min_isr(topic_configs: Mapping[str, str], default: int, replication_factor: int) -> int:
    """The effective min.insync.replicas of a partition: the topic's override (else the
    cluster default), at most its replication factor (Kafka's getTopicEffectiveMinIsr)."""
    raw = topic_configs.get(MIN_INSYNC_REPLICAS)
    value = default
    if raw is not None:
        try:
            value = int(raw)
        except ValueError:
            pass
    return max(1, min(value, replication_factor)) if replication_factor > 0 else max(1, value)


def in_replica_order(members: Iterable[int], replicas: tuple[int, ...]) -> tuple[int, ...]:
    """`members` in replica order (then any others, sorted: replicas that left the assignment
    are dropped by the caller)."""
    s = set(members)
    return tuple(r for r in replicas if r in s) + tuple(sorted(s - set(replicas)))


def next_elr(old_isr: tuple[int, ...], old_elr: tuple[int, ...],
             old_last_known: tuple[int, ...], new_isr: tuple[int, ...], min_insync: int,
             replicas: tuple[int, ...], unclean_shutdown: Iterable[int] = ()
             ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(ELR, LastKnownElr) after the ISR goes from `old_isr` to `new_isr` (Kafka's
    PartitionChangeBuilder.maybePopulateTargetElr). Only replicas of the partition stay."""
    if len(new_isr) >= min_insync:
        return (), ()
    new = set(new_isr)
    unclean = set(unclean_shutdown)
    assigned = set(replicas)
    candidates = set(old_elr) | set(old_isr)
    elr = {r for r in candidates if r not in new and r not in unclean and r in assigned}
    last = {r for r in candidates | set(old_last_known)
            if r not in new and r not in elr and r in assigned}
    return in_replica_order(elr, replicas), in_replica_order(last, replicas)


@dataclass(frozen=True, slots=True)
class Election:
    """The outcome of `elect`: the leader (-1 = none), the ISR to write, and how it was chosen:
    "isr", "elr" (clean, from the eligible leader replicas), "unclean", or "" (no leader)."""
    leader: int
    isr: tuple[int, ...]
    how: str


def elect(replicas: tuple[int, ...], isr: tuple[int, ...], elr: tuple[int, ...],
          live: Iterable[int] | Mapping, *, unclean_enabled: bool,
          prefer: Callable[[list[int]], list[int]] = lambda cands: cands) -> Election:
    """Choose a leader among `live` replicas (see the module doc). `prefer` orders candidates
    (the controller puts nodes that are shutting down last)."""
    live_isr = [r for r in replicas if r in isr and r in live]
    if live_isr:
        return Election(prefer(live_isr)[0], tuple(r for r in isr if r in live), "isr")
    live_elr = [r for r in replicas if r in elr and r in live]
    if live_elr:
        leader = prefer(live_elr)[0]
        return Election(leader, (leader,), "elr")
    live_any = [r for r in replicas if r in live]
    if unclean_enabled and live_any:
        leader = prefer(live_any)[0]
        return Election(leader, (leader,), "unclean")
    return Election(-1, isr, "")
