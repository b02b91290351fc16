"""ansible/ without hosts: the filter plugin that renders each service's .properties with the local
fleet's templates, the decommission plan, the example inventory, and the systemd unit and
riverbedctl templates (`systemd-analyze verify`, `bash -n`)."""
from __future__ import annotations

import importlib.util
import pathlib
import shlex
import shutil
import subprocess
import sys

import jinja2
import pytest
import yaml

from deploy.fleet import ROLES, Fleet, free_base_port

REPO = pathlib.Path(__file__).resolve().parents[3]
ANSIBLE = REPO / "ansible"


def _plugin():
    spec = importlib.util.spec_from_file_location("riverbed_filters", ANSIBLE / "filter_plugins" / "riverbed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rf = _plugin()


def _example():
    inv = yaml.safe_load((ANSIBLE / "inventories/example/hosts.yml").read_text())
    groups = {g: list(v["hosts"]) for g, v in inv["all"]["children"].items()}
    groups["all"] = sorted({h for hs in groups.values() for h in hs})
    hostvars = {h: yaml.safe_load((ANSIBLE / f"inventories/example/host_vars/{h}.yml").read_text())
                for h in groups["all"]}
    defaults = yaml.safe_load((ANSIBLE / "roles/riverbed_common/defaults/main.yml").read_text())
    settings = {"ports": defaults["riverbed_ports"], "metrics_port_offset": 200,
                "data_dir": "/var/lib/riverbed", "config_dir": "/etc/riverbed", "log_dir": "/var/log/riverbed",
                "zookeeper_client_port": 2181, "zookeeper_chroot": "/riverbed", "config_overrides": {},
                "venv": "/opt/riverbed/venv"}
    return groups, hostvars, settings


def test_example_inventory_has_the_six_groups_ids_and_disks():
    groups, hostvars, _ = _example()
    assert set(groups) - {"all"} == {"zookeeper", "controller", "storage_node", "gateway",
                                     "group_coordinator", "offset_manager",
                                     "transaction_coordinator"}
    assert sorted(hostvars[h]["zookeeper_myid"] for h in groups["zookeeper"]) == [1, 2, 3]
    ids = [hostvars[h]["riverbed_node_id"] for h in groups["storage_node"]]
    assert len(set(ids)) == len(ids)
    assert all(hostvars[h]["riverbed_data_disks"] for h in groups["storage_node"])
    assert {d["fstype"] for h in groups["storage_node"] for d in hostvars[h]["riverbed_data_disks"]} == {"xfs", "ext4"}


def test_properties_are_the_local_fleets_keys_with_the_hosts_values(tmp_path):
    groups, hostvars, settings = _example()
    services = rf.all_services(groups["all"], hostvars, groups, settings)
    by_name = {s["name"]: s for s in services}
    assert set(by_name) == {"controller-1", "controller-2", "storage-1", "storage-2", "storage-3",
                            "storage-4", "gateway-1", "group-coordinator-1", "offset-manager-1",
                            "transaction-coordinator-1"}
    fleet = Fleet(tmp_path, free_base_port(), storage_nodes=4, controllers=2).configs()
    # the same keys `fleet up` writes (CURVE in both by default), security ones included
    for name, s in by_name.items():
        # plus broker.rack on a host (its name: a failure domain; one machine has none)
        extra = {"broker.rack"} if s["role"] == "storage_node" else set()
        assert set(s["properties"]) == set(fleet[name]) | extra, name
        p = s["properties"]
        assert p["security.protocol"] == "CURVE" and p["zookeeper.set.acl"] == "true"
        # the host's key directory, in the local fleet's layout
        assert p["curve.secret.key.file"] == f"/etc/riverbed/keys/private/{name}.key_secret"
        assert p["curve.trusted.keys.dir"] == "/etc/riverbed/keys/certificates"
        assert p["zookeeper.credentials.file"] == "/etc/riverbed/keys/zookeeper.credentials"
    gw = by_name["gateway-1"]["properties"]       # SASL_SSL only unless told otherwise
    assert gw["listeners"] == f"SASL_SSL://{by_name['gateway-1']['host']}:9093"
    assert gw["ssl.keystore.location"] == "/etc/riverbed/keys/private/gateway-1.pem"
    assert gw["ssl.truststore.location"] == "/etc/riverbed/keys/kafka-ca.pem"
    assert gw["sasl.enabled.mechanisms"] == "SCRAM-SHA-256,SCRAM-SHA-512"
    st = by_name["storage-1"]      # rb2: riverbed_node_id 1, two XFS disks
    p = st["properties"]
    assert p["broker.id"] == "1" and p["host.name"] == "10.0.0.12"
    assert p["zookeeper.connect"] == "10.0.0.11:2181,10.0.0.12:2181,10.0.0.13:2181/riverbed"
    assert p["log.dirs"] == "/srv/riverbed/data1/logs,/srv/riverbed/data2/logs"   # one per disk
    assert p["port"] == "9192" and p["metrics.port"] == "9392"
    assert p["broker.rack"] == "rb2"
    assert st["argv"] == ["/opt/riverbed/venv/bin/python", "-m", "services.storage_node",
                          "--config", "/etc/riverbed/storage-1.properties"]
    ctrl = by_name["controller-2"]["properties"]
    assert ctrl["default.replication.factor"] == "3" and ctrl["pub.port"] == "9111"
    assert by_name["group-coordinator-1"]["properties"]["offsets.topic.replication.factor"] == "3"
    text = rf.properties_text(st)
    assert "broker.id=1\n" in text and text.startswith("# storage-1 (storage_node)")


def test_kafka_listeners_are_asked_for_and_their_tls_planned():
    groups, hostvars, settings = _example()
    gw = next(s for s in rf.all_services(groups["all"], hostvars, groups, settings)
              if s["role"] == "gateway")
    addr = gw["host"]
    assert rf.kafka_tls_plan(groups["all"], hostvars, groups, settings) == {"gateway-1": [addr]}
    assert rf.kafka_bootstrap(groups["all"], hostvars, groups, settings) == f"{addr}:9093"
    both = {**settings, "kafka_listeners": ["SASL_SSL", "PLAINTEXT"]}
    gw = next(s for s in rf.all_services(groups["all"], hostvars, groups, both)
              if s["role"] == "gateway")
    assert gw["properties"]["listeners"] == f"PLAINTEXT://{addr}:9094,SASL_SSL://{addr}:9093"
    plain = {**settings, "kafka_listeners": ["PLAINTEXT"]}
    gw = next(s for s in rf.all_services(groups["all"], hostvars, groups, plain)
              if s["role"] == "gateway")
    assert gw["properties"]["listeners"] == f"PLAINTEXT://{addr}:9094"
    assert "ssl.keystore.location" not in gw["properties"]
    assert rf.kafka_tls_plan(groups["all"], hostvars, groups, plain) == {}
    with pytest.raises(rf.RiverbedInventoryError):
        rf.all_services(groups["all"], hostvars, groups, {**settings, "kafka_listeners": ["SSL"]})


def test_none_must_be_asked_for_and_writes_no_key_settings():
    groups, hostvars, settings = _example()
    settings["security_protocol"] = "NONE"
    for s in rf.all_services(groups["all"], hostvars, groups, settings):
        assert s["properties"]["security.protocol"] == "NONE"
        assert not {"curve.secret.key.file", "zookeeper.set.acl"} & set(s["properties"])


def test_key_plan_names_each_services_endpoints():
    groups, hostvars, settings = _example()
    plan = rf.key_plan(groups["all"], hostvars, groups, settings)
    assert set(plan) == {"controller-1", "controller-2", "storage-1", "storage-2", "storage-3",
                         "storage-4", "gateway-1", "group-coordinator-1", "offset-manager-1",
                         "transaction-coordinator-1"}
    assert plan["storage-1"] == ["tcp://10.0.0.12:9192"]
    # a controller's certificate also names its metadata PUB (clients look it up there)
    assert plan["controller-2"] == ["tcp://10.0.0.12:9101", "tcp://10.0.0.12:9111"]


def test_key_plan_refuses_two_hosts_with_one_id():
    groups, hostvars, settings = _example()
    hostvars["rb3"]["riverbed_node_id"] = hostvars["rb2"]["riverbed_node_id"]
    with pytest.raises(rf.RiverbedInventoryError, match="two hosts run storage-1"):
        rf.key_plan(groups["all"], hostvars, groups, settings)


def test_client_properties_text_is_the_fleets_for_the_hosts_key_dir():
    _, _, settings = _example()
    text = rf.client_properties_text(settings, "operator")
    assert "security.protocol=CURVE\n" in text
    assert "curve.secret.key.file=/etc/riverbed/keys/private/operator.key_secret\n" in text
    assert "curve.server.keys.dir=/etc/riverbed/keys/certificates\n" in text


def test_host_key_bundle_is_its_own_share(tmp_path):
    from deploy.fleet_security import FleetSecurity
    groups, hostvars, settings = _example()
    keys = tmp_path / "keys"
    FleetSecurity(keys, root=keys).ensure(rf.key_plan(groups["all"], hostvars, groups, settings),
                                          ["operator", "client"])
    b = rf.host_key_bundle("rb2", hostvars, groups, settings, str(keys), "operator")
    assert set(b["certificates"]) == {f"{n}.key" for n in rf.key_plan(groups["all"], hostvars, groups, settings)} | {
        "operator.key", "client.key"}
    # rb2 runs controller-2 and storage-1: only their secrets and the operator's
    assert set(b["private"]) == {"controller-2.key_secret", "storage-1.key_secret", "operator.key_secret"}
    assert all("secret-key" in t for t in b["private"].values())
    assert not any("secret-key" in t for t in b["certificates"].values())
    assert set(b["files"]) == {"zookeeper.credentials", "tools.properties"}
    assert "operator.key_secret" in b["files"]["tools.properties"]
    # a gateway host also gets its SASL_SSL listener's keystore and the CA certificate
    FleetSecurity(keys, root=keys).ensure_kafka_tls(
        rf.kafka_tls_plan(groups["all"], hostvars, groups, settings))
    gw_host = groups["gateway"][0]
    b = rf.host_key_bundle(gw_host, hostvars, groups, settings, str(keys), "operator")
    assert "gateway-1.pem" in b["private"] and "PRIVATE KEY" in b["private"]["gateway-1.pem"]
    assert "kafka-ca.pem" in b["files"] and "PRIVATE" not in b["files"]["kafka-ca.pem"]
    none = rf.host_key_bundle(gw_host, hostvars, groups, {**settings, "security_protocol": "NONE"},
                              str(keys), "operator")
    assert none == {"certificates": {}, "private": {"gateway-1.pem": b["private"]["gateway-1.pem"]},
                    "files": {"kafka-ca.pem": b["files"]["kafka-ca.pem"]}}


ACLS_LISTED = """Current ACLs for resource `ResourcePattern(resourceType=Topic, name=*, patternType=LITERAL)`:
 \t(principal=User:operator, host=*, operation=All, permissionType=ALLOW)
 \t(principal=User:client, host=*, operation=Read, permissionType=ALLOW)

Current ACLs for resource `ResourcePattern(resourceType=Group, name=*, patternType=PREFIXED)`:
 \t(principal=User:operator, host=*, operation=All, permissionType=ALLOW)

Current ACLs for resource `ResourcePattern(resourceType=Cluster, name=kafka-cluster, patternType=LITERAL)`:
 \t(principal=User:operator, host=*, operation=All, permissionType=ALLOW)
 \t(principal=User:client, host=*, operation=All, permissionType=DENY)

"""


def test_missing_acl_grants_from_the_acls_listing():
    missing = rf.missing_acl_grants(ACLS_LISTED, ["User:operator", "User:client"])
    got = {(m["principal"], m["resource"]) for m in missing}
    # operator: Topic * and Cluster are there; a PREFIXED `*` group is not the literal wildcard
    assert got == {("User:operator", "Group:*"), ("User:operator", "TransactionalId:*"),
                   ("User:client", "Topic:*"), ("User:client", "Group:*"),
                   ("User:client", "TransactionalId:*"), ("User:client", "Cluster:kafka-cluster")}
    by = {(m["principal"], m["resource"]): m["argv"] for m in missing}
    assert by[("User:client", "Cluster:kafka-cluster")] == [
        "--allow-principal", "User:client", "--operation", "All", "--cluster"]
    assert by[("User:operator", "Group:*")][-2:] == ["--group", "*"]
    # nothing listed: every grant; everything granted: none (a re-run changes nothing)
    assert len(rf.missing_acl_grants("", ["User:a"])) == 4
    full = "".join(
        f"Current ACLs for resource `ResourcePattern(resourceType={t}, name={n}, patternType=LITERAL)`:\n"
        f" \t(principal=User:a, host=*, operation=All, permissionType=ALLOW)\n\n"
        for t, n, _ in rf.CLIENT_GRANTS)
    assert rf.missing_acl_grants(full, ["User:a"]) == []


def test_missing_acl_grants_match_what_the_acls_tool_prints(capsys):
    """The listing format is `riverbed acls --list`'s own (services/common/acl/cli.py)."""
    from services.common.acl import cli
    from services.common.acl.authorizer import (CLUSTER_NAME, AclEntry, Operation, Permission,
                                                ResourcePattern, ResourceType)
    entry = AclEntry("User:a", "*", Operation.ALL, Permission.ALLOW)
    for rtype, name in ((ResourceType.TOPIC, "*"), (ResourceType.GROUP, "*"),
                        (ResourceType.TRANSACTIONAL_ID, "*"), (ResourceType.CLUSTER, CLUSTER_NAME)):
        cli._print_resource(ResourcePattern(rtype, name), [entry])
    assert rf.missing_acl_grants(capsys.readouterr().out, ["User:a"]) == []


def test_overrides_by_role_then_by_process():
    groups, hostvars, settings = _example()
    settings["config_overrides"] = {"storage_node": {"log.segment.bytes": "1024"},
                                    "storage-2": {"log.segment.bytes": "2048"}}
    s = {x["name"]: x["properties"] for x in rf.all_services(groups["all"], hostvars, groups, settings)}
    assert s["storage-1"]["log.segment.bytes"] == "1024"
    assert s["storage-2"]["log.segment.bytes"] == "2048"


def test_config_omit_leaves_keys_out_by_role_or_process():
    groups, hostvars, settings = _example()
    settings["config_omit"] = {"gateway": ["listeners"], "storage-2": ["metrics.port"]}
    by_name = {s["name"]: s for s in rf.all_services(groups["all"], hostvars, groups, settings)}
    assert "listeners" not in by_name["gateway-1"]["properties"]
    assert "metrics.port" not in by_name["storage-2"]["properties"]
    assert "metrics.port" in by_name["storage-1"]["properties"]


def test_a_storage_node_without_an_id_is_an_inventory_error():
    groups, hostvars, settings = _example()
    del hostvars["rb3"]["riverbed_node_id"]
    with pytest.raises(rf.RiverbedInventoryError, match="rb3 has no riverbed_node_id"):
        rf.host_services("rb3", hostvars, groups, settings)


def test_scrape_config_names_every_metrics_endpoint():
    groups, hostvars, settings = _example()
    text = rf.scrape_config_text(groups["all"], hostvars, groups, settings)
    assert text.count("- targets:") == 10
    assert '"10.0.0.12:9392"' in text and 'role: "storage_node"' in text


CURRENT = {"version": 1, "partitions": [
    {"topic": "a", "partition": 0, "replicas": [1, 2, 3]},
    {"topic": "a", "partition": 1, "replicas": [2, 3, 4]},
    {"topic": "a", "partition": 2, "replicas": [3, 4, 1]},
    {"topic": "b", "partition": 0, "replicas": [4]},
]}


def test_decommission_plan_moves_only_the_leaving_nodes_replicas():
    plan = rf.decommission_plan(CURRENT, 4, [1, 2, 3, 5])
    moved = {(p["topic"], p["partition"]): p["replicas"] for p in plan["partitions"]}
    assert set(moved) == {("a", 1), ("a", 2), ("b", 0)}          # a-0 never held node 4
    for (t, p), replicas in moved.items():
        old = next(x["replicas"] for x in CURRENT["partitions"] if (x["topic"], x["partition"]) == (t, p))
        assert 4 not in replicas and len(replicas) == len(old) == len(set(replicas))
        assert [r for r in replicas if r in old] == [r for r in old if r != 4]   # places kept
    assert moved[("a", 1)] == [2, 3, 5]      # 5 holds nothing yet: the least loaded


def test_decommission_refuses_below_the_replication_factor():
    with pytest.raises(rf.RiverbedInventoryError, match="refusing to decommission storage node 4: a-1 has replication factor 3"):
        rf.decommission_plan(CURRENT, 4, [2, 3])


def test_decommission_plan_moves_every_instance_of_a_host_off_it():
    plan = rf.decommission_plan(CURRENT, [4, 1], [1, 2, 3, 4, 5, 6])
    moved = {(p["topic"], p["partition"]): p["replicas"] for p in plan["partitions"]}
    assert all(not {1, 4} & set(r) and len(r) == len(set(r)) for r in moved.values()), moved
    held = {(x["topic"], x["partition"]) for x in CURRENT["partitions"] if {1, 4} & set(x["replicas"])}
    assert set(moved) == held
    with pytest.raises(rf.RiverbedInventoryError, match="refusing to decommission storage nodes 1,4"):
        rf.decommission_plan(CURRENT, [4, 1], [1, 2, 3, 4])


def test_decommission_plan_keeps_a_partitions_replicas_on_distinct_racks():
    racks = {1: "h2", 5: "h2", 2: "h3", 3: "h4", 4: "h5", 6: "h6"}
    current = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 1, 2]},
                                            {"topic": "t", "partition": 1, "replicas": [4, 3, 6]}]}
    plan = rf.decommission_plan(current, 4, [1, 2, 3, 5, 6], racks)
    moved = {p["partition"]: p["replicas"] for p in plan["partitions"]}
    assert 5 not in moved[0] and len({racks[r] for r in moved[0]}) == 3     # not h2 again
    # without racks the least loaded node (5 holds nothing) would have been taken
    assert rf.decommission_plan(current, 4, [1, 2, 3, 5, 6])["partitions"][0]["replicas"][0] == 5


