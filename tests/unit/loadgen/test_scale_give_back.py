"""loadgen.scale's preferred-replica give-back before a storage node is stopped: it waits only
for a node that some partition names first, and asks again while it waits (the CI run of
68a3d55 spent 2 x 120 s waiting after one election, and the scale test hit its timeout)."""
from __future__ import annotations

from loadgen import scale
from riverbed.structs import PartitionInfo, TopicDescription


class Admin:
    """describe_topics over fixed replica lists; elect_leaders moves the leader of each partition
    asked for to its first replica, as the controller's preferred election does."""

    def __init__(self, replicas: dict[str, tuple[int, ...]], leaders: dict[str, int]):
        self.replicas = replicas
        self.leaders = dict(leaders)
        self.elections = 0
        self.refusals = 0

    def describe_topics(self, topics):
        return [TopicDescription(t, (PartitionInfo(t, 0, self.leaders[t], self.replicas[t],
                                                   self.replicas[t]),)) for t in topics]

    def elect_leaders(self, partitions=None):
        self.elections += 1
        if self.elections <= self.refusals:         # e.g. PreferredLeaderNotAvailable
            return {tp: "refused" for tp in partitions}
        for t, _ in partitions:
            self.leaders[t] = self.replicas[t][0]
        return {tp: None for tp in partitions}


def test_a_node_first_nowhere_is_not_waited_for(capsys):
    admin = Admin({"a": (1, 3), "b": (2, 3), "c": (2, 1)}, {"a": 3, "b": 3, "c": 1})
    scale._give_back(admin, ["a", "b", "c"], 3)
    assert admin.elections == 0
    assert "preferred replica of no partition" in capsys.readouterr().err


def test_a_node_first_somewhere_gets_its_share_back_when_asked_again():
    admin = Admin({"a": (3, 1), "b": (2, 3), "c": (3, 2)}, {"a": 1, "b": 2, "c": 2})
    admin.refusals = 1                  # the first election refuses (node 3 not in the ISR yet)
    scale._give_back(admin, ["a", "b", "c"], 3)
    assert admin.elections == 2
    assert admin.leaders == {"a": 3, "b": 2, "c": 3}
