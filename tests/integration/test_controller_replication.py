"""Issue 4's controller half against a real fleet (ZooKeeper, 2 controllers, 3 storage nodes,
1 gateway): preferred-leader election after a bounce, a reassignment {1,2} -> {2,3} with the
data still readable, and a controller failover in the middle of a reassignment.

Waits are bounded (WAIT_S) and never pass/fail thresholds on speed. Every process is the
fleet's and is stopped by Fleet.down (by PID)."""
from __future__ import annotations

import functools

import json
import signal
import time

import node_helpers
import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors
from riverbed.tools import main as tools_main
from services.common import zk as zkmod
from services.common import znodes

pytestmark = pytest.mark.integration
WAIT_S = 60.0
N = 2000


wait_until = functools.partial(node_helpers.wait_until, timeout_s=WAIT_S, interval_s=0.2,
                               tolerate=(errors.RiverbedError,))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    # ZooKeeper's session alone decides liveness here: a test SIGSTOPs a replica to keep a
    # reassignment in progress, which the controller's 2 s heartbeat fencing would turn into
    # "node not live" before the reassignment is even asked for on a loaded machine
    # (heartbeat fencing has its own fault test).
    f = Fleet(tmp_path_factory.mktemp("ctl-repl-fleet"), free_base_port(), storage_nodes=3,
              controllers=2, gateways=1,
              config_overrides={"controller": {"broker.session.timeout.ms": "0"}})
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture
def bootstrap(fleet):
    return [fleet.gateway_endpoint]


@pytest.fixture
def zk(fleet):
    client = zkmod.connect(fleet.zk_connect, timeout_s=10, create_chroot=False, auth=fleet.zk_auth)
    try:
        yield client
    finally:
        zkmod.close(client)


def partitions(admin, topic):
    (desc,) = admin.describe_topics([topic])
    return {p.partition: p for p in desc.partitions}


def produce(bootstrap, topic, n, partition=0):
    values = [b"%s-%06d" % (topic.encode(), i) for i in range(n)]
    with Producer(bootstrap, acks=-1, linger_ms=5) as producer:
        futs = [producer.send(topic, v, partition=partition) for v in values]
        producer.flush(timeout=60)
        assert all(f.result(timeout=0).offset >= 0 for f in futs)
    return values


def consume(bootstrap, topic, n, partition=0):
    got = []
    with Consumer(bootstrap=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, partition)])
        deadline = time.monotonic() + WAIT_S
        while len(got) < n and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
    return got


def run_tool(capsys, *argv) -> tuple[int, str]:
    code = tools_main(list(argv))
    return code, capsys.readouterr().out


def active_controller(zk) -> int | None:
    try:
        return znodes.decode_controller(zk.get(znodes.CONTROLLER)[0]).controller_id
    except Exception:  # noqa: BLE001 - none while an election runs
        return None


def test_preferred_election_after_a_leader_bounce(fleet, bootstrap, capsys):
    topic = "pref"
    assignment = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3, 2]}
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, replica_assignment=assignment)])
        wait_until(lambda: all(p.leader == assignment[i][0]
                               for i, p in partitions(admin, topic).items()), "preferred leaders")
        fleet.stop("storage-1")
        wait_until(lambda: all(p.leader not in (-1, 1)
                               for p in partitions(admin, topic).values()), "leaders moved off 1")
        fleet.start("storage-1")
        # node 1 catches up and its leaders put it back in the ISR (ALTER_PARTITION)
        wait_until(lambda: all(1 in p.isr for p in partitions(admin, topic).values()),
                   "node 1 back in every ISR")
        before = partitions(admin, topic)
        assert before[0].leader != 1 and before[3].leader != 1   # the bounce moved them
        code, out = run_tool(capsys, "leaders", "elect-preferred", "--all",
                             "--bootstrap-server", fleet.gateway_endpoint)
        assert code == 0, out
        assert f"{topic}-0" in out and "Successfully completed leader election" in out
        after = wait_until(lambda: (lambda ps: ps if all(
            ps[i].leader == assignment[i][0] for i in ps) else None)(partitions(admin, topic)),
            "preferred leaders restored")
        assert after[0].leader_epoch > before[0].leader_epoch
        # again: nothing to do
        results = admin.elect_leaders([(topic, 0), (topic, 1)])
        assert all(isinstance(e, errors.ElectionNotNeededError) for e in results.values())