# --- several storage-node processes on one host (riverbed_storage_instances) ----------------------

def _two_instances(hostvars):
    hostvars["rb2"]["riverbed_storage_instances"] = [
        {"node_id": 1, "data_disks": ["/srv/riverbed/data1"]},
        {"node_id": 5, "data_disks": ["/srv/riverbed/data2/"]}]
    del hostvars["rb2"]["riverbed_node_id"]


def test_a_host_runs_one_storage_node_per_listed_instance_with_its_own_id_ports_and_disks():
    groups, hostvars, settings = _example()
    _two_instances(hostvars)
    mine = {s["name"]: s for s in rf.host_services("rb2", hostvars, groups, settings)}
    assert list(mine) == ["controller-2", "storage-1", "storage-5"]      # start order kept
    one, five = mine["storage-1"]["properties"], mine["storage-5"]["properties"]
    assert (one["broker.id"], one["port"], one["metrics.port"]) == ("1", "9192", "9392")
    assert (five["broker.id"], five["port"], five["metrics.port"]) == ("5", "9193", "9393")
    assert one["log.dirs"] == "/srv/riverbed/data1/logs" and five["log.dirs"] == "/srv/riverbed/data2/logs"
    assert one["broker.rack"] == five["broker.rack"] == "rb2"     # one failure domain
    hostvars["rb2"]["riverbed_rack"] = "row-7"
    assert {s["properties"]["broker.rack"] for s in rf.host_services("rb2", hostvars, groups, settings)
            if s["role"] == "storage_node"} == {"row-7"}
    assert mine["storage-5"]["workdir"] == "/var/lib/riverbed/storage-5"
    assert mine["storage-5"]["endpoints"] == ["tcp://10.0.0.12:9193"]
    assert mine["storage-5"]["argv"][-1] == "/etc/riverbed/storage-5.properties"
    assert rf.storage_node_ids(groups["storage_node"], hostvars) == [1, 5, 2, 3, 4]
    plan = rf.key_plan(groups["all"], hostvars, groups, settings)
    assert plan["storage-5"] == ["tcp://10.0.0.12:9193"]
    # the controllers count storage processes, not hosts
    ctrl = {s["name"]: s for s in rf.host_services("rb1", hostvars, groups, settings)}["controller-1"]
    assert ctrl["properties"]["default.replication.factor"] == "3"
    scrape = rf.scrape_config_text(groups["all"], hostvars, groups, settings)
    assert '"10.0.0.12:9393"' in scrape and '"10.0.0.12:9392"' in scrape


