"""Programs written for kafka-python 3.0 run unchanged on Riverbed with only their imports
changed, and print what kafka-python 3.0.12 itself prints (issue 28).

Each program under kafka_python3/ runs twice against one fleet (per module): once as written,
with kafka-python 3.0.12 (the pinned oracle) talking to gateway-1's Kafka listener, and once with
`kafka` replaced by `riverbed` in its import lines, over the SDK's ZeroMQ path. Their outputs
must be equal; the only normalisation is the name prefix each run gives its topics and groups
(the two runs share the fleet). A program needing a Kafka API the listener does not serve yet is
skipped on the oracle side, with the APIs named (it is enabled when the listener serves them).
The fleet is CURVE's: ACLs are enforced, and the fleet grants its own client key and
User:ANONYMOUS on 127.0.0.1 (the listener's clients here) every operation, the cluster's
Describe and Alter included, which admin_acls.py's calls need.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys
import uuid

import pytest
from test_dropin import with_riverbed_imports

from deploy.fleet import Fleet, free_base_port

pytestmark = pytest.mark.integration

PROGRAMS_DIR = pathlib.Path(__file__).parent / "kafka_python3"
PROGRAMS = sorted(p.name for p in PROGRAMS_DIR.glob("*.py"))

# Kafka APIs (kafka-python's ApiKey names) a program needs beyond what every program uses
# (Metadata, Produce, Fetch, groups, offsets, CreateTopics, DeleteTopics, ...).
NEEDS_KAFKA_APIS = {
    "admin_configs_alter.py": {"AlterConfigs", "IncrementalAlterConfigs"},
    "admin_delete_group_offsets.py": {"OffsetDelete"},
    "admin_delete_records.py": {"DeleteRecords"},
    "admin_delete_groups.py": {"DeleteGroups"},
    "admin_acls.py": {"DescribeAcls", "CreateAcls", "DeleteAcls"},
}

TIMEOUT_S = 240


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("kp3-fleet"), free_base_port(), storage_nodes=1,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def listener_apis(fleet) -> set[str]:
    """The Kafka APIs gateway-1's Kafka listener serves (its ApiVersions, read by kafka-python)."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=fleet.kafka_bootstrap_servers)
    try:
        return {key.name for key in admin.api_versions()}
    finally:
        admin.close()


def run(program: pathlib.Path, bootstrap: str, prefix: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(program), bootstrap, prefix],
                          capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_kafka_python3_program_prints_the_same_on_riverbed(fleet, listener_apis, tmp_path,
                                                             name):
    source = (PROGRAMS_DIR / name).read_text()
    ours = tmp_path / name
    ours.write_text(with_riverbed_imports(source, "kafka", "riverbed", "import riverbed"))
    tag = uuid.uuid4().hex[:6]

    riverbed_run = run(ours, fleet.gateway_endpoint, f"r{tag}")
    assert riverbed_run.returncode == 0, riverbed_run.stdout + riverbed_run.stderr
    assert f"{name[:-3]}: OK" in riverbed_run.stdout

    missing = NEEDS_KAFKA_APIS.get(name, set()) - listener_apis
    if missing:
        pytest.skip(f"the oracle run needs {', '.join(sorted(missing))}, which Riverbed's Kafka "
                    "listener does not serve yet (issue 25's admin APIs): enabled when it does")
    oracle_run = run(PROGRAMS_DIR / name, fleet.kafka_bootstrap_servers, f"k{tag}")
    assert oracle_run.returncode == 0, oracle_run.stdout + oracle_run.stderr

    expected = oracle_run.stdout.replace(f"k{tag}", "PREFIX").splitlines()
    got = riverbed_run.stdout.replace(f"r{tag}", "PREFIX").splitlines()
    assert got == expected
