"""Kafka's v2 record batch (magic 2), byte for byte: header checks, builder, decoder.

See `header.py` for the batch layout, `codec.py` for the record layout and decoding,
`builder.py` for building and `compression.py` for compression framing.
"""
from riverbed.records.builder import BatchBuilder, build_batch
from riverbed.records.codec import (
    Record,
    decode_batch,
    decode_batches,
    decode_varint,
    encode_varint,
    iter_records,
)
from riverbed.records.compression import compress, decompress
from riverbed.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    TimestampType,
    iter_batches,
    read_header,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
    validate_batch,
    validate_batches,
)

__all__ = [
    "BatchBuilder", "Record", "build_batch", "compress", "decode_batch", "decode_batches",
    "decode_varint", "decompress", "encode_varint", "iter_records",
    "HEADER_SIZE", "LOG_OVERHEAD", "BatchHeader", "Compression", "TimestampType",
    "iter_batches", "read_header", "set_base_offset", "set_max_timestamp_log_append",
    "set_partition_leader_epoch", "validate_batch", "validate_batches",
]
