"""ProducerStateManager: Kafka's idempotent-producer sequence rules, expiry, rebuild, restore."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riverbed import errors
from riverbed.records import BatchHeader
from services.storage_node.core.producer_state import (
    MAX_CACHED_BATCHES, SEQ_MOD, BatchKey, ProducerStateEntry, ProducerStateManager, Verdict,
    next_sequence, resolve_old_duplicates, with_assigned_offsets)

code = errors.ErrorCode.Value
PID = 7


def hdr(pid=PID, epoch=0, seq=0, count=1, base_offset=0, ts=1000, control=False) -> BatchHeader:
    """A batch header as a client sends it (or, with base_offset, as the log holds it)."""
    return BatchHeader(base_offset=base_offset, batch_length=49 + 7 * count,
                       partition_leader_epoch=0, magic=2, crc=0,
                       attributes=0x20 if control else 0, last_offset_delta=count - 1,
                       base_timestamp=ts, max_timestamp=ts, producer_id=pid,
                       producer_epoch=epoch if pid >= 0 else -1,
                       base_sequence=seq if pid >= 0 else -1, records_count=count)


class Leader:
    """A leader's log in miniature: offsets assigned end to end, state kept via the manager."""

    def __init__(self, **kw):
        self.state = ProducerStateManager(**kw)
        self.leo = 0
        self.log: list[BatchHeader] = []

    def produce(self, *headers):
        decision = self.state.check_and_prepare(headers)
        if decision.verdict is Verdict.APPEND:
            written = with_assigned_offsets(headers, self.leo)
            self.state.on_appended(written)
            self.log += written
            self.leo = written[-1].next_offset
        self.state.check_invariants()
        return decision


def test_first_batches_in_sequence_are_appended_with_offsets():
    leader = Leader()
    assert leader.produce(hdr(seq=0, count=3)).verdict is Verdict.APPEND
    assert leader.produce(hdr(seq=3, count=2)).verdict is Verdict.APPEND
    entry = leader.state.entry(PID)
    assert entry.producer_epoch == 0 and entry.last_seq == 4
    assert [(b.first_offset, b.last_offset) for b in entry.batches] == [(0, 2), (3, 4)]
    assert leader.state.map_end_offset == 5


@pytest.mark.parametrize("which", range(MAX_CACHED_BATCHES))
def test_duplicate_of_each_of_the_last_five_answers_its_original_offset(which):
    leader = Leader()
    leader.produce(hdr(seq=0, count=4))                    # pushed out of the cache later
    sent = [hdr(seq=4 + 2 * i, count=2) for i in range(MAX_CACHED_BATCHES)]
    for h in sent:
        leader.produce(h)
    before = leader.state.entries()
    d = leader.produce(sent[which])
    assert d.verdict is Verdict.DUPLICATE and d.error_code == code("NONE")
    assert (d.first_offset, d.last_offset) == (4 + 2 * which, 5 + 2 * which)
    assert leader.state.entries() == before and leader.leo == 14


def test_duplicate_older_than_the_cache_is_duplicate_sequence_number():
    leader = Leader()
    for i in range(MAX_CACHED_BATCHES + 1):
        leader.produce(hdr(seq=i))
    d = leader.produce(hdr(seq=0))
    assert d.verdict is Verdict.REFUSE and d.error_code == code("DUPLICATE_SEQUENCE_NUMBER")


def test_duplicate_older_than_the_cache_names_the_batches_to_find_in_the_log():
    leader = Leader()
    for i in range(MAX_CACHED_BATCHES + 2):
        leader.produce(hdr(seq=2 * i, count=2))            # offsets 2i..2i+1
    d = leader.produce(hdr(seq=2, count=2))
    assert d.old_duplicates == (BatchKey(PID, 0, 2, 3),)
    assert d.old_duplicates_below == 4                      # the oldest cached batch's offset
    assert d.old_duplicates_guess == 2                      # one producer alone: exact
    found = resolve_old_duplicates(d, reversed(leader.log))
    assert found.verdict is Verdict.DUPLICATE and found.error_code == code("NONE")
    assert (found.first_offset, found.last_offset) == (2, 3)
    assert leader.leo == 2 * (MAX_CACHED_BATCHES + 2)       # nothing appended


