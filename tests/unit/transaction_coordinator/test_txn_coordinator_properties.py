"""Property tests of the transaction coordinator core over random interleavings: several instances
of two transactional ids race InitProducerId, AddPartitions, AddOffsets and EndTxn; writes,
allocations and markers complete late, out of order or fail; time passes (timeouts); the shard
moves to a new owner. After every step: the core's invariants, plus

- markers are sent only for a decision that is durable, and agree with it (commit or abort);
- InitProducerId hands out strictly growing (producer id, epoch) per transactional id;
- an EndTxn answered NONE for a commit is a durable PrepareCommit/CompleteCommit at that epoch;

and at the end, once everything held completes: no transaction is left in Prepare*, and
reloading the shard from the log gives back exactly the state in memory."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverbed._proto.v1 import producer_id_pb2 as pid_pb, transaction_pb2 as tx
from riverbed.coordinator import transaction_log as tl
from riverbed.coordinator.transaction_log import TxnStatus as S
from riverbed.errors import ErrorCode as E
from services.transaction_coordinator.core.effects import AppendRecords, SendMarkers
from services.transaction_coordinator.core.events import RequestReceived, ShardUnloaded

from test_txn_coordinator_core import World

IDS = ("a", "b")

action = st.one_of(
    st.tuples(st.just("init"), st.sampled_from(IDS), st.integers(0, 2)),
    st.tuples(st.just("add"), st.sampled_from(IDS), st.integers(0, 2),
              st.lists(st.tuples(st.sampled_from(["out", "in"]), st.integers(0, 1)),
                       min_size=1, max_size=3)),
    st.tuples(st.just("offsets"), st.sampled_from(IDS), st.integers(0, 2)),
    st.tuples(st.just("end"), st.sampled_from(IDS), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("tick"), st.integers(0, 3000)),
    st.tuples(st.just("hold"), st.booleans()),
    st.tuples(st.just("release"), st.randoms(use_true_random=False)),
    st.tuples(st.just("fail"),),
    st.tuples(st.just("reload"),),
    # a whole transaction of one instance (its steps may still be held, fail or be fenced)
    st.tuples(st.just("txn"), st.sampled_from(IDS), st.integers(0, 2), st.booleans(),
              st.booleans()),
    st.tuples(st.just("txn"), st.sampled_from(IDS), st.integers(0, 2), st.booleans(),
              st.booleans()),
    # the coordinator dies between the durable decision and its markers
    st.tuples(st.just("crash_mid_end"), st.sampled_from(IDS), st.integers(0, 2), st.booleans()),
)


class Checked(World):
    def __init__(self):
        super().__init__(transaction_abort_timed_out_transaction_cleanup_interval_ms=500,
                         transaction_max_timeout_ms=2000)
        self.instances: dict[tuple[str, int], tuple[int, int]] = {}   # (tid, k) -> (pid, epoch)
        self.granted: dict[str, tuple[int, int]] = {}
        self.commits_answered: list[tuple[str, int, int]] = []
        self.epochs: dict[str, int] = {}

    def complete(self, e):
        if isinstance(e, SendMarkers):
            last = self.durable(e.transactional_id)
            assert last is not None
            assert last.status is (S.PREPARE_COMMIT if e.commit else S.PREPARE_ABORT), \
                (e, last)
            assert (last.producer_id, last.producer_epoch) == (e.producer_id, e.producer_epoch)
            assert set(e.partitions) == set(last.partitions)
        if isinstance(e, AppendRecords):
            for k, v in e.records:
                if v is not None:
                    val = tl.decode_value(v)
                    tid = tl.decode_key(k)
                    # epochs written never go back for one producer id
                    prev = self.epochs.get((tid, val.producer_id), -1)
                    assert val.producer_epoch >= prev
        failing = self.fail_writes > 0
        out = super().complete(e)
        if isinstance(e, AppendRecords) and not failing:
            for k, v in e.records:
                if v is not None:
                    val = tl.decode_value(v)
                    self.epochs[(tl.decode_key(k), val.producer_id)] = max(
                        self.epochs.get((tl.decode_key(k), val.producer_id), -1),
                        val.producer_epoch)
        return out

    def step(self, a):
        kind = a[0]
        if kind == "init":
            _, tid, k = a
            r = self.init(tid=tid, timeout=1500)
            if r is not None and r.error_code == E.NONE:
                got = (r.producer_id, r.producer_epoch)
                prev = self.granted.get(tid)
                assert prev is None or got > prev or got[0] != prev[0], (prev, got)
                self.granted[tid] = got
                self.instances[(tid, k)] = got
        elif kind in ("add", "offsets", "end"):
            tid, k = a[1], a[2]
            pid, epoch = self.instances.get((tid, k), (-1, -1))
            if kind == "add":
                self.add(pid, epoch, a[3], tid=tid)
            elif kind == "offsets":
                self.add_offsets(pid, epoch, "g", tid=tid)
            else:
                r = self.end(pid, epoch, a[3], tid=tid)
                if r is not None and r.error_code == E.NONE and a[3]:
                    self.commits_answered.append((tid, pid, epoch))
                    last = self.durable(tid)
                    assert last.status in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
                    assert last.producer_epoch == epoch
        elif kind == "txn":
            _, tid, k, commit, offsets = a
            if (tid, k) not in self.instances:
                self.step(("init", tid, k))
            self.step(("add", tid, k, [("out", k % 2)]))
            if offsets:
                self.step(("offsets", tid, k))
            self.step(("end", tid, k, commit))
        elif kind == "crash_mid_end":
            _, tid, k, commit = a
            if (tid, k) not in self.instances:
                self.step(("init", tid, k))
            self.step(("add", tid, k, [("in", k % 2)]))
            auto = self.auto
            self.auto = False
            self.step(("end", tid, k, commit))
            held, self.held = self.held, []
            for e in held:                      # the decision is written, its markers are lost
                if isinstance(e, AppendRecords):
                    self.run(self.complete(e))
            self.held = [e for e in self.held if not isinstance(e, SendMarkers)]
            self.auto = auto
            self.step(("reload",))
        elif kind == "tick":
            self.tick(a[1])
        elif kind == "hold":
            self.auto = not a[1]
        elif kind == "release":
            rnd = a[1]
            held, self.held = self.held, []
            rnd.shuffle(held)
            for e in held:
                self.run(self.complete(e))
        elif kind == "fail":
            self.fail_writes += 1
        elif kind == "reload":
            self.held.clear()                   # the old owner's work dies with it
            self.run(self.core.handle(ShardUnloaded(0), self.now))
            self.load(0)

    def settle(self):
        self.auto = True
        self.fail_writes = 0
        for _ in range(5):
            held, self.held = self.held, []
            for e in held:
                self.run(self.complete(e))
            self.tick(600)
        for tid, txn in self.core.txns.items():
            assert txn.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT), (tid, txn)
            assert txn.pending is None
        before = {t: m.value() for t, m in self.core.txns.items() if m.producer_epoch >= 0}
        self.run(self.core.handle(ShardUnloaded(0), self.now))
        self.load(0)
        after = {t: m.value() for t, m in self.core.txns.items()}
        assert after == before


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, max_size=40))
def test_random_interleavings_keep_kafkas_guarantees(actions):
    w = Checked()
    for a in actions:
        w.step(a)
    w.settle()


def test_unknown_body_is_a_bug_not_an_answer():
    w = World()
    try:
        w.core.handle(RequestReceived(1, tx.WriteTxnMarkersRequest()), w.now)
    except TypeError:
        return
    raise AssertionError("expected TypeError")


def test_init_body_type():
    w = World()
    assert w.send(pid_pb.InitProducerIdRequest(transactional_id="x", transaction_timeout_ms=1,
                                               producer_id=3, producer_epoch=-1)).error_code \
        == E.INVALID_REQUEST
