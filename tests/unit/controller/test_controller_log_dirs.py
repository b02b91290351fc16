"""A storage node's failed log dir (KIP-112): the controller treats the replicas it names as
offline — leaders move to the rest of the ISR, the replica leaves the ISR — and takes them back
when the node registers again without them."""
from __future__ import annotations

import dataclasses

from test_controller_core import broker, brokers, new_core, of, snapshot, st

from services.controller.core.effects import PublishMetadata, WritePartitionState
from services.controller.core.events import BrokersChanged


def with_offline(b, *tps):
    return dataclasses.replace(b, offline_partitions=frozenset(tps))


def test_failed_log_dir_moves_its_leaderships_and_shrinks_isrs_only_for_those_partitions():
    topics = [snapshot("a", {0: (1, 2, 3), 1: (2, 1, 3), 2: (1, 2, 3)},
                       {0: st(1, [1, 2, 3], 2, 5), 1: st(2, [2, 1, 3]), 2: st(1, [1, 2, 3])})]
    core = new_core(live=(1, 2, 3), topics=topics, epoch=6)
    # node 1's dir holding a-0 and a-1 failed; a-2 lives on its other dir
    out = core.handle(BrokersChanged((with_offline(broker(1), ("a", 0), ("a", 1)),
                                      broker(2), broker(3))), 100)
    writes = {(w.topic, w.partition): w.state for w in of(out, WritePartitionState)}
    assert writes[("a", 0)].leader == 2 and writes[("a", 0)].isr == (2, 3)
    assert writes[("a", 0)].leader_epoch == 3
    assert writes[("a", 1)].leader == 2 and writes[("a", 1)].isr == (2, 3)
    assert ("a", 2) not in writes                       # node 1 still leads it
    pub = of(out, PublishMetadata)[-1].update
    a = next(t for t in pub.topics if t.name == "a")
    assert list(a.partitions[0].offline_replicas) == [1]
    assert list(a.partitions[2].offline_replicas) == []
    core.check_invariants()
    assert core.leader_elections == 1


def test_partition_whose_only_isr_member_failed_goes_offline_and_comes_back_on_reregistration():
    topics = [snapshot("b", {0: (1,)}, {0: st(1, [1], 4, 1)})]
    core = new_core(live=(1, 2), topics=topics)
    out = core.handle(BrokersChanged((with_offline(broker(1), ("b", 0)), broker(2))), 0)
    (w,) = of(out, WritePartitionState)
    assert w.state.leader == -1 and w.state.isr == (1,)
    assert core.offline_partitions() == 1
    # the node restarted on a replaced disk: registered again with nothing offline
    out = core.handle(BrokersChanged(brokers(1, 2)), 10)
    (w,) = of(out, WritePartitionState)
    assert w.state.leader == 1
    assert core.offline_partitions() == 0
