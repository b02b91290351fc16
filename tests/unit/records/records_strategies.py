"""Strategies and helpers shared by the record-batch codec tests."""
from __future__ import annotations

import struct

from crc32c import crc32c
from hypothesis import strategies as st

from riverbed.records import Compression

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
TIMESTAMPS = st.integers(0, 1 << 44)
BYTES_OR_NONE = st.none() | st.binary(max_size=40)
HEADERS = st.lists(st.tuples(st.text(max_size=8), BYTES_OR_NONE), max_size=3).map(tuple)
RECORDS = st.lists(st.tuples(TIMESTAMPS, BYTES_OR_NONE, BYTES_OR_NONE, HEADERS),
                   min_size=1, max_size=20)
CODECS = st.sampled_from(list(Compression))


def fix_crc(buf: bytearray, pos: int = 0) -> bytearray:
    """Recompute the CRC of the (possibly tampered) batch at pos, so decoders see past it."""
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21:pos + 12 + length])))
    return buf
