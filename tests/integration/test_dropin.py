"""riverbed as a drop-in for kafka-python and riverbed.aio for aiokafka (issue 16, items 2 and 3):
kafka_python_program.py and aiokafka_program.py, written for those libraries, run against a real
fleet with only their import lines changed. The aiokafka program covers produce (send + await,
send_and_wait, a batch), consume with a group, commit, committed, seek, end/beginning offsets, a
second member from the committed offsets, admin."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from deploy.fleet import Fleet, free_base_port

pytestmark = pytest.mark.integration

HERE = pathlib.Path(__file__).parent

# (program, the library it was written for, what replaces it, `import X` becomes, its OK line)
PROGRAMS = [
    ("kafka_python_program.py", "kafka", "riverbed", "import riverbed", "kafka-python program: OK"),
    ("aiokafka_program.py", "aiokafka", "riverbed.aio", "import riverbed.aio as aiokafka",
     "aiokafka program: OK"),
]


def with_riverbed_imports(source: str, library: str, replacement: str, import_line: str) -> str:
    """Replace `library` in `from library... import` / `import library` lines only."""
    out = re.sub(rf"^from {library}(\.| )", rf"from {replacement}\1", source, flags=re.M)
    out = re.sub(rf"^import {library}\b", import_line, out, flags=re.M)
    changed = [(a, b) for a, b in zip(source.splitlines(), out.splitlines()) if a != b]
    assert changed and all(a.startswith((f"from {library}", f"import {library}"))
                           for a, _ in changed)
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("dropin-fleet"), free_base_port(), storage_nodes=1,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.mark.parametrize("name,library,replacement,import_line,ok", PROGRAMS,
                         ids=[p[1] for p in PROGRAMS])
def test_a_program_runs_with_only_its_imports_changed(fleet, tmp_path, name, library,
                                                      replacement, import_line, ok):
    program = tmp_path / "program.py"
    program.write_text(with_riverbed_imports((HERE / name).read_text(), library, replacement,
                                             import_line))
    proc = subprocess.run([sys.executable, str(program), fleet.gateway_endpoint],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ok in proc.stdout


def test_kafka_python_constructors_check_the_cluster_as_kafka_python_does(fleet):
    """KafkaProducer/KafkaConsumer/KafkaAdminClient raise NoBrokersAvailable (2.x's name; a
    KafkaTimeoutError, 3.0's) from the constructor when no bootstrap address answers within
    bootstrap_timeout_ms (2.x: api_version_auto_timeout_ms), and construct against a live fleet
    (with the fleet's CURVE keys, from the RIVERBED_* variables Fleet.up() set)."""
    import socket

    import riverbed
    from riverbed.errors import KafkaTimeoutError, NoBrokersAvailable

    with socket.socket() as s:          # a port nobody listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        nobody = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    for name in ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient"):
        for protocol in ("NONE", "CURVE"):      # refused / no server key known for it
            with pytest.raises(NoBrokersAvailable, match=nobody):
                getattr(riverbed, name)(bootstrap_servers=nobody, security_protocol=protocol,
                                        api_version_auto_timeout_ms=2000)
            with pytest.raises(KafkaTimeoutError, match="bootstrap_timeout_ms=1000"):
                getattr(riverbed, name)(bootstrap_servers=nobody, security_protocol=protocol,
                                        bootstrap_timeout_ms=1000)
    producer = riverbed.KafkaProducer(bootstrap_servers=fleet.gateway_endpoint)
    consumer = riverbed.KafkaConsumer(bootstrap_servers=fleet.gateway_endpoint)
    admin = riverbed.KafkaAdminClient(bootstrap_servers=[nobody, fleet.gateway_endpoint])
    try:
        assert admin.describe_cluster()["brokers"]
    finally:
        admin.close()
        consumer.close()
        producer.close()
