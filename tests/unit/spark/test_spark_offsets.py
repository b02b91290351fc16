"""Offset planning of the riverbed data source: resolving specs, ranges, minPartitions,
maxOffsetsPerTrigger and failOnDataLoss decisions (pure; no Spark, no network)."""
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from riverbed import TopicPartition as TP
from riverbed.spark.offsets import (
    DataLoss,
    OffsetRange,
    batch_ranges,
    from_stream_offset,
    on_out_of_range,
    rate_limit,
    resolve_offsets,
    split_ranges,
    stream_ranges,
    to_json,
    to_stream_offset,
)
from riverbed.spark.options import OffsetSpec, OptionError

TPS = [TP("t", 0), TP("t", 1), TP("u", 0)]
EARLIEST = {TP("t", 0): 0, TP("t", 1): 5, TP("u", 0): 0}
LATEST = {TP("t", 0): 100, TP("t", 1): 50, TP("u", 0): 0}


def by_time(wanted):
    # t-0: timestamps 1000 * offset; others have no record that late
    return {tp: (ts // 1000 if tp == TP("t", 0) and ts // 1000 < 100 else None)
            for tp, ts in wanted.items()}


def resolve(spec, no_match="error", **kw):
    return resolve_offsets(spec, TPS, EARLIEST, LATEST, by_time, no_match=no_match, **kw)


def test_spark_json_round_trip():
    offsets = {TP("t", 1): 7, TP("t", 0): 3, TP("u", 0): 0}
    assert to_json(offsets) == '{"t":{"0":3,"1":7},"u":{"0":0}}'
    assert from_stream_offset(json.loads(to_json(offsets))) == offsets
    assert to_stream_offset({}) == {}


def test_resolve_specs():
    assert resolve(OffsetSpec("earliest")) == EARLIEST
    assert resolve(OffsetSpec("latest")) == LATEST
    spec = OffsetSpec("offsets", {TP("t", 0): 7, TP("t", 1): -2, TP("u", 0): -1}, option="o")
    assert resolve(spec) == {TP("t", 0): 7, TP("t", 1): 5, TP("u", 0): 0}
    assert resolve(OffsetSpec("timestamp", timestamp=42_000), no_match="latest") == {
        TP("t", 0): 42, TP("t", 1): 50, TP("u", 0): 0}
    spec = OffsetSpec("timestamps", {TP("t", 0): 3000}, option="o")
    assert resolve(spec, require_all=False) == {TP("t", 0): 3, TP("t", 1): 5, TP("u", 0): 0}


def test_resolve_errors_name_the_option_and_partition():
    with pytest.raises(OptionError, match="startingTimestamp: no record of t-1"):
        resolve(OffsetSpec("timestamp", timestamp=1, option="startingTimestamp"))
    with pytest.raises(OptionError, match="o gives no offset for t-1"):
        resolve(OffsetSpec("offsets", {TP("t", 0): 1, TP("u", 0): 1}, option="o"))
    with pytest.raises(OptionError, match="names t-9"):
        resolve(OffsetSpec("offsets", {TP("t", 9): 1}, option="o"))


def test_batch_ranges_refuse_a_start_after_the_end():
    assert batch_ranges({TP("t", 0): 3}, {TP("t", 0): 9}) == [OffsetRange("t", 0, 3, 9)]
    with pytest.raises(OptionError, match="t-0: starting offset 10 is after the ending offset 9"):
        batch_ranges({TP("t", 0): 10}, {TP("t", 0): 9})


def test_stream_ranges_and_data_loss_cases():
    start = {TP("t", 0): 10, TP("t", 1): 40, TP("gone", 0): 3}
    end = {TP("t", 0): 20, TP("t", 1): 30, TP("t", 2): 8, TP("t", 3): 4, TP("new", 0): 6}
    ranges, losses = stream_ranges(start, end, {TP("t", 2): 0, TP("t", 3): 2})
    assert ranges == [OffsetRange("t", 0, 10, 20), OffsetRange("t", 2, 0, 8),
                      OffsetRange("t", 3, 2, 4)]
    assert losses == ["partitions gone-0 are gone (topic deleted?)",
                      "cannot find the earliest offset of the new partition new-0",
                      "the offset of t-1 went from 40 back to 30",
                      "added partition t-3 starts from 2 instead of 0"]
    assert stream_ranges({TP("t", 0): 5}, {TP("t", 0): 5}, {}) == ([], [])
    err = DataLoss(losses[0])
    assert "failOnDataLoss to false" in str(err) and err.detail == losses[0]


def test_split_ranges_like_sparks_range_calculator():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]                # empty ranges dropped
    assert split_ranges(ranges, 2) == ranges[:2]                   # already enough
    got = split_ranges(ranges, 10)
    # t-0: round(100/110*10) = 9 parts of 11 or 12; t-1: round(0.9) = 1 part
    assert [r for r in got if r.partition == 0] == [
        OffsetRange("t", 0, a, b) for a, b in
        [(0, 11), (11, 22), (22, 33), (33, 44), (44, 55), (55, 66), (66, 77), (77, 88), (88, 100)]]
    assert [r for r in got if r.partition == 1] == [OffsetRange("t", 1, 0, 10)]
    assert split_ranges([OffsetRange("t", 0, 0, 3)], 8) == [
        OffsetRange("t", 0, 0, 1), OffsetRange("t", 0, 1, 2), OffsetRange("t", 0, 2, 3)]


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=6), st.integers(1, 50))
def test_split_ranges_cover_each_range_exactly(sizes, min_partitions):
    ranges = [OffsetRange("t", p, 10, 10 + n) for p, n in enumerate(sizes)]
    got = split_ranges(ranges, min_partitions)
    for r in ranges:
        parts = [g for g in got if g.partition == r.partition]
        if r.size == 0:
            assert parts == []
            continue
        assert parts[0].from_offset == r.from_offset and parts[-1].until_offset == r.until_offset
        assert all(a.until_offset == b.from_offset for a, b in zip(parts, parts[1:]))
        assert all(p.size > 0 for p in parts)