def test_old_duplicate_not_in_the_log_stays_duplicate_sequence_number():
    leader = Leader()
    for i in range(MAX_CACHED_BATCHES + 2):
        leader.produce(hdr(seq=i))
    d = leader.produce(hdr(seq=0))
    gone = resolve_old_duplicates(d, leader.log[1:])        # offset 0 deleted by retention
    assert gone is d and gone.error_code == code("DUPLICATE_SEQUENCE_NUMBER")
    other_epoch = resolve_old_duplicates(d, [hdr(epoch=1, seq=0)])
    assert other_epoch is d


def test_payload_mixing_an_old_duplicate_with_new_batches_is_out_of_order():
    leader = Leader()
    for i in range(MAX_CACHED_BATCHES + 1):
        leader.produce(hdr(seq=i))
    d = leader.produce(hdr(seq=0), hdr(seq=MAX_CACHED_BATCHES + 1))
    assert d.error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER") and not d.old_duplicates


@pytest.mark.parametrize("window", [1, 5, 16, 64])
def test_the_window_is_configurable(window):
    leader = Leader(batches_retained=window)
    for i in range(window + 3):
        leader.produce(hdr(seq=i))
    assert len(leader.state.entry(PID).batches) == window
    oldest_cached = 3
    d = leader.produce(hdr(seq=oldest_cached))
    assert d.verdict is Verdict.DUPLICATE and d.first_offset == oldest_cached
    d = leader.produce(hdr(seq=oldest_cached - 1))
    assert d.error_code == code("DUPLICATE_SEQUENCE_NUMBER")


def test_window_out_of_range_is_refused():
    with pytest.raises(ValueError):
        ProducerStateManager(batches_retained=0)
    with pytest.raises(ValueError):
        ProducerStateManager(batches_retained=100_000)


def test_a_snapshot_from_a_wider_window_restores_into_a_narrower_one():
    wide = Leader(batches_retained=12)
    for i in range(12):
        wide.produce(hdr(seq=i))
    narrow = ProducerStateManager(batches_retained=5)
    narrow.restore(wide.state.entries(), wide.state.map_end_offset)
    narrow.check_invariants()
    assert [b.first_seq for b in narrow.entry(PID).batches] == [7, 8, 9, 10, 11]
    assert isinstance(narrow.entry(PID), ProducerStateEntry)


@pytest.mark.parametrize("seq", [2, 5, 1000])
def test_gap_is_out_of_order(seq):
    leader = Leader()
    leader.produce(hdr(seq=0))
    d = leader.produce(hdr(seq=seq))
    assert d.verdict is Verdict.REFUSE and d.error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert leader.leo == 1


def test_overlapping_batch_not_in_cache_is_out_of_order():
    leader = Leader()
    leader.produce(hdr(seq=0, count=4))
    d = leader.produce(hdr(seq=2, count=4))               # 2..5 overlaps 0..3, not a retry
    assert d.error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER")


def test_older_epoch_is_refused_and_newer_epoch_must_start_at_zero():
    leader = Leader()
    leader.produce(hdr(epoch=3, seq=0, count=5))
    old = leader.produce(hdr(epoch=2, seq=5))
    assert old.error_code == code("INVALID_PRODUCER_EPOCH")
    jump = leader.produce(hdr(epoch=4, seq=5))
    assert jump.error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert leader.produce(hdr(epoch=4, seq=0, count=2)).verdict is Verdict.APPEND
    entry = leader.state.entry(PID)
    assert entry.producer_epoch == 4 and len(entry.batches) == 1   # new epoch clears the cache
    # a retry of an old-epoch batch is not a duplicate any more
    assert leader.produce(hdr(epoch=3, seq=0, count=5)).error_code == code(
        "INVALID_PRODUCER_EPOCH")


def test_sequence_wraps_from_int32_max_to_zero():
    leader = Leader()
    top = SEQ_MOD - 3
    assert leader.produce(hdr(seq=top, count=3)).verdict is Verdict.APPEND   # unknown: any seq
    assert leader.state.entry(PID).last_seq == SEQ_MOD - 1
    assert leader.produce(hdr(seq=0, count=2)).verdict is Verdict.APPEND
    assert leader.state.entry(PID).last_seq == 1
    assert leader.produce(hdr(seq=top, count=3)).verdict is Verdict.DUPLICATE
    # a batch spanning the wrap: last_seq wraps too
    assert next_sequence(SEQ_MOD - 1, 2) == 1
    assert leader.produce(hdr(seq=3)).error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER")


def test_unknown_producer_any_sequence_accepted_unless_strict():
    assert Leader().produce(hdr(seq=42)).verdict is Verdict.APPEND          # Kafka >= 2.5
    strict = Leader(reject_unknown_producer_sequence=True)
    d = strict.produce(hdr(seq=42))
    assert d.error_code == code("UNKNOWN_PRODUCER_ID") and strict.leo == 0
    assert strict.produce(hdr(seq=0)).verdict is Verdict.APPEND


