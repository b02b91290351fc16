"""The console tools' pure parts: kcat format tokens, the -J envelope, -H headers, ISO 8601
durations and the leader-loss lines."""
from __future__ import annotations

import json

import pytest

from riverbed.structs import ConsumerRecord
from riverbed.tools.leader_watch import leader_changes
from riverbed.tools.record_format import (FormatError, compile_format, parse_duration_ms,
                                          parse_header, record_json)

REC = ConsumerRecord("orders", 2, 41, 1700000000123, b"k1", b"hello",
                     (("trace", b"abc"), ("n", b"1")))


@pytest.mark.parametrize("fmt,expected", [
    ("%k %s\\n", b"k1 hello\n"),
    ("%t [%p] @%o %T\\t%K/%S %h\\n", b"orders [2] @41 1700000000123\t2/5 trace=abc,n=1\n"),
    ("100%% %s", b"100% hello"),
    ("\\\\%s", b"\\hello"),
    ("plain", b"plain"),
])
def test_format_tokens(fmt, expected):
    assert compile_format(fmt)(REC) == expected


def test_null_key_and_value():
    rec = ConsumerRecord("t", 0, 0, 0, None, None)
    assert compile_format("[%k][%s] %K %S %h")(rec) == b"[][] -1 -1 "
    assert compile_format("%k", null_literal=b"NULL")(rec) == b"NULL"


@pytest.mark.parametrize("fmt", ["%x", "%", "abc\\", "\\q"])
def test_bad_format_is_a_format_error(fmt):
    with pytest.raises(FormatError):
        compile_format(fmt)


def test_record_json_is_kcats_envelope():
    obj = json.loads(record_json(REC))
    assert obj == {"topic": "orders", "partition": 2, "offset": 41, "tstype": "create",
                   "ts": 1700000000123, "headers": ["trace", "abc", "n", "1"],
                   "key": "k1", "payload": "hello"}
    raw = json.loads(record_json(ConsumerRecord("t", 0, 0, 0, None, b"\xff")))
    assert raw["key"] is None and raw["payload"] == "\\xff"


def test_parse_header():
    assert parse_header("a=b=c") == ("a", b"b=c")
    assert parse_header("e=") == ("e", b"")
    for bad in ("nokey", "=v"):
        with pytest.raises(FormatError):
            parse_header(bad)


@pytest.mark.parametrize("text,ms", [("PT15M", 900_000), ("PT1H30M", 5_400_000),
                                     ("P1DT2H", 93_600_000), ("PT0.5S", 500), ("p2d", 172_800_000)])
def test_durations(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "15M", "PT1X", "P1DT"])
def test_bad_durations(text):
    with pytest.raises(FormatError):
        parse_duration_ms(text)


def test_leader_changes():
    assert leader_changes("t", {}, {0: 1, 1: -1}) == [
        "% t [1]: no leader (election in progress?); waiting"]
    assert leader_changes("t", {0: 1, 1: -1}, {0: -1, 1: 2}) == [
        "% t [0]: no leader (election in progress?); waiting", "% t [1]: leader is now node 2"]
    assert leader_changes("t", {0: -1}, {0: -1}) == []