def test_storage_instances_may_set_a_port_and_default_to_their_work_dirs_logs():
    groups, hostvars, settings = _example()
    hostvars["rb2"]["riverbed_storage_instances"] = [{"node_id": 7, "port": 9300}, {"node_id": 8}]
    mine = {s["name"]: s for s in rf.host_services("rb2", hostvars, groups, settings)}
    assert mine["storage-7"]["properties"]["port"] == "9300"
    assert mine["storage-8"]["properties"]["port"] == "9193"
    assert mine["storage-8"]["properties"]["log.dirs"] == "/var/lib/riverbed/storage-8/logs"


@pytest.mark.parametrize("instances, match", [
    ([{"node_id": 1}, {"data_disks": ["/srv/riverbed/data2"]}], r"riverbed_storage_instances\[1\] has no node_id"),
    ([{"node_id": 1, "data_disks": ["/srv/riverbed/data1"]}, {"node_id": 5, "data_disks": ["/srv/riverbed/data1"]}],
     "data disk /srv/riverbed/data1 is named by storage instances 1 and 5"),
    ([{"node_id": 1, "data_disks": ["/srv/other"]}], "names data disk /srv/other, which is not one of"),
    ([{"node_id": 1}, {"node_id": 1}], "two storage instances share a node_id"),
    ([{"node_id": 1, "port": 9300}, {"node_id": 2, "port": 9300}], "two storage instances share a port"),
])
def test_bad_storage_instances_are_inventory_errors(instances, match):
    groups, hostvars, settings = _example()
    hostvars["rb2"]["riverbed_storage_instances"] = instances
    with pytest.raises(rf.RiverbedInventoryError, match=match):
        rf.host_services("rb2", hostvars, groups, settings)


