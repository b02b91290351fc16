"""deploy/fleet_security.py's key directory as the Ansible roles drive it (`python -m
deploy.fleet_security ensure | rotate`): generated once, never regenerated while valid, and a
client key's rotation that keeps its principal. Real key files in a temp dir; no sockets."""
from __future__ import annotations

import json
import stat

import pytest

from deploy import fleet_security as fs
from riverbed.wire.security import SecurityConfigError, read_certificate, read_certificates

SERVICES = {"storage-1": ["tcp://10.0.0.12:9192"],
            "controller-1": ["tcp://10.0.0.11:9101", "tcp://10.0.0.11:9111"]}


def _cli(capsys, *args) -> dict:
    assert fs.main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_ensure_generates_once_then_changes_nothing(tmp_path, capsys):
    root = tmp_path / "keys"
    argv = ["ensure", "--root", str(root), "--services", json.dumps(SERVICES),
            "--client", "operator", "--client", "client"]
    first = _cli(capsys, *argv)["changed"]
    assert set(first) == {"storage-1", "controller-1", "operator", "client",
                          "zookeeper.credentials", "client.properties"}
    before = {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert _cli(capsys, *argv)["changed"] == []
    assert {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    # the layout the hosts get: secrets 0600 in a 0700 directory, credentials 0600
    assert stat.S_IMODE((root / "private").stat().st_mode) == 0o700
    for f in (root / "private").iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert stat.S_IMODE((root / "zookeeper.credentials").stat().st_mode) == 0o600
    certs = {c.name: c for c in read_certificates(root / "certificates")}
    assert certs["controller-1"].kind == "service"
    assert certs["controller-1"].endpoints == tuple(SERVICES["controller-1"])
    assert certs["client"].kind == certs["operator"].kind == "client"
    # client.properties is for the `client` key (the applications'), not the operator's
    props = (root / "client.properties").read_text()
    assert f"curve.secret.key.file={root}/private/client.key_secret" in props


def test_ensure_replaces_only_a_service_whose_endpoints_moved(tmp_path):
    sec = fs.FleetSecurity(tmp_path, root=tmp_path / "keys")
    sec.ensure(SERVICES, ["client"])
    old = read_certificate(tmp_path / "keys/certificates/storage-1.key").public_key
    moved = {**SERVICES, "storage-1": ["tcp://10.0.0.99:9192"]}
    assert sec.ensure(moved, ["client"]) == ["storage-1"]
    assert read_certificate(tmp_path / "keys/certificates/storage-1.key").public_key != old


def test_rotation_keeps_the_principal_and_both_keys_trusted_until_finish(tmp_path, capsys):
    root = tmp_path / "keys"
    fs.FleetSecurity(root, root=root).ensure(SERVICES, ["operator", "client"])
    old = read_certificate(root / "private/client.key_secret")
    assert _cli(capsys, "rotate", "--root", str(root), "--phase", "begin",
                "--key", "client")["changed"] == ["client"]
    new = read_certificate(root / "private/client.key_secret")
    assert new.public_key != old.public_key and new.principal == old.principal == "User:client"
    trusted = {c.public_key: c.principal for c in read_certificates(root / "certificates")}
    assert trusted[old.public_key] == trusted[new.public_key] == "User:client"   # both admitted
    assert read_certificate(root / "private/client.retiring.key_secret").public_key == old.public_key
    assert stat.S_IMODE((root / "private/client.key_secret").stat().st_mode) == 0o600
    # begin again while under way: nothing (the retiring key is not overwritten)
    assert _cli(capsys, "rotate", "--root", str(root), "--phase", "begin",
                "--key", "client")["changed"] == []
    # ensure (site.yml) in the middle of a rotation changes nothing either
    assert fs.FleetSecurity(root, root=root).ensure(SERVICES, ["operator", "client"]) == []
    assert _cli(capsys, "rotate", "--root", str(root), "--phase", "finish",
                "--key", "client")["changed"] == ["client"]
    trusted = {c.public_key for c in read_certificates(root / "certificates")}
    assert old.public_key not in trusted and new.public_key in trusted
    assert not (root / "private/client.retiring.key_secret").exists()
    assert _cli(capsys, "rotate", "--root", str(root), "--phase", "finish",
                "--key", "client")["changed"] == []


def test_a_service_key_is_not_rotated_as_a_client_key(tmp_path, capsys):
    root = tmp_path / "keys"
    fs.FleetSecurity(root, root=root).ensure(SERVICES, ["client"])
    with pytest.raises(SecurityConfigError, match="service key"):
        fs.FleetSecurity(root, root=root).rotate_begin("storage-1")
    assert fs.main(["rotate", "--root", str(root), "--phase", "begin", "--key", "nope"]) == 1


def test_sync_installs_exactly_a_hosts_share_and_reports_trust_changes(tmp_path, capsys, monkeypatch):
    import io
    host = tmp_path / "etc-keys"
    bundle = {"certificates": {"a.key": "A\n", "client.key": "C\n"},
              "private": {"a.key_secret": "secret-a\n"},
              "files": {"zookeeper.credentials": "riverbed:pw\n", "tools.properties": "x=1\n"}}

    def sync(b):
        monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(b)))
        return _cli(capsys, "sync", "--root", str(host))

    first = sync(bundle)
    assert first["trust_changed"] and set(first["changed"]) == {
        "private/", "certificates/a.key", "certificates/client.key", "private/a.key_secret",
        "tools.properties", "zookeeper.credentials"}                 # private/ made 0700
    assert stat.S_IMODE((host / "private").stat().st_mode) == 0o700
    assert stat.S_IMODE((host / "private/a.key_secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((host / "certificates/a.key").stat().st_mode) == 0o644
    assert stat.S_IMODE((host / "zookeeper.credentials").stat().st_mode) == 0o600
    assert sync(bundle) == {"changed": [], "trust_changed": False}          # idempotent
    # a mode someone loosened is put back, without counting as a trust change
    (host / "private/a.key_secret").chmod(0o644)
    assert sync(bundle) == {"changed": ["private/a.key_secret"], "trust_changed": False}
    # a rotation's new key arrives, then the retiring one goes; a stray secret is removed
    (host / "private/other.key_secret").write_text("not this host's\n")
    second = {**bundle, "certificates": {"a.key": "A\n", "client.key": "C2\n"}}
    out = sync(second)
    assert out["trust_changed"] and set(out["changed"]) == {"certificates/client.key",
                                                            "private/other.key_secret"}
    assert (host / "certificates/client.key").read_text() == "C2\n"
    assert sorted(p.name for p in (host / "private").iterdir()) == ["a.key_secret"]
    third = {**second, "certificates": {"a.key": "A\n"}}
    assert sync(third) == {"changed": ["certificates/client.key"], "trust_changed": True}
    # a name with a directory part is refused, nothing written
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"private": {"../x.key_secret": "s"}})))
    assert fs.main(["sync", "--root", str(host)]) == 1
    assert not (tmp_path / "x.key_secret").exists()


