"""`make docs` builds: the SDK reference renders from the docstrings (pdoc) for every module it
lists, and the pages carry the public API."""
from __future__ import annotations

import importlib.util
import pathlib
import warnings

DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs"


def test_sdk_reference_builds(tmp_path):
    spec = importlib.util.spec_from_file_location("build_docs", DOCS / "build_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pages = mod.build(tmp_path, write_config_reference=False)
    # pdoc warns of what it cannot render: a name in __all__ it cannot find, an annotation it
    # cannot resolve (a NamedTuple's fields under `from __future__ import annotations`)
    assert [str(w.message) for w in caught if "pdoc" in w.filename] == []
    names = {p.relative_to(tmp_path).as_posix() for p in pages}
    for module in mod.MODULES[1:]:
        assert module.replace(".", "/") + ".html" in names, module
    producer = (tmp_path / "riverbed" / "producer.html").read_text(encoding="utf-8")
    assert "linger_ms" in producer and "flush" in producer
    assert "riverbed_fleet" in (tmp_path / "riverbed" / "testing.html").read_text(encoding="utf-8")
    wire = (tmp_path / "riverbed" / "wire.html").read_text(encoding="utf-8")
    assert 'id="Channel"' in wire                   # in __all__, loaded lazily
    structs = (tmp_path / "riverbed" / "structs.html").read_text(encoding="utf-8")
    assert "Sequence[tuple[str, bytes]]" in structs   # ConsumerRecord.headers, resolved
