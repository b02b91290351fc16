"""The idempotent producer's server side with real processes (issue 6 item 3).

- INIT_PRODUCER_ID from the active controller (a real controller process; a standby answers
  NOT_CONTROLLER): distinct ids for two callers, the same id with epoch + 1 for (id, epoch).
- Storage nodes (the test plays controller with LEADER_AND_ISR, as in test_storage_node.py, and
  produces to the leader directly with riverbed.wire.client.Channel): a retried batch is answered
  with its original offset and written once; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER with
  nothing appended; the state survives a SIGKILL restart (rebuilt from the log), a clean restart
  (loaded from the snapshot written at close) and a leader change (the follower built it from
  the replicated batches).
"""
from __future__ import annotations

import functools

import signal
import sys
import time

import node_helpers
import pytest
from kazoo.exceptions import NoNodeError
from node_helpers import NONE, fetch_all, leader_and_isr, produce, wait_registered

from riverbed import errors
from riverbed._proto.v1 import producer_id_pb2
from riverbed.records import build_batch
from riverbed.wire.apis import ApiKey
from riverbed.wire.client import Channel

from deploy.process import port_accepts, spawn, stop_all
from services.common import znodes

pytestmark = pytest.mark.integration

E = errors.ErrorCode
WAIT_S = 30.0          # bound on polling loops, never a pass/fail threshold on speed
TOPIC = "idem"


def active_controller(zk) -> int | None:
    """The id in /controller, or None while there is none (it may go between exists and get)."""
    try:
        return znodes.decode_controller(zk.get(znodes.CONTROLLER)[0]).controller_id
    except NoNodeError:
        return None


wait_until = functools.partial(node_helpers.wait_until, timeout_s=WAIT_S, interval_s=0.05)


