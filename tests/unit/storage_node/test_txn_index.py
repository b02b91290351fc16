"""Transactions in the storage engine: the .txnindex (Kafka's format), the aborted-range search,
markers through the producer-state store, truncation and recovery, read_committed reads,
compaction of aborted data and markers, and kafka-python reading segments with markers."""
from __future__ import annotations

import os
import struct

import pytest

from riverbed.records import build_batch, decode_batches, iter_batches, read_header
from riverbed.records.control import (
    ABORT, COMMIT, ControlRecord, build_marker_batch, decode_control_key, read_control_record,
)
from services.storage_node.core.aborted_txns import (
    ENTRY_SIZE, AbortedTxn, TxnIndexFormatError, collect_aborted, decode_entries, encode_entry,
)
from services.storage_node.core import log_policy
from services.storage_node.log import clean_log
from services.storage_node.log.producer_snapshot import ProducerStateStore
from services.storage_node.shell import log_access

from log_helpers import config, open_log, read_all

COMPACT = {"cleanup_policy": "compact", "segment_bytes": 600, "min_cleanable_dirty_ratio": 0.01,
           "delete_retention_ms": 1000}


def txn_batch(pid, seq, values, *, epoch=0, keys=None, ts=1000):
    keys = keys if keys is not None else [b"k%d" % i for i in range(len(values))]
    return build_batch([(ts + i, k, v) for i, (k, v) in enumerate(zip(keys, values))],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=True)


def produce(store, payload):
    decision, info = store.append_as_leader(payload, [h for _, h in iter_batches(payload)],
                                            now_ms=0, leader_epoch=0)
    assert decision.ok, decision
    return info


def marker(store, pid, commit, *, epoch=0, coordinator_epoch=0, ts=1000):
    batch = build_marker_batch(pid, epoch, commit, coordinator_epoch, ts)
    refusal, info = store.append_marker(batch, read_header(batch),
                                        ControlRecord(commit, coordinator_epoch),
                                        now_ms=0, leader_epoch=0)
    assert refusal is None, refusal
    return info.first_offset


# ---- formats ------------------------------------------------------------------------------

def test_entry_is_kafkas_34_bytes():
    e = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=21)
    data = encode_entry(e)
    assert len(data) == ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 7, 10, 20, 21)
    assert decode_entries(data + data[:5]) == [e]            # a torn tail is ignored
    with pytest.raises(TxnIndexFormatError):
        decode_entries(data[:5], strict=True)
    with pytest.raises(TxnIndexFormatError):
        decode_entries(struct.pack(">hqqqq", 1, 7, 10, 20, 21))


def test_control_record_is_kafkas_end_transaction_marker():
    batch = build_marker_batch(5, 3, True, 9, 1234)
    h = read_header(batch)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (5, 3, -1, 1)
    (r,) = decode_batches(batch)
    assert r.key == struct.pack(">hh", 0, COMMIT) and r.value == struct.pack(">hi", 0, 9)
    assert read_control_record(batch) == ControlRecord(True, 9, COMMIT)
    assert decode_control_key(struct.pack(">hh", 0, ABORT)) == ABORT


def test_collect_aborted_stops_at_an_entry_stable_past_the_upper_bound():
    seg0 = [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 8, 9)]
    seg1 = [AbortedTxn(3, 20, 25, 26), AbortedTxn(4, 30, 40, 41)]
    assert collect_aborted([seg0, seg1], 6, 22) == [AbortedTxn(2, 3, 8, 9),
                                                   AbortedTxn(3, 20, 25, 26)]
    # complete at the first entry whose LSO reaches the bound: later ones are not read
    assert collect_aborted([seg0, seg1], 0, 4) == [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 8, 9)]
    assert collect_aborted([seg0, seg1], 41, 50) == []


# ---- the store and the log ------------------------------------------------------------------

