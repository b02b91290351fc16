"""Retention: by time, by size, by log start offset; delayed deletion; readers in flight."""
import os

import pytest

from riverbed import errors
from riverbed.records import build_batch

from log_helpers import config, open_log, read_all, records_from


def _fill(plog, n, ts0=1000):
    for i in range(n):
        plog.append(build_batch([(ts0 + i * 100, b"k", b"v" * 60)]), now_ms=0)


def test_retention_by_time_renames_then_deletes_after_delay(tmp_path):
    cfg = config(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=500)
    plog = open_log(tmp_path / "t-0", cfg)
    _fill(plog, 12)                             # timestamps 1000 .. 2100
    segs = list(plog.segments)
    assert len(segs) >= 4
    n = plog.delete_old_segments(now_ms=2450)   # deletes segments whose largest ts < 1450
    assert n >= 1
    gone = segs[:n]
    assert all(s.largest_timestamp < 1450 for s in gone)
    assert all(s.largest_timestamp >= 1450 for s in plog.segments[:-1])
    assert plog.log_start_offset == plog.segments[0].base_offset
    assert all(s.log_path.endswith(".log.deleted") and os.path.exists(s.log_path) for s in gone)
    with pytest.raises(errors.OffsetOutOfRangeError):
        plog.read(0, 100)
    plog.tick(2450 + 499)
    assert all(os.path.exists(s.log_path) for s in gone)
    plog.tick(2450 + 500)
    assert not any(os.path.exists(s.log_path) for s in gone)
    # everything from the new log start still reads
    assert [r.offset for r in records_from(plog)] == list(range(plog.log_start_offset, 12))


def test_active_segment_is_never_deleted(tmp_path):
    plog = open_log(tmp_path / "t-0", config(retention_ms=0, retention_bytes=0))
    _fill(plog, 5)
    assert plog.delete_old_segments(now_ms=10**9) == 0
    assert plog.log_end_offset == 5 and len(plog.segments) == 1


def test_retention_by_bytes(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=300, retention_bytes=700))
    _fill(plog, 20)
    plog.delete_old_segments(now_ms=0)
    assert plog.size_bytes <= 700 + 300
    assert sum(s.size for s in plog.segments[1:]) < 700 or len(plog.segments) == 1
    assert plog.log_start_offset > 0


def test_delete_records_before_raises_log_start(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=300))
    _fill(plog, 12)
    assert plog.delete_records_before(5) == 5
    with pytest.raises(errors.OffsetOutOfRangeError):
        plog.read(4, 100)
    assert plog.read(5, 100).first_offset == 5
    with pytest.raises(errors.OffsetOutOfRangeError):
        plog.delete_records_before(13)
    plog.delete_old_segments(now_ms=0)
    assert plog.segments[0].base_offset <= 5
    assert len(plog.segments) == 1 or plog.segments[1].base_offset > 5
    plog.close()


def test_compact_policy_keeps_old_segments(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=300, retention_ms=1,
                                             cleanup_policy="compact"))
    _fill(plog, 12)
    assert plog.delete_old_segments(now_ms=10**9) == 0


def test_reader_in_flight_survives_deletion(tmp_path):
    cfg = config(segment_bytes=300, retention_ms=1, file_delete_delay_ms=0)
    plog = open_log(tmp_path / "t-0", cfg)
    _fill(plog, 12)
    seg = plog.segments[0]
    expected = read_all(plog)[:seg.size]
    assert seg.acquire()                      # a read in flight holds the segment
    try:
        plog.delete_old_segments(now_ms=10**9)
        plog.tick(10**9)
        assert not os.path.exists(seg.log_path)
        assert seg.fd >= 0                    # still open: the fd outlives the unlink
        assert seg.pread(seg.size, 0) == expected
    finally:
        seg.release()
    assert seg.fd == -1                       # closed by the last release
