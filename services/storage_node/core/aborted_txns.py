"""The aborted-transactions index (Kafka's `.txnindex`, TransactionIndex) and the last stable
offset's inputs. Pure: bytes in, decisions out; the file layer is log/txn_index.py.

Each segment may have a `<base>.txnindex` beside its `.log`, holding one entry per transaction
aborted by a marker in that segment, in marker order, 34 bytes each (Kafka's AbortedTxn,
big-endian):

    position  size  field
     0         2    version            int16   0
     2         8    producer_id        int64
    10         8    first_offset       int64   the transaction's first batch in this partition
    18         8    last_offset        int64   the offset of its ABORT marker
    26         8    last_stable_offset int64   the partition's LSO right after the abort: the
                                               first offset of the oldest other open
                                               transaction, else last_offset + 1

A read_committed FETCH from `fetch_offset` whose data ends before `upper_bound` lists every
aborted transaction with `last_offset >= fetch_offset` and `first_offset < upper_bound`
(`collect_aborted`): the segments are searched from the one holding the fetch offset (an
aborted transaction overlapping it has its marker there or later) and the search stops at the
first entry whose `last_stable_offset >= upper_bound` (no transaction that started before
`upper_bound` can be aborted later than that; Kafka's TxnIndexSearchResult.isComplete).
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["AbortedTxn", "ENTRY_SIZE", "encode_entry", "decode_entries", "collect_aborted",
           "TxnIndexFormatError"]

VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size        # 34


class TxnIndexFormatError(ValueError):
    """Bytes that are not whole version-0 AbortedTxn entries."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_entry(e: AbortedTxn) -> bytes:
    return _ENTRY.pack(VERSION, e.producer_id, e.first_offset, e.last_offset,
                       e.last_stable_offset)


def decode_entries(data: bytes, *, strict: bool = False) -> list[AbortedTxn]:
    """Every whole entry of a .txnindex. A torn tail (a partial last entry after a crash) is
    ignored unless `strict`; an unknown version or impossible offsets raise TxnIndexFormatError."""
    n = len(data) // ENTRY_SIZE
    if strict and len(data) % ENTRY_SIZE:
        raise TxnIndexFormatError(f"{len(data)} bytes is not a whole number of entries")
    out = []
    for i in range(n):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, i * ENTRY_SIZE)
        if version != VERSION:
            raise TxnIndexFormatError(f"entry {i}: unknown version {version}")
        if first < 0 or last < first or pid < 0:
            raise TxnIndexFormatError(f"entry {i}: producer {pid}, offsets {first}..{last}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def collect_aborted(segments: Iterable[Sequence[AbortedTxn]], fetch_offset: int,
                    upper_bound: int) -> list[AbortedTxn]:
    """The aborted transactions a read_committed reader of [fetch_offset, upper_bound) must
    know, from the entries of each segment starting with the one holding `fetch_offset`, in
    log order (see the module doc)."""
    out: list[AbortedTxn] = []
    for entries in segments:
        for e in entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return out
    return out