def test_abort_markers_fill_the_txnindex_and_read_committed_skips_them(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=100000))
    store = ProducerStateStore(plog)
    produce(store, txn_batch(1, 0, [b"a1", b"a2"]))      # 0..1 aborted
    produce(store, txn_batch(2, 0, [b"c1"]))             # 2 committed
    produce(store, build_batch([(1000, b"p", b"plain")]))  # 3 not transactional
    assert store.last_stable_offset(4) == 0
    abort_at = marker(store, 1, False)                   # 4
    assert store.last_stable_offset(5) == 2
    commit_at = marker(store, 2, True)                   # 5
    assert store.last_stable_offset(5) == 2         # the commit marker is not below the HW
    assert store.last_stable_offset(6) == 6
    assert (abort_at, commit_at) == (4, 5)
    seg = plog.segments[-1]
    with open(seg.txn_index.path, "rb") as f:
        assert decode_entries(f.read(), strict=True) == [AbortedTxn(1, 0, 4, 2)]
    data = read_all(plog)
    assert log_access.aborted_transactions(plog, 0, data) == [(1, 0)]
    assert log_access.aborted_transactions(plog, 5, plog.read(5, 1 << 20).data) == []
    assert plog.collect_aborted_transactions(2, 6) == [AbortedTxn(1, 0, 4, 2)]
    plog.close()


def test_open_transactions_survive_a_restart_through_the_snapshot(tmp_path):
    d = tmp_path / "t-0"
    plog = open_log(d, config(segment_bytes=100000))
    store = ProducerStateStore(plog)
    produce(store, txn_batch(1, 0, [b"x"]))
    produce(store, txn_batch(2, 0, [b"y"]))
    marker(store, 2, False, coordinator_epoch=4)
    assert store.close() is not None
    plog.close()
    plog2 = open_log(d, config(segment_bytes=100000))
    again = ProducerStateStore(plog2)
    again.load(now_ms=0, producer_id_expiration_ms=10**12)
    assert again.state.ongoing_transactions() == {1: 0}
    assert again.last_stable_offset(3) == 0
    assert again.state.entry(2).coordinator_epoch == 4
    assert plog2.collect_aborted_transactions(0, 3) == [AbortedTxn(2, 1, 2, 0)]
    plog2.close()


def test_a_lost_txnindex_is_rebuilt_from_the_markers_after_the_snapshot(tmp_path):
    d = tmp_path / "t-0"
    plog = open_log(d, config(segment_bytes=100000))
    store = ProducerStateStore(plog)
    produce(store, txn_batch(1, 0, [b"x", b"y"]))
    marker(store, 1, False)
    path = plog.segments[-1].txn_index.path
    plog.close()                        # no producer snapshot: a hard stop
    os.unlink(path)
    plog2 = open_log(d, config(segment_bytes=100000), needs_recovery=True)
    again = ProducerStateStore(plog2)
    again.load(now_ms=0, producer_id_expiration_ms=10**12)
    assert os.path.exists(path)
    assert plog2.collect_aborted_transactions(0, 3) == [AbortedTxn(1, 0, 2, 3)]
    plog2.close()


def test_truncation_drops_the_entries_of_markers_cut_away_and_reopens_the_transaction(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=100000))
    store = ProducerStateStore(plog)
    produce(store, txn_batch(1, 0, [b"x"]))              # 0
    marker(store, 1, False)                              # 1
    assert plog.collect_aborted_transactions(0, 2)
    log_access.truncate_to(store, 1)                     # the marker goes
    assert plog.collect_aborted_transactions(0, 2) == []
    assert store.state.ongoing_transactions() == {1: 0}
    assert store.last_stable_offset(1) == 0
    plog.close()


def test_a_marker_from_an_older_coordinator_epoch_is_refused_and_not_written(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=100000))
    store = ProducerStateStore(plog)
    produce(store, txn_batch(1, 0, [b"x"]))
    marker(store, 1, True, coordinator_epoch=5)
    produce(store, txn_batch(1, 1, [b"y"]))
    batch = build_marker_batch(1, 0, True, 4, 0)
    refusal, info = store.append_marker(batch, read_header(batch), ControlRecord(True, 4),
                                        now_ms=0, leader_epoch=0)
    assert refusal[0] == 52 and info is None and plog.log_end_offset == 3
    plog.close()


def test_follower_applies_the_leaders_markers(tmp_path):
    leader = ProducerStateStore(open_log(tmp_path / "l", config(segment_bytes=100000)))
    produce(leader, txn_batch(1, 0, [b"x"]))
    marker(leader, 1, False)
    follower = ProducerStateStore(open_log(tmp_path / "f", config(segment_bytes=100000)))
    log_access.append_as_follower(follower, read_all(leader.log))
    assert follower.state.same_state(leader.state)
    assert follower.log.collect_aborted_transactions(0, 2) == \
        leader.log.collect_aborted_transactions(0, 2)
    leader.log.close()
    follower.log.close()


