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
