"""Command line of `riverbed-perf`: subcommands, Kafka-style `key=value` properties, and their
mapping onto the SDK's keyword arguments.

Properties use Kafka's dotted names (`batch.size=65536`, `linger.ms=5`, `acks=all`); each becomes
the snake_case keyword of `riverbed.Producer` / `riverbed.Consumer` (`batch_size`, `linger_ms`)
and is converted to the type of that keyword's default. The accepted names are read from the
client's signature, so a keyword the SDK adds is accepted without a change here; an unknown name
is an error naming it (exit code 2).
"""
from __future__ import annotations

import argparse
import inspect
from typing import Any, Callable, Iterable, Mapping

__all__ = ["PropertyError", "parse_props", "client_kwargs", "build_parser", "parse_args",
           "producer_kwargs", "consumer_kwargs", "DEFAULT_REPORTING_INTERVAL_MS"]

DEFAULT_REPORTING_INTERVAL_MS = 5000
# Keywords the tool sets itself (or that make no sense from the command line).
_RESERVED = {"bootstrap", "bootstrap_servers", "partitioner", "key_serializer",
             "value_serializer", "key_deserializer", "value_deserializer", "_channel_factory",
             "group_id"}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class PropertyError(ValueError):
    """A bad `key=value` property (unknown key, bad value)."""


def parse_props(items: Iterable[str] | None) -> dict[str, str]:
    """['a.b=1', 'c=x=y'] -> {'a.b': '1', 'c': 'x=y'}; later keys win."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PropertyError(f"property {item!r}: expected key=value")
        out[key] = value.strip()
    return out


def _convert(key: str, raw: str, default: Any) -> Any:
    if key == "acks":
        v = raw.lower()
        if v == "all":
            return -1
        try:
            return int(v)
        except ValueError:
            raise PropertyError(f"acks={raw!r}: expected 0, 1, -1 or all") from None
    if key == "compression_type":
        return None if raw.lower() in ("", "none") else raw.lower()
    if default is None and raw.lower() in _TRUE | _FALSE and raw.lower() not in ("0", "1"):
        # Optional flags whose default is None (automatic), e.g. enable.idempotence: a string
        # "false" would otherwise reach the SDK as a true value.
        return raw.lower() in _TRUE
    try:
        if isinstance(default, bool):
            v = raw.lower()
            if v in _TRUE:
                return True
            if v in _FALSE:
                return False
            raise ValueError(raw)
        if isinstance(default, int):
            # "5" -> 5; "5.0" -> 5; "0.5" -> 0.5 (linger.ms may be fractional in our SDK)
            try:
                return int(raw)
            except ValueError:
                f = float(raw)
                return int(f) if f.is_integer() else f
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise PropertyError(f"{key.replace('_', '.')}={raw!r}: expected a "
                            f"{type(default).__name__}") from None
    return raw


def client_kwargs(cls: Callable, props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka-named properties -> keyword arguments of `cls` (Producer or Consumer)."""
    params = inspect.signature(cls).parameters
    out: dict[str, Any] = {}
    for key, raw in props.items():
        name = key.replace(".", "_").replace("-", "_")
        if name in ("bootstrap_servers", "bootstrap"):
            continue  # --bootstrap-server wins
        if name not in params or name in _RESERVED or name.startswith("_"):
            known = sorted(p.replace("_", ".") for p in params
                           if p not in _RESERVED and not p.startswith("_")
                           and params[p].kind is inspect.Parameter.KEYWORD_ONLY)
            raise PropertyError(f"unknown property {key!r} for {cls.__name__}; known: "
                                f"{', '.join(known)}")
        default = params[name].default
        default = None if default is inspect.Parameter.empty else default
        if default is None:
            default = _annotated_default(params[name].annotation)
        out[name] = _convert(name, raw, default)
    return out


_ANNOTATED = {"bool": False, "int": 0, "float": 0.0}


