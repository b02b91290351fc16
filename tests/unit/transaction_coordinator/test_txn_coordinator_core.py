"""Transaction coordinator core: Kafka's state machine, table by table (InitProducerId, AddPartitions,
AddOffsets, EndTxn, markers, timeouts, expiry, loading a shard, failed writes)."""
import pytest

from riverbed._proto.v1 import producer_id_pb2 as pid_pb, transaction_pb2 as tx
from riverbed.coordinator import offsets_topic as ot
from riverbed.coordinator import transaction_log as tl
from riverbed.coordinator.transaction_log import TxnStatus as S
from riverbed.errors import ErrorCode as E
from services.transaction_coordinator.config import TransactionCoordinatorConfig
from services.transaction_coordinator.core.coordinator import TransactionCoordinatorCore
from services.transaction_coordinator.core.effects import (
    AllocateProducerId, AppendRecords, Reply, SendMarkers,
)
from services.transaction_coordinator.core.events import (
    MarkersWritten, ProducerIdAllocated, RequestReceived, ShardLoadCompleted, ShardLoadStarted,
    ShardUnloaded, TopicMetadataChanged, WriteCompleted,
)
from services.transaction_coordinator.core.markers import MarkerOutcome, marker_outcome
from services.transaction_coordinator.core.states import (
    TRANSITIONS, IllegalTransition, check_transition,
)

TID = "etl-1"


class World:
    """One core, an in-memory __transaction_state log, a producer-id source, and markers that
    succeed unless told otherwise. `auto` completes writes, allocations and markers at once."""

    def __init__(self, shards=(0,), num_partitions=1, auto=True, **cfg):
        cfg.setdefault("transaction_state_log_num_partitions", num_partitions)
        self.config = TransactionCoordinatorConfig(**cfg)
        self.core = TransactionCoordinatorCore(self.config)
        self.now = 1_000_000
        self.rid = 0
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.next_pid = 1000
        self.auto = auto
        self.replies: dict[int, object] = {}
        self.markers: list[SendMarkers] = []      # all markers ever sent
        self.held: list = []                      # effects not completed (auto=False)
        self.fail_writes = 0                      # fail the next n writes
        self.epoch = 7
        self.core.handle(TopicMetadataChanged({"out": 3, "in": 2, ot.OFFSETS_TOPIC: 5}), self.now)
        for s in shards:
            self.load(s)

    # -- driving ----------------------------------------------------------------------------
    def load(self, shard, epoch=None):
        self.epoch = epoch if epoch is not None else self.epoch + 1
        self.run(self.core.handle(ShardLoadStarted(shard, self.epoch), self.now))
        for off, (s, k, v) in enumerate(self.log):
            if s == shard:
                self.core.replay(ot.StoredRecord(s, off, k, v))
        self.run(self.core.handle(ShardLoadCompleted(shard), self.now))

    def reload(self, shard=0):
        self.run(self.core.handle(ShardUnloaded(shard), self.now))
        self.load(shard)

    def run(self, effects):
        todo = list(effects)
        while todo:
            e = todo.pop(0)
            self.core.check_invariants()
            if isinstance(e, Reply):
                self.replies[e.request_id] = e.body
            elif not self.auto:
                self.held.append(e)
            else:
                todo += self.complete(e)
        self.core.check_invariants()

    def complete(self, e):
        if isinstance(e, AppendRecords):
            if self.fail_writes:
                self.fail_writes -= 1
                return self.core.handle(WriteCompleted(e.write_id, E.NOT_LEADER_FOR_PARTITION),
                                        self.now)
            base = len(self.log)
            self.log.extend((e.shard, k, v) for k, v in e.records)
            return self.core.handle(WriteCompleted(e.write_id, E.NONE, base), self.now)
        if isinstance(e, AllocateProducerId):
            self.next_pid += 1
            return self.core.handle(ProducerIdAllocated(e.alloc_id, self.next_pid), self.now)
        if isinstance(e, SendMarkers):
            self.markers.append(e)
            return self.core.handle(MarkersWritten(e.marker_id), self.now)
        raise AssertionError(e)

    def release(self):
        held, self.held = self.held, []
        for e in held:
            self.run(self.complete(e))

    def send(self, body):
        self.rid += 1
        rid = self.rid
        self.run(self.core.handle(RequestReceived(rid, body), self.now))
        return self.replies.get(rid)

    def tick(self, advance_ms=0):
        self.now += advance_ms
        self.run(self.core.tick(self.now))

    # -- requests ---------------------------------------------------------------------------
    def init(self, tid=TID, timeout=60000, pid=-1, epoch=-1):
        return self.send(pid_pb.InitProducerIdRequest(transactional_id=tid,
                                                      transaction_timeout_ms=timeout,
                                                      producer_id=pid, producer_epoch=epoch))

    def add(self, pid, epoch, tps, tid=TID):
        by = {}
        for t, p in tps:
            by.setdefault(t, []).append(p)
        return self.send(tx.AddPartitionsToTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch,
            topics=[tx.TxnTopic(name=t, partitions=ps) for t, ps in by.items()]))

    def add_offsets(self, pid, epoch, group, tid=TID):
        return self.send(tx.AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid,
                                                   producer_epoch=epoch, group_id=group))

    def end(self, pid, epoch, commit, tid=TID):
        return self.send(tx.EndTxnRequest(transactional_id=tid, producer_id=pid,
                                          producer_epoch=epoch, committed=commit))

    def state(self, tid=TID):
        return self.core.txns[tid].state

    def durable(self, tid=TID):
        """The transactional id's last record in the log."""
        found = None
        for _, k, v in self.log:
            if tl.decode_key(k) == tid:
                found = tl.decode_value(v) if v is not None else None
        return found


