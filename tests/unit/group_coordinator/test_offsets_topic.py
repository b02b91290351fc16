"""__consumer_offsets record formats: golden bytes derived by hand from Kafka's schemas,
round trips, and random bytes that may only decode or raise OffsetsTopicFormatError."""
import struct

import pytest
from hypothesis import given, settings, strategies as st

from riverbed.coordinator import offsets_topic as ot
from riverbed.coordinator.consumer_protocol import (
    Assignment, Subscription, decode_assignment, decode_subscription, encode_assignment,
    encode_subscription,
)


def s16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


@pytest.mark.parametrize("s,h", [
    ("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -2**31),
    ("é", 233), ("😀", 1772899),     # a surrogate pair hashes as two UTF-16 code units
])
def test_java_string_hashcode(s, h):
    assert ot.java_string_hashcode(s) == h


def test_partition_for_is_kafkas_abs_mod():
    assert ot.partition_for("polygenelubricants", 50) == 0        # Utils.abs(MIN_VALUE) == 0
    assert ot.partition_for("hello", 50) == 99162322 % 50
    neg = "a" * 7
    assert ot.java_string_hashcode(neg) < 0
    assert ot.partition_for(neg, 50) == (ot.java_string_hashcode(neg) & 0x7FFFFFFF) % 50


def test_offset_commit_key_golden():
    key = ot.encode_key(ot.OffsetCommitKey("grp", "orders", 3))
    assert key == b"\x00\x01" + b"\x00\x03grp" + b"\x00\x06orders" + b"\x00\x00\x00\x03"
    assert ot.decode_key(key) == ot.OffsetCommitKey("grp", "orders", 3)


def test_group_metadata_key_golden():
    key = ot.encode_key(ot.GroupMetadataKey("grp"))
    assert key == b"\x00\x02\x00\x03grp"
    assert ot.decode_key(key) == ot.GroupMetadataKey("grp")


def test_offset_value_v3_golden():
    v = ot.OffsetCommitValue(offset=5, metadata="md", commit_timestamp_ms=1000, leader_epoch=7)
    assert ot.encode_offset_value(v) == (
        b"\x00\x03" + struct.pack(">q", 5) + struct.pack(">i", 7) + b"\x00\x02md" + struct.pack(">q", 1000))
    assert ot.decode_offset_value(ot.encode_offset_value(v)) == v


def test_offset_value_v1_when_expire_timestamp_given():
    v = ot.OffsetCommitValue(offset=9, metadata="", commit_timestamp_ms=10, expire_timestamp_ms=99)
    assert ot.encode_offset_value(v) == (
        b"\x00\x01" + struct.pack(">q", 9) + b"\x00\x00" + struct.pack(">qq", 10, 99))
    assert ot.decode_offset_value(ot.encode_offset_value(v)) == v


def test_offset_value_v0_v2_decode():
    body = struct.pack(">q", 4) + b"\x00\x01x" + struct.pack(">q", 77)
    for version in (0, 2):
        v = ot.decode_offset_value(struct.pack(">h", version) + body)
        assert (v.offset, v.metadata, v.commit_timestamp_ms, v.leader_epoch) == (4, "x", 77, -1)


def test_group_value_v3_golden():
    member = ot.MemberMetadata("m1", "cli", "/10.0.0.1", 300000, 10000, b"SUB", b"AS")
    v = ot.GroupMetadataValue("consumer", 4, "range", "m1", 123, (member,))
    expected = (b"\x00\x03" + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("m1")
                + struct.pack(">q", 123) + struct.pack(">i", 1)
                + s16("m1") + b"\xff\xff" + s16("cli") + s16("/10.0.0.1")
                + struct.pack(">ii", 300000, 10000)
                + struct.pack(">i", 3) + b"SUB" + struct.pack(">i", 2) + b"AS")
    assert ot.encode_group_value(v) == expected
    assert ot.decode_group_value(expected) == v


def test_empty_group_value_has_null_protocol_and_leader():
    v = ot.GroupMetadataValue("consumer", 2, None, None, 5, ())
    b = ot.encode_group_value(v)
    assert b == b"\x00\x03" + s16("consumer") + struct.pack(">i", 2) + b"\xff\xff\xff\xff" \
        + struct.pack(">q", 5) + b"\x00\x00\x00\x00"
    assert ot.decode_group_value(b) == v


def test_group_value_v1_decodes_without_timestamp():
    b = (b"\x00\x01" + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
         + struct.pack(">i", 1) + s16("m") + s16("c") + s16("h") + struct.pack(">ii", 5, 6)
         + struct.pack(">i", 0) + struct.pack(">i", 0))
    v = ot.decode_group_value(b)
    assert v.current_state_timestamp_ms == -1
    assert v.members[0].rebalance_timeout_ms == 5 and v.members[0].session_timeout_ms == 6


def test_tombstones_round_trip():
    k, v = ot.encode_record(ot.OffsetsRecord(ot.GroupMetadataKey("g"), None))
    assert v is None
    assert ot.decode_record(k, None) == ot.OffsetsRecord(ot.GroupMetadataKey("g"), None)


def test_subscription_v1_golden_and_pattern_extension():
    s = Subscription(("t",), None, (("t", 1), ("t", 0)))
    b = encode_subscription(s)
    assert b == (b"\x00\x01" + struct.pack(">i", 1) + s16("t") + b"\xff\xff\xff\xff"
                 + struct.pack(">i", 1) + s16("t") + struct.pack(">iii", 2, 0, 1))
    assert decode_subscription(b) == Subscription(("t",), None, (("t", 0), ("t", 1)))
    sp = Subscription((), b"u", (), "orders-.*")
    assert decode_subscription(encode_subscription(sp)) == sp
    assert encode_subscription(sp).endswith(s16("orders-.*"))


def test_assignment_v0_golden():
    b = encode_assignment(Assignment((("b", 0), ("a", 2))))
    assert b == (b"\x00\x00" + struct.pack(">i", 2) + s16("a") + struct.pack(">ii", 1, 2)
                 + s16("b") + struct.pack(">ii", 1, 0) + b"\xff\xff\xff\xff")
    assert decode_assignment(b) == Assignment((("a", 2), ("b", 0)))


names = st.text(max_size=12)
tps = st.lists(st.tuples(names, st.integers(0, 2**31 - 1)), unique=True, max_size=6)


@settings(max_examples=150, deadline=None)
@given(st.builds(ot.OffsetCommitValue, st.integers(-1, 2**63 - 1), names, st.integers(-1, 2**62),
                 st.integers(-1, 2**31 - 1), st.none()),
       names, names, st.integers(0, 2**31 - 1))
def test_offset_records_round_trip(value, group, topic, partition):
    rec = ot.OffsetsRecord(ot.OffsetCommitKey(group, topic, partition), value)
    assert ot.decode_record(*ot.encode_record(rec)) == rec


@settings(max_examples=100, deadline=None)
@given(st.lists(st.builds(ot.MemberMetadata, names, names, names, st.integers(0, 2**31 - 1),
                          st.integers(0, 2**31 - 1), st.binary(max_size=20), st.binary(max_size=20),
                          st.none() | names), max_size=4),
       st.none() | names, st.integers(-1, 2**31 - 1))
def test_group_records_round_trip(members, protocol, generation):
    v = ot.GroupMetadataValue("consumer", generation, protocol, protocol, 42, tuple(members))
    assert ot.decode_group_value(ot.encode_group_value(v)) == v


@settings(max_examples=100, deadline=None)
@given(st.builds(Subscription, st.lists(names, max_size=4).map(tuple), st.none() | st.binary(max_size=8),
                 tps.map(lambda x: tuple(sorted(x))), st.none() | names.filter(bool)))
def test_subscription_round_trip(sub):
    assert decode_subscription(encode_subscription(sub)) == sub


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_format_error(buf):
    for decode in (ot.decode_key, ot.decode_offset_value, ot.decode_group_value,
                   decode_subscription, decode_assignment):
        try:
            decode(buf)
        except ot.OffsetsTopicFormatError:
            pass


def test_an_append_lost_with_its_leader_is_a_retriable_coordinator_error():
    # the coordinators append over the network: a leader killed mid-append (NETWORK_EXCEPTION)
    # or none yet is COORDINATOR_NOT_AVAILABLE, which clients retry, never UNKNOWN_SERVER_ERROR
    # (fatal to a transactional producer: the chaos test's workers died of it)
    from riverbed.coordinator.offsets_topic import coordinator_error_for_append
    from riverbed.errors import ErrorCode as E
    for code in (E.NETWORK_EXCEPTION, E.LEADER_NOT_AVAILABLE, E.BROKER_NOT_AVAILABLE,
                 E.REQUEST_TIMED_OUT, E.NOT_ENOUGH_REPLICAS):
        assert coordinator_error_for_append(code) == E.COORDINATOR_NOT_AVAILABLE
    assert coordinator_error_for_append(E.NOT_LEADER_FOR_PARTITION) == E.NOT_COORDINATOR
    assert coordinator_error_for_append(E.CORRUPT_MESSAGE) == E.UNKNOWN_SERVER_ERROR
    assert coordinator_error_for_append(E.NONE) == E.NONE
