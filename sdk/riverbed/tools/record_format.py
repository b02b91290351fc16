"""How the console tools print and parse records: kcat's `-f` format tokens, kcat's `-J` JSON
envelope, `-H key=value` headers and ISO 8601 durations (`--by-duration`). Pure functions.

Format tokens (kcat's):

    %t topic    %p partition    %o offset    %T timestamp (ms since the epoch)
    %k key      %s value        %K key length (-1 for null)    %S value length (-1 for null)
    %h headers as key=value, comma-separated    %%  a percent sign
    \\n newline    \\t tab    \\r carriage return    \\\\ backslash

Nothing is added after a record: end the format with \\n for one record per line.
A null key or value prints as nothing (kcat's -Z would print NULL; --null-literal does).
"""
from __future__ import annotations

import json
import re
from typing import Callable, Sequence

from riverbed.structs import ConsumerRecord

__all__ = ["compile_format", "record_json", "parse_header", "parse_duration_ms", "FormatError"]


class FormatError(ValueError):
    """A format string, header or duration that cannot be parsed."""


_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "0": b"\0"}
_TOKENS = "tpoTkKsSh%"


def _headers_text(headers: Sequence[tuple[str, bytes]]) -> bytes:
    return b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in headers)


def compile_format(fmt: str, *, null_literal: bytes = b"") -> Callable[[ConsumerRecord], bytes]:
    """A function record -> the bytes `fmt` asks for. FormatError on an unknown token."""
    parts: list[bytes | str] = []        # literal bytes, or a one-letter token
    literal = bytearray()
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == "%" or c == "\\":
            if i + 1 >= len(fmt):
                raise FormatError(f"format ends with a lone {c!r}")
            n = fmt[i + 1]
            if c == "\\":
                if n not in _ESCAPES:
                    raise FormatError(f"unknown escape \\{n} in format (known: \\n \\t \\r \\\\ \\0)")
                literal += _ESCAPES[n]
            elif n == "%":
                literal += b"%"
            elif n in _TOKENS:
                if literal:
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(n)
            else:
                raise FormatError(f"unknown token %{n} in format (known: "
                                  + " ".join("%" + t for t in _TOKENS) + ")")
            i += 2
            continue
        literal += c.encode()
        i += 1
    if literal:
        parts.append(bytes(literal))

    def render(rec: ConsumerRecord) -> bytes:
        out = bytearray()
        for part in parts:
            if isinstance(part, bytes):
                out += part
            elif part == "s":
                out += rec.value if rec.value is not None else null_literal
            elif part == "k":
                out += rec.key if rec.key is not None else null_literal
            elif part == "o":
                out += str(rec.offset).encode()
            elif part == "p":
                out += str(rec.partition).encode()
            elif part == "t":
                out += rec.topic.encode()
            elif part == "T":
                out += str(rec.timestamp).encode()
            elif part == "K":
                out += str(-1 if rec.key is None else len(rec.key)).encode()
            elif part == "S":
                out += str(-1 if rec.value is None else len(rec.value)).encode()
            elif part == "h":
                out += _headers_text(rec.headers)
        return bytes(out)
    return render


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="backslashreplace")


def record_json(rec: ConsumerRecord) -> str:
    """kcat -J's envelope on one line: topic, partition, offset, tstype, ts, headers (a flat
    [key, value, ...] list), key, payload. Bytes are shown as UTF-8 (invalid bytes escaped)."""
    headers: list[str | None] = []
    for k, v in rec.headers:
        headers += [k, _text(v)]
    return json.dumps({"topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
                       "tstype": "create", "ts": rec.timestamp, "headers": headers,
                       "key": _text(rec.key), "payload": _text(rec.value)}, ensure_ascii=False)


def parse_header(text: str) -> tuple[str, bytes]:
    """-H key=value -> (key, value bytes); a value may itself contain '='."""
    if "=" not in text:
        raise FormatError(f"header {text!r}: expected key=value")
    k, v = text.split("=", 1)
    if not k:
        raise FormatError(f"header {text!r}: empty key")
    return k, v.encode()


_DURATION = re.compile(r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?"
                       r"(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")


def parse_duration_ms(text: str) -> int:
    """An ISO 8601 duration as kafka-consumer-groups.sh --by-duration takes it (PnDTnHnMnS,
    e.g. PT15M, P1DT2H) -> milliseconds."""
    m = _DURATION.match(text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise FormatError(f"duration {text!r}: expected ISO 8601 like PT15M, PT1H30M or P1DT2H")
    d, h, mi, s = (float(m.group(g) or 0) for g in "dhms")
    return int(round(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000))
