"""kafka-python 3.0's serializer classes (`kafka.serializer`): what `key_serializer`,
`value_serializer`, `key_deserializer` and `value_deserializer` may be besides a plain function.

A `Serializer` is called as `serialize(topic, headers, data)` and a `Deserializer` as
`deserialize(topic, headers, data)` (kafka-python 3.0 passes the headers; a plain function gets
only the data, as before). `DefaultSerializer` encodes str as UTF-8 and passes bytes through;
`JsonSerializer` does JSON on top of it.
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Callable, Sequence

__all__ = ["Serializer", "Deserializer", "DefaultSerializer", "JsonSerializer", "serializer_of",
           "deserializer_of"]

Headers = Sequence[tuple[str, bytes]]


class Serializer(ABC):
    @abstractmethod
    def serialize(self, topic: str, headers: Headers, data: Any) -> Any: ...

    def close(self) -> None:
        pass


class Deserializer(ABC):
    @abstractmethod
    def deserialize(self, topic: str, headers: Headers, data: bytes) -> Any: ...

    def close(self) -> None:
        pass


class DefaultSerializer(Serializer, Deserializer):
    """str <-> bytes in `encoding`; bytes-like values and None pass through."""

    def __init__(self, encoding: str = "utf-8"):
        self.encoding = encoding

    def serialize(self, topic: str, headers: Headers, data: Any) -> Any:
        if type(data) in (bytes, bytearray, memoryview, type(None)):
            return data
        return data.encode(self.encoding)

    def deserialize(self, topic: str, headers: Headers, data: bytes) -> Any:
        return None if data is None else data.decode(self.encoding)


class JsonSerializer(DefaultSerializer):
    """Any JSON value <-> its UTF-8 JSON text."""

    def serialize(self, topic: str, headers: Headers, data: Any) -> Any:
        return None if data is None else super().serialize(topic, headers, json.dumps(data))

    def deserialize(self, topic: str, headers: Headers, data: bytes) -> Any:
        return None if data is None else json.loads(super().deserialize(topic, headers, data))


def serializer_of(s: Any) -> Callable[[str, Headers, Any], Any] | None:
    """A client's key/value serializer as fn(topic, headers, data): a Serializer's serialize, or
    a plain function given the data alone."""
    if s is None:
        return None
    if hasattr(s, "serialize"):
        return s.serialize
    return lambda topic, headers, data: s(data)


def deserializer_of(d: Any) -> Callable[[str, Headers, Any], Any] | None:
    """The same for deserializers (`deserialize(topic, headers, data)`, or fn(data))."""
    if d is None:
        return None
    if hasattr(d, "deserialize"):
        return d.deserialize
    return lambda topic, headers, data: d(data)
