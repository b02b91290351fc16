"""pytest imports test modules by basename (no packages under tests/): two modules with the same
name in different folders make collection fail. Keep every test module's basename unique."""
import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]


def test_test_module_basenames_are_unique():
    names = collections.Counter(p.name for p in TESTS.rglob("*.py")
                                if p.name not in ("__init__.py", "conftest.py"))
    assert [n for n, c in names.items() if c > 1] == []
