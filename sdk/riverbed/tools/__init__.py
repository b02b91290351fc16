"""Kafka's command-line tools for Riverbed: `topics`, `produce`, `consume`, `partitions`,
`leaders`, `groups`, `transactions`, `cluster health`, `top`, `log-dirs`, and `keys` (CurveZMQ
keypairs).

`add_commands(subparsers)` registers them on any argparse subparsers object (the `riverbed` CLI
calls it); `main(argv)` runs them standalone: `python -m riverbed.tools topics --list`.
The bootstrap default is $RIVERBED_BOOTSTRAP, else tcp://127.0.0.1:9092 (the local fleet);
`--command-config FILE` (a client properties file: security.protocol, curve.*) or the RIVERBED_*
security variables (riverbed.wire.security) connect with a CURVE key.
"""
from __future__ import annotations

import argparse
import sys

from riverbed.tools import (console, groups, health, keys, leaders, log_dirs, partitions, top,
                            topics, transactions)

__all__ = ["add_commands", "main", "build_parser"]


def add_commands(subparsers) -> None:
    """Register `topics`, `produce` and `consume` on an argparse subparsers object. Each sets
    `func(args) -> int` (exit code) on its namespace."""
    topics.add_command(subparsers)
    console.add_commands(subparsers)
    partitions.add_command(subparsers)
    leaders.add_command(subparsers)
    groups.add_command(subparsers)
    transactions.add_command(subparsers)
    health.add_command(subparsers)
    top.add_command(subparsers)
    log_dirs.add_command(subparsers)
    keys.add_command(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="riverbed", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)


def run(args: argparse.Namespace) -> int:
    from riverbed import errors
    try:
        return int(args.func(args) or 0)
    except errors.RiverbedError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
