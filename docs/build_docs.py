"""Build the documentation site (what `make docs` does with `mkdocs build --strict`), for tests and
scripts:

    .venv/bin/python docs/build_docs.py [--out build/site]

The site is mkdocs.yml's: MkDocs with the Material theme, the SDK API from its docstrings
(mkdocstrings), and the reference pages generated from the code by docs/hooks.py. Strict: a
broken link or anchor, a page missing from the nav, or any other warning fails the build.
tests/unit/sdk/test_docs_build.py runs build() into a temporary directory.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def build(out: pathlib.Path, *, strict: bool = True) -> list[pathlib.Path]:
    """Build the site into `out`; returns its HTML pages. Raises mkdocs' Abort on a warning."""
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")    # Material's banner about its future
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    cwd = os.getcwd()
    os.chdir(REPO)              # mkdocs.yml's paths (docs/, sdk/, hooks) are the checkout's
    try:
        config = load_config(str(REPO / "mkdocs.yml"), site_dir=str(out), strict=strict)
        mkdocs_build(config)
    finally:
        os.chdir(cwd)
    return sorted(out.rglob("*.html"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "build" / "site"),
                    help="output directory (default build/site)")
    args = ap.parse_args(argv)
    pages = build(pathlib.Path(args.out).resolve())
    print(f"{len(pages)} pages in {args.out}/ (open {args.out}/index.html)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
