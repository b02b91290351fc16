"""Transactions (KIP-98/447) on a real fleet: ZooKeeper, a controller, 3 storage nodes, a group
coordinator, an offset manager, 2 transaction coordinators and a gateway; the SDK's
transactional producer and read_committed consumer.

Every test ends with a checker that reads everything back: records of committed transactions
are read exactly once by read_committed consumers, records of aborted ones never, nothing
committed is lost, and each producer's records keep their order per partition.

- commits and aborts of several producers interleaved over several partitions;
- the last stable offset holds read_committed readers below an open transaction;
- a zombie (an older instance of a transactional id) is fenced: PRODUCER_FENCED, and its open
  transaction is aborted by the new instance's init_transactions;
- a transaction left open past transaction.timeout.ms is aborted by the coordinator, its
  producer fenced, and read_committed readers move past it;
- a read-process-write worker (consume -> transform -> produce + send_offsets) SIGKILLed in the
  middle and restarted with the same transactional id: output = input transformed, exactly once;
- a transaction coordinator that dies between its durable PrepareCommit and the markers: the
  shard's next owner completes the commit.
"""
from __future__ import annotations

import collections
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import errors
from riverbed.admin import Admin
from riverbed.consumer import Consumer
from riverbed.coordinator.transaction_log import partition_for
from riverbed.producer import Producer
from riverbed.structs import NewTopic, OffsetAndMetadata, TopicPartition
from services.common import zk as zkmod
from services.common import znodes

pytestmark = pytest.mark.integration

WAIT_S = 90.0                  # bound on polls (coordinator takeover: session 6 s + load)
TXN_SHARDS = 10                # transaction.state.log.num.partitions of the local fleet
WORKER = str(pathlib.Path(__file__).with_name("txn_worker_proc.py"))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("txn-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=1, counts={"transaction_coordinator": 2},
              config_overrides=[
                  "transaction_coordinator:"
                  "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"])
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def bootstrap(fleet):
    return fleet.gateway_endpoint


def create_topic(bootstrap, name, partitions, rf=3):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, rf)])
        admin.describe_topics([name])


def poll_until(fn, what, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def read_all(bootstrap, topic, partitions, *, committed=True, idle_ms=2000):
    """Every record of the topic from the beginning, per partition in offset order."""
    with Consumer(bootstrap_servers=bootstrap, consumer_timeout_ms=idle_ms,
                  isolation_level="read_committed" if committed else "read_uncommitted") as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning()
        out = collections.defaultdict(list)
        for r in c:
            out[r.partition].append((r.offset, r.key, r.value))
        return out


def end_offsets(bootstrap, topic, partitions, *, committed):
    with Consumer(bootstrap_servers=bootstrap,
                  isolation_level="read_committed" if committed else "read_uncommitted") as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: o for tp, o in c.end_offsets(tps).items()}


def check_read_back(bootstrap, topic, partitions, committed, aborted, *, exact=True):
    """The checker: `committed` and `aborted` are sets of values; every committed value is read
    exactly once, no aborted one ever; per partition each producer's values (b"<producer>:<n>")
    keep their order."""
    got = read_all(bootstrap, topic, partitions)
    values = [v for recs in got.values() for _, _, v in recs]
    counts = collections.Counter(values)
    assert [v for v, n in counts.items() if n > 1] == [], "duplicates"
    assert not set(values) & set(aborted), "aborted records were read"
    missing = set(committed) - set(values)
    assert not missing, f"{len(missing)} committed records lost, e.g. {sorted(missing)[:5]}"
    if exact:
        assert set(values) == set(committed)
    for recs in got.values():
        last: dict[bytes, int] = {}
        for _, _, v in recs:
            producer, _, n = v.rpartition(b":")
            assert int(n) > last.get(producer, -1), f"order broken at {v!r}"
            last[producer] = int(n)
    return got


