"""Recovery after an unclean stop: torn or garbage tails are cut, flushed batches survive."""
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverbed.records import decode_batches

from log_helpers import batch, config, open_log, read_all, records_from

CFG = dict(segment_bytes=600, index_interval_bytes=64, segment_index_bytes=240)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_flushed=st.integers(1, 12), n_unflushed=st.integers(0, 8),
       damage=st.sampled_from(["truncate", "garbage", "flip", "zeros"]),
       where=st.floats(0, 1), garbage=st.binary(min_size=1, max_size=300))
def test_recovery_keeps_everything_before_the_damage(tmp_path_factory, n_flushed, n_unflushed,
                                                     damage, where, garbage):
    d = tmp_path_factory.mktemp("rec") / "t-0"
    plog = open_log(d, config(**CFG))
    for i in range(n_flushed):
        plog.append(batch([b"f%d" % i, b"x" * (i * 7)]), now_ms=0)
    plog.flush()
    flushed_end = plog.log_end_offset
    recovery_point = plog.recovery_point
    assert recovery_point == flushed_end
    flushed_bytes = read_all(plog)
    for i in range(n_unflushed):
        plog.append(batch([b"u%d" % i, b"y" * i]), now_ms=0)
    # crash: no close. Damage the unflushed tail (bytes after the recovery point).
    active = plog.active_segment
    seg_path = active.log_path
    size = os.path.getsize(seg_path)
    flushed_in_active = 0
    if active.base_offset < flushed_end:
        flushed_in_active = sum(1 for _ in active.headers_from(0, active.size))
    # position of the first byte past the flushed batches in the active segment
    start = 0
    for k, (pos, h) in enumerate(active.headers_from(0, active.size)):
        if h.base_offset >= flushed_end:
            break
        start = pos + h.size
    cut = start + int((size - start) * where)
    with open(seg_path, "r+b") as f:
        if damage == "truncate":
            f.truncate(cut)
        elif damage == "garbage":
            f.seek(cut)
            f.write(garbage)
        elif damage == "flip" and cut < size:
            f.seek(cut)
            byte = f.read(1)
            f.seek(cut)
            f.write(bytes([byte[0] ^ 0x5A]))
        elif damage == "zeros":
            f.seek(size)
            f.write(bytes(len(garbage)))
    del flushed_in_active
    plog.abandon()       # the crashed process's files are closed, nothing more is written
    again = open_log(d, config(**CFG), recovery_point=recovery_point, needs_recovery=True)
    assert again.log_end_offset >= flushed_end
    data = read_all(again)
    assert data[:len(flushed_bytes)] == flushed_bytes          # every flushed batch survives
    recs = decode_batches(data)                                 # everything kept is valid
    assert [r.offset for r in recs] == list(range(len(recs)))
    assert again.log_end_offset == len(recs)
    # still appendable, and the new batch reads back
    info = again.append(batch([b"after"]), now_ms=0)
    assert info.first_offset == len(recs)
    assert records_from(again)[-1].value == b"after"
    again.close()


def test_recovery_drops_segments_after_the_cut(tmp_path):
    d = tmp_path / "t-0"
    plog = open_log(d, config(**CFG))
    for i in range(30):
        plog.append(batch([b"v" * 60]), now_ms=0)
    segs = list(plog.segments)
    assert len(segs) >= 4
    # corrupt the middle of the second segment; flushed nothing (recovery point 0)
    with open(segs[1].log_path, "r+b") as f:
        f.seek(100)
        f.write(b"\xff" * 4)
    again = open_log(d, config(**CFG), recovery_point=0, needs_recovery=True)
    assert len(again.segments) == 2
    assert again.log_end_offset < segs[2].base_offset
    assert not os.path.exists(segs[3].log_path)
    recs = records_from(again)
    assert [r.offset for r in recs] == list(range(again.log_end_offset))


def test_missing_or_garbage_indexes_are_rebuilt(tmp_path):
    d = tmp_path / "t-0"
    plog = open_log(d, config(**CFG))
    for i in range(30):
        plog.append(batch([b"v" * 60]), now_ms=0)
    plog.close()
    first = d / "00000000000000000000.index"
    first.write_bytes(b"\x7f" * 16)
    again = open_log(d, config(**CFG))
    for off in range(30):
        assert again.read(off, 1).first_offset == off
