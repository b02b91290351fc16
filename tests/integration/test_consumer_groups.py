"""Consumer groups on a real fleet (ZooKeeper, controller, 3 storage nodes, group coordinator,
offset manager, gateway): three members share a 6-partition topic two partitions each; a member
in its own process is SIGKILLed and its partitions are consumed again, at least once, with no
gap; with long heartbeat intervals the survivors take them over as soon as the dead member's
session expires (long-polled heartbeats), not at their next heartbeat; `riverbed groups describe` shows committed offsets, log end offsets and lag;
`reset-offsets --to-earliest` on the inactive group makes a new member re-read from 0."""
from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors
from riverbed.tools import main as tools_main

pytestmark = pytest.mark.integration

TOPIC = "grp-events"
PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000        # the coordinator's group.min.session.timeout.ms
HEARTBEAT_MS = 1000
PROC = os.path.join(os.path.dirname(__file__), "group_consumer_proc.py")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("groups-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def bootstrap(fleet):
    return [fleet.gateway_endpoint]


def wait_for(cond, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def create_topic(bootstrap, topic, partitions):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])

        def ready():
            try:
                (d,) = admin.describe_topics([topic])
                return len(d.partitions) == partitions and all(p.leader >= 0 for p in d.partitions)
            except errors.RiverbedError:
                return False
        wait_for(ready, 30, f"{topic} leaders")


def produce(bootstrap, topic, per_partition, partitions=PARTITIONS):
    with Producer(bootstrap, acks=-1, linger_ms=5) as p:
        for i in range(per_partition):
            for part in range(partitions):
                p.send(topic, b"v%d" % i, partition=part)
        p.flush(timeout=60)


class Member(threading.Thread):
    """A group member on a thread: commits after processing each poll's records."""

    def __init__(self, bootstrap, group, name, *, topic=TOPIC, session_timeout_ms=None,
                 heartbeat_interval_ms=None):
        super().__init__(name=name, daemon=True)
        self.consumer = Consumer(bootstrap=bootstrap, group_id=group, client_id=name,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 fetch_max_wait_ms=100,
                                 session_timeout_ms=session_timeout_ms or SESSION_TIMEOUT_MS,
                                 heartbeat_interval_ms=heartbeat_interval_ms or HEARTBEAT_MS)
        self.consumer.subscribe([topic])
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.records: list[tuple[int, int, float]] = []     # (partition, offset, when)
        self.assigned: frozenset = frozenset()
        self.error: BaseException | None = None

    def run(self):
        c = self.consumer
        try:
            while not self.stop_event.is_set():
                batch = c.poll(timeout_ms=200)
                now = time.monotonic()
                with self.lock:
                    self.assigned = frozenset(tp.partition for tp in c.assignment())
                    for tp, recs in batch.items():
                        self.records += [(tp.partition, r.offset, now) for r in recs]
                if batch:
                    try:
                        c.commit()
                    except errors.RiverbedError:
                        pass          # rebalanced meanwhile: records will be re-delivered
        except BaseException as e:  # noqa: BLE001 - surfaced by the test
            self.error = e
        finally:
            c.close()

    def stop(self):
        self.stop_event.set()
        self.join(timeout=30)
        assert not self.is_alive()
        if self.error is not None:
            raise self.error


