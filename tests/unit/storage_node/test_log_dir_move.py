"""Moving a replica between log dirs (KIP-113) in the log layer: copy passes while the log is
live, the swap under the writer, truncation during the copy, an interrupted move, and where a
replica not hosted yet is created."""
import os
import random

from services.storage_node.log import LogManager
from services.storage_node.log.log_manager import FUTURE_DIR_SUFFIX, copy_tree

from log_helpers import batch, config, read_all


def _manager(dirs, **kw):
    return LogManager([str(d) for d in dirs], kw.pop("cfg", config(segment_bytes=400)),
                      now_ms=0, rng=random.Random(1), **kw)


def _fill(plog, n, start=0):
    for i in range(n):
        plog.append(batch([b"v%03d" % (start + i) * 10]), now_ms=0, leader_epoch=1)


def _move(m, tp, target, *, between=None):
    plog = m.get(*tp)
    future = m.future_path(tp[0], tp[1], target)
    copied = {}
    truncations = plog.truncations
    copy_tree(plog.dir, future, copied)
    if between is not None:
        between(plog)
    return m.swap_in_future(tp[0], tp[1], future, copied, truncations)


def test_move_keeps_every_batch_and_appends_during_the_copy(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a])
    plog = m.get_or_create("t", 0, now_ms=0)
    _fill(plog, 20)
    m.close()
    m = _manager([a, b])
    plog = m.get("t", 0)
    before_bytes = read_all(plog)
    moved = _move(m, ("t", 0), str(b), between=lambda p: _fill(p, 7, start=20))
    assert m.dir_of("t", 0) == str(b)
    assert not os.path.exists(a / "t-0") and os.path.isdir(b / "t-0")
    assert not [n for n in os.listdir(b) if n.endswith(FUTURE_DIR_SUFFIX)]
    data = read_all(moved)
    assert data.startswith(before_bytes) and len(data) > len(before_bytes)
    assert moved.log_end_offset == 27
    _fill(moved, 3, start=27)             # the moved log takes appends
    assert moved.log_end_offset == 30
    m.close()
    m = _manager([a, b])                  # and a restart finds it in its new dir
    assert m.dir_of("t", 0) == str(b) and m.get("t", 0).log_end_offset == 30
    m.close()


def test_a_truncation_during_the_copy_recopies_the_replica(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b])
    plog = m.get_or_create("t", 0, now_ms=0)
    assert m.dir_of("t", 0) == str(a)
    _fill(plog, 20)

    def diverge(p):
        p.truncate_to(12)
        _fill(p, 5, start=100)            # same size as before in places: a stale tail would show

    moved = _move(m, ("t", 0), str(b), between=diverge)
    assert moved.log_end_offset == 17
    fresh = _manager([tmp_path / "c"])
    ref = fresh.get_or_create("t", 0, now_ms=0)
    _fill(ref, 12)
    _fill(ref, 5, start=100)
    assert read_all(moved) == read_all(ref)
    m.close()
    fresh.close()


def test_an_unfinished_move_is_dropped_at_startup(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b])
    plog = m.get_or_create("t", 0, now_ms=0)
    _fill(plog, 5)
    future = m.future_path("t", 0, str(b))
    copy_tree(plog.dir, future, {})
    m.close()                             # crash-like: the swap never happened
    m = _manager([a, b])
    assert m.dir_of("t", 0) == str(a) and m.get("t", 0).log_end_offset == 5
    assert not os.path.exists(future)
    m.close()


def test_a_preferred_dir_places_a_new_replica(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b])
    m.preferred_dirs[("t", 3)] = str(b)
    m.get_or_create("t", 3, now_ms=0)
    assert m.dir_of("t", 3) == str(b)
    assert ("t", 3) not in m.preferred_dirs
    m.close()
