"""LogManager: placement over log.dirs, checkpoints, clean/unclean restart, delete, tick;
and one writer with concurrent reader threads."""
import os
import random
import threading

from riverbed.records import build_batch, iter_batches, validate_batch
from services.storage_node.core.checkpoints import parse_offsets
from services.storage_node.log import LogManager

from log_helpers import batch, config, read_all, records_from


def _manager(dirs, **kw):
    return LogManager([str(d) for d in dirs], kw.pop("cfg", config()), now_ms=0,
                      rng=random.Random(1), **kw)


def test_placement_fewest_partitions(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    m = _manager(dirs)
    for p in range(6):
        m.get_or_create("t", p, now_ms=0)
    counts = [len(os.listdir(d)) for d in dirs]
    assert all(sorted(n for n in os.listdir(d) if n.startswith("t-")) for d in dirs)
    assert [sum(1 for n in os.listdir(d) if n.startswith("t-")) for d in dirs] == [2, 2, 2]
    assert counts  # dirs also hold checkpoints
    assert os.path.isdir(os.path.join(m.dir_of("t", 0), "t-0"))
    assert m.get_or_create("t", 0, now_ms=0) is m.get("t", 0)
    m.close()


def test_clean_restart_and_checkpoints(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = _manager(dirs)
    for p in range(2):
        plog = m.get_or_create("orders-eu", p, {"segment.bytes": "300"}, now_ms=0)
        for i in range(10):
            plog.append(batch([b"v" * 40]), now_ms=0, leader_epoch=1)
    m.close()
    for d in dirs:
        assert (d / ".kafka_cleanshutdown").exists()
        cp = parse_offsets((d / "recovery-point-offset-checkpoint").read_text())
        assert list(cp.values()) == [10]
        assert (d / "recovery-point-offset-checkpoint").read_text().startswith("0\n1\norders-eu ")
    m2 = _manager(dirs, topic_overrides={"orders-eu": {"segment.bytes": "300"}})
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)   # removed once loaded
    assert m2.partitions() == [("orders-eu", 0), ("orders-eu", 1)]
    assert m2.get("orders-eu", 1).log_end_offset == 10
    assert m2.get("orders-eu", 1).config.segment_bytes == 300
    m2.close()


def test_unclean_restart_recovers_torn_tail(tmp_path):
    d = tmp_path / "a"
    m = _manager([d])
    plog = m.get_or_create("t", 0, now_ms=0)
    for i in range(5):
        plog.append(batch([b"v%d" % i]), now_ms=0)
    plog.flush()
    m.checkpoint()
    plog.append(batch([b"lost"]), now_ms=0)
    with open(plog.active_segment.log_path, "ab") as f:
        f.write(b"\x00\x00\x00garbage")
    # no close(): no marker, so the next start recovers
    m2 = _manager([d])
    again = m2.get("t", 0)
    assert [r.value for r in records_from(again)][:5] == [b"v%d" % i for i in range(5)]
    assert again.log_end_offset in (5, 6)
    again.append(batch([b"more"]), now_ms=0)
    m2.close()


def test_delete_partition(tmp_path):
    d = tmp_path / "a"
    m = _manager([d])
    m.get_or_create("t", 0, now_ms=0).append(batch([b"x"]), now_ms=0)
    m.get_or_create("t", 1, now_ms=0)
    assert m.delete_partition("t", 0)
    assert not (d / "t-0").exists()
    assert not any(n.endswith("-delete") for n in os.listdir(d))
    assert m.get("t", 0) is None
    assert ("t", 0) not in parse_offsets((d / "recovery-point-offset-checkpoint").read_text())
    # a leftover -delete dir from a crash is removed at startup
    (d / "t-7.abc-delete").mkdir()
    m.close()
    m2 = _manager([d])
    assert not (d / "t-7.abc-delete").exists() and m2.partitions() == [("t", 1)]
    m2.close()


def test_tick_flushes_retains_and_cleans(tmp_path):
    d = tmp_path / "a"
    m = _manager([d], cfg=config(segment_bytes=300, flush_ms=100, retention_ms=1000,
                                 file_delete_delay_ms=0))
    plog = m.get_or_create("logs", 0, now_ms=0)
    for i in range(12):
        plog.append(build_batch([(1000 + i * 100, b"k", b"v" * 60)]), now_ms=0)
    assert plog.recovery_point < plog.log_end_offset
    m.tick(now_ms=2500)
    assert plog.recovery_point == plog.log_end_offset                     # flush.ms
    assert plog.log_start_offset > 0                                      # retention.ms
    compacted = m.get_or_create("state", 0, {"cleanup.policy": "compact", "segment.bytes": "300"},
                                now_ms=0)
    for i in range(12):
        compacted.append(build_batch([(0, b"same", b"v%d" % i)]), now_ms=0)
    m.tick(now_ms=3000)
    assert [r.value for r in records_from(compacted)][0] != b"v0"
    cp = parse_offsets((d / "cleaner-offset-checkpoint").read_text())
    assert cp[("state", 0)] == compacted.cleaner_checkpoint > 0
    m.close()


def test_reader_threads_never_see_partial_batches(tmp_path):
    d = tmp_path / "a"
    m = _manager([d], cfg=config(segment_bytes=20_000, index_interval_bytes=500))
    plog = m.get_or_create("t", 0, now_ms=0)
    total = 400
    stop = threading.Event()
    problems = []
    seen_counts = []

    def reader():
        offset = 0
        count = 0
        while not stop.is_set() or offset < plog.log_end_offset:
            r = plog.read(offset, 3000)
            data = bytes(r.data)
            pos = 0
            for pos_, _h in iter_batches(data):
                try:
                    h = validate_batch(data, pos_)
                except Exception as e:           # noqa: BLE001 - recorded and asserted below
                    problems.append(repr(e))
                    return
                if h.base_offset != offset:
                    problems.append(f"expected {offset}, got {h.base_offset}")
                    return
                offset = h.next_offset
                count += 1
                pos = pos_ + h.size
            if pos != len(data):
                problems.append(f"partial batch: {len(data) - pos} trailing bytes")
                return
        seen_counts.append(count)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(total):
        plog.append(batch([b"x" * (i % 300)]), now_ms=0)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not problems
    assert seen_counts == [total] * 3
    assert len(read_all(plog)) == sum(len(batch([b"x" * (i % 300)])) for i in range(total))
    m.close()


def test_created_dirs_are_synced_once_per_log_dir_when_the_caller_asks(tmp_path, monkeypatch):
    from services.storage_node.log import files
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = _manager(dirs)
    synced = []
    monkeypatch.setattr(files, "fsync_dir", lambda path: synced.append(path))
    m.get_or_create("t", 0, now_ms=0)                    # at once, by default
    assert synced == [m.dir_of("t", 0)]
    synced.clear()
    for p in range(1, 7):
        m.get_or_create("t", p, now_ms=0, sync_dir=False)
    assert synced == []
    assert m.sync_created_dirs() == []
    assert sorted(synced) == sorted(str(d) for d in dirs)  # one fsync per log dir
    synced.clear()
    assert m.sync_created_dirs() == [] and synced == []   # nothing new since
    monkeypatch.setattr(files, "fsync_dir", lambda path: (_ for _ in ()).throw(OSError(5, "EIO")))
    m.get_or_create("t", 9, now_ms=0, sync_dir=False)
    failed = m.sync_created_dirs()
    assert [d for d, _ in failed] == [m.dir_of("t", 9)] and isinstance(failed[0][1], OSError)
    monkeypatch.undo()
    m.close()