def test_non_idempotent_batches_always_pass_and_move_the_map_end():
    leader = Leader()
    for _ in range(3):
        assert leader.produce(hdr(pid=-1, count=2)).verdict is Verdict.APPEND
    assert len(leader.state) == 0 and leader.state.map_end_offset == 6


def test_negative_sequence_from_idempotent_producer_is_invalid_record():
    bad = hdr()
    bad = BatchHeader(**{**{f: getattr(bad, f) for f in BatchHeader.__dataclass_fields__},
                         "base_sequence": -1})
    assert Leader().produce(bad).error_code == code("INVALID_RECORD")


def test_mixed_payload_checks_each_producer_and_chains_sequences():
    leader = Leader()
    d = leader.produce(hdr(pid=1, seq=0, count=2), hdr(pid=-1, count=3),
                       hdr(pid=2, seq=0), hdr(pid=1, seq=2, count=1))
    assert d.verdict is Verdict.APPEND
    assert leader.state.entry(1).last_seq == 2 and leader.state.entry(2).last_seq == 0
    assert [(b.first_offset, b.last_offset) for b in leader.state.entry(1).batches] == \
        [(0, 1), (6, 6)]


def test_payload_is_all_or_nothing():
    leader = Leader()
    leader.produce(hdr(pid=1, seq=0))
    before = (leader.state.entries(), leader.state.map_end_offset)
    # first batch fine, second has a gap: nothing is appended, the state is untouched
    d = leader.produce(hdr(pid=1, seq=1), hdr(pid=2, seq=0), hdr(pid=1, seq=5))
    assert d.error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert (leader.state.entries(), leader.state.map_end_offset) == before and leader.leo == 1
    # two batches of one producer in a payload must follow each other
    assert leader.produce(hdr(pid=1, seq=1), hdr(pid=1, seq=1)).error_code == code(
        "OUT_OF_ORDER_SEQUENCE_NUMBER")


def test_payload_of_duplicates_only_is_a_duplicate_and_mixed_is_refused():
    leader = Leader()
    leader.produce(hdr(pid=1, seq=0))
    leader.produce(hdr(pid=1, seq=1, count=2))
    d = leader.produce(hdr(pid=1, seq=0), hdr(pid=1, seq=1, count=2))
    assert d.verdict is Verdict.DUPLICATE and (d.first_offset, d.last_offset) == (0, 2)
    mixed = leader.produce(hdr(pid=1, seq=1, count=2), hdr(pid=1, seq=3))
    assert mixed.error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER") and leader.leo == 3


def test_check_changes_nothing_until_on_appended():
    state = ProducerStateManager()
    assert state.check_and_prepare([hdr(seq=0)]).ok
    assert state.entry(PID) is None
    assert state.check_and_prepare([hdr(seq=0)]).ok            # still unknown: same answer
    state.on_appended(with_assigned_offsets([hdr(seq=0)], 10))
    assert state.entry(PID).batches[0].first_offset == 10 and state.map_end_offset == 11


def test_with_assigned_offsets_and_log_append_time():
    out = with_assigned_offsets([hdr(count=3), hdr(count=2, seq=3)], 100, log_append_time_ms=77)
    assert [(h.base_offset, h.last_offset, h.max_timestamp) for h in out] == \
        [(100, 102, 77), (103, 104, 77)]


def test_follower_applies_without_checks_including_older_epochs():
    state = ProducerStateManager()
    state.on_replicated([hdr(epoch=5, seq=9, base_offset=0), hdr(epoch=2, seq=3, base_offset=1)])
    e = state.entry(PID)
    assert (e.producer_epoch, e.last_seq, e.last_offset) == (2, 3, 1)


def test_control_batches_are_not_producer_state():
    state = ProducerStateManager()
    state.on_replicated([hdr(control=True, base_offset=0)])
    assert state.entry(PID) is None and state.map_end_offset == 1


def test_expire_drops_producers_idle_for_the_expiration():
    state = ProducerStateManager()
    state.on_replicated([hdr(pid=1, ts=1000, base_offset=0), hdr(pid=2, ts=5000, base_offset=1)])
    assert state.expire(now_ms=5999, producer_id_expiration_ms=5000) == []
    assert state.expire(now_ms=6000, producer_id_expiration_ms=5000) == [1]   # >=, as Kafka
    assert state.entry(1) is None and state.entry(2) is not None
    # the expired producer is now unknown: any sequence is accepted again
    assert state.check_and_prepare([hdr(pid=1, seq=99)]).ok


