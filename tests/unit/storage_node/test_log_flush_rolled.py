"""Log maintenance beside the partition's traffic (the storage node runs it in a worker
thread): the flush after a roll fsyncs without the log's lock, so appends go on while a rolled
segment's data is fsynced (half a second for 1 GiB of dirty pages), and a truncation meanwhile
wins; the cleaner lets appends through and gives up its swap to a truncation or a close."""
import contextlib
import os
import random
import threading

from riverbed.records import build_batch
from services.storage_node.log import clean_log
from services.storage_node.log.log_manager import LogManager

from log_helpers import batch, config, open_log, records_from

WAIT_S = 10.0      # a bound on a hang, not a timing: every wait below ends on an event


class BlockingFsync:
    """os.fsync that holds its first call on `go` (after setting `started`)."""

    def __init__(self, monkeypatch):
        self.real = os.fsync
        self.started = threading.Event()
        self.go = threading.Event()
        self.held = 0
        monkeypatch.setattr(os, "fsync", self)

    def __call__(self, fd):
        if self.held == 0:
            self.held += 1
            self.started.set()
            assert self.go.wait(WAIT_S), "the test never released the fsync"
        return self.real(fd)


def rolled_log(path):
    plog = open_log(path, config(segment_bytes=300))
    while len(plog.segments) < 3:
        plog.append(batch([b"v" * 60]), now_ms=0)
    pending = plog.segments[-1].base_offset
    assert plog.recovery_point < pending            # the rolled segments are not flushed yet
    return plog, pending


@contextlib.contextmanager
def flush_held_in_fsync(plog, monkeypatch):
    """`plog.flush_rolled()` in a thread, held inside its first fsync for the block's length;
    on leaving, the fsync is released and the flush has ended."""
    fsync = BlockingFsync(monkeypatch)
    flusher = threading.Thread(target=plog.flush_rolled)
    flusher.start()
    try:
        assert fsync.started.wait(WAIT_S)
        yield
    finally:
        fsync.go.set()
        flusher.join(WAIT_S)
    assert not flusher.is_alive()


def test_appends_go_on_while_a_rolled_segment_is_fsynced(tmp_path, monkeypatch):
    plog, pending = rolled_log(tmp_path / "t-0")
    with flush_held_in_fsync(plog, monkeypatch):
        appended = threading.Event()
        appender = threading.Thread(target=lambda: (plog.append(batch([b"during"]), now_ms=0),
                                                    appended.set()))
        appender.start()
        # with the lock held across the fsync (the old tick) the append waits for `go`
        assert appended.wait(WAIT_S), "the append waited for the flush of a rolled segment"
        appender.join(WAIT_S)
        assert plog.recovery_point < pending       # not before the data is on disk
    assert plog.recovery_point == pending
    assert plog.flush_rolled() is None and plog.recovery_point == pending    # done once
    assert records_from(plog)[-1].value == b"during"


def test_a_truncation_during_the_flush_keeps_its_recovery_point(tmp_path, monkeypatch):
    plog, pending = rolled_log(tmp_path / "t-0")
    with flush_held_in_fsync(plog, monkeypatch):
        cut = plog.segments[0].base_offset + 1
        assert plog.truncate_to(cut) == cut         # a follower truncating below the roll
    assert plog.log_end_offset == cut
    assert plog.recovery_point <= cut < pending    # not raised above the truncated end


def test_the_log_manager_leaves_its_background_io_to_its_caller_when_asked(tmp_path):
    mgr = LogManager([str(tmp_path / "d")], config(segment_bytes=300, file_delete_delay_ms=0),
                     now_ms=0, rng=random.Random(0))
    plog = mgr.get_or_create("t", 0, now_ms=0)
    while len(plog.segments) < 3:
        plog.append(batch([b"v" * 60]), now_ms=0)
    pending = plog.segments[-1].base_offset
    plog.delete_records_before(pending)
    checkpoint = tmp_path / "d" / "recovery-point-offset-checkpoint"
    assert mgr.tick(0, background_io=False) == []
    assert plog.recovery_point < pending            # the flush after the roll: left
    assert [f for f in os.listdir(plog.dir) if f.endswith(".deleted")]    # and the unlinks
    assert mgr.background_io(0) == []
    assert plog.recovery_point == pending
    assert not [f for f in os.listdir(plog.dir) if f.endswith(".deleted")]
    assert f"t 0 {pending}" in checkpoint.read_text()
    mgr.close()


# --- the cleaner beside the partition's appends, truncations and closes ----------------------

class HeldThrottler:
    """A cleaner throttler that holds the cleaner at its first read until `go`."""

    def __init__(self):
        self.started = threading.Event()
        self.go = threading.Event()

    def throttle(self, nbytes):
        if not self.started.is_set():
            self.started.set()
            assert self.go.wait(WAIT_S), "the test never released the cleaner"


def dirty_compacted_log(path):
    plog = open_log(path, config(segment_bytes=10**6, cleanup_policy="compact"))
    for i in range(20):
        plog.append(build_batch([(1000, b"k", b"v%d" % i)]), now_ms=0)
    plog.roll(now_ms=0)
    plog.append(build_batch([(1000, b"other", b"x")]), now_ms=0)
    return plog


@contextlib.contextmanager
def cleaner_held(plog):
    """clean_log(plog) in a thread, held at its first read for the block's length; yields the
    list its result lands in."""
    throttler, result = HeldThrottler(), []
    cleaner = threading.Thread(target=lambda: result.append(
        clean_log(plog, now_ms=0, throttler=throttler)))
    cleaner.start()
    try:
        assert throttler.started.wait(WAIT_S)
        yield result
    finally:
        throttler.go.set()
        cleaner.join(WAIT_S)
    assert not cleaner.is_alive() and len(result) == 1


def test_appends_go_on_while_the_cleaner_runs(tmp_path):
    plog = dirty_compacted_log(tmp_path / "t-0")
    with cleaner_held(plog) as result:
        plog.append(build_batch([(1000, b"k", b"during")]), now_ms=0)    # not blocked
    assert result[0] is not None                                         # and the swap happened
    assert [(r.key, r.value) for r in records_from(plog)] == [
        (b"k", b"v19"), (b"other", b"x"), (b"k", b"during")]


def test_a_truncation_while_the_cleaner_runs_cancels_its_swap(tmp_path):
    plog = dirty_compacted_log(tmp_path / "t-0")
    with cleaner_held(plog) as result:
        plog.truncate_to(10)                 # a follower truncating inside the dirty section
    assert result[0] is None
    assert [r.value for r in records_from(plog)] == [b"v%d" % i for i in range(10)]


def test_a_close_while_the_cleaner_runs_ends_it_quietly(tmp_path):
    plog = dirty_compacted_log(tmp_path / "t-0")
    with cleaner_held(plog) as result:
        plog.close()
    assert result[0] is None
    assert not [f for f in os.listdir(plog.dir) if f.endswith((".cleaned", ".swap"))]
    again = open_log(plog.dir, config(segment_bytes=10**6, cleanup_policy="compact"))
    assert len(records_from(again)) == 21                                # nothing lost
