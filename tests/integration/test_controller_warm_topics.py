"""The standby's warm copy of the topic znodes (controller shell/warm_topics.py) against a real
ZooKeeper: after another session's writes, a write of its own (the epoch bump), the barrier
and a refresh, the copy equals a full read, and the refresh read only what changed. Also the
store's own batches (shell/zk_store.py) where their order matters."""
from __future__ import annotations

import pytest

from services.common import zk as zkmod
from services.common import znodes
from services.controller.core.effects import (
    DeleteTopicZnodes, MarkTopicForDeletion, WritePartitionState, WriteTopicAssignment,
    WriteTopicConfig)
from services.controller.core.model import NEW, LeaderIsr
from services.controller.shell.warm_topics import WarmTopics
from services.controller.shell.zk_store import ZkStore

pytestmark = pytest.mark.integration


@pytest.fixture
def clients(zk_chroot):
    writer = zkmod.connect(zk_chroot, timeout_s=10)
    reader = zkmod.connect(zk_chroot, timeout_s=10)
    try:
        ZkStore(writer).ensure_paths()
        writer.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(1))
        yield writer, reader
    finally:
        zkmod.close(reader)
        zkmod.close(writer)


def _topic(name: str, partitions: int, epoch: int = 1) -> list:
    assignment = {p: (1 + p % 3, 1 + (p + 1) % 3) for p in range(partitions)}
    return ([WriteTopicAssignment(name, assignment, NEW), WriteTopicConfig(name, {"a": "1"}, NEW)]
            + [WritePartitionState(name, p, LeaderIsr(r[0], 0, r, epoch, 0), NEW)
               for p, r in assignment.items()])


def _bump(client) -> None:
    """What the elected controller does first: a write on its own session."""
    data, stat = client.get(znodes.CONTROLLER_EPOCH)
    client.set(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(
        znodes.decode_controller_epoch(data) + 1), version=stat.version)


def _epoch_version(client) -> int:
    return client.get(znodes.CONTROLLER_EPOCH)[1].version


def test_warm_copy_equals_a_full_read_after_changes(clients):
    writer, reader = clients
    store, full = ZkStore(writer), ZkStore(reader)
    store.commit(_topic("a", 50) + _topic("b", 20) + _topic("gone", 5), _epoch_version(writer))
    warm = WarmTopics(reader)
    first = warm.refresh()
    assert first >= 3 * 2 + 75
    assert warm.snapshot() == full.read_topics()
    assert warm.refresh() == 0                        # nothing changed, nothing read

    # Changes by the other session (the active controller): states, a config, a new topic,
    # a deleted topic, partitions added to a topic.
    v = _epoch_version(writer)
    states = {p: s for t in full.read_topics() if t.name == "a" for p, s in t.states.items()}
    changes = [WritePartitionState("a", p, LeaderIsr(2, 1, (2,), 1, 1), states[p].zk_version)
               for p in (3, 7, 11)]
    changes.append(WriteTopicConfig("b", {"a": "2"}, 0))
    changes += _topic("new", 4)
    changes.append(DeleteTopicZnodes("gone", tuple(range(5)), True, False))
    b = next(t for t in full.read_topics() if t.name == "b")
    grown = {**b.assignment, 20: (1, 2), 21: (2, 3)}
    changes.append(WriteTopicAssignment("b", grown, b.assignment_version))
    changes += [WritePartitionState("b", p, LeaderIsr(grown[p][0], 0, grown[p], 1, 0), NEW)
                for p in (20, 21)]
    store.commit(changes, v)

    # No waiting for the notifications: the bump on the reader's session, then the barrier.
    _bump(reader)
    assert warm.barrier()
    read = warm.refresh()
    assert warm.snapshot() == full.read_topics()
    # O(changed): 3 states + 1 config + the new topic (2 + 4) + b's assignment and 2 new
    # states, and the children list; never the 70 partitions that did not change.
    assert read <= 3 + 1 + 6 + 3 + 1 + 2, read


def test_invalidate_reads_everything_again(clients):
    writer, reader = clients
    ZkStore(writer).commit(_topic("a", 10), _epoch_version(writer))
    warm = WarmTopics(reader)
    warm.refresh()
    warm.invalidate("test")
    assert warm.snapshot() == ()
    assert warm.refresh() >= 12
    assert warm.snapshot() == ZkStore(reader).read_topics()


def test_background_refresh_is_bounded_and_converges(clients):
    """A standby's background refresh reads at most about max_reads znodes per call (an
    election must not wait behind a first load of every partition); calls add up to the copy."""
    writer, reader = clients
    ZkStore(writer).commit(_topic("a", 60), _epoch_version(writer))
    warm = WarmTopics(reader)
    calls = 0
    while True:
        n = warm.refresh(max_reads=10)
        calls += 1
        assert n <= 10 + 1, n               # + the children list
        if n == 0:
            break
        assert calls < 50
    assert calls > 6                         # 62 znodes, 10 at a time
    assert warm.snapshot() == ZkStore(reader).read_topics()


def test_a_topic_marked_and_deleted_in_one_batch_leaves_no_marker(clients):
    """A topic none of whose replicas is live: no StopReplica to send, so the controller core's
    mark and delete reach the store as one batch. The marker the batch creates must go too; a
    marker left behind makes the next controller delete a new topic of that name."""
    writer, reader = clients
    ZkStore(writer).commit(_topic("gone", 3), _epoch_version(writer))
    ZkStore(writer).commit([MarkTopicForDeletion("gone"),
                            DeleteTopicZnodes("gone", (0, 1, 2), True, True)],
                           _epoch_version(writer))
    assert reader.get_children(znodes.DELETE_TOPICS) == []
    assert reader.exists(znodes.topic_path("gone")) is None
    assert reader.exists(znodes.topic_config_path("gone")) is None
    assert ZkStore(reader).read_pending_deletions() == ()
