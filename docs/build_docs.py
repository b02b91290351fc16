"""`make docs`: the SDK reference (pdoc, from the docstrings) and docs/configuration.md.

    .venv/bin/python docs/build_docs.py [--out build/docs]

The reference covers the modules users touch (MODULES); riverbed.spark is left out (it needs
the [spark] extra) and the generated protobuf code too. tests/unit/sdk/test_docs_build.py runs
build() into a temporary directory, so `make test` fails when the reference stops building.
"""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent

MODULES = ["riverbed", "riverbed.producer", "riverbed.consumer", "riverbed.admin",
           "riverbed.structs", "riverbed.errors", "riverbed.consumer_groups",
           "riverbed.partitioner", "riverbed.futures", "riverbed.kafka_python_admin",
           "riverbed.records", "riverbed.wire", "riverbed.testing", "riverbed.aio",
           "riverbed.log_dirs"]


def _config_reference():
    spec = importlib.util.spec_from_file_location("riverbed_config_reference",
                                                  HERE / "config_reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(out: pathlib.Path, *, write_config_reference: bool = True) -> list[pathlib.Path]:
    """Render the reference into `out` (and rewrite docs/configuration.md); returns the pages."""
    import pdoc
    import pdoc.render

    if write_config_reference:
        (HERE / "configuration.md").write_text(_config_reference().render(), encoding="utf-8")
    pdoc.render.configure(docformat="markdown", footer_text="Riverbed SDK reference",
                          search=True)
    out.mkdir(parents=True, exist_ok=True)
    import riverbed.wire
    riverbed.wire.Channel   # noqa: B018 - loaded lazily; pdoc reads __all__ from the module dict
    pdoc.pdoc(*MODULES, output_directory=out)
    return sorted(out.rglob("*.html"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/docs", help="output directory (default build/docs)")
    args = ap.parse_args(argv)
    pages = build(pathlib.Path(args.out))
    print(f"{len(pages)} pages in {args.out}/ (open {args.out}/index.html); "
          f"docs/configuration.md rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