class ProcMember:
    """group_consumer_proc.py in a subprocess; reads its output on a thread."""

    def __init__(self, bootstrap, group, sleep_ms=20, max_poll_records=20, *, topic=TOPIC,
                 session_timeout_ms=None, heartbeat_interval_ms=None):
        self.proc = subprocess.Popen(
            [sys.executable, PROC, ",".join(bootstrap), topic, group, "--sleep-ms", str(sleep_ms),
             "--max-poll-records", str(max_poll_records),
             "--session-timeout-ms", str(session_timeout_ms or SESSION_TIMEOUT_MS),
             "--heartbeat-interval-ms", str(heartbeat_interval_ms or HEARTBEAT_MS)],
            stdout=subprocess.PIPE, text=True)
        self.records: list[tuple[int, int]] = []
        self.assigned: frozenset = frozenset()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            parts = line.split()
            with self.lock:
                if parts[0] == "REC":
                    self.records.append((int(parts[1]), int(parts[2])))
                elif parts[0] == "ASSIGNED":
                    self.assigned = frozenset(int(p) for p in parts[1].split(",")) if len(parts) > 1 else frozenset()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.reader.join(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def cli(bootstrap, *argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = tools_main(list(argv) + ["--bootstrap-server", ",".join(bootstrap)])
    return code, out.getvalue(), err.getvalue()


def _start_balanced(proc, members: list, new_members) -> None:
    """After the process member's first assignment, start the thread members new_members()
    makes (into `members`, so the caller stops them) and wait until each of the three owns two
    partitions."""
    wait_for(lambda: proc.assigned, 60, "the process member's first assignment")
    members.extend(new_members())
    for m in members:
        m.start()

    def balanced():
        owned = [proc.assigned] + [m.assigned for m in members]
        return all(len(o) == 2 for o in owned) and \
            frozenset().union(*owned) == frozenset(range(PARTITIONS))
    wait_for(balanced, 60, "three members with two partitions each")


def _reowned(members) -> bool:
    return frozenset().union(*(m.assigned for m in members)) == frozenset(range(PARTITIONS))


def test_three_members_share_partitions_and_survive_a_sigkill(bootstrap):
    group = "g-failover"
    create_topic(bootstrap, TOPIC, PARTITIONS)
    produce(bootstrap, TOPIC, 300)
    proc = ProcMember(bootstrap, group)
    members = []
    try:
        _start_balanced(proc, members,
                        lambda: [Member(bootstrap, group, f"thread-{i}") for i in range(2)])
        owned = [proc.assigned] + [m.assigned for m in members]
        assert sorted(p for o in owned for p in o) == list(range(PARTITIONS))   # disjoint, all six
        killed_parts = proc.assigned

        # SIGKILL the process while it is mid-way (it processes 20 records per 20 ms)
        wait_for(lambda: len(proc.records) >= 40, 30, "the process member to consume")
        t_kill = time.monotonic()
        proc.kill()

        wait_for(lambda: _reowned(members), SESSION_TIMEOUT_MS / 1000 + 30,
                 "the killed member's partitions to be re-owned")

        def first_reconsumed():
            times = [t for m in members for (p, _, t) in m.records if p in killed_parts and t > t_kill]
            return min(times) if times else None
        wait_for(lambda: first_reconsumed() is not None, 30, "records of the killed member's partitions")
        takeover_s = first_reconsumed() - t_kill
        print(f"\nSIGKILL -> partitions consumed again: {takeover_s:.2f} s "
              f"(session.timeout.ms={SESSION_TIMEOUT_MS}, heartbeat.interval.ms={HEARTBEAT_MS})")
        assert takeover_s >= 0

        produce(bootstrap, TOPIC, 50)                # more after the failover
        expected = 350

        def all_consumed():
            seen = {(p, o) for m in members for (p, o, _) in m.records} | set(proc.records)
            return all((p, o) in seen for p in range(PARTITIONS) for o in range(expected))
        wait_for(all_consumed, 60, "every record of every partition consumed at least once")
        seen = {(p, o) for m in members for (p, o, _) in m.records} | set(proc.records)
        for p in range(PARTITIONS):                   # no gap in any partition
            assert {o for (q, o) in seen if q == p} >= set(range(expected))
        # the survivors committed everything: describe shows it with zero lag
        def caught_up():
            code, out, _ = cli(bootstrap, "groups", "describe", group)
            rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
            return code == 0 and len(rows) == PARTITIONS and all(r[3] == str(expected) for r in rows)
        wait_for(caught_up, 30, "committed offsets at the log end")
        code, out, _ = cli(bootstrap, "groups", "describe", group)
        rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
        for r in rows:
            assert r[1] == TOPIC and r[3] == r[4] == str(expected) and r[5] == "0"
            assert r[6].startswith("thread-")        # CONSUMER-ID: client id + "-" + uuid
            assert r[8] in ("thread-0", "thread-1")  # CLIENT-ID
        code, out, _ = cli(bootstrap, "groups", "list")
        assert code == 0 and group in out.split()
        # reset on an active group is refused
        code, _, err = cli(bootstrap, "groups", "reset-offsets", "--group", group, "--topic", TOPIC,
                           "--to-earliest", "--execute")
        assert code == 1 and "inactive" in err
    finally:
        proc.stop()
        for m in members:
            m.stop()


def test_survivors_take_over_when_the_dead_members_session_expires_not_at_their_next_heartbeat(
        bootstrap):
    """Long-polled heartbeats (HeartbeatRequest.max_wait_ms): the coordinator answers a held
    heartbeat the moment the group starts rebalancing. The survivors heartbeat every 5 s
    (session 15 s); the member SIGKILLed has a 6 s session. All three start the generation
    together (t0) and the kill comes right after, so the dead member's session ends at about
    t0 + 6 s. Told at once, the survivors own its partitions soon after; told at their next
    heartbeat (Kafka's way, this code before the long poll), not before t0 + 10 s, about 4 s
    late. The bound, the dead member's session plus 2 s, is below the survivors' heartbeat
    interval and leaves room for the rebalance on a loaded machine."""
    group, topic = "g-hb-long-poll", "grp-hb"
    dead_session_ms, session_ms, heartbeat_ms = 6000, 15000, 5000
    margin_s = 2.0
    assert margin_s < heartbeat_ms / 1000 - 2       # the old way misses the bound by seconds
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, 100)
    proc = ProcMember(bootstrap, group, topic=topic, session_timeout_ms=dead_session_ms,
                      heartbeat_interval_ms=2000)
    members = []
    try:
        _start_balanced(proc, members, lambda: [
            Member(bootstrap, group, f"hb-thread-{i}", topic=topic, session_timeout_ms=session_ms,
                   heartbeat_interval_ms=heartbeat_ms) for i in range(2)])
        t_kill = time.monotonic()              # the generation started < 0.5 s ago (t0)
        proc.kill()
        wait_for(lambda: _reowned(members), session_ms / 1000 + 30,
                 "the killed member's partitions to be re-owned")
        took_s = time.monotonic() - t_kill
        print(f"\nSIGKILL -> re-owned in {took_s:.2f} s (dead member's session.timeout.ms="
              f"{dead_session_ms}; survivors' heartbeat.interval.ms={heartbeat_ms})")
        assert took_s <= dead_session_ms / 1000 + margin_s, \
            f"re-owned {took_s:.2f} s after the kill: the survivors learned of the rebalance late"
    finally:
        proc.stop()
        for m in members:
            m.stop()


def test_reset_offsets_to_earliest_on_an_inactive_group_rereads_from_zero(bootstrap):
    group = "g-reset"
    topic = "grp-reset"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 20, partitions=2)
    with Consumer(bootstrap=bootstrap, group_id=group, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100, session_timeout_ms=SESSION_TIMEOUT_MS,
                  heartbeat_interval_ms=HEARTBEAT_MS) as c:
        c.subscribe([topic])
        n = 0
        deadline = time.monotonic() + 30
        while n < 40 and time.monotonic() < deadline:
            n += sum(len(r) for r in c.poll(timeout_ms=200).values())
        assert n == 40
        c.commit()
        assert c.committed(TopicPartition(topic, 0)) == 20
    # closed: the group is Empty now; the committed offsets are there
    code, out, _ = cli(bootstrap, "groups", "describe", group)
    assert code == 0 and "state Empty" in out.splitlines()[0]
    code, out, err = cli(bootstrap, "groups", "reset-offsets", "--group", group, "--topic", topic,
                         "--to-earliest")
    assert code == 0 and "dry run" in err
    with Admin(bootstrap) as admin:
        assert admin.list_group_offsets(group)[TopicPartition(topic, 0)].offset == 20
    code, out, _ = cli(bootstrap, "groups", "reset-offsets", "--group", group, "--topic", topic,
                       "--to-earliest", "--execute")
    assert code == 0
    with Admin(bootstrap) as admin:
        offs = admin.list_group_offsets(group)
        assert {tp.partition: om.offset for tp, om in offs.items() if tp.topic == topic} == {0: 0, 1: 0}
    with Consumer(bootstrap=bootstrap, group_id=group, auto_offset_reset="latest",
                  fetch_max_wait_ms=100, session_timeout_ms=SESSION_TIMEOUT_MS,
                  heartbeat_interval_ms=HEARTBEAT_MS) as c:
        c.subscribe([topic])
        got: dict[int, list[int]] = {0: [], 1: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 40 and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=200).items():
                got[tp.partition] += [r.offset for r in recs]
        assert got == {0: list(range(20)), 1: list(range(20))}   # from 0, not from "latest"