def test_reassignment_moves_a_partition_and_keeps_its_data(fleet, bootstrap, capsys, tmp_path):
    topic = "moving"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2]})])
        wait_until(lambda: partitions(admin, topic)[0].leader == 1, "leader 1")
    values = produce(bootstrap, topic, N)
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3]}]}))
    to_move = tmp_path / "topics.json"
    to_move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    gw = ["--bootstrap-server", fleet.gateway_endpoint]
    code, out = run_tool(capsys, "partitions", "reassign", "--generate", "--topics-to-move-json-file",
                         str(to_move), "--broker-list", "2,3", *gw)
    assert code == 0
    assert "Current partition replica assignment" in out
    assert "Proposed partition reassignment configuration" in out
    proposed = json.loads(out.strip().splitlines()[-1])
    assert sorted(proposed["partitions"][0]["replicas"]) == [2, 3]
    code, out = run_tool(capsys, "partitions", "reassign", "--execute",
                         "--reassignment-json-file", str(move), *gw)
    assert code == 0 and "Successfully started reassignment" in out, out

    def verified():
        c, o = run_tool(capsys, "partitions", "reassign", "--verify",
                        "--reassignment-json-file", str(move), *gw)
        assert "failed" not in o, o
        return f"Reassignment of partition {topic}-0 completed successfully" in o
    wait_until(verified, "reassignment completed")
    with Admin(bootstrap) as admin:
        p = wait_until(lambda: (lambda x: x if x.leader in (2, 3) else None)(
            partitions(admin, topic)[0]), "leader in {2,3}")
        assert list(p.replicas) == [2, 3] and set(p.isr) <= {2, 3}
        assert admin.list_partition_reassignments() == {}
    assert consume(bootstrap, topic, N) == values


def test_successor_controller_finishes_a_reassignment(fleet, bootstrap, zk, capsys):
    topic = "failover-move"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, replica_assignment={0: [1, 2]})])
        wait_until(lambda: partitions(admin, topic)[0].leader == 1, "leader 1")
    values = produce(bootstrap, topic, N)
    first = wait_until(lambda: active_controller(zk), "an active controller")
    fleet.signal("storage-3", signal.SIGSTOP)        # the new replica cannot catch up
    try:
        with Admin(bootstrap) as admin:
            admin.alter_partition_reassignments({(topic, 0): [2, 3]})
            wait_until(lambda: list(partitions(admin, topic)[0].replicas) == [1, 2, 3],
                       "assignment expanded to OAR + RAR")
            assert (topic, 0) in admin.list_partition_reassignments()
        data, _ = zk.get(znodes.REASSIGN_PARTITIONS)
        assert [(r.topic, r.replicas) for r in znodes.decode_reassign_partitions(data)] == [
            (topic, (2, 3))]
        fleet.stop(f"controller-{first}", kill=True)
        wait_until(lambda: active_controller(zk) not in (None, first), "a successor controller")
    finally:
        fleet.signal("storage-3", signal.SIGCONT)
    with Admin(bootstrap) as admin:
        wait_until(lambda: list(partitions(admin, topic)[0].replicas) == [2, 3]
                   and not admin.list_partition_reassignments(), "reassignment finished")
        assert partitions(admin, topic)[0].leader in (2, 3)
    assert zk.exists(znodes.REASSIGN_PARTITIONS) is None
    assert consume(bootstrap, topic, N) == values
    fleet.start(f"controller-{first}")               # leave the fleet as we found it