def test_commits_and_aborts_interleaved_are_read_exactly_once(bootstrap):
    topic = "txn-mixed"
    create_topic(bootstrap, topic, 3)
    a = Producer(bootstrap, transactional_id="mixed-a")
    b = Producer(bootstrap, transactional_id="mixed-b")
    committed, aborted = set(), set()
    try:
        a.init_transactions(timeout=60)
        b.init_transactions(timeout=60)
        n = {"a": 0, "b": 0}
        for round_ in range(8):
            # both open at once, records of both in every partition, then decided in turn
            a.begin_transaction()
            b.begin_transaction()
            written = {"a": [], "b": []}
            for i in range(12):
                for name, p in (("a", a), ("b", b)):
                    v = b"%s:%d" % (name.encode(), n[name])
                    n[name] += 1
                    p.send(topic, v, partition=i % 3)
                    written[name].append(v)
            a.flush()
            b.flush()
            a_commits = round_ % 2 == 0
            b_commits = round_ % 3 != 0
            (a.commit_transaction if a_commits else a.abort_transaction)(timeout=60)
            (b.commit_transaction if b_commits else b.abort_transaction)(timeout=60)
            (committed if a_commits else aborted).update(written["a"])
            (committed if b_commits else aborted).update(written["b"])
    finally:
        a.close()
        b.close()
    got = check_read_back(bootstrap, topic, 3, committed, aborted)
    everything = read_all(bootstrap, topic, 3, committed=False)
    uncommitted = {v for recs in everything.values() for _, _, v in recs}
    assert uncommitted == committed | aborted          # read_uncommitted sees both
    assert sum(len(r) for r in got.values()) == len(committed)


def test_an_open_transaction_holds_read_committed_readers_at_the_lso(bootstrap):
    topic = "txn-lso"
    create_topic(bootstrap, topic, 1)
    p = Producer(bootstrap, transactional_id="lso-1")
    plain = Producer(bootstrap, acks="all")
    try:
        p.init_transactions(timeout=60)
        plain.send(topic, b"plain:0").get(timeout=30)
        p.begin_transaction()
        p.send(topic, b"t:0").get(timeout=30)
        plain.send(topic, b"plain:1").get(timeout=30)
        hw = end_offsets(bootstrap, topic, 1, committed=False)[0]
        lso = end_offsets(bootstrap, topic, 1, committed=True)[0]
        assert (lso, hw) == (1, 3)
        assert [v for _, _, v in read_all(bootstrap, topic, 1, idle_ms=1000)[0]] == [b"plain:0"]
        p.commit_transaction(timeout=60)
        poll_until(lambda: end_offsets(bootstrap, topic, 1, committed=True)[0] == 4,
                   "the LSO past the commit marker")
        check_read_back(bootstrap, topic, 1, {b"plain:0", b"t:0", b"plain:1"}, set())
    finally:
        p.close()
        plain.close()


def test_a_zombie_is_fenced_and_its_transaction_aborted(bootstrap):
    topic = "txn-zombie"
    create_topic(bootstrap, topic, 2)
    zombie = Producer(bootstrap, transactional_id="zombie-1")
    fresh = Producer(bootstrap, transactional_id="zombie-1")
    try:
        zombie.init_transactions(timeout=60)
        zombie.begin_transaction()
        for i in range(5):
            zombie.send(topic, b"zombie:%d" % i, partition=i % 2)
        zombie.flush()
        fresh.init_transactions(timeout=60)      # aborts the zombie's transaction first
        fresh.begin_transaction()
        for i in range(5):
            fresh.send(topic, b"fresh:%d" % i, partition=i % 2)
        fresh.commit_transaction(timeout=60)
        with pytest.raises(errors.RiverbedError) as info:
            zombie.send(topic, b"zombie:5", partition=0)
            zombie.commit_transaction(timeout=60)
        err = info.value
        if not isinstance(err, errors.ProducerFencedError):
            assert getattr(err, "txn_requires_abort", False), err
            with pytest.raises(errors.ProducerFencedError) as fenced:
                zombie.abort_transaction(timeout=60)
            err = fenced.value
        assert err.fatal and not err.txn_requires_abort
        with pytest.raises(errors.IllegalStateError):
            zombie.begin_transaction()
    finally:
        zombie.close()
        fresh.close()
    check_read_back(bootstrap, topic, 2, {b"fresh:%d" % i for i in range(5)},
                    {b"zombie:%d" % i for i in range(6)})