def test_rate_limit_shares_the_limit_in_proportion():
    start = {TP("t", 0): 0, TP("t", 1): 100, TP("t", 2): 7}
    latest = {TP("t", 0): 900, TP("t", 1): 200, TP("t", 2): 7}
    assert rate_limit(start, latest, 10_000) == latest          # everything fits
    end = rate_limit(start, latest, 100)
    assert end == {TP("t", 0): 90, TP("t", 1): 110, TP("t", 2): 7}
    end = rate_limit(start, latest, 7)        # shares 6.3 and 0.7: remainders decide
    assert end == {TP("t", 0): 6, TP("t", 1): 101, TP("t", 2): 7}


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)), min_size=1, max_size=8),
       st.integers(1, 10**5))
def test_rate_limit_never_exceeds_the_limit_or_moves_back(parts, limit):
    start = {TP("t", i): s for i, (s, _) in enumerate(parts)}
    latest = {TP("t", i): s + n for i, (s, n) in enumerate(parts)}
    end = rate_limit(start, latest, limit)
    total = sum(latest[tp] - start[tp] for tp in start)
    taken = sum(end[tp] - start[tp] for tp in start)
    assert taken == min(limit, total)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)


def test_out_of_range_decisions():
    rng = OffsetRange("t", 0, 10, 50)
    d = on_out_of_range(rng, 10, earliest=30, latest=80)        # retention deleted 10..29
    assert d.resume_at == 30 and "offsets 10 to 29 are no longer in the log" in d.loss
    d = on_out_of_range(rng, 10, earliest=60, latest=80)        # the whole range is gone
    assert d.resume_at is None and "offsets 10 to 49" in d.loss
    d = on_out_of_range(rng, 20, earliest=0, latest=35)         # truncated below the end
    assert d.resume_at is None and "offsets 35 to 49" in d.loss and "ends at 35" in d.loss
    with pytest.raises(ValueError, match="not out of range"):
        on_out_of_range(rng, 20, earliest=0, latest=80)
