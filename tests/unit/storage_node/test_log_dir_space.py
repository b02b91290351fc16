"""log.dir.free.bytes.min: when a log dir is low on space and when it is back (pure)."""
from services.storage_node.core.log_dirs import DirSpace, SpaceChange

MB = 1 << 20


def test_measurement_below_the_minimum_makes_the_dir_low_once():
    s = DirSpace(16 * MB)
    assert s.measured("/a", 100 * MB) is None and not s.is_low("/a")
    assert s.measured("/a", 10 * MB) == SpaceChange("/a", True, 10 * MB)
    assert s.is_low("/a")
    assert s.measured("/a", 9 * MB) is None


def test_appends_since_the_last_measurement_count():
    s = DirSpace(16 * MB)
    s.measured("/a", 20 * MB)
    assert s.appended("/a", 3 * MB) is None
    assert s.appended("/a", 2 * MB) == SpaceChange("/a", True, 15 * MB)
    assert s.appended("/a", MB) is None            # already low: reported once


def test_back_only_with_hysteresis():
    s = DirSpace(16 * MB)
    s.measured("/a", MB)
    assert s.measured("/a", 20 * MB) is None       # above the minimum but below 1.5x
    assert s.is_low("/a")
    assert s.measured("/a", 24 * MB) == SpaceChange("/a", False, 24 * MB)
    assert not s.is_low("/a")


def test_zero_turns_it_off_and_unmeasured_dirs_are_not_low():
    s = DirSpace(0)
    assert s.measured("/a", 0) is None and s.appended("/a", 10**9) is None
    assert not DirSpace(MB).is_low("/never-measured")
    t = DirSpace(MB)
    assert t.appended("/b", 10**9) is None          # no measurement yet: no estimate