def test_an_expired_transaction_is_aborted_and_readers_move_past_it(bootstrap):
    topic = "txn-expired"
    create_topic(bootstrap, topic, 1)
    stale = Producer(bootstrap, transactional_id="expired-1", transaction_timeout_ms=2000)
    other = Producer(bootstrap, transactional_id="expired-2")
    try:
        stale.init_transactions(timeout=60)
        other.init_transactions(timeout=60)
        stale.begin_transaction()
        for i in range(3):
            stale.send(topic, b"stale:%d" % i)
        stale.flush()
        other.begin_transaction()
        other.send(topic, b"other:0")
        other.commit_transaction(timeout=60)
        # the stale transaction holds the LSO at its first record until the coordinator aborts
        assert end_offsets(bootstrap, topic, 1, committed=True)[0] == 0
        with Admin(bootstrap) as admin:
            poll_until(lambda: admin.describe_transactions(["expired-1"])[0].state
                       == "CompleteAbort", "the coordinator to abort the expired transaction")
            (d,) = admin.describe_transactions(["expired-1"])
            assert d.producer_epoch == 1               # fenced: aborted at epoch + 1
        poll_until(lambda: end_offsets(bootstrap, topic, 1, committed=True)[0] ==
                   end_offsets(bootstrap, topic, 1, committed=False)[0], "the LSO to catch up")
        with pytest.raises(errors.RiverbedError) as info:
            stale.commit_transaction(timeout=60)
        if not isinstance(info.value, errors.ProducerFencedError):
            with pytest.raises(errors.ProducerFencedError):
                stale.abort_transaction(timeout=60)
    finally:
        stale.close()
        other.close()
    check_read_back(bootstrap, topic, 1, {b"other:0"}, {b"stale:%d" % i for i in range(3)})


