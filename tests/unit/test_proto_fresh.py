"""The generated protobuf code in sdk/riverbed/_proto must match proto/ (run `make proto`)."""
import filecmp
import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_code_is_fresh(tmp_path):
    _generator().generate(tmp_path)
    committed = ROOT / "sdk" / "riverbed" / "_proto" / "v1"
    fresh = tmp_path / "v1"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in committed.iterdir() if p.name != "__pycache__")
    stale = [n for n in names if not filecmp.cmp(fresh / n, committed / n, shallow=False)]
    assert not stale, f"stale generated code, run `make proto`: {stale}"


def test_error_codes_keep_kafka_numbers():
    from riverbed import errors
    assert errors.ErrorCode.Value("NOT_LEADER_FOR_PARTITION") == 6
    assert errors.ErrorCode.Value("NOT_ENOUGH_REPLICAS") == 19
    assert errors.for_code(6).retriable
    assert isinstance(errors.for_code(12345), errors.UnknownServerError)
