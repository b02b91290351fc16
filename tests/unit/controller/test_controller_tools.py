"""The reassignment tool's pure parts: Kafka's JSON shapes and the proposed assignment."""
import json
import random

import pytest

from riverbed.tools import build_parser
from riverbed.tools.partitions import (
    assignment_json, parse_reassignment, parse_topics_to_move, propose)


def test_reassignment_json_round_trip_and_errors():
    text = '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}'
    parsed = parse_reassignment(text)
    assert parsed == {("t", 0): (2, 3)}
    assert json.loads(assignment_json(parsed)) == json.loads(text)
    for bad in ('{"version":1}', '{"partitions":[{"topic":"t"}]}',
                '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
                '{"topic":"t","partition":0,"replicas":[2]}]}'):
        with pytest.raises(ValueError):
            parse_reassignment(bad)
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]


def test_propose_spreads_replicas_over_the_broker_list_keeping_the_replica_count():
    current = {("a", p): (1, 2) for p in range(4)}
    proposed = propose(current, [4, 3, 2], random.Random(1))
    assert set(proposed) == set(current)
    for replicas in proposed.values():
        assert len(replicas) == 2 and len(set(replicas)) == 2 and set(replicas) <= {2, 3, 4}
    firsts = [proposed[("a", p)][0] for p in range(4)]
    assert len(set(firsts[:3])) == 3                      # preferred leaders rotate
    with pytest.raises(ValueError):
        propose(current, [1], random.Random(0))


def test_propose_keeps_two_replicas_of_a_partition_off_one_rack():
    racks = {1: "h2", 5: "h2", 2: "h3", 3: "h4", 4: "h5"}
    current = {("a", p): (1, 2, 3) for p in range(10)}
    proposed = propose(current, [1, 2, 3, 4, 5], random.Random(3), racks)
    for replicas in proposed.values():
        assert len({racks[r] for r in replicas}) == 3, replicas
    # the same list without racks: the plain formula, which does put 1 and 5 together somewhere
    plain = propose(current, [1, 2, 3, 4, 5], random.Random(3))
    assert any({1, 5} <= set(r) for r in plain.values())


def test_cli_registers_the_commands():
    args = build_parser().parse_args(["partitions", "reassign", "--verify",
                                      "--reassignment-json-file", "f.json"])
    assert args.verify and args.reassignment_json_file == "f.json"
    args = build_parser().parse_args(["leaders", "elect-preferred", "--topic", "t",
                                      "--partition", "1"])
    assert (args.topic, args.partition) == ("t", 1)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["partitions", "reassign", "--generate", "--execute"])
