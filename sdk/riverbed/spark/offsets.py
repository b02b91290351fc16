"""Offset planning for the `riverbed` data source: pure functions, no Spark, no network.

The driver looks offsets up (earliest, latest = high watermark, by time) and hands them here;
these functions decide what to read:

- `resolve_offsets`: an OffsetSpec (earliest, latest, Spark's JSON, timestamps) -> concrete
  offsets per partition;
- `batch_ranges` / `stream_ranges`: [from, until) per partition, with the data-loss cases of
  Spark's Kafka source (partitions gone, offsets that went backwards, new partitions that do
  not start at 0) reported as messages for `failOnDataLoss` to raise or log;
- `split_ranges`: Spark's KafkaOffsetRangeCalculator for `minPartitions`;
- `rate_limit`: `maxOffsetsPerTrigger` shared over partitions in proportion to what each has;
- `on_out_of_range`: what an executor does when its range's start was deleted or its end is
  past the log (retention, truncation);
- Spark's JSON offsets ({"topic":{"0":23}}) in and out: the stream's checkpointed offsets have
  the same shape as Spark's Kafka source's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from riverbed.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError
from riverbed.structs import TopicPartition

__all__ = ["OffsetRange", "DataLoss", "resolve_offsets", "batch_ranges", "stream_ranges",
           "split_ranges", "rate_limit", "on_out_of_range", "to_json", "to_stream_offset",
           "from_stream_offset", "DATA_LOSS_HINT"]

PartitionOffsets = Mapping[TopicPartition, int]

DATA_LOSS_HINT = ("Some data may have been lost because it is no longer in the topic (retention, "
                  "deletion, truncation). If you want your query to go on in that case, set the "
                  "source option failOnDataLoss to false.")


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one partition: one Spark input partition."""
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


class DataLoss(Exception):
    """Records a query should have read are gone. Raised when failOnDataLoss is true (the
    default); otherwise the message is logged and the query goes on."""

    def __init__(self, message: str):
        super().__init__(f"{message}. {DATA_LOSS_HINT}")
        self.detail = message


# -- Spark's JSON offsets --------------------------------------------------------------------

