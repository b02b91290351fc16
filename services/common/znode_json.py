"""The JSON primitives every znode codec is built from, and the error they raise.

`ZnodeDataError` and the reading helpers (`_load`, `_field`, `_version`, `_int_list`,
`_timestamp`) that turn a znode's bytes into a checked JSON object: bad UTF-8, bad JSON, a
missing or mistyped field or a version below 1 raise `ZnodeDataError`. `services.common.znodes`
builds each znode's codec on them and re-exports `ZnodeDataError`.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["ZnodeDataError"]


class ZnodeDataError(ValueError):
    """A znode's bytes do not decode as the payload its path promises."""

    def __init__(self, what: str, reason: str, data: bytes | None = None):
        shown = "" if data is None else f" (data: {data[:80]!r})"
        super().__init__(f"bad {what} znode payload: {reason}{shown}")
        self.what = what
        self.reason = reason


# --- JSON helpers -----------------------------------------------------------------------------

def _dump(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=False).encode()


def _load(what: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise ZnodeDataError(what, "no data")
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as e:
        raise ZnodeDataError(what, f"not JSON: {e}", data) from None
    if not isinstance(obj, dict):
        raise ZnodeDataError(what, f"expected a JSON object, got {type(obj).__name__}", data)
    _version(what, obj, data)
    return obj


def _version(what: str, obj: Mapping[str, Any], data: bytes) -> int:
    v = obj.get("version")
    if isinstance(v, str) and v.isdigit():  # /cluster/id writes it as a string, as Kafka does
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ZnodeDataError(what, f"missing or invalid version {obj.get('version')!r}", data)
    return v


def _field(what: str, obj: Mapping[str, Any], key: str, typ: type | tuple[type, ...], data: bytes,
           *, optional: bool = False, default: Any = None) -> Any:
    if key not in obj or obj[key] is None:
        if optional:
            return default
        raise ZnodeDataError(what, f"missing field {key!r}", data)
    value = obj[key]
    if isinstance(value, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)):
        raise ZnodeDataError(what, f"field {key!r} has type bool", data)
    if not isinstance(value, typ):
        raise ZnodeDataError(what, f"field {key!r} has type {type(value).__name__}", data)
    return value


def _int_list(what: str, value: Any, key: str, data: bytes) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in value):
        raise ZnodeDataError(what, f"field {key!r} must be a list of integers", data)
    return tuple(value)


def _timestamp(what: str, obj: Mapping[str, Any], data: bytes) -> int:
    # Kafka writes timestamps as strings of milliseconds; accept numbers too.
    raw = obj.get("timestamp")
    if raw is None:
        return 0
    try:
        if isinstance(raw, bool):
            raise ValueError
        return int(raw)
    except (TypeError, ValueError):
        raise ZnodeDataError(what, f"invalid timestamp {raw!r}", data) from None
