"""The storage node's log access with producer state (shell/log_access.py) on real log files:
every partition has a ProducerStateStore (loaded at open, empty for a new log), the leader's
append checks sequences (duplicate -> original offsets, gap -> refused, nothing appended),
followers apply what they replicate, truncations reload the state, close snapshots, delete and
expiry forget. No sockets, threads or sleeps."""
from __future__ import annotations

import os

import pytest

from riverbed import errors
from riverbed.records import build_batch, decode_batches

from services.common.config import ConfigError, build
from services.storage_node.config import StorageNodeConfig
from services.storage_node.core.producer_state import Verdict
from services.storage_node.shell import log_access

TP = ("t", 0)
code = errors.ErrorCode.Value
NOW = 1_800_000_000_000          # record timestamps; expiry compares them with wall time


def cfg(tmp_path, **kw) -> StorageNodeConfig:
    return build(StorageNodeConfig, {"broker.id": 1, "log.dirs": str(tmp_path), **kw})


def pbatch(pid, seq, n=1, *, epoch=0, ts=NOW):
    return build_batch([(ts + i, None, b"v%d" % (seq + i)) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


def records(logs):
    plog = logs.get(TP)
    return [r.value for r in decode_batches(bytes(log_access.read(plog, 0, 1 << 20,
                                                                 plog.log_end_offset)))]


def test_leader_append_duplicate_gap_and_reload_after_a_clean_close(tmp_path):
    logs = log_access.open_logs(cfg(tmp_path))
    logs.get_or_create(TP, {})
    store = logs.store(TP)
    assert store is not None and len(store.state) == 0

    d, first, last = log_access.append_as_leader(store, pbatch(5, 0, 2), 0)
    assert (d.verdict, first, last) == (Verdict.APPEND, 0, 1)
    d, first, last = log_access.append_as_leader(store, pbatch(5, 2, 1), 0)
    assert (d.verdict, first, last) == (Verdict.APPEND, 2, 2)
    d, first, last = log_access.append_as_leader(store, pbatch(5, 0, 2), 0)   # a retry
    assert (d.verdict, first, last) == (Verdict.DUPLICATE, 0, 1)
    d, first, last = log_access.append_as_leader(store, pbatch(5, 9), 0)      # a gap
    assert (d.verdict, d.error_code, first) == \
        (Verdict.REFUSE, code("OUT_OF_ORDER_SEQUENCE_NUMBER"), -1)
    assert records(logs) == [b"v0", b"v1", b"v2"]
    assert logs.get(TP).log_end_offset == 3

    logs.close()
    assert os.listdir(tmp_path / "t-0").count(f"{3:020d}.snapshot") == 1
    logs = log_access.open_logs(cfg(tmp_path))
    store = logs.store(TP)
    assert store.state.map_end_offset == 3
    d, first, _ = log_access.append_as_leader(store, pbatch(5, 2, 1), 0)
    assert (d.verdict, first) == (Verdict.DUPLICATE, 2)
    logs.close()


def test_retry_older_than_the_window_is_answered_with_its_offset_from_the_log(tmp_path):
    # Kafka answers a duplicate with the offset the batch has; one older than the batches
    # remembered is found in the log (here across a segment roll), never acknowledged with -1.
    logs = log_access.open_logs(cfg(tmp_path, **{"log.segment.bytes": "300"}))
    logs.get_or_create(TP, {})
    store = logs.store(TP)
    offsets = []
    for i in range(9):
        d, first, last = log_access.append_as_leader(store, pbatch(5, 2 * i, 2), 0)
        assert d.verdict is Verdict.APPEND
        offsets.append((first, last))
    assert len(logs.get(TP).segments) > 2
    for i in (0, 1, 3):                                   # older than the 5 remembered
        d, first, last = log_access.append_as_leader(store, pbatch(5, 2 * i, 2), 0)
        assert (d.verdict, d.error_code, (first, last)) == \
            (Verdict.DUPLICATE, code("NONE"), offsets[i])
    assert logs.get(TP).log_end_offset == 18
    logs.close()


def test_old_retry_is_found_when_other_producers_wrote_in_between(tmp_path):
    # The first guess (the offset it would have with one producer alone) misses; the scan of
    # the log finds it.
    logs = log_access.open_logs(cfg(tmp_path))
    logs.get_or_create(TP, {})
    store = logs.store(TP)
    mine = []
    for i in range(8):
        _, first, last = log_access.append_as_leader(store, pbatch(5, 2 * i, 2), 0)
        mine.append((first, last))
        log_access.append_as_leader(store, pbatch(6, 3 * i, 3), 0)      # another producer
    d, first, last = log_access.append_as_leader(store, pbatch(5, 2, 2), 0)
    assert (d.verdict, (first, last)) == (Verdict.DUPLICATE, mine[1])
    assert logs.get(TP).log_end_offset == 40
    logs.close()


def test_old_sequence_never_written_is_a_gap_not_a_duplicate(tmp_path):
    # Producer 5's batch 10..11 came in first (here replicated as a follower, which checks
    # nothing); its batch 0..1 then precedes everything remembered but is nowhere in a log
    # nothing was removed from: OUT_OF_ORDER (the client writes it again), never a duplicate
    # acknowledged as written with offset -1.
    logs = log_access.open_logs(cfg(tmp_path))
    logs.get_or_create(TP, {})
    store = logs.store(TP)
    log_access.append_as_follower(store, log_access_batch_at(pbatch(5, 10, 2), 0))
    d, first, _ = log_access.append_as_leader(store, pbatch(5, 0, 2), 0)
    assert (d.verdict, d.error_code, first) == \
        (Verdict.REFUSE, code("OUT_OF_ORDER_SEQUENCE_NUMBER"), -1)
    assert logs.get(TP).log_end_offset == 2
    logs.close()


def log_access_batch_at(batch: bytes, base_offset: int) -> bytes:
    """A client batch as a leader wrote it at `base_offset` (base offset is outside the CRC)."""
    import struct
    return struct.pack(">q", base_offset) + batch[8:]


def test_a_wider_window_survives_a_restart(tmp_path):
    conf = cfg(tmp_path, **{"producer.state.batches.retained": "20"})
    logs = log_access.open_logs(conf)
    logs.get_or_create(TP, {})
    for i in range(15):
        log_access.append_as_leader(logs.store(TP), pbatch(5, i), 0)
    logs.close()
    logs = log_access.open_logs(conf)                      # from the snapshot at close
    assert len(logs.store(TP).state.entry(5).batches) == 15
    d, first, _ = log_access.append_as_leader(logs.store(TP), pbatch(5, 0), 0)
    assert (d.verdict, first) == (Verdict.DUPLICATE, 0)
    logs.close()


def test_follower_append_builds_the_state_and_truncation_reloads_it(tmp_path):
    leader = log_access.open_logs(cfg(tmp_path / "a"))
    follower = log_access.open_logs(cfg(tmp_path / "b"))
    leader.get_or_create(TP, {})
    follower.get_or_create(TP, {})
    for seq in range(3):
        log_access.append_as_leader(leader.store(TP), pbatch(8, seq), 0)
    data = log_access.read(leader.get(TP), 0, 1 << 20, 3)
    log_access.append_as_follower(follower.store(TP), data)
    fstore = follower.store(TP)
    assert fstore.state.same_state(leader.store(TP).state)

    # Becoming leader at a higher epoch: the retried last batch is a duplicate here too.
    d, first, _ = log_access.append_as_leader(fstore, pbatch(8, 2), 1)
    assert (d.verdict, first) == (Verdict.DUPLICATE, 2)

    # Truncating the last batch away: the state forgets it, so its retry is appended again.
    log_access.truncate_to(fstore, 2)
    assert fstore.state.entry(8).last_seq == 1
    d, first, _ = log_access.append_as_leader(fstore, pbatch(8, 2), 1)
    assert (d.verdict, first) == (Verdict.APPEND, 2)

    # Truncating at or past the end changes nothing.
    before = fstore.state.entries()
    log_access.truncate_to(fstore, 10)
    assert fstore.state.entries() == before

    # Starting over at the leader's log start: empty state and no snapshots.
    fstore.take_snapshot()
    log_access.truncate_fully_and_start_at(fstore, 50)
    assert len(fstore.state) == 0 and fstore.state.map_end_offset == 50
    assert not [n for n in os.listdir(tmp_path / "b" / "t-0") if n.endswith(".snapshot")]
    leader.close()
    follower.close()


def test_expiry_forgets_idle_producers_and_delete_drops_the_store(tmp_path):
    logs = log_access.open_logs(cfg(tmp_path, **{"producer.id.expiration.ms": 1000}))
    logs.get_or_create(TP, {})
    log_access.append_as_leader(logs.store(TP), pbatch(3, 0, ts=0), 0)      # long ago
    log_access.append_as_leader(logs.store(TP), pbatch(4, 0, ts=1 << 62), 0)  # far ahead
    assert logs.expire_producers() == 1
    assert logs.store(TP).state.entry(3) is None
    assert logs.store(TP).state.entry(4) is not None
    logs.delete(TP)
    assert logs.store(TP) is None and not (tmp_path / "t-0").exists()
    logs.close()


def test_restart_without_a_clean_close_rebuilds_the_state_from_the_log(tmp_path):
    logs = log_access.open_logs(cfg(tmp_path))
    logs.get_or_create(TP, {})
    for seq in range(0, 6, 2):
        log_access.append_as_leader(logs.store(TP), pbatch(9, seq, 2), 0)
    logs.get(TP).flush()
    expected = logs.store(TP).state.entries()
    # No close (a crash): reopen from the same files while the old objects are dropped.
    reopened = log_access.open_logs(cfg(tmp_path))
    assert reopened.store(TP).state.entries() == expected
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".snapshot")]
    reopened.close()


@pytest.mark.parametrize("key,value", [("producer.state.batches.retained", "0"),
                                       ("producer.state.batches.retained", "1025"),
                                       ("replica.high.watermark.checkpoint.interval.ms", "0")])
def test_out_of_range_keys_are_config_errors(tmp_path, key, value):
    with pytest.raises(ConfigError, match=key):
        cfg(tmp_path, **{key: value})