def _annotated_default(annotation: Any) -> Any:
    """A stand-in default of the type an optional keyword is annotated with (`batch_size_max:
    int | None = None` -> 0, so "1048576" becomes an int, not a string), or None."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return _ANNOTATED.get(text.split("|")[0].strip())


# Direct flags -> Kafka property names (they override --producer-prop).
_PRODUCER_FLAGS = {"acks": "acks", "batch_size": "batch.size", "linger_ms": "linger.ms",
                   "compression_type": "compression.type",
                   "max_in_flight": "max.in.flight.requests.per.connection"}


def producer_kwargs(args: argparse.Namespace, producer_cls: Callable) -> dict[str, Any]:
    props = parse_props(args.producer_prop)
    for attr, key in _PRODUCER_FLAGS.items():
        value = getattr(args, attr, None)
        if value is not None:
            props[key] = str(value)
    return client_kwargs(producer_cls, props)


def consumer_kwargs(args: argparse.Namespace, consumer_cls: Callable) -> dict[str, Any]:
    props = parse_props(getattr(args, "consumer_prop", None))
    if getattr(args, "fetch_min_bytes", None) is not None:
        props["fetch.min.bytes"] = str(args.fetch_min_bytes)
    return client_kwargs(consumer_cls, props)


# ---------------------------------------------------------------------------------------------

def _positive_int(text: str) -> int:
    v = int(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text}: expected a positive integer")
    return v


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", "--bootstrap", action="append", dest="bootstrap",
                   default=None, metavar="ENDPOINT",
                   help="a gateway, e.g. tcp://127.0.0.1:9092 (repeatable; default: "
                        "$RIVERBED_BOOTSTRAP, else tcp://127.0.0.1:9092)")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", required=True, type=_positive_int, metavar="N")
    p.add_argument("--reporting-interval", type=_positive_int,
                   default=DEFAULT_REPORTING_INTERVAL_MS, metavar="MS",
                   help="period of the interval rows (default 5000 ms)")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="plot throughput and latency over time")
    p.add_argument("--no-progress", action="store_true", help="no live line even on a TTY")
    p.add_argument("--gc-freeze", action=argparse.BooleanOptionalAction, default=True,
                   help="once the clients are set up, one full collection and gc.freeze() in "
                        "every process of the run, as the services do after their start: "
                        "the first full collections of a new process's heap pause it for "
                        "10-20 ms (default: on; --no-gc-freeze measures them too)")
    p.add_argument("--security-protocol", type=str.upper, choices=("NONE", "CURVE"), default=None,
                   help="NONE or CURVE for every client of the run (default: the RIVERBED_* "
                        "security variables; CURVE needs a key: --command-config or "
                        "RIVERBED_CURVE_SECRET_KEY_FILE)")
    p.add_argument("--command-config", metavar="FILE", default=None,
                   help="client properties (security.protocol, curve.secret.key.file, "
                        "curve.server.keys.dir): `riverbed fleet status --json` names the "
                        "local fleet's")


def _topic_creation(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("topic creation (through Admin)")
    g.add_argument("--create-topic", action="store_true",
                   help="create the topic first (an existing topic is fine)")
    g.add_argument("--partitions", type=_positive_int, default=1)
    g.add_argument("--replication-factor", type=_positive_int, default=1)
    g.add_argument("--topic-config", action="append", default=[], metavar="K=V")


def _producer_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--producer-prop", "--producer-props", action="append", default=[],
                   metavar="K=V", nargs="+", help="producer properties (Kafka names)")
    p.add_argument("--acks", help="0, 1, -1 or all")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--linger-ms", type=float)
    p.add_argument("--compression-type", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--max-in-flight", type=int,
                   help="max.in.flight.requests.per.connection")
    p.add_argument("--partition", type=int, help="send every record to this partition")


def _non_negative_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: expected an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text}: expected 0 or more")
    return v


def _warmup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warmup-records", type=_non_negative_int, default=0, metavar="N",
                   help="the first N of --num-records are a warm-up: the summary covers the "
                        "whole run, and a second line (and the JSON's steady_state) the "
                        "records after them (Kafka's --warmup-records; default 0: none)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="riverbed-perf",
        description="Load generator for Riverbed, shaped like Kafka's perf tools.")
    sub = parser.add_subparsers(dest="mode", required=True)

    p = sub.add_parser("produce", help="producer throughput and latency")
    _common(p)
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=_positive_int, metavar="B")
    size.add_argument("--payload-file", metavar="F",
                      help="values are this file's records split by --payload-delimiter")
    p.add_argument("--payload-delimiter", default="\\n")
    p.add_argument("--throughput", type=float, default=-1.0, metavar="R",
                   help="records/s cap over all processes; -1: no cap (default)")
    p.add_argument("--processes", type=_positive_int, default=1, metavar="P")
    p.add_argument("--bulk", action="store_true", help="send with Producer.send_many, about 256 KiB of records per call")
    p.add_argument("--asyncio", action="store_true",
                   help="riverbed.aio's producer on an asyncio loop (`await send(...)` per "
                        "record; not with --bulk or --null-sink)")
    p.add_argument("--null-sink", action="store_true",
                   help="the no-network baseline: the same producer and settings, its requests "
                        "answered in-process by a null sink (loadgen.nullsink) instead of a "
                        "gateway; --bootstrap-server is then only a name")
    _warmup(p)
    _producer_flags(p)
    _topic_creation(p)

    c = sub.add_parser("consume", help="consumer throughput")
    _common(c)
    c.add_argument("--consumer-prop", "--consumer-props", action="append", default=[],
                   metavar="K=V", nargs="+", help="consumer properties (Kafka names)")
    c.add_argument("--fetch-min-bytes", type=int)
    c.add_argument("--from-beginning", action=argparse.BooleanOptionalAction, default=True,
                   help="start at the earliest offsets (default) or at the end")
    c.add_argument("--timeout-ms", type=_positive_int, default=10000,
                   help="give up after this long without a record (default 10000)")

    e = sub.add_parser("e2e", help="end-to-end latency at a fixed rate")
    _common(e)
    e.add_argument("--throughput", type=float, required=True, metavar="R")
    e.add_argument("--record-size", type=_positive_int, default=100, metavar="B")
    e.add_argument("--consumer-prop", "--consumer-props", action="append", default=[],
                   metavar="K=V", nargs="+")
    e.add_argument("--fetch-min-bytes", type=int)
    e.add_argument("--timeout-ms", type=_positive_int, default=10000)
    _warmup(e)
    _producer_flags(e)
    _topic_creation(e)
    return parser


def _flatten(v):
    out = []
    for item in v or ():
        out.extend(item if isinstance(item, list) else [item])
    return out


def _apply_security(args: argparse.Namespace) -> None:
    """--command-config / --security-protocol reach every client of the run (Admin, producers,
    consumers, the worker and e2e consumer processes) through this process's environment."""
    import os

    from riverbed.wire import security
    if getattr(args, "command_config", None):
        for k in security.CLIENT_ENV_VARS:
            os.environ.pop(k, None)
        os.environ[security.ENV_CLIENT_PROPERTIES] = args.command_config
    if getattr(args, "security_protocol", None):
        os.environ[security.ENV_PROTOCOL] = args.security_protocol


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.bootstrap is None:
        from riverbed.cluster import default_bootstrap
        args.bootstrap = default_bootstrap()
    _apply_security(args)
    for attr in ("producer_prop", "consumer_prop"):
        if hasattr(args, attr):
            setattr(args, attr, _flatten(getattr(args, attr)))
    if getattr(args, "record_size", None) is not None and args.record_size < 8 and args.mode == "e2e":
        build_parser().error("e2e needs --record-size >= 8 (the send time rides in the value)")
    if getattr(args, "warmup_records", 0) >= args.num_records:
        build_parser().error(f"--warmup-records ({args.warmup_records}) must be less than "
                             f"--num-records ({args.num_records})")
    if args.mode == "e2e" and not args.throughput > 0:
        build_parser().error("e2e needs a positive --throughput (a fixed rate)")
    if getattr(args, "asyncio", False) and (args.bulk or args.null_sink):
        build_parser().error("--asyncio goes with neither --bulk nor --null-sink")
    return args