def test_restore_refuses_entries_at_or_above_the_snapshot_offset():
    state = ProducerStateManager()
    state.on_replicated([hdr(base_offset=4)])
    with pytest.raises(ValueError):
        ProducerStateManager().restore(state.entries(), 4)
    other = ProducerStateManager()
    other.restore(state.entries(), 5)
    assert other.same_state(state)


# ---- properties: any history -> rebuild from the log (from any snapshot point) is identical ----

ops = st.lists(st.tuples(st.integers(-1, 3),            # producer id (-1: not idempotent)
                         st.integers(0, 2),             # epoch
                         st.sampled_from(["next", "dup", "zero", "gap", "wrap"]),
                         st.integers(1, 4),             # records
                         st.integers(0, 10_000)),       # timestamp
               min_size=1, max_size=40)


def _history(leader: Leader, script) -> list[int]:
    """Drive the leader with a script of produce attempts; returns the map end after each."""
    ends = []
    for pid, epoch, kind, count, ts in script:
        e = leader.state.entry(pid) if pid >= 0 else None
        last = e.last_seq if e is not None else -1
        seq = {"next": next_sequence(last, 1) if last >= 0 else 0,
               "dup": e.batches[0].first_seq if e is not None else 0,
               "zero": 0, "gap": next_sequence(last, 3), "wrap": SEQ_MOD - 2}[kind]
        if kind == "dup" and e is not None:
            count = e.batches[0].last_offset - e.batches[0].first_offset + 1
        leader.produce(hdr(pid=pid, epoch=epoch, seq=seq, count=count, ts=ts))
        ends.append(leader.state.map_end_offset)
    return ends


@settings(max_examples=150, deadline=None)
@given(script=ops, cut=st.integers(0, 40))
def test_rebuild_from_headers_equals_incremental_state(script, cut):
    leader = Leader()
    appended_before_cut = []
    for i, step in enumerate(script):
        _history(leader, [step])
        if i == cut:
            appended_before_cut = (leader.state.entries(), leader.state.map_end_offset)
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(leader.log)
    assert rebuilt.same_state(leader.state)
    if appended_before_cut:                   # restore a "snapshot" taken mid-way, replay the rest
        entries, offset = appended_before_cut
        resumed = ProducerStateManager()
        resumed.restore(entries, offset)
        resumed.rebuild(leader.log)           # batches below the snapshot offset are skipped
        assert resumed.same_state(leader.state)


@settings(max_examples=100, deadline=None)
@given(script=ops, data=st.data())
def test_truncation_by_rebuild_equals_state_of_the_prefix(script, data):
    """Kafka's truncation: reload the state of a point at or below the cut and replay the log up
    to the cut; it must equal the state the leader had when its log ended there."""
    leader = Leader()
    states = {0: ((), 0)}
    for step in script:
        _history(leader, [step])
        states[leader.leo] = (leader.state.entries(), leader.state.map_end_offset)
    cut = data.draw(st.sampled_from(sorted(states)))
    snap = data.draw(st.sampled_from([o for o in sorted(states) if o <= cut]))
    kept = [h for h in leader.log if h.last_offset < cut]
    state = ProducerStateManager()
    state.restore(*states[snap])
    state.rebuild(kept)
    state.update_map_end_offset(cut)
    assert state.entries() == states[cut][0] and state.map_end_offset == cut


def test_in_a_whole_log_a_new_producer_must_start_at_sequence_zero():
    # Two requests crossed (e.g. in a gateway): batch 2..3 arrives before 0..1. In a log
    # nothing was removed from, the leader refuses it (OUT_OF_ORDER: the client retries it after
    # 0..1) instead of accepting it and later taking 0..1 for an old duplicate.
    state = ProducerStateManager()
    d = state.check_and_prepare([hdr(seq=2, count=2)], log_whole=True)
    assert d.error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert state.check_and_prepare([hdr(seq=0, count=2)], log_whole=True).ok
    assert state.check_and_prepare([hdr(seq=0, count=2), hdr(seq=2, count=2)],
                                   log_whole=True).ok
    # With retention or compaction behind it the leader cannot tell: KIP-360 accepts.
    assert state.check_and_prepare([hdr(seq=2, count=2)], log_whole=False).ok
    assert state.check_and_prepare([hdr(pid=-1)], log_whole=True).ok