def codes(resp):
    return {(t.name, p.partition_index): p.error_code for t in resp.results for p in t.results}


def test_transition_table_is_kafkas():
    assert TRANSITIONS[S.EMPTY] == {S.EMPTY, S.ONGOING, S.DEAD}
    assert TRANSITIONS[S.ONGOING] == {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT,
                                      S.PREPARE_EPOCH_FENCE}
    assert TRANSITIONS[S.PREPARE_COMMIT] == {S.COMPLETE_COMMIT}
    assert TRANSITIONS[S.PREPARE_ABORT] == {S.COMPLETE_ABORT}
    assert TRANSITIONS[S.COMPLETE_COMMIT] == {S.EMPTY, S.ONGOING, S.DEAD}
    assert TRANSITIONS[S.PREPARE_EPOCH_FENCE] == {S.PREPARE_ABORT}
    assert TRANSITIONS[S.DEAD] == frozenset()
    with pytest.raises(IllegalTransition):
        check_transition(S.PREPARE_COMMIT, S.PREPARE_ABORT)


def test_init_new_id_allocates_a_producer_id_and_starts_at_epoch_0():
    w = World()
    r = w.init()
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1001, 0)
    assert w.state() is S.EMPTY
    assert w.durable().producer_epoch == 0


def test_init_again_bumps_the_epoch_and_fences_the_old_instance():
    w = World()
    a = w.init()
    b = w.init()
    assert (b.producer_id, b.producer_epoch) == (a.producer_id, 1)
    r = w.add(a.producer_id, a.producer_epoch, [("out", 0)])
    assert codes(r) == {("out", 0): E.PRODUCER_FENCED}
    assert w.end(a.producer_id, a.producer_epoch, True).error_code == E.PRODUCER_FENCED
    assert codes(w.add(b.producer_id, b.producer_epoch, [("out", 0)])) == {("out", 0): E.NONE}


