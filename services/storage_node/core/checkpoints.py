"""Kafka's checkpoint file formats, as text in and out (the file layer writes them atomically).

Offset checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`cleaner-offset-checkpoint`, `replication-offset-checkpoint`):

    0                      <- version
    2                      <- entry count
    orders 0 1234          <- topic partition offset
    orders 1 99

`leader-epoch-checkpoint` (per partition):

    0
    2
    3 0                    <- epoch start_offset
    5 1200
"""
from __future__ import annotations

from riverbed import errors

VERSION = 0


class CheckpointError(errors.KafkaStorageError):
    """A checkpoint file does not parse."""


def format_offsets(offsets: dict[tuple[str, int], int]) -> str:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return "\n".join(lines) + "\n"


def parse_offsets(text: str) -> dict[tuple[str, int], int]:
    lines = _lines(text)
    out: dict[tuple[str, int], int] = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 3:
            raise CheckpointError(f"expected 'topic partition offset', got {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointError(f"bad numbers in {line!r}") from None
    return out


def format_epochs(entries: list[tuple[int, int]]) -> str:
    lines = [str(VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
    return "\n".join(lines) + "\n"


def parse_epochs(text: str) -> list[tuple[int, int]]:
    out = []
    for line in _lines(text):
        parts = line.split()
        if len(parts) != 2:
            raise CheckpointError(f"expected 'epoch start_offset', got {line!r}")
        try:
            out.append((int(parts[0]), int(parts[1])))
        except ValueError:
            raise CheckpointError(f"bad numbers in {line!r}") from None
    return out


def _lines(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise CheckpointError("checkpoint needs a version and a count line")
    if lines[0].strip() != str(VERSION):
        raise CheckpointError(f"unknown checkpoint version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"bad count line {lines[1]!r}") from None
    body = lines[2:]
    if count != len(body):
        raise CheckpointError(f"count says {count} entries, found {len(body)}")
    return body
