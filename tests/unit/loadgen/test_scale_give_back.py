"""loadgen.scale's preferred-replica give-back before a storage node is stopped: it waits only
for a node that some partition names first (the CI run of 68a3d55 spent 2 x 120 s waiting for
node 3 to lead one of ten single-partition topics that all put it second or nowhere)."""
from __future__ import annotations

from loadgen import scale
from riverbed.structs import PartitionInfo, TopicDescription


class Admin:
    """describe_topics over fixed replica lists; elect_leaders moves each leader to the first
    replica, as the controller's preferred election does."""

    def __init__(self, replicas: dict[str, tuple[int, ...]]):
        self.replicas = replicas
        self.leaders = {t: r[1] for t, r in replicas.items()}     # not on the preferred one
        self.elections = 0

    def describe_topics(self, topics):
        return [TopicDescription(t, (PartitionInfo(t, 0, self.leaders[t], self.replicas[t],
                                                   self.replicas[t]),)) for t in topics]

    def elect_leaders(self):
        self.elections += 1
        self.leaders = {t: r[0] for t, r in self.replicas.items()}


def test_a_node_first_nowhere_is_not_waited_for(capsys):
    admin = Admin({"a": (1, 3), "b": (2, 3), "c": (2, 1)})
    scale._give_back(admin, ["a", "b", "c"], 3)
    assert admin.elections == 0
    assert "preferred replica of no partition" in capsys.readouterr().err


def test_a_node_first_somewhere_gets_its_share_back():
    admin = Admin({"a": (3, 1), "b": (2, 3), "c": (3, 2)})
    assert scale._leads(admin, ["a", "b", "c"], 3) == 1        # b: its second replica leads
    scale._give_back(admin, ["a", "b", "c"], 3)
    assert admin.elections == 1
    assert scale._leads(admin, ["a", "b", "c"], 3) == 2
