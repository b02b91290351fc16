"""Unit tests of produce admission: acks, leadership, batch validity and size before append."""
import struct

from crc32c import crc32c

from riverbed import errors

from services.storage_node.core.produce_admission import (
    admit_partition, check_acks, max_batch_bytes)
from services.storage_node.core.replica_state import (
    NONE, LocalLog, PartitionStateIn, ReplicaManager)

T = ("t", 0)


def batch(n_records=1, value=b"v" * 10):
    """A minimal valid v2 batch with n uncompressed records (hand-built, no SDK builder)."""
    def varint(v):
        v = (v << 1) ^ (v >> 63)
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                out.append(b | 0x80)
            else:
                out.append(b)
                return bytes(out)
    records = b""
    for i in range(n_records):
        body = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(len(value)) + value + varint(0)
        records += varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, n_records - 1, 1000, 1000, -1, -1, -1, n_records) + records
    crc = crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", 0, length, -1, 2, crc) + after_crc


def leader_rm():
    rm = ReplicaManager(1)
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("t", 0, 1, 0, (1,), (1,))])
    rm.apply_leader_and_isr(plan, {T: LocalLog(0, 0)})
    return rm


def test_acks():
    assert [check_acks(a) for a in (0, 1, -1)] == [NONE] * 3
    assert check_acks(2) == errors.InvalidRequiredAcksError.code
    assert check_acks(-2) == errors.InvalidRequiredAcksError.code


def test_valid_payload_is_admitted():
    a = admit_partition(leader_rm(), T, batch(3) + batch(2), 1_000_000)
    assert a.ok and a.batch_count == 2 and a.record_count == 5


def test_unknown_and_not_leader():
    rm = leader_rm()
    assert admit_partition(rm, ("x", 0), batch(), 10**6).error_code == \
        errors.UnknownTopicOrPartitionError.code
    assert admit_partition(rm, ("t", -1), batch(), 10**6).error_code == \
        errors.UnknownTopicOrPartitionError.code
    plan = rm.plan_leader_and_isr(1, [PartitionStateIn("t", 0, 2, 1, (2, 1), (1, 2))])
    rm.apply_leader_and_isr(plan, {T: LocalLog(0, 0)})
    assert admit_partition(rm, T, batch(), 10**6).error_code == \
        errors.NotLeaderForPartitionError.code


def test_oversize_and_corrupt_batches_are_refused_whole():
    rm = leader_rm()
    good = batch(1)
    big = batch(1, b"x" * 500)
    a = admit_partition(rm, T, good + big, 200)
    assert a.error_code == errors.MessageTooLargeError.code
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    assert admit_partition(rm, T, good + bytes(bad), 10**6).error_code == \
        errors.CorruptMessageError.code
    assert admit_partition(rm, T, good[:-3], 10**6).error_code == errors.CorruptMessageError.code
    assert admit_partition(rm, T, b"", 10**6).error_code == errors.CorruptMessageError.code
    assert admit_partition(rm, T, None, 10**6).error_code == errors.CorruptMessageError.code


def test_topic_max_message_bytes_overrides_node_default():
    assert max_batch_bytes({"max.message.bytes": "100"}, 1000) == 100
    assert max_batch_bytes({"max.message.bytes": "junk"}, 1000) == 1000
    assert max_batch_bytes({}, 1000) == 1000
    assert max_batch_bytes(None, 1000) == 1000
