"""The entry point every service's `__main__` shares: arguments -> config -> run until a signal.

`python -m services.<role> --config FILE [--override key=value ...] [--log-level LEVEL]`

- `--config` is a Kafka-style `.properties` file; each `--override` sets one key and wins over it.
- A bad config (unknown key, unparsable value, failed validation, unreadable file) prints
  `<prog>: bad config: <error naming the key>` and exits 2 before anything starts.
- SIGTERM or SIGINT sets the `stop` event handed to the role's `serve`; the role stops cleanly
  and the process exits with what `serve` returned (None = 0).
- An exception escaping `serve` is logged and exits 1 (the supervisor restarts the process).
- Garbage collection: GC_SETTLE_S after the start, once the role has opened what it keeps for
  its lifetime (modules, protobuf descriptors, sessions, logs), one full collection and
  `gc.freeze()` move that heap out of the collector's sight: later full (generation 2)
  collections, which run on the request loop and were a source of multi-millisecond pauses in
  the latency tail, only walk objects made since.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from services.common.config import ConfigError, build, load_properties, parse_overrides
from services.common.telemetry import setup_tracing

C = TypeVar("C")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Seconds after the start when the long-lived heap is frozen (gc.freeze); a service is serving
# well before that on this kind of machine.
GC_SETTLE_S = 5.0


def parse_args(argv: list[str] | None, *, prog: str, description: str,
               config_help: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--config", help=config_help)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set one config key (repeatable); wins over --config")
    p.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


def load_config(config_class: type[C], args: argparse.Namespace) -> C:
    props = load_properties(args.config) if args.config else {}
    return build(config_class, props, parse_overrides(args.override))


async def _serve_until_signalled(serve: Callable[[C, asyncio.Event], Awaitable[int | None]],
                                 cfg: C) -> int | None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    settle = loop.call_later(GC_SETTLE_S, freeze_long_lived_heap)
    try:
        return await serve(cfg, stop)
    finally:
        settle.cancel()


def freeze_long_lived_heap() -> None:
    """One full collection, then gc.freeze(): what survived is never scanned again."""
    gc.collect()
    gc.freeze()


def run_service(argv: list[str] | None, *, prog: str, description: str, config_class: type[C],
                serve: Callable[[C, asyncio.Event], Awaitable[int | None]], logger_name: str,
                config_help: str = "a .properties file") -> int:
    """Parse `argv`, build `config_class`, set up logging and run `serve(cfg, stop)` under
    asyncio; returns the process exit code (see the module docstring). `logger_name` is the
    role's package (`services.gateway`): a crash is logged there as "<role> failed"."""
    args = parse_args(argv, prog=prog, description=description, config_help=config_help)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        stream=sys.stderr, format=LOG_FORMAT)
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        cfg = load_config(config_class, args)
    except (ConfigError, OSError) as e:
        print(f"{prog}: bad config: {e}", file=sys.stderr)
        return 2
    # Traces over OTLP when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set (off otherwise).
    tracer_provider = setup_tracing(logger_name.rsplit(".", 1)[-1], str(os.getpid()))
    try:
        code = asyncio.run(_serve_until_signalled(serve, cfg))
    except Exception:
        role = logger_name.rsplit(".", 1)[-1].replace("_", " ")    # "group coordinator"
        logging.getLogger(logger_name).exception("%s failed", role)
        return 1
    finally:
        if tracer_provider is not None:
            tracer_provider.shutdown()      # export the spans still batched
    return 0 if code is None else code
