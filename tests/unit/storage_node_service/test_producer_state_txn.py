"""ProducerStateManager and transactions (KIP-98): open transactions, markers, the last stable
offset, the checks on transactional batches and markers, expiry, restore."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from riverbed import errors
from riverbed.records import BatchHeader
from riverbed.records.control import ControlRecord
from services.storage_node.core.producer_state import (
    CompletedTxn, ProducerStateManager, Verdict, with_assigned_offsets)

code = errors.ErrorCode.Value
TXN, CONTROL = 0x10, 0x20


def hdr(pid=1, epoch=0, seq=0, count=1, base_offset=0, ts=1000, txn=True, control=False):
    return BatchHeader(base_offset=base_offset, batch_length=49 + 7 * count,
                       partition_leader_epoch=0, magic=2, crc=0,
                       attributes=(TXN if txn or control else 0) | (CONTROL if control else 0),
                       last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts,
                       producer_id=pid, producer_epoch=epoch if pid >= 0 else -1,
                       base_sequence=seq if pid >= 0 and not control else -1,
                       records_count=count)


class Log:
    """A leader's log in miniature: data appends checked, markers written, offsets end to end."""

    def __init__(self):
        self.state = ProducerStateManager()
        self.leo = 0
        self.seq: dict[int, int] = {}

    def write(self, pid=1, epoch=0, count=1, txn=True, seq=None, **kw):
        seq = self.seq.get(pid, 0) if seq is None else seq
        h = hdr(pid, epoch, seq, count, txn=txn)
        d = self.state.check_and_prepare([h], **kw)
        if d.verdict is Verdict.APPEND:
            (w,) = with_assigned_offsets([h], self.leo)
            self.state.on_appended([w])
            self.leo = w.next_offset
            self.seq[pid] = seq + count
        self.state.check_invariants()
        return d

    def marker(self, pid=1, epoch=0, commit=True, coordinator_epoch=0):
        refused = self.state.check_marker(pid, epoch, coordinator_epoch)
        if refused is not None:
            return refused
        h = hdr(pid, epoch, base_offset=self.leo, control=True)
        self.state.on_appended([h], {self.leo: ControlRecord(commit, coordinator_epoch)})
        self.leo += 1
        self.state.check_invariants()
        return None


def test_a_transaction_opens_at_its_first_batch_and_holds_the_lso():
    log = Log()
    log.write(pid=9, txn=False, count=2)         # 0..1 plain idempotent
    log.write(pid=1, count=3)                    # 2..4 transactional
    log.write(pid=1, count=1)                    # 5
    assert log.state.ongoing_transactions() == {1: 2}
    assert log.state.last_stable_offset(6) == 2
    assert log.state.last_stable_offset(1) == 1  # never above the high watermark
    assert log.marker(pid=1, commit=True) is None
    (done,) = log.state.take_completed()
    assert done == CompletedTxn(1, 2, 6, False, 7)
    assert log.state.last_stable_offset(6) == 2   # the marker is not below the HW yet
    assert log.state.last_stable_offset(7) == 7
    assert log.state.take_completed() == []


def test_lso_is_the_oldest_open_transaction_and_an_abort_records_the_next_one():
    log = Log()
    log.write(pid=1)                 # 0
    log.write(pid=2)                 # 1
    log.write(pid=1)                 # 2
    assert log.state.last_stable_offset(100) == 0
    log.marker(pid=1, commit=False)  # 3: aborts 0..2 of pid 1; pid 2 still open at 1
    (done,) = log.state.take_completed()
    assert done == CompletedTxn(1, 0, 3, True, 1)
    assert log.state.last_stable_offset(100) == 1
    log.marker(pid=2)                # 4
    assert log.state.last_stable_offset(100) == 100


def test_a_new_transaction_after_a_marker_starts_where_its_first_batch_is():
    log = Log()
    log.write()
    log.marker()
    log.write()                      # offset 2
    assert log.state.ongoing_transactions() == {1: 2}


def test_client_control_batches_and_plain_batches_inside_a_transaction_are_refused():
    log = Log()
    d = log.state.check_and_prepare([hdr(control=True)])
    assert d.error_code == code("INVALID_RECORD")
    log.write()
    d = log.write(txn=False)
    assert (d.verdict, d.error_code) == (Verdict.REFUSE, code("INVALID_TXN_STATE"))
    log.marker()
    assert log.write(txn=False).verdict is Verdict.APPEND