def test_transactions_cli_lists_and_describes(bootstrap, fleet):
    p = Producer(bootstrap, transactional_id="cli-1")
    try:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        create_topic(bootstrap, "txn-cli", 1)
        p.send("txn-cli", b"x").get(timeout=30)
        riverbed = str(pathlib.Path(sys.executable).with_name("riverbed"))
        out = subprocess.run([riverbed, "transactions", "list", "--bootstrap", bootstrap,
                              "--state", "Ongoing", "--json"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
        assert "cli-1" in out
        out = subprocess.run([riverbed, "transactions", "describe", "--bootstrap", bootstrap,
                              "--transactional-id", "cli-1"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
        assert "Ongoing" in out and "txn-cli-0" in out
        missing = subprocess.run([riverbed, "transactions", "describe", "--bootstrap", bootstrap,
                                  "--transactional-id", "nobody"], capture_output=True,
                                 text=True, timeout=60)
        assert missing.returncode == 1 and "not known" in missing.stderr
        out = subprocess.run([riverbed, "consume", "--bootstrap", bootstrap, "--topic",
                              "txn-cli", "--from-beginning", "--isolation-level",
                              "read_committed", "--timeout-ms", "1500"],
                             capture_output=True, text=True, timeout=60).stdout
        assert out == ""                                  # not committed yet
        p.commit_transaction(timeout=60)
    finally:
        p.close()


# ---- read-process-write through a worker's SIGKILL --------------------------------------------

class Worker:
    def __init__(self, bootstrap, *args):
        self.proc = subprocess.Popen([sys.executable, WORKER, bootstrap, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def committed(self) -> int:
        return sum(int(x.split()[1]) for x in list(self.lines) if x.startswith("COMMITTED "))

    def stop(self, sig=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.thread.join(timeout=10)


def test_read_process_write_is_exactly_once_through_a_worker_sigkill(bootstrap):
    src, dst, group, tid = "rpw-in", "rpw-out", "rpw-group", "rpw-worker"
    create_topic(bootstrap, src, 3)
    create_topic(bootstrap, dst, 3)
    n = 600
    inputs = [b"in:%d" % i for i in range(n)]
    with Producer(bootstrap, acks="all") as p:
        for i, v in enumerate(inputs):
            p.send(src, v, key=b"k%d" % i, partition=i % 3)
    args = (src, dst, group, tid, "--per-transaction", "15", "--sleep-ms", "30")
    first = Worker(bootstrap, *args)
    second = None
    try:
        poll_until(lambda: first.committed() >= n // 4, "the first worker's commits")
        first.stop(sig=9)                            # SIGKILL mid-stream, maybe mid-transaction
        done_by_first = first.committed()
        assert done_by_first < n
        second = Worker(bootstrap, *args)
        expected = {b"out:" + v for v in inputs}

        def all_out():
            got = read_all(bootstrap, dst, 3, idle_ms=500)
            return sum(len(r) for r in got.values()) >= n

        poll_until(all_out, "the output of every input record", timeout_s=180)
    finally:
        if second is not None:
            second.stop()
        first.stop()
    got = read_all(bootstrap, dst, 3)
    values = [v for recs in got.values() for _, _, v in recs]
    dupes = [v for v, c in collections.Counter(values).items() if c > 1]
    assert dupes == [], f"{len(dupes)} output records twice, e.g. {dupes[:5]}"
    assert set(values) == expected
    # each input partition's records keep their order within each output partition
    for recs in got.values():
        last: dict[int, int] = {}
        for _, key, v in recs:
            i = int(v.split(b":")[-1])
            assert i > last.get(i % 3, -1), f"order broken at {v!r}"
            last[i % 3] = i
    # the group's committed offsets are at the end of the input
    with Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False) as c:
        assert {p: c.committed(TopicPartition(src, p)) for p in range(3)} == {
            p: n // 3 for p in range(3)}


# ---- a transaction coordinator dies between its decision and its markers ----------------------

def _txn_id_owned_by(index: int, live: int = 2) -> str:
    """A transactional id whose shard the local fleet gives to transaction-coordinator-`index`
    (shard s -> sorted(live ids)[s % n])."""
    for i in range(1000):
        tid = f"mid-commit-{i}"
        if partition_for(tid, TXN_SHARDS) % live == index - 1:
            return tid
    raise AssertionError("no such id")


def _shard_owner(fleet, shard: int) -> int | None:
    client = zkmod.connect(fleet.zk_connect, timeout_s=10, auth=fleet.zk_auth)
    try:
        path = znodes.shard_owner_path(znodes.TRANSACTION_COORDINATORS, shard)
        return znodes.decode_shard_owner(shard, client.get(path)[0]).owner_id
    except Exception:  # noqa: BLE001 - no owner right now
        return None
    finally:
        zkmod.close(client)


def test_coordinator_killed_mid_commit_its_successor_completes_it(bootstrap, fleet):
    topic = "txn-midcommit"
    create_topic(bootstrap, topic, 2)
    victim = "transaction-coordinator-2"
    tid = _txn_id_owned_by(2)
    shard = partition_for(tid, TXN_SHARDS)
    # restart the victim with a failpoint: it writes PrepareCommit, answers the producer, and
    # never sends the markers
    fleet.stop(victim)
    os.environ["RIVERBED_FAILPOINTS"] = "transaction_coordinator.before_markers=hang"
    try:
        fleet.start(victim)
    finally:
        del os.environ["RIVERBED_FAILPOINTS"]
    poll_until(lambda: _shard_owner(fleet, shard) == 2, "the victim to own the id's shard")
    p = Producer(bootstrap, transactional_id=tid)
    try:
        with Admin(bootstrap) as admin:
            p.init_transactions(timeout=120)
            p.begin_transaction()
            for i in range(6):
                p.send(topic, b"mid:%d" % i, partition=i % 2)
            p.commit_transaction(timeout=60)      # answered once PrepareCommit is durable
            (d,) = admin.describe_transactions([tid])
            assert (d.state, d.coordinator_id) == ("PrepareCommit", 2)
            assert read_all(bootstrap, topic, 2, idle_ms=1000) == {}   # no marker yet
            fleet.stop(victim, kill=True)
            poll_until(lambda: admin.describe_transactions([tid])[0].state == "CompleteCommit",
                       "the successor to complete the commit")
            assert admin.describe_transactions([tid])[0].coordinator_id == 1
        # the producer goes on with the successor
        p.begin_transaction()
        p.send(topic, b"mid:6", partition=0)
        p.commit_transaction(timeout=60)
    finally:
        p.close()
        fleet.stop(victim, kill=True)        # never leave it running with the failpoint
        fleet.start(victim)
    check_read_back(bootstrap, topic, 2, {b"mid:%d" % i for i in range(7)}, set())


def test_send_offsets_to_transaction_commits_only_with_the_transaction(bootstrap):
    src, group = "txn-offsets-in", "txn-offsets-group"
    create_topic(bootstrap, src, 1)
    p = Producer(bootstrap, transactional_id="offsets-1")
    try:
        p.init_transactions(timeout=60)
        tp = TopicPartition(src, 0)
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: OffsetAndMetadata(7)}, group, timeout=60)
        p.abort_transaction(timeout=60)
        with Consumer(bootstrap_servers=bootstrap, group_id=group,
                      isolation_level="read_committed") as c:
            assert c.committed(tp) is None
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: OffsetAndMetadata(9)}, group, timeout=60)
        p.commit_transaction(timeout=60)
        with Consumer(bootstrap_servers=bootstrap, group_id=group,
                      isolation_level="read_committed") as c:
            assert poll_until(lambda: c.committed(tp) == 9, "the committed offset") is True
    finally:
        p.close()


def test_asyncio_clients_transactions(bootstrap):
    """riverbed.aio: the same transactional producer and read_committed consumer on a loop."""
    import asyncio

    from riverbed.aio import Consumer as AioConsumer
    from riverbed.aio import Producer as AioProducer

    topic = "txn-aio"
    create_topic(bootstrap, topic, 2)

    async def run():
        p = AioProducer(bootstrap, transactional_id="aio-1")
        await p.start()
        try:
            await p.init_transactions(timeout=60)
            async with p.transaction():
                for i in range(4):
                    await p.send(topic, b"aio:%d" % i, partition=i % 2)
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send(topic, b"aborted:0", partition=0)
                    raise RuntimeError("the block failed")
            assert p.transaction_state == "READY"
            await p.begin_transaction()
            await p.send(topic, b"aio:4", partition=1)
            await p.commit_transaction(timeout=60)
        finally:
            await p.stop()
        c = AioConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                        auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            got: set[bytes] = set()
            deadline = time.monotonic() + 30
            while len(got) < 5 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                got |= {r.value for recs in batch.values() for r in recs}
            return got
        finally:
            await c.stop()

    got = asyncio.run(run())
    assert got == {b"aio:%d" % i for i in range(5)}
    check_read_back(bootstrap, topic, 2, {b"aio:%d" % i for i in range(5)}, {b"aborted:0"})


def test_read_process_write_survives_an_output_leader_sigkill_too(bootstrap, fleet):
    """As above, and the storage node leading an output partition is SIGKILLed at the same
    moment: the markers go to the new leader, the followers' producer state and aborted index
    (built from the replicated markers) serve read_committed readers, and the node comes back."""
    src, dst, group, tid = "rpw2-in", "rpw2-out", "rpw2-group", "rpw2-worker"
    create_topic(bootstrap, src, 3)
    create_topic(bootstrap, dst, 3)
    n = 450
    inputs = [b"in:%d" % i for i in range(n)]
    with Producer(bootstrap, acks="all") as p:
        for i, v in enumerate(inputs):
            p.send(src, v, key=b"k%d" % i, partition=i % 3)
    with Admin(bootstrap) as admin:
        (desc,) = admin.describe_topics([dst])
    leader = next(p.leader for p in desc.partitions if p.partition == 0)
    node = f"storage-{leader}"
    args = (src, dst, group, tid, "--per-transaction", "15", "--sleep-ms", "30")
    first = Worker(bootstrap, *args)
    second = None
    try:
        poll_until(lambda: first.committed() >= n // 4, "the first worker's commits")
        fleet.stop(node, kill=True)
        first.stop(sig=9)
        fleet.start(node)
        second = Worker(bootstrap, *args)

        def all_out():
            got = read_all(bootstrap, dst, 3, idle_ms=500)
            return sum(len(r) for r in got.values()) >= n

        poll_until(all_out, "the output of every input record", timeout_s=240)
    finally:
        if second is not None:
            second.stop()
        first.stop()
        if not fleet.is_up(node):
            fleet.start(node)
    got = read_all(bootstrap, dst, 3)
    values = [v for recs in got.values() for _, _, v in recs]
    dupes = [v for v, c in collections.Counter(values).items() if c > 1]
    assert dupes == [], f"{len(dupes)} output records twice, e.g. {dupes[:5]}"
    assert set(values) == {b"out:" + v for v in inputs}
