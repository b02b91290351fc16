"""The `riverbed` command: one argparse parser, one subcommand per area.

Each area adds its subcommands in an `add_*_commands(subparsers)` function and sets
`func=handler(args) -> int` on its parsers. The SDK never imports `services`; the `fleet`
commands live in `deploy.fleet_cli` (a source checkout), imported lazily here.
"""
from __future__ import annotations

import argparse
import sys


def _add_fleet_commands(subparsers: "argparse._SubParsersAction") -> None:
    try:
        from deploy.fleet_cli import add_fleet_commands
    except ImportError as e:
        missing = str(e)

        def unavailable(args: argparse.Namespace) -> int:
            print("riverbed fleet: the local fleet launcher needs the `deploy` package of a "
                  "Riverbed source checkout (install it with `make install` or "
                  f"`pip install -e .`): {missing}", file=sys.stderr)
            return 2

        p = subparsers.add_parser("fleet", help="run a local fleet (needs a source checkout)",
                                  add_help=True)
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=unavailable)
        return
    add_fleet_commands(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="riverbed", description="Riverbed: a distributed commit log with Kafka's design.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_fleet_commands(subparsers)
    from riverbed import tools
    tools.add_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    from riverbed import tools
    return tools.run(args)      # typed errors as "Error: ..." exit 1; Ctrl-C 130; closed pipe 0


if __name__ == "__main__":
    sys.exit(main())
