"""Generate Python code from proto/ into the SDK (`make proto`).

Runs `grpc_tools.protoc` (pinned in requirements.lock) with mypy-protobuf, then rewrites the
generated imports from `riverbed.v1` to `riverbed._proto.v1` so the code lives inside the SDK.
tests/unit/test_proto_fresh.py calls this into a temporary directory and fails on any diff.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent
SOURCES = ROOT / "riverbed" / "v1"
_IMPORT = re.compile(r"^from riverbed\.v1 import", re.M)
_IMPORT_PYI = re.compile(r"\briverbed\.v1\.(\w+_pb2)\b")


def generate(out: pathlib.Path) -> list[pathlib.Path]:
    from grpc_tools import protoc
    import grpc_tools

    protos = sorted(SOURCES.glob("*.proto"))
    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        plugin = pathlib.Path(sys.executable).parent / "protoc-gen-mypy"
        args = ["protoc", f"-I{ROOT}", f"-I{include}", f"--python_out={tmp}", f"--mypy_out={tmp}",
                f"--plugin=protoc-gen-mypy={plugin}"]
        args += [str(p) for p in protos]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        target = out / "v1"
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        written = []
        for f in sorted((pathlib.Path(tmp) / "riverbed" / "v1").iterdir()):
            text = f.read_text()
            text = _IMPORT.sub("from riverbed._proto.v1 import", text)
            text = _IMPORT_PYI.sub(r"riverbed._proto.v1.\1", text)
            (target / f.name).write_text(text)
            written.append(target / f.name)
        (target / "__init__.py").write_text("")
        init = out / "__init__.py"
        if not init.exists():
            init.write_text('"""Generated protobuf code (make proto). Do not edit."""\n')
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=pathlib.Path, required=True)
    a = p.parse_args(argv)
    for f in generate(a.out):
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