def test_segments_with_markers_decode_with_kafka_python(tmp_path):
    """The format oracle: kafka-python's own reader walks data and control batches alike."""
    kafka_records = pytest.importorskip("kafka.record")
    plog = open_log(tmp_path / "t-0", config(segment_bytes=100000))
    store = ProducerStateStore(plog)
    produce(store, txn_batch(1, 0, [b"a", b"b"]))
    marker(store, 1, True)
    produce(store, txn_batch(1, 2, [b"c"]))
    marker(store, 1, False)
    with open(plog.segments[0].log_path, "rb") as f:
        data = f.read()
    records = kafka_records.MemoryRecords(data)
    batches = []
    while records.has_next():
        b = records.next_batch()
        batches.append((b.is_transactional, b.is_control_batch, b.producer_id,
                        [(r.offset, r.key, r.value) for r in b]))
    assert [(t, c, p) for t, c, p, _ in batches] == [(True, False, 1), (True, True, 1),
                                                      (True, False, 1), (True, True, 1)]
    assert batches[0][3] == [(0, b"k0", b"a"), (1, b"k1", b"b")]
    assert batches[1][3][0][1] == struct.pack(">hh", 0, COMMIT)
    assert batches[3][3][0][1] == struct.pack(">hh", 0, ABORT)
    plog.close()


# ---- compaction ----------------------------------------------------------------------------

def test_cleaner_plan_stops_at_the_first_unstable_offset():
    segs = [log_policy.SegmentInfo(b, 100, 0) for b in (0, 10, 20, 30)]
    plan = log_policy.plan_clean(segs, cleaner_checkpoint=0, log_start_offset=0, now_ms=0,
                                 min_compaction_lag_ms=0, first_unstable_offset=15)
    assert plan.first_uncleanable_offset == 10
    assert log_policy.plan_clean(segs, cleaner_checkpoint=0, log_start_offset=0, now_ms=0,
                                 min_compaction_lag_ms=0, first_unstable_offset=5) is None


def test_compaction_removes_aborted_data_keeps_markers_until_retention(tmp_path):
    plog = open_log(tmp_path / "t-0", config(**COMPACT))
    store = ProducerStateStore(plog)
    produce(store, txn_batch(1, 0, [b"aborted"], keys=[b"k"]))          # 0
    produce(store, txn_batch(2, 0, [b"committed"], keys=[b"k"]))        # 1
    marker(store, 1, False)                                             # 2
    marker(store, 2, True)                                              # 3
    produce(store, build_batch([(1000, b"other", b"v")]))               # 4
    store.roll(0)
    assert store.last_stable_offset(5) == 5          # the high watermark passed the markers
    # before delete.retention.ms: the aborted record goes; both markers stay (the commit marker
    # has its record before it; the abort marker waits for delete.retention.ms)
    clean_log(plog, now_ms=1500 - 1000, force=True)
    got = [(r.offset, r.key, r.value) for r in decode_batches(read_all(plog))]
    assert got == [(1, b"k", b"committed"), (2, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00"),
                   (3, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00"), (4, b"other", b"v")]
    assert plog.collect_aborted_transactions(0, 5) == [AbortedTxn(1, 0, 2, 1)]
    # the committed value is superseded by a plain write; past delete.retention.ms both markers
    # go: neither transaction has records left
    produce(store, build_batch([(5000, b"k", b"newer")]))               # 5
    store.roll(0)
    store.last_stable_offset(6)
    clean_log(plog, now_ms=10_000, force=True)
    got = [(r.offset, r.key, r.value) for r in decode_batches(read_all(plog))]
    assert got == [(4, b"other", b"v"), (5, b"k", b"newer")]
    assert plog.collect_aborted_transactions(0, 6) == []
    plog.close()


def test_compaction_never_touches_an_open_transaction(tmp_path):
    plog = open_log(tmp_path / "t-0", config(**COMPACT))
    store = ProducerStateStore(plog)
    produce(store, build_batch([(1000, b"k", b"v1")]))
    store.roll(0)
    produce(store, txn_batch(1, 0, [b"open"], keys=[b"k"]))
    store.roll(0)
    produce(store, build_batch([(1000, b"z", b"v")]))
    store.roll(0)
    assert plog.first_unstable_offset_hint == 1
    clean_log(plog, now_ms=0, force=True)
    got = [(r.offset, r.value) for r in decode_batches(read_all(plog))]
    assert (0, b"v1") in got and (1, b"open") in got
    plog.close()