def test_markers_from_older_producer_or_coordinator_epochs_are_refused():
    log = Log()
    log.write(epoch=3)
    assert log.marker(epoch=2)[0] == code("INVALID_PRODUCER_EPOCH")
    assert log.marker(epoch=3, coordinator_epoch=5) is None
    log.write(epoch=3)
    assert log.marker(epoch=3, coordinator_epoch=4)[0] == code("TRANSACTION_COORDINATOR_FENCED")
    assert log.marker(epoch=3, coordinator_epoch=6) is None
    assert log.marker(epoch=3, coordinator_epoch=-1)[0] == code("INVALID_RECORD")


def test_a_fencing_marker_bumps_the_epoch_and_the_zombie_is_refused():
    log = Log()
    log.write(epoch=0, count=2)
    assert log.marker(epoch=1, commit=False) is None   # the coordinator aborted at epoch + 1
    assert log.state.entry(1).producer_epoch == 1 and log.state.entry(1).batches == ()
    d = log.write(epoch=0)
    assert d.error_code == code("INVALID_PRODUCER_EPOCH")
    # the new instance (epoch 2) starts at sequence 0
    assert log.write(epoch=2, seq=0).verdict is Verdict.APPEND
    # an instance at the marker's epoch with no sequence known must start at 0 too
    fresh = Log()
    fresh.write(pid=4, count=3)
    fresh.marker(pid=4, epoch=1, commit=False)
    assert fresh.write(pid=4, epoch=1, seq=5).error_code == code("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert fresh.write(pid=4, epoch=1, seq=0).verdict is Verdict.APPEND


def test_unsequenced_transactional_batches_only_from_a_coordinator():
    log = Log()
    h = hdr(seq=-1)
    assert log.state.check_and_prepare([h]).error_code == code("INVALID_RECORD")
    assert log.state.check_and_prepare([h], allow_unsequenced=True).ok
    assert log.write(seq=-1, allow_unsequenced=True).ok
    assert log.state.ongoing_transactions() == {1: 0}
    assert log.state.entry(1).batches == ()
    log.marker()
    assert log.write(epoch=0, seq=-1, allow_unsequenced=True).ok
    log.marker(epoch=1)                          # fenced
    assert log.write(epoch=0, seq=-1, allow_unsequenced=True).error_code == \
        code("INVALID_PRODUCER_EPOCH")


def test_open_transactions_never_expire():
    log = Log()
    log.write(pid=1)
    log.write(pid=2, txn=False)
    assert log.state.expire(10**9, 1000) == [2]
    assert log.state.entry(1) is not None


def test_restore_keeps_open_transactions():
    log = Log()
    log.write(pid=1)
    log.write(pid=2)
    log.marker(pid=2, coordinator_epoch=3)
    again = ProducerStateManager()
    again.restore(log.state.entries(), log.state.map_end_offset)
    again.check_invariants()
    assert again.ongoing_transactions() == {1: 0}
    assert again.entry(2).coordinator_epoch == 3
    assert again.last_stable_offset(100) == 0


ops = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("marker"), st.integers(1, 3), st.booleans())), max_size=40)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_rebuilding_from_the_log_gives_the_state_built_as_it_was_written(operations):
    """The same door: applying the log's batches (markers decoded) after the fact yields
    exactly the incremental state, open transactions and completed ones included; the LSO is
    below every open transaction's first offset."""
    log = Log()
    written: list[tuple] = []
    completed = []
    for kind, pid, flag in operations:
        before = log.leo
        if kind == "write":
            if log.write(pid=pid, txn=flag).ok:
                written.append((hdr(pid, 0, log.seq[pid] - 1, base_offset=before, txn=flag),
                                None))
        elif log.marker(pid=pid, commit=flag) is None:
            written.append((hdr(pid, 0, base_offset=before, control=True),
                            ControlRecord(flag, 0)))
        completed += log.state.take_completed()
        open_firsts = log.state.ongoing_transactions().values()
        assert log.state.last_stable_offset(log.leo) <= min(open_firsts, default=log.leo)
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(written)
    assert rebuilt.same_state(log.state)
    assert rebuilt.ongoing_transactions() == log.state.ongoing_transactions()
    assert rebuilt.take_completed() == completed
