"""The generated protobuf code in sdk/riverbed/_proto must match proto/ (run `make proto`)."""
import filecmp
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh(tmp_path):
    # protoc runs in a process of its own: in-process it can abort the whole test session once
    # other tests have loaded native extensions and threads.
    subprocess.run([sys.executable, str(ROOT / "proto" / "generate.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
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