def idem_batch(pid, epoch, seq, values):
    """An idempotent batch; timestamps are now, so producer.id.expiration.ms keeps the state."""
    ts = int(time.time() * 1000)
    return build_batch([(ts + i, None, v) for i, v in enumerate(values)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


# ---- controller: INIT_PRODUCER_ID ------------------------------------------------------------

def init_producer_id(ch: Channel, pid=-1, epoch=-1):
    req = producer_id_pb2.InitProducerIdRequest(producer_id=pid, producer_epoch=epoch)
    return ch.call(ApiKey.INIT_PRODUCER_ID, req, timeout_ms=10_000).body


def first_id_from(endpoint: str):
    """INIT_PRODUCER_ID until answered: /controller is written before the winner has read the
    cluster, so it answers NOT_CONTROLLER (or COORDINATOR_NOT_AVAILABLE) until then; both are
    retriable for a client."""
    def attempt():
        try:
            with Channel(endpoint) as ch:
                r = init_producer_id(ch)
        except errors.NotControllerError:
            return None
        return r if r.error_code == NONE else None
    return wait_until(attempt, f"a producer id from {endpoint}")


def test_init_producer_id_from_the_active_controller(tmp_path, zk_chroot, zk, free_ports):
    procs = {}
    ports = {}
    try:
        for cid in (1, 2):
            port, pub = free_ports(2)
            ports[cid] = port
            cfg = tmp_path / f"controller-{cid}.properties"
            cfg.write_text("".join(f"{k}={v}\n" for k, v in {
                "controller.id": cid, "host.name": "127.0.0.1", "port": port, "pub.port": pub,
                "zookeeper.connect": zk_chroot, "zookeeper.session.timeout.ms": 4000}.items()))
            procs[cid] = spawn([sys.executable, "-m", "services.controller", "--config",
                                str(cfg)], tmp_path / f"controller-{cid}.log")
            if cid == 1:    # 1 wins the election before 2 exists
                wait_until(lambda: zk.exists(znodes.CONTROLLER), "an active controller")

        active = znodes.decode_controller(zk.get(znodes.CONTROLLER)[0]).controller_id
        standby = 2 if active == 1 else 1
        with Channel(f"tcp://127.0.0.1:{ports[active]}") as a, \
                Channel(f"tcp://127.0.0.1:{ports[active]}") as b:
            first = first_id_from(f"tcp://127.0.0.1:{ports[active]}")
            second = init_producer_id(b)
            assert (first.error_code, second.error_code) == (NONE, NONE), (first, second)
            assert first.producer_id >= 0 and second.producer_id >= 0
            assert first.producer_id != second.producer_id
            assert (first.producer_epoch, second.producer_epoch) == (0, 0)

            bumped = init_producer_id(a, first.producer_id, first.producer_epoch)
            assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == \
                (NONE, first.producer_id, 1)
            bad = init_producer_id(a, first.producer_id, -1)
            assert bad.error_code == E.Value("INVALID_REQUEST")

        # The block the active controller claimed is recorded under its id.
        data, _ = zk.get(znodes.LATEST_PRODUCER_ID_BLOCK)
        block = znodes.decode_producer_id_block(data)
        assert block.broker_id == active
        assert block.block_start <= first.producer_id <= block.block_end
        assert block.block_start <= second.producer_id <= block.block_end

        # The standby was spawned without waiting: under load it may still be importing.
        wait_until(lambda: port_accepts("127.0.0.1", ports[standby]), "the standby's port")
        with Channel(f"tcp://127.0.0.1:{ports[standby]}") as s:
            with pytest.raises(errors.NotControllerError):
                init_producer_id(s)

        # Fail over: the successor claims the next block, so its ids are new ones.
        procs[active].send_signal(signal.SIGKILL)
        procs[active].wait(10)
        wait_until(lambda: active_controller(zk) == standby, "the standby to take over")
        third = first_id_from(f"tcp://127.0.0.1:{ports[standby]}")
        assert third.producer_id > block.block_end
    finally:
        stop_all([(p.pid, p) for p in procs.values()], grace_s=5, kill_only=True)


# ---- storage node: duplicates, gaps, restarts, leader change --------------------------------

def values_in_log(ch, partition=0):
    recs, part = fetch_all(ch, TOPIC, partition)
    return [r.value for r in recs], part


def test_retry_is_written_once_and_gap_is_refused_and_state_survives_restarts(storage_nodes, zk):
    node = storage_nodes(1).start()
    session = wait_registered(zk, node).stat.ephemeralOwner
    pid, epoch = 4242, 1
    b0 = idem_batch(pid, epoch, 0, [b"a", b"b"])
    b1 = idem_batch(pid, epoch, 2, [b"c"])
    with Channel(node.endpoint) as ch:
        r = leader_and_isr(ch, 1, [(TOPIC, 0, 1, 0, [1], [1])])
        assert r.partitions[0].error_code == NONE

        p = produce(ch, TOPIC, 0, b0)
        assert (p.error_code, p.base_offset) == (NONE, 0)
        again = produce(ch, TOPIC, 0, b0)            # the response was lost; the client retries
        assert (again.error_code, again.base_offset) == (NONE, 0)
        p = produce(ch, TOPIC, 0, b1, acks=-1)
        assert (p.error_code, p.base_offset) == (NONE, 2)
        again = produce(ch, TOPIC, 0, b1, acks=-1)   # acks=-1 duplicate: at once (ISR of one)
        assert (again.error_code, again.base_offset) == (NONE, 2)

        gap = produce(ch, TOPIC, 0, idem_batch(pid, epoch, 5, [b"x"]))
        assert gap.error_code == E.Value("OUT_OF_ORDER_SEQUENCE_NUMBER"), gap
        assert gap.base_offset == -1
        stale = produce(ch, TOPIC, 0, idem_batch(pid, epoch - 1, 3, [b"y"]))
        assert stale.error_code == E.Value("INVALID_PRODUCER_EPOCH"), stale

        vals, part = values_in_log(ch)
        assert vals == [b"a", b"b", b"c"]
        assert part.high_watermark == 3

    # Hard kill: no snapshot at close; the state is rebuilt from the log on restart.
    node.stop(signal.SIGKILL)
    assert not list((node.log_dir / f"{TOPIC}-0").glob("*.snapshot"))
    node.start()
    session = wait_registered(zk, node, not_session=session).stat.ephemeralOwner
    with Channel(node.endpoint) as ch:
        assert leader_and_isr(ch, 1, [(TOPIC, 0, 1, 0, [1], [1])]).partitions[0].error_code \
            == NONE
        again = produce(ch, TOPIC, 0, b1)
        assert (again.error_code, again.base_offset) == (NONE, 2)
        again = produce(ch, TOPIC, 0, b0)            # still one of the last five batches
        assert (again.error_code, again.base_offset) == (NONE, 0)
        p = produce(ch, TOPIC, 0, idem_batch(pid, epoch, 3, [b"d"]))
        assert (p.error_code, p.base_offset) == (NONE, 3)
        assert values_in_log(ch)[0] == [b"a", b"b", b"c", b"d"]

    # Clean stop: the snapshot at the log end is written and loaded at the next start.
    assert node.stop(signal.SIGTERM) == 0
    snapshots = sorted(p.name for p in (node.log_dir / f"{TOPIC}-0").glob("*.snapshot"))
    assert snapshots == [f"{4:020d}.snapshot"]
    node.start()
    wait_registered(zk, node, not_session=session)
    with Channel(node.endpoint) as ch:
        assert leader_and_isr(ch, 1, [(TOPIC, 0, 1, 0, [1], [1])]).partitions[0].error_code \
            == NONE
        again = produce(ch, TOPIC, 0, idem_batch(pid, epoch, 3, [b"d"]))
        assert (again.error_code, again.base_offset) == (NONE, 3)
        gap = produce(ch, TOPIC, 0, idem_batch(pid, epoch, 9, [b"z"]))
        assert gap.error_code == E.Value("OUT_OF_ORDER_SEQUENCE_NUMBER")
        assert values_in_log(ch)[0] == [b"a", b"b", b"c", b"d"]


def test_retry_older_than_the_window_gets_its_offset_not_minus_one(storage_nodes, zk):
    # Kafka answers a duplicate with the offset the batch already has; a retry older than the
    # batches remembered per producer (producer.state.batches.retained, here 3) is found in the
    # log, across a SIGKILL restart too, and written once.
    node = storage_nodes(1, **{"producer.state.batches.retained": 3}).start()
    session = wait_registered(zk, node).stat.ephemeralOwner
    pid, epoch = 777, 0
    sent = [idem_batch(pid, epoch, 2 * i, [b"%d" % (2 * i), b"%d" % (2 * i + 1)])
            for i in range(6)]
    with Channel(node.endpoint) as ch:
        assert leader_and_isr(ch, 1, [(TOPIC, 0, 1, 0, [1], [1])]).partitions[0].error_code \
            == NONE
        for i, b in enumerate(sent):
            p = produce(ch, TOPIC, 0, b, acks=-1)
            assert (p.error_code, p.base_offset) == (NONE, 2 * i)
        for i in (0, 1, 4):                  # 0 and 1 precede the three remembered
            again = produce(ch, TOPIC, 0, sent[i], acks=-1)
            assert (again.error_code, again.base_offset) == (NONE, 2 * i), again
        assert len(values_in_log(ch)[0]) == 12
    node.stop(signal.SIGKILL)
    node.start()
    wait_registered(zk, node, not_session=session)
    with Channel(node.endpoint) as ch:
        assert leader_and_isr(ch, 1, [(TOPIC, 0, 1, 0, [1], [1])]).partitions[0].error_code \
            == NONE
        again = produce(ch, TOPIC, 0, sent[0])
        assert (again.error_code, again.base_offset) == (NONE, 0), again
        assert values_in_log(ch)[0] == [b"%d" % i for i in range(12)]


def test_new_leader_answers_duplicates_with_the_original_offsets(storage_nodes, zk):
    n1, n2 = storage_nodes(1).start(), storage_nodes(2).start()
    wait_registered(zk, n1)
    wait_registered(zk, n2)
    pid, epoch = 77, 3
    batches = [idem_batch(pid, epoch, 0, [b"a", b"b"]), idem_batch(pid, epoch, 2, [b"c"]),
               idem_batch(pid, epoch, 3, [b"d", b"e", b"f"])]
    state = (TOPIC, 0, 1, 0, [1, 2], [1, 2])
    with Channel(n2.endpoint) as c2:          # follower first, then the leader
        assert leader_and_isr(c2, 1, [state], [n1]).partitions[0].error_code == NONE
    with Channel(n1.endpoint) as c1:
        assert leader_and_isr(c1, 1, [state], [n1]).partitions[0].error_code == NONE
        offsets = []
        for b in batches:                     # acks=-1: the follower has every batch
            p = produce(c1, TOPIC, 0, b, acks=-1, timeout_ms=20_000)
            assert p.error_code == NONE, p
            offsets.append(p.base_offset)
        assert offsets == [0, 2, 3]
        # A duplicate with acks=-1 on the old leader waits for (already passed) HW: at once.
        again = produce(c1, TOPIC, 0, batches[-1], acks=-1, timeout_ms=20_000)
        assert (again.error_code, again.base_offset) == (NONE, 3)

    n1.stop(signal.SIGKILL)
    with Channel(n2.endpoint) as c2:
        r = leader_and_isr(c2, 1, [(TOPIC, 0, 2, 1, [2], [1, 2])])
        assert r.partitions[0].error_code == NONE
        for b, off in zip(batches, offsets):
            again = produce(c2, TOPIC, 0, b)
            assert (again.error_code, again.base_offset) == (NONE, off), again
        gap = produce(c2, TOPIC, 0, idem_batch(pid, epoch, 7, [b"x"]))
        assert gap.error_code == E.Value("OUT_OF_ORDER_SEQUENCE_NUMBER")
        p = produce(c2, TOPIC, 0, idem_batch(pid, epoch, 6, [b"g"]))
        assert (p.error_code, p.base_offset) == (NONE, 6)
        vals, _ = values_in_log(c2)
        assert vals == [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