def test_the_fleet_and_the_roles_grant_the_same():
    from services.common.acl.authorizer import CLUSTER_NAME, WILDCARD, ResourceType
    assert {ResourceType(t) for t, _ in fs.CLIENT_GRANTS} == set(ResourceType)
    assert dict(fs.CLIENT_GRANTS)["Cluster"] == CLUSTER_NAME
    assert {n for t, n in fs.CLIENT_GRANTS if t != "Cluster"} == {WILDCARD}


def test_the_ansible_key_directory_keeps_every_scram_users_conf_under_kafka_clients(tmp_path):
    # tasks/kafka_users.yml runs `deploy.fleet_security kafka-client --root <keys>` and the
    # operator finds <keys>/kafka-clients/<user>.conf, the fleet's own kafka-client too
    keys = tmp_path / "keys"
    assert fs.main(["kafka-client", "--root", str(keys), "--user", "kafka-client",
                    "--bootstrap", "10.0.0.1:9093"]) == 0
    conf = keys / "kafka-clients" / "kafka-client.conf"
    assert oct(conf.stat().st_mode & 0o777) == "0o600"
    assert "bootstrap.servers=10.0.0.1:9093" in conf.read_text().splitlines()
    assert not (keys / "kafka-client.conf").exists()
    # a local fleet keeps its one user's at security/kafka-client.conf
    local = fs.FleetSecurity(tmp_path / "fleet")
    assert local.kafka_client_conf_of("kafka-client") == tmp_path / "fleet/security/kafka-client.conf"
