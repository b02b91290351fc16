"""Storage faults on real file systems (issue 17): each storage node's log dirs live on loop
devices formatted XFS or ext4; an idempotent acks=all producer writes RF 3,
min.insync.replicas 2 partitions while a disk fills or fails; afterwards everything
acknowledged is read back (nothing lost or duplicated, offsets and order kept).

- a leader's disk fills past log.dir.free.bytes.min: its partitions' leadership moves, the node
  stays up, and once the ballast is gone the replicas rejoin the ISR without a restart;
- a follower's disk fills: it leaves the ISR at once (not after replica.lag.time.max.ms) and
  rejoins when space is back;
- a leader's only disk fails (the file system shuts down: EIO): the node shuts itself down
  cleanly, leadership moves; after the disk is replaced and the node restarted it recovers
  from what is on disk and rejoins;
- a node with two disks loses one: its partitions on the other keep being served by it;
- a log dir is remounted read-only under load (ext4 errors=remount-ro, an error triggered):
  EROFS takes that dir offline, `describe_log_dirs` and the topic's offline replicas say so, the
  node's other dir keeps serving;
- a replica moves between a node's two log dirs under load (KIP-113, the reassignment tool's
  `log_dirs`): the copy swaps in while the replica keeps leading, and a restart serves it from
  the new dir.

The longest gap between two acknowledgements of a partition around the fault is reported
(`-rA` shows it); nothing asserts on it.
"""
from __future__ import annotations

import contextlib
import pathlib
import time

import pytest

from deploy.fleet import Fleet, free_base_port
from disks import loop_disk, unavailable_reason
from faults import partitions, wait_full_isr, wait_partitions, wait_until
from riverbed import Admin, NewTopic
from verifiers import VerifyingProducer, verify

from conftest import FAULT_OVERRIDES

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=str(unavailable_reason()))

MIN_FREE = 32 << 20           # log.dir.free.bytes.min in these tests
RO_ON_ERROR = "noatime,errors=remount-ro"    # layout entry "ext4!ro"
TOPIC_CONFIG = {"min.insync.replicas": "2"}


@contextlib.contextmanager
def disk_fleet(tmp_path: pathlib.Path, layout: dict[int, list[str]]):
    """A fleet (3 storage nodes) whose node i has one loop disk per entry of layout[i]."""
    with contextlib.ExitStack() as stack:
        overrides = {k: dict(v) for k, v in FAULT_OVERRIDES.items()}
        overrides["storage_node"]["log.dir.free.bytes.min"] = str(MIN_FREE)
        disks = {}
        for node, types in layout.items():
            disks[node] = [stack.enter_context(loop_disk(
                tmp_path / f"n{node}d{i}", fstype=t.split("!")[0],
                options=RO_ON_ERROR if t.endswith("!ro") else ""))
                for i, t in enumerate(types)]
            overrides[f"storage-{node}"] = {
                "log.dirs": ",".join(str(d.path / "logs") for d in disks[node])}
        fleet = stack.enter_context(Fleet(
            tmp_path / "fleet", free_base_port(), storage_nodes=3, controllers=1, gateways=1,
            counts={"group_coordinator": 0, "offset_manager": 0,
                    "transaction_coordinator": 0}, config_overrides=overrides))
        fleet.up()
        try:
            yield fleet, disks
        finally:
            fleet.down()          # before the disks are unmounted (ExitStack order)


def max_gap(vp: VerifyingProducer, partition: int, since: float) -> float:
    """The longest time between two acknowledgements of `partition` after `since`."""
    times = [t for t in vp.ack_times[partition] if t >= since - 1.0]
    return max((b - a for a, b in zip(times, times[1:])), default=float("nan"))


def finish(request, name: str, bootstrap, topic: str, vp: VerifyingProducer, gaps: dict) -> None:
    v = verify(bootstrap, topic, [vp])
    epoch = vp.producer.metrics().get("producer_epoch")
    line = (f"[{name}] producer {vp.summary()}, producer epoch {epoch}; gaps "
            + ", ".join(f"p{p} {g:.2f} s" for p, g in gaps.items())
            + f"; verification: {v.describe()}")
    print(line)
    request.node.user_properties.append((name, line))
    assert v.acked > 0 and v.ok, v.describe()
    assert v.duplicates == 0, v.describe()


def producer(bootstrap, topic, parts):
    return VerifyingProducer(bootstrap, topic, parts, enable_idempotence=True,
                             max_in_flight_requests_per_connection=5, value_size=512,
                             rate_per_s=600)


