"""Compaction: the seeds' guarantees (000 §4.8), tombstones, throttle, crash mid-clean."""
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverbed import errors
from riverbed.records import Compression, build_batch, decode_batches
from services.storage_node.log import Throttler, clean_log
from services.storage_node.log import cleaner as cleaner_mod

from log_helpers import config, headers_of, open_log, read_all, records_from

COMPACT = dict(segment_bytes=400, cleanup_policy="compact", index_interval_bytes=50,
               segment_index_bytes=400, delete_retention_ms=1000)

ops = st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.binary(min_size=1, max_size=20))),
               min_size=1, max_size=60)


def _append_ops(plog, operations, *, per_batch, ts=1000, compression=Compression.NONE):
    written = []
    for i in range(0, len(operations), per_batch):
        chunk = operations[i:i + per_batch]
        raw = build_batch([(ts, b"key%d" % k, v) for k, v in chunk], compression=compression)
        info = plog.append(raw, now_ms=0)
        written += [(info.first_offset + j, b"key%d" % k, v) for j, (k, v) in enumerate(chunk)]
    return written


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=ops, per_batch=st.integers(1, 5), expire=st.booleans(),
       compression=st.sampled_from([Compression.NONE, Compression.LZ4]))
def test_compaction_guarantees(tmp_path_factory, operations, per_batch, expire, compression):
    plog = open_log(tmp_path_factory.mktemp("c") / "t-0", config(**COMPACT))
    written = _append_ops(plog, operations, per_batch=per_batch, compression=compression)
    plog.roll(now_ms=0)                     # everything written becomes cleanable
    before = {r.offset: r for r in records_from(plog)}
    now = 1000 + (1000 if expire else 999)  # tombstones' segments expire at ts + delete.retention.ms
    result = clean_log(plog, now_ms=now, force=True)
    assert result is not None
    after = records_from(plog)
    offsets = [r.offset for r in after]
    # order and offsets kept: strictly increasing, and a subset of what was written
    assert offsets == sorted(set(offsets))
    for r in after:
        assert (before[r.offset].key, before[r.offset].value) == (r.key, r.value)
    # a consumer from the log start sees the final value of every key
    final = {}
    for offset, key, value in written:
        final[key] = (offset, value)
    seen = {}
    for r in after:
        seen[r.key] = r.value
    for key, (offset, value) in final.items():
        if value is None:
            if expire:
                assert key not in seen                   # tombstone gone, and what it deleted
            else:
                assert seen.get(key, b"missing") is None  # tombstone still visible
                assert offset in offsets
        else:
            assert seen[key] == value and offset in offsets
    # exactly the latest per key survive (nothing superseded remains)
    latest_offsets = {o for o, v in final.values() if v is not None or not expire}
    assert set(offsets) == latest_offsets
    # producer metadata and compression kept on re-encoded batches
    assert all(h.compression == compression for h in headers_of(read_all(plog)))
    # the log is still appendable and re-openable after the swap
    plog.append(build_batch([(5000, b"key1", b"after")]), now_ms=now)
    plog.close()
    again = open_log(plog.dir, config(**COMPACT), needs_recovery=True)
    assert [r.offset for r in records_from(again)] == offsets + [plog.log_end_offset - 1]
    again.close()


def test_keyless_records_refused_in_compacted_log(tmp_path):
    plog = open_log(tmp_path / "t-0", config(**COMPACT))
    with pytest.raises(errors.InvalidRecordError):
        plog.append(build_batch([(0, b"k", b"v"), (0, None, b"v")]), now_ms=0)
    assert plog.log_end_offset == 0 and plog.active_segment.size == 0


def test_active_segment_and_dirty_ratio(tmp_path):
    plog = open_log(tmp_path / "t-0", config(**{**COMPACT, "segment_bytes": 10**6}))
    _append_ops(plog, [(1, b"a")] * 20, per_batch=1)
    assert clean_log(plog, now_ms=0, force=True) is None       # only the active segment
    plog.roll(now_ms=0)
    _append_ops(plog, [(2, b"b")], per_batch=1)
    r = clean_log(plog, now_ms=0)
    assert r is not None and r.dirty_ratio == 1.0
    assert [x.offset for x in records_from(plog)] == [19, 20]
    # nothing dirty left: below the ratio, no clean
    assert clean_log(plog, now_ms=0) is None
    assert plog.cleaner_checkpoint == 20


