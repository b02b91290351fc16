"""PartitionLog: append/read round trips across rolls, bounds, time lookups, bad input, truncation."""
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverbed import errors
from riverbed.records import build_batch, decode_batches, iter_batches, read_header

from log_helpers import batch, config, headers_of, open_log, read_all, records_from

TMP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

values = st.lists(st.binary(max_size=120), min_size=1, max_size=6)


@TMP
@given(payloads=st.lists(st.lists(values, min_size=1, max_size=3), min_size=1, max_size=25),
       seg_bytes=st.integers(200, 2000), interval=st.integers(0, 300),
       budget=st.integers(1, 3000))
def test_any_appends_read_back_identical(tmp_path_factory, payloads, seg_bytes, interval, budget):
    d = tmp_path_factory.mktemp("log")
    plog = open_log(d / "t-0", config(segment_bytes=seg_bytes, index_interval_bytes=interval,
                                      segment_index_bytes=120))
    expected = []          # (offset, value) per record
    sent = []              # raw batches with the offsets the log must give them
    for payload_values in payloads:
        raw = b"".join(batch(v) for v in payload_values)
        info = plog.append(raw, now_ms=0, leader_epoch=2)
        assert info.first_offset == len(expected)
        for v in payload_values:
            for x in v:
                expected.append((len(expected), x))
        assert info.last_offset == len(expected) - 1
        assert info.batch_count == len(payload_values)
        sent.append(raw)
    assert plog.log_end_offset == len(expected)
    data = read_all(plog, max_bytes=budget)
    # byte-identical except the stamped base offset and leader epoch
    got = headers_of(data)
    assert [h.partition_leader_epoch for h in got] == [2] * len(got)
    assert len(data) == sum(len(s) for s in sent)
    recs = decode_batches(data)
    assert [(r.offset, r.value) for r in recs] == expected
    # each offset reads from the batch that holds it
    for off in range(0, len(expected), 7):
        r = plog.read(off, budget)
        first = read_header(r.data)
        assert first.base_offset <= off <= first.last_offset
        assert r.first_offset == first.base_offset
    # reopen after a clean close: same bytes
    plog.close()
    again = open_log(d / "t-0", config(segment_bytes=seg_bytes, index_interval_bytes=interval,
                                       segment_index_bytes=120))
    assert read_all(again, max_bytes=budget) == data
    again.close()


def test_read_bounds(tmp_path):
    plog = open_log(tmp_path / "t-0")      # one segment: a read never crosses a segment end
    for i in range(10):
        plog.append(batch([b"x" * 50, b"y" * 50]), now_ms=0)
    end = plog.log_end_offset
    assert end == 20
    assert plog.read(end, 1000).data == b""
    with pytest.raises(errors.OffsetOutOfRangeError):
        plog.read(end + 1, 1000)
    with pytest.raises(errors.OffsetOutOfRangeError):
        plog.read(-1, 1000)
    # at least one batch, even with a tiny budget; none when min_one_batch=False
    r = plog.read(3, 1)
    assert len(headers_of(r.data)) == 1 and r.next_offset == 4
    assert plog.read(3, 1, min_one_batch=False).data == b""
    # never beyond max_offset: only batches whose last offset is below it
    r = plog.read(0, 1 << 20, max_offset=7)
    assert all(h.last_offset < 7 for h in headers_of(r.data))
    assert headers_of(r.data)[-1].last_offset == 5
    assert plog.read(6, 1 << 20, max_offset=7).data == b""
    # the budget is respected when more than one batch fits
    one = len(batch([b"x" * 50, b"y" * 50]))
    r = plog.read(0, 2 * one + 10)
    assert len(r.data) == 2 * one


def test_offset_for_timestamp(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=300, index_interval_bytes=10))
    for i in range(20):
        plog.append(build_batch([(1000 + 10 * i, b"k", b"a"), (1005 + 10 * i, b"k", b"b")]), now_ms=0)
    assert plog.offset_for_timestamp(-2) == (0, -1)
    assert plog.offset_for_timestamp(-1) == (40, -1)
    assert plog.offset_for_timestamp(0) == (0, 1000)
    assert plog.offset_for_timestamp(1005) == (1, 1005)
    assert plog.offset_for_timestamp(1006) == (2, 1010)
    assert plog.offset_for_timestamp(1153) == (31, 1155)
    assert plog.offset_for_timestamp(1196) is None


