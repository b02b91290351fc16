"""Flags shared by the tools."""
from __future__ import annotations

import argparse
import os

from riverbed.cluster import DEFAULT_BOOTSTRAP


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", "--bootstrap", dest="bootstrap_server", metavar="ENDPOINTS",
        default=None,
        help="gateway endpoint(s), comma-separated, e.g. tcp://127.0.0.1:9092 "
             f"(default: $RIVERBED_BOOTSTRAP or {DEFAULT_BOOTSTRAP})")
    parser.add_argument(
        "--command-config", dest="command_config", metavar="FILE", default=None,
        help="client properties (Kafka's name): security.protocol=CURVE, curve.secret.key.file, "
             "curve.server.keys.dir or curve.server.public.key; `riverbed fleet status --json` "
             "names the local fleet's (default: the RIVERBED_* security variables)")


def bootstrap_of(args: argparse.Namespace) -> str:
    config = getattr(args, "command_config", None)
    if config:
        # this tool's own process: the file wins over the RIVERBED_* security variables
        from riverbed.wire import security
        for k in security.CLIENT_ENV_VARS:
            os.environ.pop(k, None)
        os.environ[security.ENV_CLIENT_PROPERTIES] = config
    return args.bootstrap_server or os.environ.get("RIVERBED_BOOTSTRAP") or DEFAULT_BOOTSTRAP


def parse_kv(items: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        for part in item.split(","):
            if not part:
                continue
            if "=" not in part:
                raise argparse.ArgumentTypeError(f"{flag} expects key=value, got {part!r}")
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out
