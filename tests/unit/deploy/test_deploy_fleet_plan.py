"""The fleet's port plan, config templates and override parsing (nothing is started)."""
from __future__ import annotations

import pytest

from deploy.fleet import ROLES, Fleet, FleetError, parse_config_overrides
from services.common.config import load_properties
from services.common.zk import ZkConnectError, split_chroot


def test_default_port_plan(tmp_path):
    f = Fleet(tmp_path, 20000)
    ports = {n: f.process(n).port for n in f.names()}
    assert ports == {"zookeeper": 20001, "controller-1": 20010, "controller-2": 20011,
                     "storage-1": 20101, "storage-2": 20102, "storage-3": 20103,
                     "group-coordinator-1": 20030, "offset-manager-1": 20040,
                     "transaction-coordinator-1": 20070, "gateway-1": 20000}
    assert f.process("controller-2").extra["pub_endpoint"] == "tcp://127.0.0.1:20021"
    assert f.gateway_endpoint == "tcp://127.0.0.1:20000"
    assert f.zk_connect == "127.0.0.1:20001/riverbed"
    # start order: ZooKeeper, controllers, storage nodes, coordinators, gateways
    assert [f.process(n).role for n in f.names()] == [
        "zookeeper", "controller", "controller", "storage_node", "storage_node", "storage_node",
        "group_coordinator", "offset_manager", "transaction_coordinator", "gateway"]


def test_more_gateways_never_collide(tmp_path):
    f = Fleet(tmp_path, 20000, gateways=9, controllers=10, storage_nodes=99)
    ports = [p for n in f.names() for p in f.process(n).extra.get("ports", {"p": f.process(n).port}).values()]
    assert len(ports) == len(set(ports))
    assert max(ports) - 20000 < 400
    assert {p - 20000 for p in ports if p - 20000 >= 200} == {
        p + 200 - 20000 for n in f.names() if n != "zookeeper" for p in [f.process(n).port]}


def test_metrics_endpoints_are_port_plus_200_and_in_prometheus_yml(tmp_path):
    f = Fleet(tmp_path, 20000)
    assert f.process("storage-2").extra["metrics_endpoint"] == "http://127.0.0.1:20302/metrics"
    assert f.process("gateway-1").extra["metrics_endpoint"] == "http://127.0.0.1:20200/metrics"
    assert f.configs()["controller-1"]["metrics.port"] == "20210"
    f.write_configs()
    text = f.prometheus_config_path.read_text()
    assert text.count("- targets:") == 9      # every service, not ZooKeeper
    assert '- targets: ["127.0.0.1:20302"]' in text and 'role: "storage_node"' in text
    assert 'process: "storage-2"' in text


def test_counts_are_bounded(tmp_path):
    with pytest.raises(FleetError):
        Fleet(tmp_path, 20000, gateways=10)
    with pytest.raises(FleetError):
        Fleet(tmp_path, 20000, counts={"no_such_role": 1})