def test_commit_writes_prepare_then_markers_then_complete():
    w = World()
    p = w.init()
    assert codes(w.add(p.producer_id, 0, [("out", 0), ("out", 1)])) == \
        {("out", 0): E.NONE, ("out", 1): E.NONE}
    assert codes(w.add(p.producer_id, 0, [("out", 2)]))[("out", 2)] == E.NONE
    assert w.state() is S.ONGOING
    assert w.core.txns[TID].partitions == {("out", 0), ("out", 1), ("out", 2)}
    assert w.end(p.producer_id, 0, True).error_code == E.NONE
    statuses = [tl.decode_value(v).status for _, _, v in w.log]
    assert statuses == [S.EMPTY, S.ONGOING, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    m = w.markers[-1]
    assert (m.commit, m.producer_id, m.producer_epoch, m.coordinator_epoch) == \
        (True, p.producer_id, 0, w.epoch)
    assert m.partitions == (("out", 0), ("out", 1), ("out", 2))
    assert w.state() is S.COMPLETE_COMMIT and not w.core.txns[TID].partitions
    assert w.core.stats.commits == 1


def test_adding_partitions_already_in_the_transaction_writes_nothing():
    w = World()
    p = w.init()
    w.add(p.producer_id, 0, [("out", 0)])
    n = len(w.log)
    assert codes(w.add(p.producer_id, 0, [("out", 0)])) == {("out", 0): E.NONE}
    assert len(w.log) == n


def test_unknown_partitions_are_refused_and_the_rest_not_attempted():
    w = World()
    p = w.init()
    r = w.add(p.producer_id, 0, [("out", 0), ("nope", 0), ("out", 9)])
    assert codes(r) == {("out", 0): E.OPERATION_NOT_ATTEMPTED,
                        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                        ("out", 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert w.state() is S.EMPTY


def test_add_offsets_adds_the_groups_offsets_partition():
    w = World()
    p = w.init()
    assert w.add_offsets(p.producer_id, 0, "grp").error_code == E.NONE
    assert w.core.txns[TID].partitions == {(ot.OFFSETS_TOPIC, ot.partition_for("grp", 5))}
    assert w.add_offsets(p.producer_id, 0, "").error_code == E.INVALID_GROUP_ID


@pytest.mark.parametrize("state,commit,code", [
    (S.EMPTY, True, E.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, True, E.NONE),          # a retry of the commit that completed
    (S.COMPLETE_COMMIT, False, E.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, False, E.NONE),
    (S.COMPLETE_ABORT, True, E.INVALID_TXN_STATE),
])
def test_end_txn_outside_an_open_transaction(state, commit, code):
    w = World()
    p = w.init()
    if state is not S.EMPTY:
        w.add(p.producer_id, 0, [("out", 0)])
        w.end(p.producer_id, 0, state is S.COMPLETE_COMMIT)
    assert w.state() is state
    assert w.end(p.producer_id, 0, commit).error_code == code


def test_while_the_markers_are_out_requests_get_concurrent_transactions():
    w = World(transaction_concurrent_request_max_wait_ms=0)       # Kafka's: answered at once
    p = w.init()
    w.add(p.producer_id, 0, [("out", 0)])
    w.auto = False
    w.end(p.producer_id, 0, True)
    w.release()                       # PrepareCommit written: the end is answered, markers out
    assert w.state() is S.PREPARE_COMMIT
    assert w.end(p.producer_id, 0, True).error_code == E.CONCURRENT_TRANSACTIONS
    assert w.end(p.producer_id, 0, False).error_code == E.INVALID_TXN_STATE
    assert codes(w.add(p.producer_id, 0, [("out", 1)]))[("out", 1)] == E.CONCURRENT_TRANSACTIONS
    assert w.init().error_code == E.CONCURRENT_TRANSACTIONS
    w.release()                       # markers written -> CompleteCommit
    w.release()
    assert w.state() is S.COMPLETE_COMMIT


def test_the_next_transactions_add_partitions_waits_for_the_last_to_complete():
    """Riverbed: parked instead of CONCURRENT_TRANSACTIONS, answered once CompleteCommit is
    written, or CONCURRENT_TRANSACTIONS after transaction.concurrent.request.max.wait.ms."""
    w = World(transaction_concurrent_request_max_wait_ms=500)
    p = w.init()
    w.add(p.producer_id, 0, [("out", 0)])
    w.auto = False
    w.end(p.producer_id, 0, True)
    w.release()                                     # PrepareCommit: markers out
    assert w.add(p.producer_id, 0, [("out", 1)]) is None
    assert w.core.parked_count == 1
    w.release()                                     # markers written: Complete write out
    w.release()                                     # CompleteCommit: the parked one goes on
    w.release()                                     # ... and its Ongoing write completes
    assert codes(w.replies[w.rid]) == {("out", 1): E.NONE}
    assert w.state() is S.ONGOING and w.core.parked_count == 0
    w.end(p.producer_id, 0, False)
    w.release()
    assert w.add(p.producer_id, 0, [("out", 2)]) is None          # parked again
    w.held.clear()                                                # the markers never come
    w.tick(499)
    assert w.core.parked_count == 1
    w.tick(1)
    assert codes(w.replies[w.rid]) == {("out", 2): E.CONCURRENT_TRANSACTIONS}
    assert w.add(p.producer_id, 0, [("out", 2)]) is None
    w.run(w.core.handle(ShardUnloaded(0), w.now))
    assert codes(w.replies[w.rid]) == {("out", 2): E.NOT_COORDINATOR}
    assert w.core.parked_count == 0


def test_a_request_while_a_write_is_in_flight_is_concurrent():
    w = World(transaction_concurrent_request_max_wait_ms=0)
    p = w.init()
    w.auto = False
    w.add(p.producer_id, 0, [("out", 0)])
    assert w.end(p.producer_id, 0, True).error_code == E.CONCURRENT_TRANSACTIONS
    w.release()
    assert w.state() is S.ONGOING


def test_init_while_ongoing_aborts_at_a_bumped_epoch_then_the_retry_succeeds():
    w = World()
    p = w.init()
    w.add(p.producer_id, 0, [("out", 0), ("in", 1)])
    assert w.init().error_code == E.CONCURRENT_TRANSACTIONS
    abort = w.markers[-1]
    assert (abort.commit, abort.producer_epoch) == (False, 1)    # the zombie is fenced
    assert w.state() is S.COMPLETE_ABORT
    r = w.init()
    assert (r.error_code, r.producer_epoch) == (E.NONE, 2)
    assert w.end(p.producer_id, 0, True).error_code == E.PRODUCER_FENCED
    assert w.core.stats.fenced == 1


def test_transaction_timeout_aborts_and_fences():
    w = World(transaction_abort_timed_out_transaction_cleanup_interval_ms=1000)
    p = w.init(timeout=5000)
    w.add(p.producer_id, 0, [("out", 0)])
    w.tick(4000)
    assert w.state() is S.ONGOING
    w.tick(1500)
    assert w.state() is S.COMPLETE_ABORT
    assert w.markers[-1].producer_epoch == 1 and not w.markers[-1].commit
    assert w.end(p.producer_id, 0, True).error_code == E.PRODUCER_FENCED
    assert w.core.stats.timed_out == 1


def test_transaction_timeout_bounds():
    w = World(transaction_max_timeout_ms=10000)
    assert w.init(timeout=10001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert w.init(timeout=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert w.init(timeout=10000).error_code == E.NONE


def test_kip360_init_with_the_current_epoch_bumps_a_retry_of_the_previous_is_answered_again():
    w = World()
    p = w.init()
    r = w.init(pid=p.producer_id, epoch=0)
    assert (r.error_code, r.producer_epoch) == (E.NONE, 1)
    again = w.init(pid=p.producer_id, epoch=0)         # the answer was lost: a retry
    assert (again.error_code, again.producer_epoch) == (E.NONE, 1)
    assert w.init(pid=p.producer_id, epoch=5).error_code == E.PRODUCER_FENCED
    assert w.init(pid=p.producer_id + 1, epoch=1).error_code == E.PRODUCER_FENCED


def test_an_exhausted_epoch_gets_a_new_producer_id():
    w = World()
    p = w.init()
    w.core.txns[TID].producer_epoch = 32766
    r = w.init()
    assert r.producer_id != p.producer_id and r.producer_epoch == 0


def test_requests_for_shards_not_owned_or_loading():
    w = World(shards=(), num_partitions=2)
    assert w.init().error_code == E.NOT_COORDINATOR
    shard = w.core.shard_of(TID)
    w.run(w.core.handle(ShardLoadStarted(shard, 3), w.now))
    assert w.init().error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    w.run(w.core.handle(ShardLoadCompleted(shard), w.now))
    assert w.init().error_code == E.NONE
    assert w.init(tid="").error_code == E.INVALID_REQUEST


def test_wrong_producer_id_is_invalid_mapping():
    w = World()
    p = w.init()
    assert codes(w.add(p.producer_id + 1, 0, [("out", 0)]))[("out", 0)] == \
        E.INVALID_PRODUCER_ID_MAPPING
    assert w.end(p.producer_id, 0, True, tid="other").error_code == E.INVALID_PRODUCER_ID_MAPPING


def test_a_failed_write_changes_nothing_and_answers_a_coordinator_error():
    w = World()
    p = w.init()
    w.fail_writes = 1
    r = w.add(p.producer_id, 0, [("out", 0)])
    assert codes(r) == {("out", 0): E.NOT_COORDINATOR}
    assert w.state() is S.EMPTY
    w.fail_writes = 1
    assert w.init().error_code == E.NOT_COORDINATOR
    assert w.core.txns[TID].producer_epoch == 0


def test_a_failed_complete_write_is_retried_on_tick():
    w = World()
    p = w.init()
    w.add(p.producer_id, 0, [("out", 0)])
    w.auto = False
    w.end(p.producer_id, 0, True)
    w.release()                      # PrepareCommit
    w.release()                      # markers written; Complete write held
    w.fail_writes = 1
    w.auto = True
    w.release()
    assert w.state() is S.PREPARE_COMMIT
    w.tick()
    assert w.state() is S.COMPLETE_COMMIT


def test_a_successor_completes_what_the_dead_coordinator_decided():
    """PrepareCommit is durable, the coordinator dies before its markers: the next owner of the
    shard finds it at load and writes the markers (with its own, larger, coordinator epoch)."""
    w = World()
    p = w.init()
    w.add(p.producer_id, 0, [("out", 0), ("out", 1)])
    w.auto = False
    w.end(p.producer_id, 0, True)
    w.release()                        # PrepareCommit written, markers held (the owner dies)
    old_epoch = w.epoch
    assert w.durable().status is S.PREPARE_COMMIT
    w.held.clear()
    w.auto = True
    w.reload()                         # the successor
    assert w.state() is S.COMPLETE_COMMIT
    m = w.markers[-1]
    assert m.commit and m.coordinator_epoch > old_epoch
    assert w.core.stats.completed_after_load == 1


def test_an_ongoing_transaction_survives_a_coordinator_move_and_times_out_there():
    w = World(transaction_abort_timed_out_transaction_cleanup_interval_ms=100)
    p = w.init(timeout=1000)
    w.add(p.producer_id, 0, [("out", 0)])
    w.reload()
    assert w.state() is S.ONGOING and w.core.txns[TID].partitions == {("out", 0)}
    w.tick(2000)
    assert w.state() is S.COMPLETE_ABORT


def test_unload_answers_waiters_not_coordinator_and_forgets_the_shard():
    w = World()
    p = w.init()
    w.auto = False
    w.rid += 1
    w.run(w.core.handle(RequestReceived(w.rid, tx.EndTxnRequest(
        transactional_id=TID, producer_id=p.producer_id, producer_epoch=0, committed=True)),
        w.now))
    rid = w.send(pid_pb.InitProducerIdRequest(transactional_id="new", transaction_timeout_ms=1))
    assert rid is None                 # parked on the producer id allocation
    w.run(w.core.handle(ShardUnloaded(0), w.now))
    assert w.replies[w.rid].error_code == E.NOT_COORDINATOR
    assert not w.core.txns and not w.core.shards
    w.release()                        # late completions change nothing
    w.core.check_invariants()


def test_expired_ids_are_tombstoned():
    w = World(transactional_id_expiration_ms=10_000,
              transaction_remove_expired_transaction_cleanup_interval_ms=1000)
    w.init()
    w.tick(5_000)
    assert TID in w.core.txns
    w.tick(6_000)
    assert TID not in w.core.txns
    assert w.durable() is None
    w.reload()
    assert TID not in w.core.txns


def test_describe_and_list():
    w = World()
    p = w.init()
    w.add(p.producer_id, 0, [("out", 1), ("in", 0)])
    w.init(tid="idle")
    d = w.send(tx.DescribeTransactionsRequest(transactional_ids=[TID, "missing"]))
    a, b = d.transaction_states
    assert (a.error_code, a.transaction_state, a.producer_id) == (E.NONE, "Ongoing", p.producer_id)
    assert {(t.name, tuple(t.partitions)) for t in a.topics} == {("in", (0,)), ("out", (1,))}
    assert b.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    listed = w.send(tx.ListTransactionsRequest())
    assert {(t.transactional_id, t.transaction_state) for t in listed.transaction_states} == \
        {(TID, "Ongoing"), ("idle", "Empty")}
    only = w.send(tx.ListTransactionsRequest(state_filters=["Ongoing", "Bogus"]))
    assert [t.transactional_id for t in only.transaction_states] == [TID]
    assert list(only.unknown_state_filters) == ["Bogus"]
    by_pid = w.send(tx.ListTransactionsRequest(producer_id_filters=[p.producer_id]))
    assert [t.transactional_id for t in by_pid.transaction_states] == [TID]
    # v1's duration filter (KIP-994): open transactions only, open at least that long
    w.tick(5000)
    assert [t.transactional_id for t in w.send(tx.ListTransactionsRequest(
        duration_filter_ms=5000)).transaction_states] == [TID]
    assert w.send(tx.ListTransactionsRequest(duration_filter_ms=5001)).transaction_states == []
    assert len(w.send(tx.ListTransactionsRequest(duration_filter_ms=-1)).transaction_states) == 2
    w.end(p.producer_id, 0, True)
    assert w.send(tx.ListTransactionsRequest(duration_filter_ms=0)).transaction_states == []


def test_replay_rebuilds_what_was_acknowledged():
    w = World()
    p = w.init()
    w.add(p.producer_id, 0, [("out", 0)])
    before = w.core.txns[TID].value()
    w.reload()
    assert w.core.txns[TID].value() == before


def test_marker_outcomes():
    assert marker_outcome(E.NONE) is MarkerOutcome.DONE
    assert marker_outcome(E.TRANSACTION_COORDINATOR_FENCED) is MarkerOutcome.FENCED
    assert marker_outcome(E.INVALID_PRODUCER_EPOCH) is MarkerOutcome.FENCED
    assert marker_outcome(E.NOT_LEADER_FOR_PARTITION) is MarkerOutcome.RETRY_REFRESH
    assert marker_outcome(E.NOT_ENOUGH_REPLICAS) is MarkerOutcome.RETRY


def test_fenced_markers_leave_the_transaction_to_the_new_owner():
    w = World()
    p = w.init()
    w.add(p.producer_id, 0, [("out", 0)])
    w.auto = False
    w.end(p.producer_id, 0, True)
    w.release()
    (send,) = w.held
    w.held.clear()
    w.run(w.core.handle(MarkersWritten(send.marker_id, fenced=True), w.now))
    assert w.state() is S.PREPARE_COMMIT
    assert not w.core.marker_wanted(send.marker_id)
