"""One segment's aborted-transactions index file, `<base>.txnindex` (Kafka's TransactionIndex).
The format and the search are in core/aborted_txns.py; this is the file.

Created on the first entry (most segments never have one, as in Kafka). Appends are buffered
writes, fsynced with the segment's flush; a torn tail after a crash is ignored on reading and
the producer-state rebuild from the log re-adds what is missing (`add`, idempotent per marker).
Entries are kept in memory once read (a few per aborted transaction).
"""
from __future__ import annotations

import logging
import os

from services.storage_node.core.aborted_txns import (
    ENTRY_SIZE, AbortedTxn, TxnIndexFormatError, decode_entries, encode_entry,
)
from services.storage_node.log import files

log = logging.getLogger(__name__)


class TxnIndex:
    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self.dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        try:
            entries = decode_entries(data)
        except TxnIndexFormatError as e:
            log.warning("%s: unreadable (%s); rebuilt from the log's markers", self.path, e)
            files.unlink_quietly(self.path)
            return []
        if len(data) % ENTRY_SIZE:
            log.warning("%s: dropping a torn entry at its end", self.path)
            self._rewrite(entries)
        return entries

    def add(self, entry: AbortedTxn) -> bool:
        """Append `entry` unless an entry for the same marker is there. Returns True if added."""
        entries = self.entries
        for e in reversed(entries):
            if e.last_offset == entry.last_offset:
                return False
            if e.last_offset < entry.last_offset:
                break
        entries.append(entry)
        with open(self.path, "ab") as f:
            f.write(encode_entry(entry))
        self.dirty = True
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after `offset` (the log was truncated there)."""
        entries = self.entries
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) != len(entries):
            self._entries = keep
            self._rewrite(keep)

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            files.unlink_quietly(self.path)
            return
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(encode_entry(e) for e in entries))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def flush(self) -> None:
        if self.dirty:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                self.dirty = False
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self.dirty = False

    def rename(self, path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        files.unlink_quietly(self.path)
        self._entries = []
