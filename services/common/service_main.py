"""The entry point every service's `__main__` shares: arguments -> config -> run until a signal.

`python -m services.<role> --config FILE [--override key=value ...] [--log-level LEVEL]`

- `--config` is a Kafka-style `.properties` file; each `--override` sets one key and wins over it.
- A bad config (unknown key, unparsable value, failed validation, unreadable file) prints
  `<prog>: bad config: <error naming the key>` and exits 2 before anything starts.
- SIGTERM or SIGINT sets the `stop` event handed to the role's `serve`; the role stops cleanly
  and the process exits with what `serve` returned (None = 0).
- An exception escaping `serve` is logged and exits 1 (the supervisor restarts the process).
- Security keys (`security.protocol`, `curve.*`, `socket.handshake.timeout.ms`, `super.users`,
  `zookeeper.set.acl`, `zookeeper.credentials.file`: services.common.rpc.security) are read here
  for every role and installed for the whole process before the role starts; SIGHUP re-reads
  the trusted keys directory (a key rotation).
- Garbage collection: GC_SETTLE_S after the start, once the role has opened what it keeps for
  its lifetime (modules, protobuf descriptors, sessions, logs), one full collection and
  `gc.freeze()` move that heap out of the collector's sight: later full (generation 2)
  collections, which run on the request loop and were a source of multi-millisecond pauses in
  the latency tail, only walk objects made since.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from services.common import zk as zkmod
from services.common.config import ConfigError, build, load_properties, parse_overrides
from services.common.rpc import security
from services.common.telemetry import setup_tracing

C = TypeVar("C")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Seconds after the start when the long-lived heap is frozen (gc.freeze); a service is serving
# well before that on this kind of machine.
GC_SETTLE_S = 5.0


def parse_args(argv: list[str] | None, *, prog: str, description: str,
               config_help: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog, description=description,
        epilog="Every role also reads the security keys: security.protocol (NONE | CURVE), "
               "curve.secret.key.file, curve.trusted.keys.dir, curve.trusted.keys.reload.ms, "
               "socket.handshake.timeout.ms, max.connections.per.ip, num.network.threads, "
               "super.users, "
               "zookeeper.set.acl, zookeeper.credentials.file (docs/operations/security.md). SIGHUP "
               "re-reads the trusted keys.")
    p.add_argument("--config", help=config_help)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set one config key (repeatable); wins over --config")
    p.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


def load_config(config_class: type[C], args: argparse.Namespace) -> C:
    return load_configs(config_class, args)[0]


def load_configs(config_class: type[C], args: argparse.Namespace) -> tuple[C, security.SecurityConfig]:
    """The role's config and the process's security config, from the same sources."""
    props = load_properties(args.config) if args.config else {}
    overrides = parse_overrides(args.override)
    fields = {f.name for f in dataclasses.fields(config_class)}  # type: ignore[arg-type]
    sec_props, props = security.split_security_properties(props, fields)
    sec_over, overrides = security.split_security_properties(overrides, fields)
    return (build(config_class, props, overrides),
            build(security.SecurityConfig, sec_props, sec_over))


def install_security(sec: security.SecurityConfig) -> security.ServerSecurity:
    """This process's CURVE keys, ZooKeeper credentials and ZeroMQ I/O threads (before any
    socket or session)."""
    import zmq.asyncio
    # the shared context every socket of the role uses; its I/O threads do the framing and
    # the CURVE encryption, so more than one lets a busy process use more than one core
    zmq.asyncio.Context.instance(io_threads=sec.num_network_threads)
    zkmod.install_auth(zkmod.ZkAuth.from_file(sec.zookeeper_credentials_file,
                                              set_acl=sec.zookeeper_set_acl))
    return security.install(sec)


async def _serve_until_signalled(serve: Callable[[C, asyncio.Event], Awaitable[int | None]],
                                 cfg: C) -> int | None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # SIGHUP: re-read the trusted keys now (a rotation need not wait for the periodic check)
    loop.add_signal_handler(signal.SIGHUP, security.process_security().reload_trusted_keys)
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
        cfg, sec = load_configs(config_class, args)
        install_security(sec)
    except (ConfigError, OSError, ValueError) as e:
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
