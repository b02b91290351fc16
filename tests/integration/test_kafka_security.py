"""The Kafka listener's security against a real fleet with real clients (issue 25, phase 2a):
SASL/SCRAM over TLS (SASL_SSL) with kcat (`-F security/kafka-client.conf`), confluent-kafka
(SCRAM-SHA-256 and -512) and kafka-python; a wrong password refused; a request before
authentication closing the connection; ACLs and quotas on a SCRAM user (TOPIC_AUTHORIZATION_FAILED,
throttle_time_ms); mutual TLS on an SSL listener (the principal is the certificate's DN); the
users' credentials managed with `riverbed configs`.

One fleet for the module, as `riverbed fleet up` makes it (CurveZMQ, ACLs enforced), plus an SSL
listener with ssl.client.auth=requested on each gateway (a config override).
"""
from __future__ import annotations

import json
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from deploy.fleet import Fleet, free_base_port

pytestmark = pytest.mark.integration

SSL_OFFSET = 80          # gateway-1's SSL listener: P + 80 (P+50 PLAINTEXT, P+60 SASL_SSL, P+70 the transaction coordinator)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    port = free_base_port()
    listeners = (f"PLAINTEXT://127.0.0.1:{port + 50},SASL_SSL://127.0.0.1:{port + 60},"
                 f"SSL://127.0.0.1:{port + SSL_OFFSET}")
    f = Fleet(tmp_path_factory.mktemp("kafka-sec"), port, storage_nodes=1, controllers=1,
              gateways=1, config_overrides={"gateway-1": {"listeners": listeners,
                                                          "ssl.client.auth": "requested"}})
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def conf(fleet) -> dict[str, str]:
    text = fleet.security.kafka_client_conf.read_text()
    return dict(line.split("=", 1) for line in text.splitlines()
                if line.strip() and not line.startswith("#"))


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def riverbed(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "riverbed.cli", *args], capture_output=True,
                          text=True, timeout=60)


def configs(fleet, *args: str, credentials: bool = True) -> subprocess.CompletedProcess:
    cred = ["--zookeeper-credentials-file", str(fleet.security.zk_credentials_file)] \
        if credentials else ["--zookeeper-credentials-file", ""]
    return riverbed("configs", "--zookeeper", fleet.zk_connect, *cred, *args)


def acls(fleet, *args: str) -> subprocess.CompletedProcess:
    return riverbed("acls", "--zookeeper", fleet.zk_connect, "--zookeeper-credentials-file",
                    str(fleet.security.zk_credentials_file), *args)


def add_user(fleet, user: str, password: str) -> None:
    out = configs(fleet, "--alter", "--entity-type", "users", "--entity-name", user,
                  "--add-config", f"SCRAM-SHA-256=[iterations=8192,password={password}],"
                                  f"SCRAM-SHA-512=[password={password}]")
    assert out.returncode == 0, out.stderr


def sasl_conf(conf: dict[str, str], **kw) -> dict[str, str]:
    """confluent-kafka's config from kafka-client.conf (the same librdkafka keys)."""
    return {**conf, **kw}


def kcat(*args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=input, capture_output=True, text=True,
                          timeout=timeout)