def to_stream_offset(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """{TopicPartition: offset} -> {"topic": {"0": offset}} (sorted; what Spark checkpoints)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_stream_offset(obj: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in obj.items()
            for p, o in parts.items()}


def to_json(offsets: PartitionOffsets) -> str:
    """Spark's JSON form, e.g. for startingOffsets: {"t":{"0":23,"1":42}}."""
    return json.dumps(to_stream_offset(offsets), separators=(",", ":"))


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


# -- resolving specs -------------------------------------------------------------------------

def resolve_offsets(spec: OffsetSpec, tps: Iterable[TopicPartition], earliest: PartitionOffsets,
                    latest: PartitionOffsets,
                    by_time: Callable[[dict[TopicPartition, int]], Mapping[TopicPartition, int | None]],
                    *, no_match: str, require_all: bool = True) -> dict[TopicPartition, int]:
    """Concrete offsets for the partitions `tps`. `by_time({tp: ms})` gives the first offset
    whose timestamp is >= ms (None when none). no_match: what a timestamp with no record at or
    after it gives: "latest" (ending offsets; startingOffsetsByTimestampStrategy=latest) or
    "error". require_all: JSON offsets must name every partition read, as in Spark (new
    partitions of a stream start at earliest instead)."""
    tps = sorted(set(tps))
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    if spec.kind in ("offsets", "timestamps"):
        unknown = sorted(set(spec.offsets) - set(tps))
        if unknown:
            raise OptionError(f"option {spec.option} names {_name(unknown[0])}, which is not a "
                              "partition this query reads")
        missing = [tp for tp in tps if tp not in spec.offsets]
        if missing and require_all:
            raise OptionError(
                f"option {spec.option} gives no offset for {_name(missing[0])}: name every "
                f"partition the query reads ({len(tps)}), with -2 for earliest and -1 for latest")
    if spec.kind == "offsets":
        out = {}
        for tp in tps:
            o = spec.offsets.get(tp, EARLIEST)
            out[tp] = earliest[tp] if o == EARLIEST else latest[tp] if o == LATEST else o
        return out
    if spec.kind == "timestamp":
        wanted = {tp: spec.timestamp for tp in tps}
    elif spec.kind == "timestamps":
        wanted = {tp: spec.offsets[tp] for tp in tps if tp in spec.offsets}
    else:
        raise AssertionError(f"offset spec kind {spec.kind!r}")
    found = by_time(dict(wanted)) if wanted else {}
    out = {}
    for tp in tps:
        if tp not in wanted:
            out[tp] = earliest[tp]
            continue
        off = found.get(tp)
        if off is None:
            if no_match == "error":
                raise OptionError(
                    f"option {spec.option}: no record of {_name(tp)} has a timestamp at or "
                    f"after {wanted[tp]} (set startingOffsetsByTimestampStrategy=latest to "
                    "start at the latest offset instead)")
            off = latest[tp]
        out[tp] = off
    return out


# -- ranges ------------------------------------------------------------------------------------

def batch_ranges(start: PartitionOffsets, end: PartitionOffsets) -> list[OffsetRange]:
    """One range per partition of a batch query; a start after its end is an error (Spark's
    'beginning offset ... is after the ending offset')."""
    ranges = []
    for tp in sorted(end):
        s, e = start[tp], end[tp]
        if s > e:
            raise OptionError(
                f"{_name(tp)}: starting offset {s} is after the ending offset {e}: the offsets "
                "given are wrong, or the topic lost records")
        ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
    return ranges


def stream_ranges(start: PartitionOffsets, end: PartitionOffsets,
                  new_partition_start: PartitionOffsets) -> tuple[list[OffsetRange], list[str]]:
    """A micro-batch's ranges from Spark's start and end offsets, as Spark's Kafka source plans
    them: a partition in end but not in start is new and starts where the log starts
    (`new_partition_start`, looked up now; not 0 means records were lost); a partition in start
    but not in end is gone; an end before its start means the partition went backwards
    (deleted and recreated, or truncated): nothing is read from it. Returns (ranges, data-loss
    messages)."""
    losses: list[str] = []
    gone = sorted(set(start) - set(end))
    if gone:
        losses.append(f"partitions {', '.join(map(_name, gone))} are gone (topic deleted?)")
    ranges = []
    for tp in sorted(end):
        if tp in start:
            s = start[tp]
        elif tp in new_partition_start:
            s = new_partition_start[tp]
            if s != 0:
                losses.append(f"added partition {_name(tp)} starts from {s} instead of 0")
        else:
            losses.append(f"cannot find the earliest offset of the new partition {_name(tp)}")
            continue
        e = end[tp]
        if e < s:
            losses.append(f"the offset of {_name(tp)} went from {s} back to {e}")
            continue
        if e > s:
            ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
    return ranges, losses


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: empty ranges dropped; with fewer ranges than
    min_partitions, each is cut into round(size / total * min_partitions) (at least 1) parts of
    near-equal size."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(int(r.size * min_partitions / total + 0.5), 1)   # Scala's math.round
        remaining, start = r.size, r.from_offset
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            end = min(start + this, r.until_offset)
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


def rate_limit(start: PartitionOffsets, latest: PartitionOffsets, limit: int
               ) -> dict[TopicPartition, int]:
    """End offsets for a micro-batch of at most `limit` records: each partition gets a share of
    the limit in proportion to what it has to read (largest remainders get the leftover
    records, ties by partition), never more than `limit` in all. Spark's Kafka source rounds
    small shares up and can go over the limit by up to a record per partition; this does not.
    Partitions missing from start are left at their latest offset (the caller puts new
    partitions in start at their earliest offset)."""
    if limit < 1:
        raise ValueError(f"limit {limit} must be >= 1")
    sizes = {tp: latest[tp] - start[tp] for tp in latest if tp in start and latest[tp] > start[tp]}
    total = sum(sizes.values())
    out = dict(latest)
    if total <= limit:
        return out
    shares = {tp: (limit * size) // total for tp, size in sizes.items()}
    left = limit - sum(shares.values())
    by_remainder = sorted(sizes, key=lambda tp: (-((limit * sizes[tp]) % total), tp))
    for tp in by_remainder[:left]:
        shares[tp] += 1
    for tp, share in shares.items():
        out[tp] = start[tp] + min(share, sizes[tp])
    return out


# -- executors -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutOfRange:
    """What to do when a range cannot be read where it stands: go on at `resume_at` (None: the
    range is finished), and the data-loss message."""
    resume_at: int | None
    loss: str


def on_out_of_range(rng: OffsetRange, position: int, earliest: int, latest: int) -> OutOfRange:
    """Offsets [position, until) of `rng` cannot all be read: the log now starts at `earliest`
    and ends (high watermark) at `latest`. Records before `earliest` were deleted (retention):
    go on from there. Records at and after `latest` are gone (the log was truncated below the
    range's end): the range ends there."""
    until = rng.until_offset
    name = f"{rng.topic}-{rng.partition}"
    if position < earliest:
        lost_until = min(earliest, until)
        resume = earliest if earliest < until else None
        return OutOfRange(resume, f"{name}: offsets {position} to {lost_until - 1} are no longer "
                                  f"in the log (it starts at {earliest})")
    if latest < until:
        return OutOfRange(None, f"{name}: offsets {max(position, latest)} to {until - 1} are no "
                                f"longer in the log (it ends at {latest})")
    raise ValueError(f"{name}: offset {position} is in [{earliest}, {latest}): not out of range")
