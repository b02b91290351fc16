"""Properties of the core under random node failures and returns (hypothesis)."""
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from riverbed._proto.v1 import controller_pb2, header_pb2
from services.controller.config import ControllerConfig
from services.controller.core.controller import ControllerCore
from services.controller.core.effects import SendLeaderAndIsr, WritePartitionState
from services.controller.core.events import BrokersChanged, ElectedAsController, RequestReceived
from services.controller.core.model import BrokerInfo

NODES = (1, 2, 3, 4)


def broker(i):
    return BrokerInfo(i, "127.0.0.1", 9000 + i, f"tcp://127.0.0.1:{9000 + i}")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.lists(st.sets(st.sampled_from(NODES)), max_size=12),
       rf=st.integers(1, 3))
def test_leaders_live_epochs_grow_one_send_per_node(seed, steps, rf):
    core = ControllerCore(ControllerConfig(), random.Random(seed))
    core.handle(ElectedAsController(1, "c", tuple(broker(i) for i in NODES), ()), 0)
    req = controller_pb2.CreateTopicsRequest()
    req.topics.add(name="t", num_partitions=8, replication_factor=rf)
    core.handle(RequestReceived(header_pb2.ApiKey.CREATE_TOPICS, req), 0)
    for live in steps:
        before = dict(core.topics["t"].states)
        out = core.handle(BrokersChanged(tuple(broker(i) for i in sorted(live))), 0)
        core.check_invariants()
        nodes = [e.node_id for e in out if isinstance(e, SendLeaderAndIsr)]
        assert len(nodes) == len(set(nodes)) and set(nodes) <= live
        for w in out:
            if isinstance(w, WritePartitionState):
                old = before[w.partition]
                assert w.expected_version == old.zk_version
                assert w.state.leader_epoch == old.leader_epoch + 1
        for p, s in core.topics["t"].states.items():
            assert s.leader == -1 or s.leader in live
            live_isr = [r for r in s.isr if r in live]
            # A partition without a leader has no live in-sync replica.
            assert s.leader != -1 or not live_isr