def test_configs_have_exactly_the_services_keys(tmp_path):
    f = Fleet(tmp_path, 20000, config_overrides=["storage_node:log.segment.bytes=1024",
                                                 "storage-2:log.segment.bytes=2048",
                                                 "controller:num.partitions=4"])
    cfg = f.configs()
    sec = tmp_path.resolve() / "security"
    for name in cfg:            # CURVE by default: each service's own key, the shared trust dir
        assert {k: cfg[name].pop(k) for k in list(cfg[name]) if k.startswith(
            ("security.", "curve.", "zookeeper.set.acl", "zookeeper.credentials"))} == {
            "security.protocol": "CURVE",
            "curve.secret.key.file": str(sec / "private" / f"{name}.key_secret"),
            "curve.trusted.keys.dir": str(sec / "certificates"),
            "zookeeper.set.acl": "true",
            "zookeeper.credentials.file": str(sec / "zookeeper.credentials")}
    assert cfg["storage-1"] == {
        "broker.id": "1", "host.name": "127.0.0.1", "port": "20101", "metrics.port": "20301",
        "log.dirs": str(tmp_path.resolve() / "storage-1" / "logs"),
        "zookeeper.connect": "127.0.0.1:20001/riverbed", "zookeeper.session.timeout.ms": "6000",
        "controlled.shutdown.retry.backoff.ms": "1000", "log.segment.bytes": "1024"}
    assert cfg["storage-2"]["log.segment.bytes"] == "2048"
    assert cfg["controller-2"] == {
        "controller.id": "2", "host.name": "127.0.0.1", "port": "20011", "pub.port": "20021",
        "metrics.port": "20211", "zookeeper.connect": "127.0.0.1:20001/riverbed", "zookeeper.session.timeout.ms": "6000",
        "num.partitions": "4", "default.replication.factor": "3",
        "auto.create.topics.enable": "true", "delete.topic.enable": "true"}
    assert cfg["gateway-1"] == {
        "gateway.id": "1", "host.name": "127.0.0.1", "port": "20000", "metrics.port": "20200",
        # the Kafka listeners: PLAINTEXT on P + 49 + i, SASL_SSL on P + 59 + i
        "listeners": "PLAINTEXT://127.0.0.1:20050,SASL_SSL://127.0.0.1:20060",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(sec / "private" / "gateway-1.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(sec / "kafka-ca.pem"),
        "zookeeper.connect": "127.0.0.1:20001/riverbed", "zookeeper.session.timeout.ms": "6000"}
    f.write_configs()
    assert load_properties(tmp_path / "storage-2" / "storage-2.properties") == \
        f.configs()["storage-2"]
    none = Fleet(tmp_path / "plain", 20000, security_protocol="NONE").configs()
    assert none["gateway-1"]["security.protocol"] == "NONE"
    assert not any(k.startswith("curve.") for k in none["gateway-1"])
    # the SASL_SSL listener either way
    assert none["gateway-1"]["listeners"].endswith(",SASL_SSL://127.0.0.1:20060")


def test_kafka_tls_and_client_conf(tmp_path):
    from riverbed.tools import tls
    f = Fleet(tmp_path, 20000, gateways=2)
    names = f._kafka_tls_names()
    assert names == {"gateway-1": ["127.0.0.1", "DNS:localhost"],
                     "gateway-2": ["127.0.0.1", "DNS:localhost"]}
    sec = f.security
    assert sorted(sec.ensure_kafka_tls(names)) == ["kafka-ca.pem", "private/gateway-1.pem",
                                                   "private/gateway-2.pem"]
    assert sec.ensure_kafka_tls(names) == []                       # kept while valid
    assert tls.certificate_sans(sec.kafka_keystore("gateway-1")) == ("DNS:localhost",
                                                                     "IP:127.0.0.1")
    assert sec.ensure_kafka_tls({"gateway-1": ["10.0.0.5"]}) == ["private/gateway-1.pem"]
    assert f.kafka_sasl_ssl_bootstrap_servers == "127.0.0.1:20060,127.0.0.1:20061"
    password = sec.kafka_client_password()
    assert sec.write_kafka_client_conf(f.kafka_sasl_ssl_bootstrap_servers, password)
    conf = dict(line.split("=", 1) for line in sec.kafka_client_conf.read_text().splitlines()
                if line and not line.startswith("#"))
    assert conf == {"bootstrap.servers": "127.0.0.1:20060,127.0.0.1:20061",
                    "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                    "sasl.username": "kafka-client", "sasl.password": password,
                    "ssl.ca.location": str(sec.tls_ca_file)}
    assert sec.kafka_client_conf.stat().st_mode & 0o777 == 0o600
    assert sec.kafka_client_password() == password                 # kept across `up`s
    listeners = [p["kafka_listeners"] for p in f.status(with_zk=False)["processes"]
                 if p["role"] == "gateway"]
    assert listeners == [["PLAINTEXT://127.0.0.1:20050", "SASL_SSL://127.0.0.1:20060"],
                         ["PLAINTEXT://127.0.0.1:20051", "SASL_SSL://127.0.0.1:20061"]]


def test_replication_factor_follows_small_fleets(tmp_path):
    assert Fleet(tmp_path, 20000, storage_nodes=1).configs()["controller-1"][
        "default.replication.factor"] == "1"


def test_commands_run_the_role_module_or_a_script(tmp_path):
    f = Fleet(tmp_path, 20000, role_modules={"gateway": "/x/fake.py"}, python="/py")
    cfg = str(tmp_path.resolve() / "storage-1" / "storage-1.properties")
    assert f.process("storage-1").command == ["/py", "-m", "services.storage_node", "--config", cfg]
    assert f.process("gateway-1").command[:2] == ["/py", "/x/fake.py"]


def test_parse_config_overrides():
    assert parse_config_overrides(["gateway:a.b=1", "gateway:c= x=y ", "storage-2:d="]) == {
        "gateway": {"a.b": "1", "c": "x=y"}, "storage-2": {"d": ""}}
    for bad in ["gateway", "gateway:", "gateway:novalue", ":k=v"]:
        with pytest.raises(FleetError):
            parse_config_overrides([bad])


def test_override_for_unknown_target_is_refused(tmp_path):
    with pytest.raises(FleetError):
        Fleet(tmp_path, 20000, config_overrides=["storage-9:a=1"])


def test_roles_table_shape():
    assert list(ROLES) == ["controller", "storage_node", "group_coordinator", "offset_manager",
                           "transaction_coordinator", "gateway"]
    assert all(spec.module == f"services.{role}" for role, spec in ROLES.items())


def test_status_of_a_fleet_never_started(tmp_path):
    st = Fleet(tmp_path, 20000).status()
    assert [p["up"] for p in st["processes"]] == [False] * 10
    assert st["controller"] is None and st["partitions"] == []


def test_from_state_without_a_fleet_is_a_clear_error(tmp_path):
    with pytest.raises(FleetError, match="fleet up"):
        Fleet.from_state(tmp_path)


def test_split_chroot():
    assert split_chroot("h:1,h:2/riverbed/x") == ("h:1,h:2", "/riverbed/x")
    assert split_chroot("h:1") == ("h:1", None)
    assert split_chroot("h:1/") == ("h:1", None)
    for bad in ("", "/riverbed"):
        with pytest.raises(ZkConnectError):
            split_chroot(bad)


def test_missing_java_is_a_clear_error(tmp_path):
    from deploy.zookeeper import ZooKeeperError, ZooKeeperServer
    with pytest.raises(ZooKeeperError, match="make install"):
        ZooKeeperServer(tmp_path, 1, java="no-such-java-binary").start()


def test_missing_jars_are_a_clear_error(tmp_path):
    from deploy.zookeeper import ZooKeeperError, classpath
    with pytest.raises(ZooKeeperError, match="make install"):
        classpath(tmp_path)


def test_port_blocks_stay_below_the_ephemeral_range_when_there_is_room(tmp_path):
    from deploy.process import ephemeral_port_low, free_port_block
    rng = tmp_path / "ip_local_port_range"
    rng.write_text("32768\t60999\n")
    assert ephemeral_port_low(str(rng)) == 32768
    assert ephemeral_port_low(str(tmp_path / "missing")) is None
    bases = {free_port_block(400, seed=s, ephemeral_low=32768) for s in range(20)}
    assert all(20000 <= b and b + 400 <= 32768 for b in bases)
    # no room below it (a narrow range): the whole span as before
    wide = {free_port_block(400, seed=s, ephemeral_low=21000) for s in range(20)}
    assert any(b + 400 > 21000 for b in wide)
