"""Typed configs from Kafka-style keys.

Each service declares a frozen dataclass whose fields are Kafka's keys in snake_case
(`log.segment.bytes` <-> `log_segment_bytes`). Values come from defaults, then a `.properties`
file, then `--override key=value` pairs; an unknown key or a value of the wrong type is a
ConfigError naming the key, raised before anything starts.
"""
from __future__ import annotations

import dataclasses
import pathlib
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A config key is unknown or its value does not parse."""


def key_to_field(key: str) -> str:
    return key.strip().replace(".", "_").replace("-", "_")


def field_to_key(name: str) -> str:
    return name.replace("_", ".")


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset Kafka's config files use: `k=v` or `k: v`, `#`/`!` comments."""
    out: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise ConfigError(f"line {lineno}: expected key=value, got {raw!r}")
        out[line[:sep].strip()] = line[sep + 1:].strip()
    return out


def load_properties(path: str | pathlib.Path) -> dict[str, str]:
    return parse_properties(pathlib.Path(path).read_text())


def parse_overrides(pairs: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ConfigError(f"override {pair!r} is not key=value")
        k, v = pair.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _convert(key: str, raw: Any, typ: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    origin = typing.get_origin(typ)
    args = typing.get_args(typ)
    try:
        if typ is bool:
            low = raw.strip().lower()
            if low not in ("true", "false"):
                raise ValueError("expected true or false")
            return low == "true"
        if typ is int:
            return int(raw)
        if typ is float:
            return float(raw)
        if typ is str:
            return raw
        if origin is tuple:
            inner = args[0] if args else str
            return tuple(_convert(key, part.strip(), inner) for part in raw.split(",") if part.strip())
        if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            non_none = [a for a in args if a is not type(None)]
            if raw.strip().lower() in ("", "null", "none"):
                return None
            return _convert(key, raw, non_none[0])
    except ValueError as e:
        raise ConfigError(f"{key}={raw!r}: {e}") from None
    return raw


def build(cls: type[T], *sources: Mapping[str, Any], ignore_unknown: bool = False) -> T:
    """Build config dataclass `cls` from Kafka-keyed mappings, later sources winning."""
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for src in sources:
        for key, raw in src.items():
            name = key_to_field(key)
            if name not in fields:
                if ignore_unknown:
                    continue
                raise ConfigError(f"unknown config {key!r} for {cls.__name__}")
            values[name] = _convert(field_to_key(name), raw, hints[name])
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None


def to_properties(cfg: Any) -> dict[str, str]:
    """The config as Kafka keys and string values (for describe tools and templates)."""
    out = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if isinstance(v, bool):
            s = "true" if v else "false"
        elif isinstance(v, tuple):
            s = ",".join(str(x) for x in v)
        elif v is None:
            s = ""
        else:
            s = str(v)
        out[field_to_key(f.name)] = s
    return out