def test_reassign_output_parsing():
    out = ("Current partition replica assignment\n\n" '{"version":1,"partitions":[]}\n'
           "Proposed partition reassignment configuration\n\n" '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}\n')
    cur, prop = rf.reassign_json_lines(out)
    assert cur["partitions"] == [] and prop["partitions"][0]["replicas"] == [1]


def _render(template: str, **ctx) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ANSIBLE / "roles/riverbed_service/templates")),
                             undefined=jinja2.StrictUndefined)
    env.filters["quote"] = lambda s: shlex.quote(str(s))
    return env.get_template(template).render(ansible_managed="Ansible managed", **ctx)


COMMON = dict(riverbed_config_dir="/etc/riverbed", riverbed_user="root", riverbed_group="root",
              riverbed_stop_timeout_s=60, riverbed_open_files_limit=100000)


def test_systemd_unit_restarts_on_failure_outlasts_controlled_shutdown_and_verifies(tmp_path):
    proc = {"name": "storage-1", "role": "storage_node", "workdir": str(tmp_path),
            "log": str(tmp_path / "storage-1.log"),
            "argv": [sys.executable, "-m", "services.storage_node", "--config", str(tmp_path / "s.properties")]}
    unit = _render("riverbed.service.j2", proc=proc, **COMMON)
    assert "Restart=on-failure" in unit and "LimitNOFILE=100000" in unit
    assert "TimeoutStopSec=60" in unit and "KillSignal=SIGTERM" in unit
    assert "After=network-online.target riverbed-zookeeper.service" in unit
    # Longer than a storage node's controlled shutdown: retries x backoff (the template's value).
    import dataclasses

    from services.storage_node.config import StorageNodeConfig
    backoff_ms = int(Fleet(tmp_path / "f", free_base_port()).configs()["storage-1"]["controlled.shutdown.retry.backoff.ms"])
    retries = next(f.default for f in dataclasses.fields(StorageNodeConfig) if f.name == "controlled_shutdown_max_retries")
    assert retries * backoff_ms < 60 * 1000
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed: the unit's syntax is not verified")
    path = tmp_path / "riverbed-storage-1.service"
    path.write_text(unit)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True,
                       timeout=60)
    problems = [ln for ln in (r.stdout + r.stderr).splitlines()
                if str(path) in ln or "riverbed-storage-1" in ln]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr


def test_riverbedctl_is_valid_bash(tmp_path):
    procs = [{"name": "zookeeper", "workdir": "/var/lib/riverbed/zookeeper", "log": "/var/log/riverbed/zookeeper.out",
              "host": "10.0.0.11", "port": 2181, "argv": ["/usr/bin/java", "-cp", "a b", "Main"]},
             {"name": "storage-1", "workdir": "/var/lib/riverbed/storage-1", "log": "/var/log/riverbed/storage-1.log",
              "host": "10.0.0.12", "port": 9192, "argv": ["/opt/riverbed/venv/bin/python", "-m", "services.storage_node"]}]
    script = _render("riverbedctl.j2", riverbed_host_processes=procs, riverbed_run_dir="/var/lib/riverbed/run",
                     riverbed_ready_timeout_s=60, **COMMON)
    path = tmp_path / "riverbedctl"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    assert "ARGV=(/usr/bin/java -cp 'a b' Main )" in script
    r = subprocess.run(["bash", str(path), "status", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "no process named 'nope'" in r.stderr
