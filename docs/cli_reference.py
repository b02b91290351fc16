"""The command-line reference, generated from the commands themselves: every console script of
pyproject.toml ([project.scripts]) and every subcommand of `riverbed` (the SDK's own and the
`riverbed.cli_plugins` entry points: `fleet`, `acls`, `configs`), `riverbed-perf` and
`riverbed-bench`, each with its `--help` as the command prints it.

The docs build (docs/hooks.py) writes `pages()` under reference/cli/ and puts them in the nav;
tests/unit/sdk/test_docs_build.py checks that every command has a page.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import pathlib
import sys
import tomllib
from collections.abc import Callable, Iterator

REPO = pathlib.Path(__file__).resolve().parents[1]
WIDTH = "100"          # COLUMNS while help is rendered: the same text on every machine

GENERATED = ("<!-- generated from the commands' --help by docs/cli_reference.py when the site "
             "is built: edit the command, not this page -->")


def console_scripts() -> dict[str, str]:
    """[project.scripts]: command -> "module:function"."""
    with open(REPO / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["project"]["scripts"])


@contextlib.contextmanager
def _columns() -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            seen: set[int] = set()
            out = []
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue               # an alias
                seen.add(id(sub))
                out.append((name, helps.get(name, ""), sub))
            return out
    return []


def _walk(parser: argparse.ArgumentParser, words: list[str]
          ) -> Iterator[tuple[list[str], str, str]]:
    """(command words, one-line help, --help text) of `parser` and every subcommand below it."""
    with _columns():
        text = parser.format_help()
    yield words, "", text
    for name, help_, sub in _subcommands(parser):
        first = True
        for w, h, t in _walk(sub, [*words, name]):
            yield w, (help_ if first else h), t
            first = False


def _help_of(entry: str) -> str:
    """The --help text of a console script whose entry point parses argv (argparse: prints and
    exits 0)."""
    module, func = entry.split(":")
    main: Callable = getattr(importlib.import_module(module), func)
    out = io.StringIO()
    with _columns(), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["--help"])
    return out.getvalue()


def _click_walk(command, words: list[str]) -> Iterator[tuple[list[str], str, str]]:
    import click
    with _columns():
        ctx = click.Context(command, info_name=" ".join(words), terminal_width=int(WIDTH),
                            max_content_width=int(WIDTH))
        text = command.get_help(ctx)
    yield words, command.get_short_help_str(limit=80) if len(words) > 1 else "", text
    for name, sub in getattr(command, "commands", {}).items():
        yield from _click_walk(sub, [*words, name])


def commands() -> dict[str, list[tuple[list[str], str, str]]]:
    """Per console script, (words, one-line help, --help text) of it and its subcommands; for
    `riverbed`, one entry per top-level command (`riverbed topics`, `riverbed fleet`, ...)."""
    out: dict[str, list[tuple[list[str], str, str]]] = {}
    for script, entry in console_scripts().items():
        if script == "riverbed":
            from riverbed.cli import build_parser
            parser = build_parser()
            with _columns():
                out["riverbed"] = [(["riverbed"], "", parser.format_help())]
            for name, help_, sub in _subcommands(parser):
                entries = list(_walk(sub, ["riverbed", name]))
                entries[0] = (entries[0][0], help_, entries[0][2])
                out[f"riverbed {name}"] = entries
        elif script == "riverbed-perf":
            from loadgen.options import build_parser as perf_parser
            out[script] = list(_walk(perf_parser(), [script]))
        elif script == "riverbed-bench":
            from loadgen.bench_cli import cli
            out[script] = list(_click_walk(cli, [script]))
        else:
            out[script] = [([script], "", _help_of(entry))]
    return out


def _slug(command: str) -> str:
    return command.replace(" ", "-")


def _block(text: str) -> list[str]:
    return ["```text", text.rstrip(), "```", ""]


def pages() -> dict[str, str]:
    """Every page of reference/cli/, by path under docs/: an index and one page per command."""
    cmds = commands()
    index = ["# Command line", "", GENERATED, "",
             "Every command Riverbed installs, with its `--help` as the command prints it. "
             "`riverbed` is the operator's and developer's tool (Kafka's `kafka-*.sh` tools "
             "and kcat in one); `riverbed fleet`, `riverbed acls` and `riverbed configs` come "
             "from a source checkout (entry points of `riverbed.cli_plugins`); the services' "
             "commands start one process of a role.", "",
             "| command | what it does |", "|---|---|"]
    out: dict[str, str] = {}
    summary = {"riverbed": "the top-level command: the subcommands below"}
    for command, entries in cmds.items():
        words, help_, text = entries[0]
        first_line = help_ or summary.get(command) or _first_sentence(text)
        index.append(f"| [`{command}`]({_slug(command)}.md) | {first_line} |")
        lines = [f"# {command}", "", GENERATED, ""]
        if help_:
            lines += [help_[0].upper() + help_[1:] + ".", ""]
        lines += _block(text)
        for w, h, t in entries[1:]:
            lines += [f"## {' '.join(w)}", ""]
            if h:
                lines += [h[0].upper() + h[1:] + ".", ""]
            lines += _block(t)
        out[f"reference/cli/{_slug(command)}.md"] = "\n".join(lines)
    out["reference/cli/index.md"] = "\n".join(index) + "\n"
    return out


def _first_sentence(help_text: str) -> str:
    """The description paragraph's first line of a --help text (after the usage)."""
    paras = [p.strip() for p in help_text.split("\n\n") if p.strip()]
    for p in paras[1:]:
        if not p.lower().startswith(("usage", "positional", "options", "commands")):
            return " ".join(p.split())[:160].replace("|", "\\|")
    return ""


def nav() -> list[dict[str, str] | str]:
    """The nav entries of the command pages (for docs/hooks.py)."""
    return [{"Overview": "reference/cli/index.md"},
            *({f"{command}": f"reference/cli/{_slug(command)}.md"} for command in commands())]


if __name__ == "__main__":
    for path, text in pages().items():
        sys.stdout.write(f"==> {path}\n{text}\n")
