"""Producer snapshots and ProducerStateStore on a real PartitionLog: the file format, snapshots on
roll and at clean shutdown, loading (corrupt snapshots skipped), truncation, old snapshots deleted."""
from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverbed.records import build_batch, iter_batches
from services.storage_node.core.producer_state import (
    BatchMetadata, ProducerStateEntry, ProducerStateManager, Verdict)
from services.storage_node.log import producer_snapshot as ps
from services.storage_node.log.producer_snapshot import (
    ProducerSnapshotError, ProducerStateStore, decode_snapshot, encode_snapshot, list_snapshots)

from log_helpers import config, open_log

DAY_MS = 86_400_000


def pbatch(pid: int, seq: int, n: int = 2, *, epoch: int = 0, ts: int = 1000) -> bytes:
    return build_batch([(ts, b"k%d" % i, b"v" * 20) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


def headers(payload: bytes):
    return [h for _pos, h in iter_batches(payload)]


def produce(store: ProducerStateStore, payload: bytes, now_ms: int = 0):
    return store.append_as_leader(payload, headers(payload), now_ms=now_ms, leader_epoch=0)


def fill(store: ProducerStateStore, rounds: int, producers=(1, 2, 3)) -> None:
    seqs = {p: 0 for p in producers}
    for i in range(rounds):
        p = producers[i % len(producers)]
        decision, _info = produce(store, pbatch(p, seqs[p]))
        assert decision.ok
        seqs[p] += 2


def rebuilt_from_log(plog) -> ProducerStateManager:
    state = ProducerStateManager(map_end_offset=plog.log_start_offset)
    state.rebuild(ps.iter_batch_headers(plog, plog.log_start_offset))
    state.update_map_end_offset(plog.log_end_offset)
    return state


# ---- the format ------------------------------------------------------------------------------

metas = st.builds(BatchMetadata, st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                  st.integers(0, 2**40), st.integers(0, 2**40), st.integers(-1, 2**45))
entries_st = st.dictionaries(
    st.integers(0, 2**63 - 1),
    st.tuples(st.integers(0, 32767), st.lists(metas, min_size=1, max_size=5), st.integers()),
    max_size=8).map(lambda d: [ProducerStateEntry(pid, ep, tuple(bs), ts)
                               for pid, (ep, bs, ts) in d.items()])
entries_st = entries_st.filter(lambda es: all(-2**63 <= e.last_timestamp < 2**63 for e in es))


@settings(max_examples=100, deadline=None)
@given(entries=entries_st)
def test_snapshot_round_trip(entries):
    data = encode_snapshot(entries)
    assert decode_snapshot(data) == sorted(entries, key=lambda e: e.producer_id)


@settings(max_examples=100, deadline=None)
@given(entries=entries_st.filter(bool), data=st.data())
def test_any_damage_is_detected(entries, data):
    raw = bytearray(encode_snapshot(entries))
    kind = data.draw(st.sampled_from(["flip", "truncate", "append"]))
    if kind == "flip":
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "truncate":
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    else:
        raw += b"\0"
    with pytest.raises(ProducerSnapshotError):
        decode_snapshot(bytes(raw))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_the_typed_error(raw):
    try:
        decode_snapshot(raw)
    except ProducerSnapshotError:
        pass


def test_header_is_version_then_crc32c():
    data = encode_snapshot([])
    assert data[:2] == b"\x00\x02" and len(data) == 10
    assert ps.snapshot_name(1234) == "00000000000000001234.snapshot"


# ---- the store on a real log ------------------------------------------------------------------

def test_snapshots_on_roll_and_clean_shutdown_then_load_gives_the_same_state(tmp_path):
    d = tmp_path / "t-0"
    plog = open_log(d, config(segment_bytes=400))
    store = ProducerStateStore(plog)
    fill(store, 30)
    bases = [s.base_offset for s in plog.segments]
    assert len(bases) > 2
    assert list_snapshots(str(d)) == bases[1:]          # one per roll, named by the new base
    assert store.state.same_state(rebuilt_from_log(plog))
    expected = store.state.entries()
    assert store.close() is not None
    assert list_snapshots(str(d))[-1] == plog.log_end_offset
    plog.close()

    plog2 = open_log(d, config(segment_bytes=400))
    again = ProducerStateStore(plog2)
    again.load(now_ms=0, producer_id_expiration_ms=DAY_MS)
    assert again.state.entries() == expected and again.state.map_end_offset == plog2.log_end_offset
    # each roll's snapshot is the state of everything below it
    for base in bases[1:]:
        cut = ProducerStateManager()
        cut.rebuild(h for h in ps.iter_batch_headers(plog2, 0) if h.last_offset < base)
        assert ps.read_snapshot(str(d), base) == list(cut.entries())


def test_duplicate_retry_is_answered_without_appending(tmp_path):
    plog = open_log(tmp_path / "t-0")
    store = ProducerStateStore(plog)
    first, info = produce(store, pbatch(9, 0, 3))
    produce(store, pbatch(9, 3, 1))
    again, none = produce(store, pbatch(9, 0, 3))
    assert first.ok and info.first_offset == 0
    assert again.verdict is Verdict.DUPLICATE and none is None
    assert (again.first_offset, again.last_offset) == (0, 2) and plog.log_end_offset == 4
    gap, _ = produce(store, pbatch(9, 9, 1))
    assert gap.verdict is Verdict.REFUSE and plog.log_end_offset == 4


def test_follower_reaches_the_leaders_state(tmp_path):
    leader = ProducerStateStore(open_log(tmp_path / "l", config(segment_bytes=500)))
    fill(leader, 12)
    follower = ProducerStateStore(open_log(tmp_path / "f", config(segment_bytes=500)))
    offset = 0
    while offset < leader.log.log_end_offset:
        r = leader.log.read(offset, 300)
        data = bytes(r.data)
        follower.append_as_follower(data, headers(data), now_ms=0)
        offset = r.next_offset
    assert follower.state.same_state(leader.state)
    assert list_snapshots(follower.dir)                  # the follower snapshots its own rolls


def test_corrupt_newest_snapshot_is_ignored_and_an_older_one_used(tmp_path):
    d = tmp_path / "t-0"
    plog = open_log(d, config(segment_bytes=400))
    store = ProducerStateStore(plog)
    fill(store, 30)
    store.close()
    expected = store.state.entries()
    snaps = list_snapshots(str(d))
    newest = d / ps.snapshot_name(snaps[-1])
    raw = bytearray(newest.read_bytes())
    raw[-1] ^= 0xFF
    newest.write_bytes(bytes(raw))
    (d / ps.snapshot_name(snaps[-2])).write_bytes(b"garbage")
    plog.close()

    again = ProducerStateStore(open_log(d, config(segment_bytes=400)))
    again.load(now_ms=0, producer_id_expiration_ms=DAY_MS)
    assert again.state.entries() == expected
    assert list_snapshots(str(d)) == snaps[:-2]          # the bad ones are deleted


def test_no_snapshot_at_all_rebuilds_from_the_log_start(tmp_path):
    d = tmp_path / "t-0"
    plog = open_log(d, config(segment_bytes=400))
    store = ProducerStateStore(plog)
    fill(store, 20)
    expected = store.state.entries()
    plog.close()
    for o in list_snapshots(str(d)):
        os.unlink(d / ps.snapshot_name(o))
    again = ProducerStateStore(open_log(d, config(segment_bytes=400)))
    again.load(now_ms=0, producer_id_expiration_ms=DAY_MS)
    assert again.state.entries() == expected


def test_load_drops_expired_producers(tmp_path):
    plog = open_log(tmp_path / "t-0")
    store = ProducerStateStore(plog)
    produce(store, pbatch(1, 0, ts=1_000))
    produce(store, pbatch(2, 0, ts=50_000))
    again = ProducerStateStore(plog)
    again.load(now_ms=60_000, producer_id_expiration_ms=30_000)
    assert [e.producer_id for e in again.state.entries()] == [2]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.integers(1, 30), cut_seed=st.integers(0, 10**6))
def test_truncate_to_reloads_the_state_of_the_remaining_log(tmp_path_factory, rounds, cut_seed):
    d = tmp_path_factory.mktemp("log") / "t-0"
    plog = open_log(d, config(segment_bytes=400))
    store = ProducerStateStore(plog)
    fill(store, rounds)
    cut = random.Random(cut_seed).randint(0, plog.log_end_offset)
    new_end = store.truncate_to(cut)
    assert new_end <= cut and plog.log_end_offset == new_end
    assert store.state.same_state(rebuilt_from_log(plog))
    assert all(o <= new_end for o in list_snapshots(str(d)))
    # appends continue from the reloaded state: the next sequence of producer 1 is accepted
    e = store.state.entry(1)
    nxt = e.last_seq + 1 if e is not None else 0
    assert produce(store, pbatch(1, nxt))[0].ok
    plog.close()


def test_truncate_fully_drops_every_snapshot_and_the_state(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=400))
    store = ProducerStateStore(plog)
    fill(store, 20)
    store.truncate_fully_and_start_at(500)
    assert list_snapshots(store.dir) == [] and len(store.state) == 0
    assert store.state.map_end_offset == 500 == plog.log_end_offset


def test_snapshots_below_the_log_start_are_deleted(tmp_path):
    plog = open_log(tmp_path / "t-0", config(segment_bytes=400))
    store = ProducerStateStore(plog)
    fill(store, 30)
    snaps = list_snapshots(store.dir)
    plog.delete_records_before(snaps[2])
    assert store.delete_old_snapshots() == snaps[:2]
    assert list_snapshots(store.dir) == snaps[2:]


def test_crc_valid_snapshot_with_impossible_entries_is_skipped(tmp_path):
    d = tmp_path / "t-0"
    plog = open_log(d, config(segment_bytes=400))
    store = ProducerStateStore(plog)
    fill(store, 20)
    expected = store.state.entries()
    bad = ProducerStateEntry(5, -3, (BatchMetadata(0, 0, 0, 0, 1),), 1)     # negative epoch
    ps.write_snapshot(str(d), plog.log_end_offset, [bad])
    again = ProducerStateStore(plog)
    again.load(now_ms=0, producer_id_expiration_ms=DAY_MS)
    assert again.state.entries() == expected
    assert plog.log_end_offset not in list_snapshots(str(d))
