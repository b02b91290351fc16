"""Control batches: transaction markers (Kafka's EndTransactionMarker, KIP-98), byte for byte.

A marker is a batch with attributes control (bit 5) and transactional (bit 4), the producer's id
and epoch, base sequence -1, and one record:

    key   = int16 version (0) + int16 type (0 = ABORT, 1 = COMMIT)
    value = int16 version (0) + int32 coordinator_epoch

Written by a partition's leader on the transaction coordinator's WRITE_TXN_MARKERS. Consumers
skip control batches; read_committed consumers use abort markers to end an aborted range.
Decoders raise `CorruptMessageError` on malformed bytes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from riverbed import errors
from riverbed.records.builder import build_batch
from riverbed.records.codec import decode_batch

__all__ = ["ABORT", "COMMIT", "ControlRecord", "build_marker_batch", "decode_control_key",
           "decode_control_value", "encode_control_key", "encode_control_value",
           "read_control_record"]

ABORT = 0
COMMIT = 1
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A decoded marker: commit or abort, and the coordinator epoch that wrote it (-1 when the
    control record is not a transaction marker Riverbed knows)."""
    commit: bool
    coordinator_epoch: int
    control_type: int = -1


def encode_control_key(control_type: int) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def encode_control_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)


def decode_control_key(key: bytes | None) -> int:
    """The control type (ABORT, COMMIT, or another Kafka control type)."""
    if key is None or len(key) < _KEY.size:
        raise errors.CorruptMessageError(f"control record key of {0 if key is None else len(key)} "
                                         "bytes")
    version, control_type = _KEY.unpack_from(key, 0)
    if version < 0:
        raise errors.CorruptMessageError(f"control record key version {version}")
    return control_type


def decode_control_value(value: bytes | None) -> int:
    """The coordinator epoch of a marker value (Kafka ignores bytes after the fields)."""
    if value is None or len(value) < _VALUE.size:
        raise errors.CorruptMessageError(f"marker value of {0 if value is None else len(value)} "
                                         "bytes")
    version, epoch = _VALUE.unpack_from(value, 0)
    if version < 0:
        raise errors.CorruptMessageError(f"marker value version {version}")
    return epoch


def build_marker_batch(producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """A whole control batch (base offset 0: the leader assigns it) holding one marker."""
    return build_batch([(timestamp_ms, encode_control_key(COMMIT if commit else ABORT),
                         encode_control_value(coordinator_epoch))],
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                       is_transactional=True, is_control=True)


def read_control_record(buf, pos: int = 0) -> ControlRecord:
    """The marker of the control batch at `pos` in `buf` (validated: CRC included)."""
    records = decode_batch(buf, pos)
    if not records:
        raise errors.CorruptMessageError("control batch without a record")
    r = records[0]
    control_type = decode_control_key(r.key)
    if control_type in (ABORT, COMMIT):
        return ControlRecord(control_type == COMMIT, decode_control_value(r.value), control_type)
    return ControlRecord(False, -1, control_type)