def test_min_compaction_lag(tmp_path):
    plog = open_log(tmp_path / "t-0", config(**COMPACT, min_compaction_lag_ms=500))
    _append_ops(plog, [(1, b"a")] * 5, per_batch=1, ts=1000)
    plog.roll(now_ms=0)
    assert clean_log(plog, now_ms=1400, force=True) is None
    assert clean_log(plog, now_ms=1600, force=True) is not None
    assert [x.offset for x in records_from(plog)] == [4]


def test_throttle_sleeps_in_virtual_time(tmp_path):
    clock = [0.0]

    def sleep(s):
        clock[0] += s

    throttler = Throttler(1000.0, clock=lambda: clock[0], sleep=sleep)
    plog = open_log(tmp_path / "t-0", config(**COMPACT))
    _append_ops(plog, [(k % 3, b"v" * 10) for k in range(30)], per_batch=3)
    plog.roll(now_ms=0)
    r = clean_log(plog, now_ms=0, throttler=throttler, force=True)
    moved = r.bytes_read + r.bytes_written
    assert moved > 0
    assert clock[0] == pytest.approx(moved / 1000.0)


STEPS = ["manifest", "swap", "deleted"]


@pytest.mark.parametrize("step", STEPS + ["cleaned"])
def test_crash_mid_clean_leaves_a_valid_log(tmp_path, step, monkeypatch):
    d = tmp_path / "t-0"
    plog = open_log(d, config(**COMPACT))
    written = _append_ops(plog, [(k % 4, b"v%d" % k) for k in range(40)], per_batch=2)
    plog.roll(now_ms=0)
    final = {}
    for _o, key, value in written:
        final[key] = value

    def crash(name):
        if name == step:
            raise cleaner_mod.SimulatedCrash(name)

    if step == "cleaned":
        # crash while writing the cleaned file: leave a half-written .cleaned behind
        base = plog.segments[0].base_offset
        (d / f"{base:020d}.log.cleaned").write_bytes(b"partial")
        (d / f"{base:020d}.index.cleaned").write_bytes(b"")
    else:
        monkeypatch.setattr(cleaner_mod, "crash_at", crash)
        with pytest.raises(cleaner_mod.SimulatedCrash):
            clean_log(plog, now_ms=0, force=True)
        monkeypatch.setattr(cleaner_mod, "crash_at", None)
    # the process dies here; reopen as after an unclean stop
    again = open_log(d, config(**COMPACT), needs_recovery=True)
    names = os.listdir(d)
    assert not any(n.endswith((".cleaned", ".swap", ".swap-group", ".deleted")) for n in names)
    recs = records_from(again)
    offsets = [r.offset for r in recs]
    assert offsets == sorted(set(offsets))
    seen = {}
    for r in recs:
        seen[r.key] = r.value
    assert seen == final                       # every key's final value is there
    # and cleaning again works and keeps the guarantees
    clean_log(again, now_ms=0, force=True)
    seen2 = {r.key: r.value for r in records_from(again)}
    assert seen2 == final
    assert len(records_from(again)) == len(final)
    again.close()


def test_compacted_data_decodes_with_kafka_python(tmp_path):
    kafka_records = pytest.importorskip("kafka.record")
    plog = open_log(tmp_path / "t-0", config(**COMPACT))
    _append_ops(plog, [(k % 3, b"v%d" % k) for k in range(12)], per_batch=4)
    plog.roll(now_ms=0)
    clean_log(plog, now_ms=0, force=True)
    data = read_all(plog)
    records = kafka_records.MemoryRecords(data)
    got = []
    while records.has_next():
        b = records.next_batch()
        got += [(r.offset, r.key, r.value) for r in b]
    assert [(r.offset, r.key, r.value) for r in decode_batches(data)] == got
    assert [o for o, _k, _v in got] == [9, 10, 11]