@pytest.mark.parametrize("damage", ["crc", "length", "magic", "too_large", "trailing", "empty"])
def test_bad_input_changes_nothing(tmp_path, damage):
    plog = open_log(tmp_path / "t-0", config(max_message_bytes=400))
    plog.append(batch([b"ok"]), now_ms=0)
    before = {n: (tmp_path / "t-0" / n).read_bytes() for n in os.listdir(tmp_path / "t-0")}
    good = bytearray(batch([b"fine"]))
    bad = bytearray(batch([b"v" * 50]))
    if damage == "crc":
        bad[-1] ^= 1
    elif damage == "length":
        bad[8:12] = (len(bad) + 5).to_bytes(4, "big")
    elif damage == "magic":
        bad[16] = 1
    elif damage == "too_large":
        bad = bytearray(batch([b"v" * 500]))
    elif damage == "trailing":
        bad += b"\x00" * 7
    elif damage == "empty":
        good, bad = bytearray(), bytearray()
    expected = errors.MessageTooLargeError if damage == "too_large" else errors.CorruptMessageError
    with pytest.raises(expected):
        plog.append(bytes(good + bad), now_ms=0)      # a valid batch first: still all refused
    assert plog.log_end_offset == 1
    after = {n: (tmp_path / "t-0" / n).read_bytes() for n in os.listdir(tmp_path / "t-0")}
    assert after == before
    assert plog.append(batch([b"next"]), now_ms=0).first_offset == 1


def test_replica_append_keeps_offsets(tmp_path):
    leader = open_log(tmp_path / "l-0")
    for i in range(5):
        leader.append(batch([b"a", b"b"]), now_ms=0, leader_epoch=4)
    follower = open_log(tmp_path / "f-0")
    data = read_all(leader)
    info = follower.append(data, now_ms=0, assign_offsets=False)
    assert (info.first_offset, info.last_offset) == (0, 9)
    assert read_all(follower) == data
    assert follower.epochs.entries == [(4, 0)]
    with pytest.raises(errors.InvalidRecordError):
        follower.append(data, now_ms=0, assign_offsets=False)
    assert follower.log_end_offset == 10


def test_segment_files_and_indexes(tmp_path):
    cfg = config(segment_bytes=1000, index_interval_bytes=100, segment_index_bytes=1024)
    plog = open_log(tmp_path / "t-0", cfg)
    for i in range(30):
        plog.append(batch([b"v" * 80]), now_ms=0)
    names = sorted(os.listdir(tmp_path / "t-0"))
    logs = [n for n in names if n.endswith(".log")]
    assert len(logs) >= 3 and logs[0] == "00000000000000000000.log"
    assert all(len(n) == 24 for n in logs)
    base = plog.active_segment.base_offset
    active = f"{base:020d}"
    assert os.path.getsize(tmp_path / "t-0" / f"{active}.index") == 1024      # preallocated
    assert os.path.getsize(tmp_path / "t-0" / f"{active}.timeindex") == 1020
    first_index = os.path.getsize(tmp_path / "t-0" / "00000000000000000000.index")
    assert 0 < first_index < 1024 and first_index % 8 == 0                    # trimmed at roll
    plog.close()
    assert os.path.getsize(tmp_path / "t-0" / f"{active}.index") % 8 == 0
    assert os.path.getsize(tmp_path / "t-0" / f"{active}.index") < 1024      # trimmed on close
    # a full index rolls: room for 2 entries only
    plog = open_log(tmp_path / "u-0", config(index_interval_bytes=0, segment_index_bytes=16))
    for i in range(6):
        plog.append(batch([b"v"]), now_ms=0)
    assert len(plog.segments) >= 2


def test_roll_on_segment_ms_with_jitter(tmp_path):
    cfg = config(segment_ms=1000, segment_jitter_ms=500)
    plog = open_log(tmp_path / "t-0", cfg, seed=3)
    jitter = plog.active_segment.jitter_ms
    assert 0 <= jitter < 500
    plog.append(build_batch([(10_000, b"k", b"v")]), now_ms=0)
    plog.append(build_batch([(10_000 + 1000 - jitter, b"k", b"v")]), now_ms=0)
    assert len(plog.segments) == 1
    plog.append(build_batch([(10_000 + 1001 - jitter, b"k", b"v")]), now_ms=0)
    assert len(plog.segments) == 2 and plog.active_segment.base_offset == 2