def create_topic(conf: dict[str, str], name: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(name, num_partitions=partitions,
                                           replication_factor=1)]).values():
        f.result(timeout=60)
    deadline = time.monotonic() + 60
    while True:                # the controller elects leaders just after CreateTopics answers
        md = admin.list_topics(name, timeout=30).topics[name]
        if md.error is None and md.partitions and all(p.leader >= 0 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, md
        time.sleep(0.3)


def produce_once_granted(conf: dict[str, str], topic: str) -> None:
    """Produce one record, again until it is acknowledged (a new grant reaches the gateways
    through a ZooKeeper watch, moments after `riverbed acls` returns)."""
    from confluent_kafka import Producer
    results: list = []
    p = Producer({**conf, "acks": "all"})
    deadline = time.monotonic() + 30
    while not results or results[-1] is not None:
        assert time.monotonic() < deadline, results
        p.produce(topic, b"granted", on_delivery=lambda err, msg: results.append(err))
        p.flush(15)


def metric(fleet, name: str, **labels: str) -> float:
    url = fleet.process("gateway-1").extra["metrics_endpoint"]
    # `up` returns once the gateway's ZeroMQ port is bound, which the gateway does before it
    # starts its metrics endpoint: until then a scrape is refused.
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                text = r.read().decode()
            break
        except urllib.error.URLError as e:
            if not isinstance(e.reason, ConnectionRefusedError) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_status_lists_plaintext_and_sasl_ssl_listeners(fleet, conf):
    p = fleet.base_port
    gws = [x for x in fleet.status(with_zk=False)["processes"] if x["role"] == "gateway"]
    assert [g["kafka_listeners"] for g in gws] == [
        [f"PLAINTEXT://127.0.0.1:{p + 50}", f"SASL_SSL://127.0.0.1:{p + 60}"]]
    out = riverbed("fleet", "status", "--json", "--data-dir", str(fleet.data_dir))
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert [x["kafka_listeners"] for x in status["processes"] if x["role"] == "gateway"] == \
        [g["kafka_listeners"] for g in gws]
    assert status["security"]["kafka_client_conf"] == str(fleet.security.kafka_client_conf)
    assert conf["bootstrap.servers"] == f"127.0.0.1:{p + 60}"
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert conf["sasl.username"] == "kafka-client"
    assert fleet.security.kafka_client_conf.stat().st_mode & 0o777 == 0o600


def test_kcat_with_the_fleets_client_conf(fleet, conf):
    cf = str(fleet.security.kafka_client_conf)
    topic = topic_name("kcat-sasl")
    create_topic(conf, topic)
    proc = kcat("-F", cf, "-L", "-J")
    assert proc.returncode == 0, proc.stderr
    assert [b["id"] for b in json.loads(proc.stdout)["brokers"]] == [1]
    lines = [f"k{i}:value-{i}" for i in range(20)]
    proc = kcat("-F", cf, "-P", "-t", topic, "-K:", "-X", "acks=all",
                input="\n".join(lines) + "\n")
    assert proc.returncode == 0, proc.stderr
    proc = kcat("-F", cf, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k:%s\n")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == sorted(lines)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_scram_over_tls(fleet, conf, mechanism):
    from confluent_kafka import Consumer, Producer
    c = sasl_conf(conf, **{"sasl.mechanisms": mechanism})
    topic = topic_name(f"ck-{mechanism.lower()}")
    create_topic(c, topic, 2)
    p = Producer({**c, "enable.idempotence": True, "acks": "all"})
    errors = []
    for i in range(100):
        p.produce(topic, key=b"%d" % i, value=b"v%d" % i,
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0 and errors == []
    consumer = Consumer({**c, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = set()
    deadline = time.monotonic() + 60
    while len(seen) < 100 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            seen.add(m.key())
    consumer.close()
    assert len(seen) == 100


def test_kafka_python_scram_over_tls(fleet, conf):
    from kafka import KafkaConsumer, KafkaProducer
    kw = dict(bootstrap_servers=conf["bootstrap.servers"], security_protocol="SASL_SSL",
              sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=conf["sasl.username"],
              sasl_plain_password=conf["sasl.password"], ssl_cafile=conf["ssl.ca.location"])
    topic = topic_name("kp-sasl")
    create_topic(conf, topic)
    producer = KafkaProducer(acks="all", **kw)
    for i in range(10):
        producer.send(topic, b"v%d" % i).get(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **kw)
    assert sorted(m.value for m in consumer) == sorted(b"v%d" % i for i in range(10))
    consumer.close()


def test_a_wrong_password_is_refused_counted_and_logged_without_it(fleet, conf):
    from confluent_kafka import KafkaError, Producer
    before = metric(fleet, "riverbed_gateway_kafka_failed_authentication_total",
                    mechanism="SCRAM-SHA-512")
    wrong = "not-the-password-" + uuid.uuid4().hex[:6]
    proc = kcat("-F", str(fleet.security.kafka_client_conf), "-X", f"sasl.password={wrong}",
                "-L", "-m", "10", timeout=60)
    assert proc.returncode != 0
    assert "Authentication failed" in proc.stderr or "SASL authentication error" in proc.stderr, \
        proc.stderr
    errors = []
    p = Producer(sasl_conf(conf, **{"sasl.password": wrong, "error_cb": errors.append}))
    deadline = time.monotonic() + 30
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        p.poll(0.5)
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KpError
    with pytest.raises(KpError):
        KafkaProducer(bootstrap_servers=conf["bootstrap.servers"], security_protocol="SASL_SSL",
                      sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="kafka-client",
                      sasl_plain_password=wrong, ssl_cafile=conf["ssl.ca.location"],
                      max_block_ms=15000)
    assert metric(fleet, "riverbed_gateway_kafka_failed_authentication_total",
                  mechanism="SCRAM-SHA-512") >= before + 2
    log = open(fleet.process("gateway-1").log).read()
    assert "failed authentication" in log and wrong not in log


def _tls_socket(fleet, port: int) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(fleet.security.tls_ca_file))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def test_a_request_before_authentication_closes_the_connection(fleet):
    s = _tls_socket(fleet, fleet.base_port + 60)
    # Metadata v1, all topics: refused before SASL (Kafka closes the connection)
    body = struct.pack(">hhih", 3, 1, 7, 4) + b"test" + struct.pack(">i", -1)
    s.sendall(struct.pack(">i", len(body)) + body)
    assert s.recv(4) == b""
    s.close()
    # an oversized first frame (past sasl.server.max.receive.size) too
    s = _tls_socket(fleet, fleet.base_port + 60)
    s.sendall(struct.pack(">i", 600_000))
    assert s.recv(4) == b""
    s.close()
    assert metric(fleet, "riverbed_gateway_kafka_connections_closed_total",
                  reason="unauthenticated") >= 1


def test_scram_users_are_managed_with_riverbed_configs(fleet, conf):
    from confluent_kafka.admin import AdminClient
    add_user(fleet, "carol", "carol-pw")
    out = configs(fleet, "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("SCRAM credential configs for user-principal 'carol' are "
                                  "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096")
    assert "carol-pw" not in out.stdout
    # the user's znode holds credentials: only the fleet's ZooKeeper user reads it
    out = configs(fleet, "--describe", "--entity-type", "users", credentials=False)
    assert out.returncode == 1 and "zookeeper-credentials-file" in out.stderr

    def logs_in(mechanism: str, password: str = "carol-pw") -> bool:
        admin = AdminClient(sasl_conf(conf, **{"sasl.username": "carol", "sasl.password": password,
                                               "sasl.mechanisms": mechanism}))
        try:
            admin.list_topics(timeout=10)
            return True
        except Exception:  # noqa: BLE001 - KafkaException: authentication failed
            return False

    deadline = time.monotonic() + 30         # gateways apply /config/changes within moments
    while not logs_in("SCRAM-SHA-256"):
        assert time.monotonic() < deadline
    assert logs_in("SCRAM-SHA-512") and not logs_in("SCRAM-SHA-512", "wrong")
    out = configs(fleet, "--alter", "--entity-type", "users", "--entity-name", "carol",
                  "--delete-config", "SCRAM-SHA-256")
    assert out.returncode == 0, out.stderr
    deadline = time.monotonic() + 30
    while logs_in("SCRAM-SHA-256"):
        assert time.monotonic() < deadline
    assert logs_in("SCRAM-SHA-512")


def test_an_acl_denial_for_a_scram_user(fleet, conf):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient
    topic = topic_name("acl")
    create_topic(conf, topic)
    add_user(fleet, "dave", "dave-pw")
    dave = sasl_conf(conf, **{"sasl.username": "dave", "sasl.password": "dave-pw"})
    deadline = time.monotonic() + 30
    while True:
        md = AdminClient(dave).list_topics(topic, timeout=10).topics[topic]
        if md.error is not None and md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            break                                 # authenticated as User:dave, and denied
        assert time.monotonic() < deadline, md.error
        time.sleep(0.5)
    out = acls(fleet, "--add", "--allow-principal", "User:dave", "--producer", "--topic", topic)
    assert out.returncode == 0, out.stderr
    produce_once_granted(dave, topic)     # the gateways apply the grant within moments


def test_a_quota_on_a_scram_user_throttles(fleet, conf):
    from confluent_kafka import Producer
    topic = topic_name("quota")
    create_topic(conf, topic)
    add_user(fleet, "erin", "erin-pw")
    out = acls(fleet, "--add", "--allow-principal", "User:erin", "--producer", "--topic", topic)
    assert out.returncode == 0, out.stderr
    out = configs(fleet, "--alter", "--entity-type", "users", "--entity-name", "erin",
                  "--add-config", "producer_byte_rate=2048")
    assert out.returncode == 0, out.stderr
    throttles = []
    p = Producer(sasl_conf(conf, **{"sasl.username": "erin", "sasl.password": "erin-pw",
                                    "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
                                    "linger.ms": 0}))
    deadline = time.monotonic() + 60
    while not any(t > 0 for t in throttles):
        assert time.monotonic() < deadline, "no throttle_time_ms reached the client"
        for _ in range(10):
            p.produce(topic, b"x" * 4000)
        p.flush(30)
        p.poll(0.1)
    assert max(throttles) > 0


def test_mutual_tls_principal_is_the_certificates_dn(fleet, conf, tmp_path):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    from riverbed.tools import tls
    sec = fleet.security
    cert = tls.make_certificate("app2", tmp_path, ca_dir=sec.root, ca_secret_dir=sec.private_dir,
                                client=True, ca_key_name="tls-ca.key", ca_cert_name="kafka-ca.pem")
    topic = topic_name("mtls")
    create_topic(conf, topic)
    ssl_conf = {"bootstrap.servers": f"127.0.0.1:{fleet.base_port + SSL_OFFSET}",
                "security.protocol": "SSL", "ssl.ca.location": str(sec.tls_ca_file),
                "ssl.certificate.location": str(cert), "ssl.key.location": str(cert)}
    md = AdminClient(ssl_conf).list_topics(topic, timeout=30).topics[topic]
    # User:CN=app2,O=Riverbed has no grant (User:ANONYMOUS from 127.0.0.1 would have had one)
    assert md.error is not None and md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    out = acls(fleet, "--add", "--allow-principal", "User:CN=app2,O=Riverbed", "--producer",
               "--topic", topic)
    assert out.returncode == 0, out.stderr
    produce_once_granted(ssl_conf, topic)
    assert metric(fleet, "riverbed_gateway_kafka_successful_authentication_total",
                  mechanism="SSL") >= 1


def test_plaintext_listener_still_serves_and_refuses_sasl(fleet):
    from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
    from kio.serial import entity_reader
    s = socket.create_connection(("127.0.0.1", fleet.base_port + 50), timeout=10)
    mech = b"SCRAM-SHA-512"
    body = struct.pack(">hhih", 17, 1, 9, 4) + b"test" + struct.pack(">h", len(mech)) + mech
    s.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", s.recv(4))[0]
    data = b""
    while len(data) < size:
        data += s.recv(size - len(data))
    assert struct.unpack(">i", data[:4])[0] == 9
    resp, _ = entity_reader(SaslHandshakeResponse)(data, 4)
    assert resp.error_code.value == 34           # ILLEGAL_SASL_STATE, as Kafka's KafkaApis
    s.close()


def test_admin_client_alters_and_describes_scram_users(fleet, conf):
    """Kafka's AlterUserScramCredentials / DescribeUserScramCredentials (KIP-554) through
    confluent-kafka's AdminClient: kafka-client has ALTER/DESCRIBE on the cluster (the fleet's
    grant); a user made that way logs in; an ungranted user is refused the APIs."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    admin = AdminClient(conf)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("frank", info, b"frank-pw"),
        UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)])
    futures["frank"].result(30)
    with pytest.raises(KafkaException) as e:
        futures["nobody"].result(30)
    assert e.value.args[0].code() == 91                  # RESOURCE_NOT_FOUND

    def described():
        try:
            return admin.describe_user_scram_credentials(["frank"])["frank"].result(30)
        except KafkaException:
            return None                                  # not seen by the gateway yet
    deadline = time.monotonic() + 30
    while (d := described()) is None:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert [(i.mechanism, i.iterations) for i in d.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 8192)]
    frank = sasl_conf(conf, **{"sasl.username": "frank", "sasl.password": "frank-pw",
                               "sasl.mechanisms": "SCRAM-SHA-256"})
    frank_admin = AdminClient(frank)
    frank_admin.list_topics(timeout=30)                  # logs in (and has no grants)
    with pytest.raises(KafkaException) as e:
        frank_admin.describe_user_scram_credentials(["frank"])["frank"].result(30)
    assert e.value.args[0].code() == 31                  # CLUSTER_AUTHORIZATION_FAILED
    assert frank_admin.describe_user_scram_credentials().result(30) == {}
    everyone = admin.describe_user_scram_credentials().result(30)
    assert {"frank", "kafka-client"} <= set(everyone)
    out = configs(fleet, "--describe", "--entity-type", "users", "--entity-name", "frank")
    assert "SCRAM-SHA-256=iterations=8192" in out.stdout, out.stderr
