"""The `riverbed` command: one argparse parser, one subcommand per area.

Each area adds its subcommands in an `add_*_commands(subparsers)` function and sets
`func=handler(args) -> int` on its parsers. Commands from outside the SDK come in through entry
points of the group `riverbed.cli_plugins` (each a function `add(subparsers)`): a source
checkout's pyproject.toml declares `fleet = "deploy.fleet_cli:add_fleet_commands"`, so the SDK
never imports `deploy` itself.
"""
from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

PLUGIN_GROUP = "riverbed.cli_plugins"


def _add_unavailable(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]",
                     name: str, why: str) -> None:
    def unavailable(args: argparse.Namespace) -> int:
        print(f"riverbed {name}: {why}", file=sys.stderr)
        return 2

    p = subparsers.add_parser(name, help=f"unavailable here ({name} needs a source checkout)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=unavailable)


def _add_plugin_commands(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]"
                         ) -> None:
    found = set()
    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        found.add(ep.name)
        try:
            add = ep.load()
        except ImportError as e:
            _add_unavailable(subparsers, ep.name,
                             f"the plugin {ep.value} could not be imported: {e}")
            continue
        add(subparsers)
    if "fleet" not in found:
        _add_unavailable(subparsers, "fleet",
                         "the local fleet launcher is the `deploy` package of a Riverbed source "
                         "checkout (install it with `make install` or `pip install -e .`)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="riverbed", description="Riverbed: a distributed commit log with Kafka's design.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_plugin_commands(subparsers)
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