def test_log_append_time(tmp_path):
    plog = open_log(tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"))
    info = plog.append(batch([b"a", b"b"], ts=5), now_ms=777)
    assert info.log_append_time_ms == 777 and info.max_timestamp == 777
    h = headers_of(read_all(plog))[0]
    assert h.max_timestamp == 777 and h.timestamp_type == 1


def test_truncate_to(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=300))
    for i in range(12):
        plog.append(batch([b"v" * 40, b"w" * 40]), now_ms=0, leader_epoch=i // 4)
    assert plog.epochs.entries == [(0, 0), (1, 8), (2, 16)]
    assert plog.truncate_to(9) == 8            # the batch holding 9 starts at 8
    assert plog.log_end_offset == 8
    assert [r.offset for r in records_from(plog)] == list(range(8))
    assert plog.epochs.entries == [(0, 0)]
    assert plog.append(batch([b"new"]), now_ms=0, leader_epoch=5).first_offset == 8
    plog.truncate_fully_and_start_at(100)
    assert (plog.log_start_offset, plog.log_end_offset) == (100, 100)
    assert plog.append(batch([b"x"]), now_ms=0).first_offset == 100
    plog.close()
    again = open_log(tmp_path / "t-0", config(segment_bytes=300), log_start_offset=100)
    assert (again.log_start_offset, again.log_end_offset) == (100, 101)


def test_leader_epoch_checkpoint_file(tmp_path):
    plog = open_log(tmp_path / "t-0")
    ckpt = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert ckpt.read_text() == "0\n0\n"          # a new log: the empty checkpoint
    plog.append(batch([b"a"]), now_ms=0, leader_epoch=1)
    plog.append(batch([b"a"]), now_ms=0, leader_epoch=3)
    assert plog.end_offset_for_epoch(1) == (1, 1)
    assert plog.end_offset_for_epoch(3) == (3, 2)
    # new epochs reach the file with the flush that moves the recovery point, not per append
    assert ckpt.read_text() == "0\n0\n"
    plog.flush()
    assert ckpt.read_text() == "0\n2\n1 0\n3 1\n"
    plog.close()
    assert open_log(tmp_path / "t-0").epochs.entries == [(1, 0), (3, 1)]


def test_epochs_of_a_new_leader_are_written_by_the_flush(tmp_path):
    plog = open_log(tmp_path / "t-0")
    plog.append(batch([b"a"]), now_ms=0, leader_epoch=1)
    plog.assign_epoch(4, plog.log_end_offset)     # became leader at epoch 4 at the log end
    assert plog.epochs.entries == [(1, 0), (4, 1)]
    plog.close()                                   # close flushes
    ckpt = (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text()
    assert ckpt == "0\n2\n1 0\n4 1\n"
    # reopened: an epoch starting at the log end has no batch on disk and is dropped
    assert open_log(tmp_path / "t-0").epochs.entries == [(1, 0)]


def test_recovery_reassigns_epochs_the_checkpoint_lacks(tmp_path):
    """A crash (no close, no flush) after appends of new epochs: the checkpoint on disk has
    only the flushed epochs; recovery reads the rest from the batch headers above the
    recovery point (Kafka's LogSegment.recover)."""
    d = tmp_path / "t-0"
    plog = open_log(d, config(segment_bytes=300))
    for i in range(3):
        plog.append(batch([b"v" * 40]), now_ms=0, leader_epoch=1)
    plog.flush()                                   # recovery point 3, epoch 1 on disk
    recovery_point = plog.recovery_point
    for i in range(6):
        plog.append(batch([b"w" * 40]), now_ms=0, leader_epoch=2 + i // 3)
    assert plog.epochs.entries == [(1, 0), (2, 3), (3, 6)]
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    # crash: the files stay as they are; no close
    again = open_log(d, config(segment_bytes=300), recovery_point=recovery_point,
                     needs_recovery=True)
    assert again.log_end_offset == 9
    assert again.epochs.entries == [(1, 0), (2, 3), (3, 6)]
    assert again.end_offset_for_epoch(2) == (2, 6)
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n2 3\n3 6\n"
    again.close()


def test_flush_writes_epochs_before_the_recovery_point_moves(tmp_path):
    """Whatever the recovery point covers has its epochs in the checkpoint: a clean reopen
    (no recovery scan) must find them."""
    d = tmp_path / "t-0"
    plog = open_log(d, config(segment_bytes=250))
    for i in range(8):                              # rolls: the flush after a roll runs on tick
        plog.append(batch([b"x" * 40]), now_ms=0, leader_epoch=1 + i // 2)
        plog.tick(0)
    entries = list(plog.epochs.entries)
    rp = plog.recovery_point
    assert rp > 0
    text = (d / "leader-epoch-checkpoint").read_text().split("\n")
    saved = [tuple(map(int, line.split())) for line in text[2:] if line]
    covered = [e for e in entries if e[1] < rp]
    assert len(covered) >= 2 and saved[:len(covered)] == covered
    plog.close()


def test_prevalidated_append_writes_what_a_validating_append_writes(tmp_path):
    from riverbed.records import validate_batches
    payloads = [b"".join(batch([bytes([i]) * (10 + j)] * 3) for j in range(i % 3 + 1))
                for i in range(12)]
    a = open_log(tmp_path / "a-0", config(segment_bytes=700))
    b = open_log(tmp_path / "b-0", config(segment_bytes=700))
    for raw in payloads:
        ia = a.append(raw, now_ms=0, leader_epoch=1)
        ib = b.append(raw, now_ms=0, leader_epoch=1, validated=validate_batches(raw))
        assert ia == ib
    assert read_all(a) == read_all(b)
    assert [s.base_offset for s in a.segments] == [s.base_offset for s in b.segments]


def test_prevalidated_append_still_enforces_this_logs_max_message_bytes(tmp_path):
    from riverbed.records import validate_batches
    plog = open_log(tmp_path / "t-0", config(max_message_bytes=300))
    big = batch([b"x" * 400])
    with pytest.raises(errors.MessageTooLargeError):
        plog.append(big, now_ms=0, leader_epoch=0, validated=validate_batches(big))
    assert plog.log_end_offset == 0 and read_all(plog) == b""
