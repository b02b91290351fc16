"""Pure storage decisions: index lookups, roll, retention, recovery cut, cleaner plan, checkpoints."""
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riverbed.records import build_batch, set_base_offset
from services.storage_node.core import checkpoints, log_policy
from services.storage_node.core import offset_index as oi
from services.storage_node.core.leader_epoch import LeaderEpochCache
from services.storage_node.core.log_policy import SegmentInfo


@given(st.lists(st.integers(0, 10_000), unique=True, max_size=60), st.integers(-5, 10_010))
@settings(max_examples=60)
def test_offset_lookup_is_floor_search(rels, target):
    rels.sort()
    buf = b"".join(oi.OFFSET_ENTRY.pack(r, r * 10) for r in rels) + bytes(80)
    assert oi.count_offset_entries(buf, len(buf) // 8) == (0 if rels == [0] else len(rels))
    expected = max((r for r in rels if r <= target), default=None)
    got = oi.lookup_offset(buf, len(rels), target)
    assert (got[0] if got else None) == expected
    if got:
        assert got[1] == expected * 10


def test_time_lookup_is_strictly_less():
    buf = b"".join(oi.TIME_ENTRY.pack(ts, rel) for ts, rel in [(100, 1), (200, 5), (300, 9)])
    assert oi.lookup_time(buf, 3, 100) is None
    assert oi.lookup_time(buf, 3, 201) == (200, 5)
    assert oi.lookup_time(buf, 3, 200) == (100, 1)
    assert oi.count_time_entries(buf + bytes(36), 6) == 3


def test_planner_places_entries_every_interval():
    p = oi.IndexPlanner(100, interval_bytes=1000)
    entries = [p.on_batch(i * 600, 600, 100 + i, 1000 + i) for i in range(6)]
    offset_entries = [e[0] for e in entries if e[0]]
    # first batch never indexed; then an entry once > 1000 bytes passed since the last
    assert offset_entries == [(2, 1200), (4, 2400)]
    assert [e[1] for e in entries if e[1]] == [(1002, 2), (1004, 4)]
    assert p.final_time_entry() == (1005, 5)
    assert p.final_time_entry() is None


def _roll(**kw):
    args = dict(segment_size=100, append_size=10, segment_bytes=1000, first_batch_timestamp=0,
                segment_created_ms=0, append_max_timestamp=10, now_ms=10, segment_ms=100,
                jitter_ms=0, index_full=False, time_index_full=False, segment_base_offset=0,
                append_last_offset=5)
    args.update(kw)
    return log_policy.should_roll(**args)


def test_should_roll_reasons():
    assert not _roll()
    assert _roll(append_size=901)
    assert not _roll(append_size=900)
    assert not _roll(segment_size=0, append_size=5000)           # an empty segment never rolls
    assert _roll(append_max_timestamp=101)
    assert not _roll(append_max_timestamp=100)
    assert _roll(append_max_timestamp=91, jitter_ms=10)
    assert _roll(first_batch_timestamp=-1, now_ms=101)
    assert _roll(index_full=True) and _roll(time_index_full=True)
    assert _roll(append_last_offset=2**31)


def test_roll_jitter_uses_given_rng():
    a = [log_policy.roll_jitter_ms(random.Random(7), 50, 1000) for _ in range(3)]
    assert a[0] == a[1] == a[2] and 0 <= a[0] < 50
    assert log_policy.roll_jitter_ms(random.Random(7), 0, 1000) == 0


def test_retention_count():
    segs = [SegmentInfo(0, 100, 1000), SegmentInfo(10, 100, 2000), SegmentInfo(20, 100, 3000),
            SegmentInfo(30, 100, 9000)]
    kw = dict(now_ms=5000, retention_ms=-1, retention_bytes=-1, log_start_offset=0, delete_policy=True)
    assert log_policy.retention_deletable_count(segs, **kw) == 0
    assert log_policy.retention_deletable_count(segs, **{**kw, "retention_ms": 2500}) == 2
    assert log_policy.retention_deletable_count(segs, **{**kw, "retention_ms": 0}) == 3   # never the active
    assert log_policy.retention_deletable_count(segs, **{**kw, "retention_bytes": 250}) == 1
    assert log_policy.retention_deletable_count(segs, **{**kw, "retention_bytes": 0}) == 3
    assert log_policy.retention_deletable_count(segs, **{**kw, "log_start_offset": 15}) == 1
    assert log_policy.retention_deletable_count(segs, **{**kw, "log_start_offset": 20}) == 2
    # compact-only: only the log start offset deletes
    assert log_policy.retention_deletable_count(
        segs, **{**kw, "retention_ms": 0, "delete_policy": False}) == 0


def _stream(n):
    out = bytearray()
    offset = 0
    for i in range(n):
        b = bytearray(build_batch([(i, b"k", b"v" * i), (i, b"k2", None)]))
        set_base_offset(b, 0, offset)
        offset += 2
        out += b
    return bytes(out)


def test_scan_valid_prefix_cuts_at_first_bad_byte():
    data = _stream(5)
    whole = log_policy.scan_valid_prefix(data, base_offset=0, next_offset=0)
    assert whole.valid_end == len(data) and whole.reason is None and len(whole.batches) == 5
    cut = whole.batches[3][0]
    torn = log_policy.scan_valid_prefix(data[:cut + 30], base_offset=0, next_offset=0)
    assert torn.valid_end == cut and len(torn.batches) == 3 and torn.reason
    bad = bytearray(data)
    bad[whole.batches[2][0] + 70] ^= 0xFF
    r = log_policy.scan_valid_prefix(bytes(bad), base_offset=0, next_offset=0)
    assert r.valid_end == whole.batches[2][0] and "CRC" in r.reason
    # offsets that go backwards are a bad tail too
    r = log_policy.scan_valid_prefix(data + data[:whole.batches[1][0]], base_offset=0, next_offset=0)
    assert r.valid_end == len(data)


def test_plan_clean_and_dirty_ratio():
    segs = [SegmentInfo(0, 100, 10), SegmentInfo(10, 100, 20), SegmentInfo(20, 300, 30),
            SegmentInfo(30, 50, 40)]
    plan = log_policy.plan_clean(segs, cleaner_checkpoint=10, log_start_offset=0, now_ms=100,
                                 min_compaction_lag_ms=0)
    assert (plan.first_dirty_offset, plan.first_uncleanable_offset) == (10, 30)
    assert (plan.clean_bytes, plan.dirty_bytes) == (100, 400) and plan.dirty_ratio == 0.8
    assert log_policy.should_clean(plan, 0.5) and not log_policy.should_clean(plan, 0.9)
    lagged = log_policy.plan_clean(segs, cleaner_checkpoint=0, log_start_offset=0, now_ms=100,
                                   min_compaction_lag_ms=75)
    assert lagged.first_uncleanable_offset == 20          # segment 20 has a record at 30 > 100-75
    assert log_policy.plan_clean(segs, cleaner_checkpoint=30, log_start_offset=0, now_ms=100,
                                 min_compaction_lag_ms=0) is None
    groups = log_policy.group_segments(segs[:3], max_bytes=250)
    assert [[g.base_offset for g in grp] for grp in groups] == [[0, 10], [20]]


def test_retain_record():
    kw = dict(key=b"k", offset=5, is_tombstone=False, latest_offset_for_key=5, tombstone_expired=True)
    assert log_policy.retain_record(**kw)
    assert not log_policy.retain_record(**{**kw, "latest_offset_for_key": 6})
    assert log_policy.retain_record(**{**kw, "latest_offset_for_key": -1})
    assert not log_policy.retain_record(**{**kw, "is_tombstone": True})
    assert log_policy.retain_record(**{**kw, "is_tombstone": True, "tombstone_expired": False})
    assert not log_policy.retain_record(**{**kw, "key": None})


def test_offset_checkpoint_format():
    text = checkpoints.format_offsets({("a-b", 1): 5, ("a", 0): 7})
    assert text == "0\n2\na 0 7\na-b 1 5\n"
    assert checkpoints.parse_offsets(text) == {("a", 0): 7, ("a-b", 1): 5}
    for bad in ("", "1\n0\n", "0\n2\na 0 7\n", "0\n1\na x 7\n"):
        with pytest.raises(checkpoints.CheckpointError):
            checkpoints.parse_offsets(bad)
    assert checkpoints.parse_epochs(checkpoints.format_epochs([(1, 0), (3, 40)])) == [(1, 0), (3, 40)]


def test_leader_epoch_cache():
    c = LeaderEpochCache()
    assert c.end_offset_for(0, 10) == (-1, -1)
    assert c.assign(1, 0) and c.assign(3, 40) and not c.assign(2, 50) and not c.assign(3, 45)
    assert c.end_offset_for(1, 100) == (1, 40)
    assert c.end_offset_for(2, 100) == (1, 40)
    assert c.end_offset_for(3, 100) == (3, 100)
    assert c.end_offset_for(0, 100) == (-1, -1)
    assert c.assign(5, 30)                    # overwrote entries at or after 30
    assert c.entries == [(1, 0), (5, 30)]
    assert c.truncate_from_end(30) and c.entries == [(1, 0)]
    c.assign(4, 20)
    assert c.truncate_from_start(25) and c.entries == [(4, 25)]
    assert struct.calcsize(">qi") == oi.TIME_ENTRY_SIZE