def test_leader_disk_fills_leadership_moves_and_comes_back_with_space(request, tmp_path):
    with disk_fleet(tmp_path, {1: ["xfs"], 2: ["xfs"], 3: ["ext4"]}) as (fleet, disks):
        bootstrap = [fleet.gateway_endpoint]
        with Admin(bootstrap, request_timeout_ms=10000) as admin:
            admin.create_topics([NewTopic("fill", replica_assignment={0: [1, 2, 3], 1: [2, 3, 1]},
                                          configs=TOPIC_CONFIG)])
            wait_full_isr(admin, "fill", 2)
            with producer(bootstrap, "fill", [0, 1]) as vp:
                vp.wait_for_acks(300)
                t0 = time.monotonic()
                disks[1][0].fill(leave_bytes=MIN_FREE // 2)
                wait_partitions(admin, "fill", lambda ps: ps[0].leader in (2, 3)
                                and 1 not in ps[0].isr and 1 not in ps[1].isr,
                                "node 1's leadership and ISR places handed over")
                vp.wait_for_acks(200, partition=0, what="on the new leader")
                assert fleet.is_up("storage-1")            # the node itself stays up
                desc = partitions(admin, "fill")
                assert 1 in desc[0].offline_replicas
                gaps = {0: max_gap(vp, 0, t0), 1: max_gap(vp, 1, t0)}
                disks[1][0].drain()                        # space is back
                wait_partitions(admin, "fill", lambda ps: all(1 in p.isr for p in ps.values()),
                                "node 1 back in both ISRs without a restart", timeout_s=90)
                vp.wait_for_acks(200)
                vp.stop()
        finish(request, "leader-disk-full", bootstrap, "fill", vp, gaps)


def test_follower_disk_fills_it_leaves_the_isr_at_once_and_rejoins(request, tmp_path):
    with disk_fleet(tmp_path, {1: ["xfs"], 2: ["ext4"], 3: ["xfs"]}) as (fleet, disks):
        bootstrap = [fleet.gateway_endpoint]
        with Admin(bootstrap, request_timeout_ms=10000) as admin:
            admin.create_topics([NewTopic("ffill", replica_assignment={0: [1, 2, 3]},
                                          configs=TOPIC_CONFIG)])
            wait_full_isr(admin, "ffill", 1)
            with producer(bootstrap, "ffill", [0]) as vp:
                vp.wait_for_acks(300)
                t0 = time.monotonic()
                disks[3][0].fill(leave_bytes=MIN_FREE // 2)
                wait_partitions(admin, "ffill", lambda ps: 3 not in ps[0].isr and ps[0].leader == 1,
                                "node 3 out of the ISR, node 1 still leading")
                vp.wait_for_acks(300, partition=0, what="with node 3 out")
                gaps = {0: max_gap(vp, 0, t0)}
                disks[3][0].drain()
                wait_partitions(admin, "ffill", lambda ps: set(ps[0].isr) == {1, 2, 3},
                                "node 3 back in the ISR", timeout_s=90)
                vp.stop()
        finish(request, "follower-disk-full", bootstrap, "ffill", vp, gaps)


def test_leader_disk_fails_node_stops_cleanly_and_recovers_after_replacement(request, tmp_path):
    with disk_fleet(tmp_path, {1: ["xfs"], 2: ["xfs"], 3: ["xfs"]}) as (fleet, disks):
        bootstrap = [fleet.gateway_endpoint]
        with Admin(bootstrap, request_timeout_ms=10000) as admin:
            admin.create_topics([NewTopic("eio", replica_assignment={0: [1, 2, 3], 1: [2, 1, 3]},
                                          configs=TOPIC_CONFIG)])
            wait_full_isr(admin, "eio", 2)
            with producer(bootstrap, "eio", [0, 1]) as vp:
                vp.wait_for_acks(300)
                t0 = time.monotonic()
                disks[1][0].fail()                         # EIO from now on
                wait_partitions(admin, "eio", lambda ps: ps[0].leader in (2, 3)
                                and 1 not in ps[0].isr and 1 not in ps[1].isr,
                                "node 1's partitions handed over")
                vp.wait_for_acks(200, partition=0, what="on the new leader")
                # its only log dir is offline: the node shut itself down (exit 0, no kill)
                wait_until(lambda: "storage-1" not in fleet.running(), "node 1 to exit")
                gaps = {0: max_gap(vp, 0, t0), 1: max_gap(vp, 1, t0)}
                log = (fleet.data_dir / "logs" / "storage-1.log").read_text()
                assert "every log dir is offline: shutting down" in log
                assert "Traceback" not in log
                disks[1][0].replace()                      # the operator's fix
                fleet.start("storage-1")
                wait_full_isr(admin, "eio", 2, timeout_s=90)
                vp.wait_for_acks(200)
                vp.stop()
        finish(request, "leader-disk-eio", bootstrap, "eio", vp, gaps)


def test_node_with_two_disks_loses_one_and_keeps_serving_the_other(request, tmp_path):
    with disk_fleet(tmp_path, {1: ["xfs", "ext4"], 2: ["xfs"], 3: ["ext4"]}) as (fleet, disks):
        bootstrap = [fleet.gateway_endpoint]
        with Admin(bootstrap, request_timeout_ms=10000) as admin:
            # node 1 leads all four; its log dirs get two partitions each (fewest first)
            admin.create_topics([NewTopic("two", replica_assignment={
                p: [1, 2, 3] for p in range(4)}, configs=TOPIC_CONFIG)])
            wait_full_isr(admin, "two", 4)
            def on(disk):
                return sorted(int(d.name.rsplit("-", 1)[1]) for d in (disk.path / "logs").iterdir()
                              if d.is_dir() and d.name.startswith("two-"))
            # (a full ISR in the metadata does not mean the node has created the logs yet)
            wait_until(lambda: sorted(on(disks[1][0]) + on(disks[1][1])) == [0, 1, 2, 3],
                       "node 1's four partition logs on its disks")
            on_first, on_second = on(disks[1][0]), on(disks[1][1])
            assert on_first and on_second and sorted(on_first + on_second) == [0, 1, 2, 3], \
                (on_first, on_second)
            with producer(bootstrap, "two", list(range(4))) as vp:
                vp.wait_for_acks(400)
                t0 = time.monotonic()
                disks[1][0].fail()
                wait_partitions(admin, "two", lambda ps: all(
                    ps[p].leader != 1 and 1 not in ps[p].isr for p in on_first),
                    "the failed disk's partitions handed over")
                for p in range(4):
                    vp.wait_for_acks(50, partition=p, what=f"on partition {p}")
                ps = partitions(admin, "two")
                assert all(ps[p].leader == 1 and 1 in ps[p].isr for p in on_second), ps
                assert fleet.is_up("storage-1")
                gaps = {p: max_gap(vp, p, t0) for p in range(4)}
                vp.stop()
            fleet.stop("storage-1")
            disks[1][0].replace()
            fleet.start("storage-1")
            wait_full_isr(admin, "two", 4, timeout_s=90)
        finish(request, "two-disks-one-fails", bootstrap, "two", vp, gaps)


def _dirs_of(disk, topic):
    return sorted(int(d.name.rsplit("-", 1)[1]) for d in (disk.path / "logs").iterdir()
                  if d.is_dir() and d.name.startswith(f"{topic}-") and d.name.rsplit("-", 1)[1].isdigit())


def test_log_dir_remounted_read_only_goes_offline_and_describe_says_so(request, tmp_path):
    with disk_fleet(tmp_path, {1: ["xfs", "ext4!ro"], 2: ["xfs"], 3: ["ext4"]}) as (fleet, disks):
        bootstrap = [fleet.gateway_endpoint]
        with Admin(bootstrap, request_timeout_ms=10000) as admin:
            admin.create_topics([NewTopic("ro", replica_assignment={
                p: [1, 2, 3] for p in range(4)}, configs=TOPIC_CONFIG)])
            wait_full_isr(admin, "ro", 4)
            wait_until(lambda: sorted(_dirs_of(disks[1][0], "ro") + _dirs_of(disks[1][1], "ro"))
                       == [0, 1, 2, 3], "node 1's four partition logs on its disks")
            on_xfs, on_ext4 = _dirs_of(disks[1][0], "ro"), _dirs_of(disks[1][1], "ro")
            assert on_xfs and on_ext4, (on_xfs, on_ext4)
            before = {d.path: d for n in admin.describe_log_dirs([1]) for d in n.log_dirs}
            assert all(d.state == "online" and d.error is None and d.free_bytes > 0
                       for d in before.values()), before
            with producer(bootstrap, "ro", list(range(4))) as vp:
                vp.wait_for_acks(400)
                t0 = time.monotonic()
                disks[1][1].remount_read_only()            # EROFS on the next write there
                wait_partitions(admin, "ro", lambda ps: all(
                    ps[p].leader != 1 and 1 not in ps[p].isr for p in on_ext4),
                    "the read-only dir's partitions handed over")
                for p in range(4):
                    vp.wait_for_acks(50, partition=p, what=f"on partition {p}")
                ps = partitions(admin, "ro")
                assert all(ps[p].leader == 1 and 1 in ps[p].isr for p in on_xfs), ps
                assert all(1 in ps[p].offline_replicas for p in on_ext4), ps
                assert fleet.is_up("storage-1")
                gaps = {p: max_gap(vp, p, t0) for p in range(4)}
                vp.stop()
            (node,) = admin.describe_log_dirs([1], ["ro"])
            by_path = {d.path: d for d in node.log_dirs}
            ro_dir = str(disks[1][1].path / "logs")
            ok_dir = str(disks[1][0].path / "logs")
            assert by_path[ro_dir].state == "offline"
            assert by_path[ro_dir].error == "KAFKA_STORAGE_ERROR"
            assert sorted(r.partition for r in by_path[ro_dir].replicas) == on_ext4
            assert by_path[ok_dir].state == "online"
            assert sorted(r.partition for r in by_path[ok_dir].replicas) == on_xfs
            assert all(r.size_bytes > 0 and r.role == "leader" for r in by_path[ok_dir].replicas)
            log = (fleet.data_dir / "logs" / "storage-1.log").read_text()
            assert "Traceback" not in log
        finish(request, "log-dir-read-only", bootstrap, "ro", vp, gaps)


def test_replica_moves_between_log_dirs_under_load(request, tmp_path):
    import json
    import subprocess
    import sys

    with disk_fleet(tmp_path, {1: ["xfs", "ext4"], 2: ["xfs"], 3: ["ext4"]}) as (fleet, disks):
        bootstrap = [fleet.gateway_endpoint]
        with Admin(bootstrap, request_timeout_ms=30000) as admin:
            admin.create_topics([NewTopic("mv", replica_assignment={0: [1, 2, 3], 1: [1, 3, 2]},
                                          configs=TOPIC_CONFIG)])
            wait_full_isr(admin, "mv", 2)
            wait_until(lambda: sorted(_dirs_of(disks[1][0], "mv") + _dirs_of(disks[1][1], "mv"))
                       == [0, 1], "node 1's partition logs on its disks")
            src, dst = (0, 1) if 0 in _dirs_of(disks[1][0], "mv") else (1, 0)
            target = str(disks[1][dst].path / "logs")
            with producer(bootstrap, "mv", [0, 1]) as vp:
                vp.wait_for_acks(600)
                t0 = time.monotonic()
                plan = tmp_path / "move.json"
                plan.write_text(json.dumps({"version": 1, "partitions": [
                    {"topic": "mv", "partition": 0, "replicas": [1, 2, 3],
                     "log_dirs": [target, "any", "any"]}]}))
                cli = [sys.executable, "-m", "riverbed.tools", "partitions", "reassign",
                       "--bootstrap-server", bootstrap[0], "--reassignment-json-file", str(plan)]
                run = subprocess.run(cli + ["--execute"], capture_output=True, text=True,
                                     timeout=120)
                assert run.returncode == 0, run.stderr
                assert "moved 1 replica(s) between log dirs" in run.stdout
                vp.wait_for_acks(300, partition=0, what="after the move")
                verify_run = subprocess.run(cli + ["--verify"], capture_output=True, text=True,
                                            timeout=120)
                assert verify_run.returncode == 0, verify_run.stdout + verify_run.stderr
                assert "mv-0-1 to" in verify_run.stdout and "completed" in verify_run.stdout
                assert 0 in _dirs_of(disks[1][dst], "mv") and 0 not in _dirs_of(disks[1][src], "mv")
                ps = partitions(admin, "mv")
                assert ps[0].leader == 1 and set(ps[0].isr) == {1, 2, 3}, ps
                gaps = {p: max_gap(vp, p, t0) for p in (0, 1)}
                vp.stop()
            (node,) = admin.describe_log_dirs([1], ["mv"])
            where = {r.partition: d.path for d in node.log_dirs for r in d.replicas}
            assert where[0] == target
            # the moved replica is what the node serves after a restart, too
            fleet.stop("storage-1")
            fleet.start("storage-1")
            wait_full_isr(admin, "mv", 2, timeout_s=90)
            assert 0 in _dirs_of(disks[1][dst], "mv")
            log = (fleet.data_dir / "logs" / "storage-1.log").read_text()
            assert "moved mv-0 from" in log and "Traceback" not in log
        finish(request, "log-dir-move", bootstrap, "mv", vp, gaps)
