"""The local fleet's key material: one CURVE keypair per service, a client keypair for the
operator and the tests, the trusted keys directory, ZooKeeper digest credentials, and the
settings a client needs.

    D/security/certificates/<name>.key   public certificates: the trusted keys directory every
                                         service reads (curve.trusted.keys.dir) and the servers'
                                         keys clients look up by endpoint
    D/security/private/<name>.key_secret secret keys (directory 0700, files 0600)
    D/security/zookeeper.credentials     `riverbed:<random>` (0600): the services' ZooKeeper user
    D/security/client.properties         what a client needs (security.protocol=CURVE,
                                         curve.secret.key.file, curve.server.keys.dir)

The gateways' Kafka listeners (SASL_SSL; made whatever security.protocol the fleet uses):

    D/security/kafka-ca.pem              the fleet's TLS CA certificate: Kafka clients'
                                         ssl.ca.location
    D/security/private/tls-ca.key        its key (0600)
    D/security/private/<gateway>.pem     each gateway's key and certificate chain (0600), its
                                         ssl.keystore.location; the certificate names the hosts
                                         the gateway advertises
    D/security/kafka-client.conf         librdkafka properties (`kcat -F`) for the fleet's SCRAM
                                         user KAFKA_CLIENT_USER (0600: it holds the password)

Keys are generated once and kept across `up`s (a service's key is regenerated only when its
endpoints changed). Rotating the client key: `riverbed keys generate` a new one, `riverbed keys
add` it to certificates/ (the services admit it within curve.trusted.keys.reload.ms, or at once
on SIGHUP), move clients over, then delete the old `.key` from certificates/.

The Ansible roles keep the same layout on the control machine (`riverbed_keys_dir`, a root given
with `root=`) and drive it with `python -m deploy.fleet_security`:

    ensure --root D --services JSON [--client NAME ...]   keys missing for these services
                                                          ({name: [endpoints]}) and clients
    rotate --root D --phase begin|finish --key NAME ...   client key rotation (below)
    sync --root D [--owner U --group G] < JSON            on a host: make its key directory
                                                          hold exactly its share (sync())

A client key's rotation keeps its principal: `begin` renames the current pair to
`<name>.retiring.key` / `.key_secret` (still trusted: the file name is not the principal, the
certificate's `name` is) and writes a new `<name>.key` / `.key_secret`; `finish` deletes the
retiring pair. Each prints JSON: {"changed": [...]}.
"""
from __future__ import annotations

import os
import pathlib
import secrets
from collections.abc import Iterable, Mapping

from riverbed.wire.security import (
    CLIENT_ENV_VARS,
    ENV_CLIENT_PROPERTIES,
    ENV_PROTOCOL,
    ENV_SECRET_KEY_FILE,
    ENV_SERVER_KEYS_DIR,
    SecurityConfigError,
    check_name,
    check_protocol,
    create_keypair,
    read_certificate,
)

__all__ = ["FleetSecurity", "CLIENT_KEY_NAME", "CLIENT_GRANTS", "ZK_USER", "RETIRING",
           "KAFKA_CLIENT_USER", "KAFKA_SASL_MECHANISMS"]

CLIENT_KEY_NAME = "client"
ZK_USER = "riverbed"
# `<name>.retiring.key`: a client key's previous pair during a rotation (still trusted).
RETIRING = "retiring"
# What a CURVE fleet grants its client keys (ACLs are enforced, nothing is open without a grant):
# ALLOW All on these (resource type, literal name) of services.common.acl -- the local fleet's
# `client` key (Fleet._grant_operator), and the Ansible roles' operator and client keys.
CLIENT_GRANTS = (("Topic", "*"), ("Group", "*"), ("TransactionalId", "*"),
                 ("Cluster", "kafka-cluster"))
# The SCRAM user a fleet makes for Kafka clients on its SASL_SSL listeners (User:kafka-client,
# granted CLIENT_GRANTS as the client key is), and the mechanisms the gateways enable.
KAFKA_CLIENT_USER = "kafka-client"
KAFKA_SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
KAFKA_CLIENT_MECHANISM = "SCRAM-SHA-512"
TLS_CA_KEY = "tls-ca.key"
TLS_CA_CERT = "kafka-ca.pem"


class FleetSecurity:
    def __init__(self, data_dir: pathlib.Path, protocol: str = "CURVE", *,
                 root: pathlib.Path | None = None):
        """Under `data_dir/security`, or under `root` itself when given (the Ansible roles'
        key directory on the control machine, and each host's)."""
        self.protocol = check_protocol(protocol)
        self.root = pathlib.Path(root) if root is not None else data_dir / "security"
        self.trust_dir = self.root / "certificates"
        self.private_dir = self.root / "private"
        self.zk_credentials_file = self.root / "zookeeper.credentials"
        self.client_properties_file = self.root / "client.properties"
        self.kafka_client_conf = self.root / "kafka-client.conf"
        # The Ansible roles' key directory keeps every SCRAM user's properties, the fleet's
        # kafka-client too, under kafka-clients/ (tasks/kafka_users.yml); a local fleet keeps its
        # one user's at security/kafka-client.conf.
        self._per_user_confs = root is not None

    @property
    def curve(self) -> bool:
        return self.protocol == "CURVE"

    def secret_key_file(self, name: str) -> pathlib.Path:
        return self.private_dir / f"{name}.key_secret"

    def ensure(self, services: Mapping[str, Iterable[str]],
               clients: Iterable[str] = (CLIENT_KEY_NAME,)) -> list[str]:
        """Create what is missing: a keypair per service (name -> its endpoints), a keypair per
        client name (the `client` key by default), ZooKeeper credentials and client.properties
        (for the `client` key, else the first client's). Returns the names of what it created or
        replaced (empty when everything was there and valid). No-op for NONE."""
        if not self.curve:
            return []
        changed = []
        self.root.mkdir(parents=True, exist_ok=True)
        self.private_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.private_dir, 0o700)
        for name, endpoints in services.items():
            eps = tuple(endpoints)
            if self._ensure_key(name, "service", eps):
                changed.append(name)
        clients = list(clients)
        for name in clients:
            if self._ensure_key(name, "client", ()):
                changed.append(name)
        if not self.zk_credentials_file.exists():
            fd = os.open(self.zk_credentials_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(f"{ZK_USER}:{secrets.token_urlsafe(24)}\n")
            changed.append(self.zk_credentials_file.name)
        # client.properties: for the `client` key when there is one, else the first client's
        props_key = CLIENT_KEY_NAME if CLIENT_KEY_NAME in clients or not clients else clients[0]
        text = ("# a client of this fleet: riverbed tools --command-config, RIVERBED_CLIENT_PROPERTIES\n"
                + "".join(f"{k}={v}\n" for k, v in self.client_properties(props_key).items()))
        if not self.client_properties_file.exists() or self.client_properties_file.read_text() != text:
            self.client_properties_file.write_text(text)
            changed.append(self.client_properties_file.name)
        return changed

    def _ensure_key(self, name: str, kind: str, endpoints: tuple[str, ...]) -> bool:
        pub = self.trust_dir / f"{name}.key"
        sec = self.secret_key_file(name)
        if pub.exists() and sec.exists():
            try:
                cert = read_certificate(pub)
                if cert.endpoints == endpoints and cert.kind == kind and \
                        read_certificate(sec).public_key == cert.public_key:
                    return False
            except SecurityConfigError:
                pass
        create_keypair(self.trust_dir, name, kind=kind, endpoints=endpoints,
                       secret_dir=self.private_dir, overwrite=True)
        return True

    # --- TLS and SCRAM for the Kafka listeners (any security.protocol) ------------------------------

    @property
    def tls_ca_file(self) -> pathlib.Path:
        return self.root / TLS_CA_CERT

    def kafka_keystore(self, name: str) -> pathlib.Path:
        return self.private_dir / f"{name}.pem"

    def ensure_kafka_tls(self, gateways: Mapping[str, Iterable[str]]) -> list[str]:
        """A TLS CA (once) and a certificate per gateway (name -> the hosts it advertises, its
        subject alternative names), made again only when missing or naming other hosts."""
        from riverbed.tools import tls
        changed = []
        self.private_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.private_dir, 0o700)
        ca_key = self.private_dir / TLS_CA_KEY
        new_ca = not (self.tls_ca_file.exists() and ca_key.exists())
        if new_ca:
            tls.make_ca(self.root, self.private_dir, common_name="Riverbed fleet CA",
                        overwrite=True, key_name=TLS_CA_KEY, cert_name=TLS_CA_CERT)
            changed.append(str(self.tls_ca_file.relative_to(self.root)))
        for name, hosts in gateways.items():
            sans = tuple(dict.fromkeys(hosts))
            want = {tls.parse_san(h) for h in sans}
            have = self.kafka_keystore(name)
            if not new_ca and have.exists() and \
                    {tls.parse_san(x) for x in tls.certificate_sans(have)} == want:
                continue
            tls.make_certificate(name, self.private_dir, ca_dir=self.root,
                                 ca_secret_dir=self.private_dir, sans=sans,
                                 ca_key_name=TLS_CA_KEY, ca_cert_name=TLS_CA_CERT)
            changed.append(str(have.relative_to(self.root)))
        return changed

    def kafka_listener_properties(self, name: str) -> dict[str, str]:
        """A gateway's keys for its SASL_SSL listener (Kafka's names)."""
        return {"sasl.enabled.mechanisms": ",".join(KAFKA_SASL_MECHANISMS),
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.kafka_keystore(name)),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.tls_ca_file)}

    def kafka_client_conf_of(self, user: str) -> pathlib.Path:
        """A local fleet's kafka-client.conf for its user; kafka-clients/<user>.conf for others
        and for every user of the Ansible roles' key directory."""
        if user == KAFKA_CLIENT_USER and not self._per_user_confs:
            return self.kafka_client_conf
        return self.root / "kafka-clients" / f"{check_file_name(user)}.conf"

    def kafka_client_password(self, user: str = KAFKA_CLIENT_USER) -> str:
        """A SCRAM user's password: kept in its client conf, made once."""
        try:
            for line in self.kafka_client_conf_of(user).read_text().splitlines():
                k, sep, v = line.partition("=")
                if sep and k.strip() == "sasl.password" and v.strip():
                    return v.strip()
        except OSError:
            pass
        return secrets.token_urlsafe(24)

    def write_kafka_client_conf(self, bootstrap_servers: str, password: str,
                                user: str = KAFKA_CLIENT_USER) -> bool:
        """librdkafka properties for a SCRAM user on the SASL_SSL listeners (kcat -F), 0600:
        it holds the password. True when the file changed."""
        path = self.kafka_client_conf_of(user)
        text = ("# A Kafka client of this fleet's SASL_SSL listeners: librdkafka properties\n"
                f"# (kcat -F {path} -L; confluent-kafka takes the same keys).\n"
                f"# User:{user} has the client key's grants. Written by Riverbed's deploy tools.\n"
                f"bootstrap.servers={bootstrap_servers}\n"
                "security.protocol=SASL_SSL\n"
                f"sasl.mechanisms={KAFKA_CLIENT_MECHANISM}\n"
                f"sasl.username={user}\n"
                f"sasl.password={password}\n"
                f"ssl.ca.location={self.tls_ca_file}\n")
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return _sync_file(path, text, 0o600, -1, -1)

    # --- client key rotation (the Ansible roles' rotate-keys.yml) ------------------------------

    def _retiring(self, name: str) -> tuple[pathlib.Path, pathlib.Path]:
        return (self.trust_dir / f"{name}.{RETIRING}.key",
                self.private_dir / f"{name}.{RETIRING}.key_secret")

    def rotate_begin(self, name: str) -> bool:
        """Keep `name`'s current pair as `<name>.retiring.*` (still trusted, same principal) and
        write a new current pair. False (nothing done) while a rotation of `name` is under way
        (finish it first), so a re-run changes nothing."""
        check_name(name)
        old_pub, old_sec = self._retiring(name)
        if old_pub.exists():
            return False
        pub, sec = self.trust_dir / f"{name}.key", self.secret_key_file(name)
        cert = read_certificate(pub)
        if cert.kind != "client":
            raise SecurityConfigError(f"{name} is a {cert.kind} key: only client keys rotate here")
        # the secret first: a half-done begin leaves the old pair trusted and in use
        os.replace(sec, old_sec)
        os.replace(pub, old_pub)
        create_keypair(self.trust_dir, name, kind="client", secret_dir=self.private_dir,
                       overwrite=True)
        return True

    def rotate_finish(self, name: str) -> bool:
        """Delete `name`'s retiring pair; False when there is none."""
        check_name(name)
        old_pub, old_sec = self._retiring(name)
        done = False
        for f in (old_pub, old_sec):
            if f.exists():
                f.unlink()
                done = True
        return done

    # --- a host's share (the Ansible roles' security.yml, run on the host) ----------------------

    def sync(self, bundle: Mapping[str, Mapping[str, str]], *, uid: int = -1,
             gid: int = -1) -> tuple[list[str], bool]:
        """Make this directory hold exactly `bundle`: {"certificates": {file: text}} (0644: the
        trusted keys directory), {"private": {file: text}} (0600 in a 0700 directory), {"files":
        {file: text}} (0600, in the root). A `*.key` / `*.key_secret` the bundle does not name is
        removed from certificates/ / private/ (a finished rotation, a service moved away). Each
        write is atomic (a service re-reading certificates/ never sees half a file) and happens
        only when the content differs. Returns (the paths changed, relative to the root; whether
        the trusted keys changed)."""
        changed: list[str] = []
        trust_changed = False
        for directory, mode in ((self.root, 0o755), (self.trust_dir, 0o755), (self.private_dir, 0o700)):
            directory.mkdir(parents=True, exist_ok=True)
            if directory.stat().st_mode & 0o777 != mode:
                os.chmod(directory, mode)
                changed.append(str(directory.relative_to(self.root)) + "/")
            os.chown(directory, uid, gid)
        for directory, section, suffix, mode in ((self.trust_dir, "certificates", ".key", 0o644),
                                                 (self.private_dir, "private", ".key_secret", 0o600),
                                                 (self.root, "files", None, 0o600)):
            wanted = {check_file_name(f): str(text) for f, text in (bundle.get(section) or {}).items()}
            for name, text in sorted(wanted.items()):
                path = directory / name
                if _sync_file(path, text, mode, uid, gid):
                    changed.append(str(path.relative_to(self.root)))
                    trust_changed |= directory == self.trust_dir
            if suffix is None:
                continue
            for path in sorted(directory.iterdir()):
                if path.name.endswith(suffix) and path.name not in wanted:
                    path.unlink()
                    changed.append(str(path.relative_to(self.root)))
                    trust_changed |= directory == self.trust_dir
        return changed, trust_changed

    def service_properties(self, name: str) -> dict[str, str]:
        """The security keys of service `name`'s .properties."""
        if not self.curve:
            return {"security.protocol": "NONE"}
        return {"security.protocol": "CURVE",
                "curve.secret.key.file": str(self.secret_key_file(name)),
                "curve.trusted.keys.dir": str(self.trust_dir),
                "zookeeper.set.acl": "true",
                "zookeeper.credentials.file": str(self.zk_credentials_file)}

    def client_properties(self, name: str = CLIENT_KEY_NAME) -> dict[str, str]:
        """What a client using key `name` needs (a client properties file's keys)."""
        if not self.curve:
            return {"security.protocol": "NONE"}
        return {"security.protocol": "CURVE",
                "curve.secret.key.file": str(self.secret_key_file(name)),
                "curve.server.keys.dir": str(self.trust_dir)}

    def client_env(self) -> dict[str, str]:
        """RIVERBED_* variables that make SDK clients (and `riverbed` tools) use the fleet's
        client key."""
        if not self.curve:
            return {ENV_PROTOCOL: "NONE"}
        props = self.client_properties()
        return {ENV_PROTOCOL: "CURVE", ENV_SECRET_KEY_FILE: props["curve.secret.key.file"],
                ENV_SERVER_KEYS_DIR: props["curve.server.keys.dir"],
                ENV_CLIENT_PROPERTIES: str(self.client_properties_file)}

    def describe(self) -> dict[str, str]:
        """For `riverbed fleet status --json`."""
        out = {"security_protocol": self.protocol}
        if self.curve:
            out.update({"client_properties": str(self.client_properties_file),
                        "curve_secret_key_file": str(self.secret_key_file(CLIENT_KEY_NAME)),
                        "curve_server_keys_dir": str(self.trust_dir),
                        "curve_trusted_keys_dir": str(self.trust_dir),
                        "zookeeper_credentials_file": str(self.zk_credentials_file)})
        if self.kafka_client_conf.exists():
            out["kafka_client_conf"] = str(self.kafka_client_conf)
            out["kafka_ca_file"] = str(self.tls_ca_file)
        out["env"] = self.client_env()
        return out

    def zk_auth(self):
        from services.common import zk as zkmod   # deploy may use services; the SDK may not
        if not self.curve:
            return zkmod.ZkAuth()
        return zkmod.ZkAuth.from_file(str(self.zk_credentials_file), set_acl=True)


def check_file_name(name: str) -> str:
    """A plain file name (no directory part, not hidden): what a key bundle may name."""
    if not name or name != pathlib.Path(name).name or name.startswith("."):
        raise SecurityConfigError(f"{name!r}: expected a plain file name")
    return name


def _sync_file(path: pathlib.Path, text: str, mode: int, uid: int, gid: int) -> bool:
    """Write `text` to `path` with `mode` unless it holds it already (atomically); True when
    something changed (content, mode or owner)."""
    try:
        st = path.stat()
        same = path.read_text() == text
    except OSError:
        st, same = None, False
    if not same:
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.chown(tmp, uid, gid)
        os.replace(tmp, path)
        return True
    assert st is not None
    fix = st.st_mode & 0o777 != mode or (uid != -1 and st.st_uid != uid) or (gid != -1 and st.st_gid != gid)
    if fix:
        os.chmod(path, mode)
        os.chown(path, uid, gid)
    return fix


class ClientEnv:
    """Export a fleet's client settings into this process's environment (so SDK clients made
    here use them) and put back what was there before."""

    def __init__(self) -> None:
        self._saved: dict[str, str | None] | None = None

    def export(self, env: Mapping[str, str]) -> None:
        if self._saved is None:
            self._saved = {k: os.environ.get(k) for k in CLIENT_ENV_VARS}
        for k in CLIENT_ENV_VARS:
            os.environ.pop(k, None)
        os.environ.update(env)

    def restore(self) -> None:
        if self._saved is None:
            return
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._saved = None


def main(argv: list[str] | None = None) -> int:
    """The Ansible roles' key steps on the control machine (see the module's docstring)."""
    import argparse
    import json
    import sys
    ap = argparse.ArgumentParser(prog="python -m deploy.fleet_security",
                                 description="CurveZMQ keys of a fleet under one directory")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("ensure", help="generate what is missing (never replaces a good key)")
    e.add_argument("--root", required=True, type=pathlib.Path)
    e.add_argument("--services", required=True,
                   help='JSON {"<service name>": ["tcp://host:port", ...]}')
    e.add_argument("--client", action="append", default=[], help="a client key name (repeatable)")
    r = sub.add_parser("rotate", help="begin or finish a client key rotation")
    r.add_argument("--root", required=True, type=pathlib.Path)
    r.add_argument("--phase", required=True, choices=("begin", "finish"))
    r.add_argument("--key", action="append", default=[], required=True, help="repeatable")
    t = sub.add_parser("kafka-tls", help="the Kafka listeners' TLS CA and a certificate per "
                                         "gateway (made again only when missing or renamed)")
    t.add_argument("--root", required=True, type=pathlib.Path)
    t.add_argument("--gateways", required=True,
                   help='JSON {"<gateway name>": ["<host it advertises>", ...]}')
    k = sub.add_parser("kafka-client", help="a SCRAM user's librdkafka properties (its password "
                                            "is made once and kept in them); prints the password")
    k.add_argument("--root", required=True, type=pathlib.Path)
    k.add_argument("--user", required=True)
    k.add_argument("--bootstrap", required=True, help="the SASL_SSL listeners, host:port,...")
    y = sub.add_parser("sync", help="on a host: make its key directory hold exactly the JSON "
                                    "bundle on stdin ({certificates, private, files: {name: text}})")
    y.add_argument("--root", required=True, type=pathlib.Path)
    y.add_argument("--owner", default="", help="user owning the files (default: this process's)")
    y.add_argument("--group", default="", help="group owning the files")
    a = ap.parse_args(argv)
    sec = FleetSecurity(a.root, "CURVE", root=a.root)
    try:
        if a.cmd == "sync":
            import grp
            import pwd
            uid = pwd.getpwnam(a.owner).pw_uid if a.owner else -1
            gid = grp.getgrnam(a.group).gr_gid if a.group else -1
            changed, trust_changed = sec.sync(json.load(sys.stdin), uid=uid, gid=gid)
            print(json.dumps({"changed": changed, "trust_changed": trust_changed}))
            return 0
        if a.cmd == "kafka-tls":
            print(json.dumps({"changed": sec.ensure_kafka_tls(json.loads(a.gateways))}))
            return 0
        if a.cmd == "kafka-client":
            password = sec.kafka_client_password(a.user)
            changed = sec.write_kafka_client_conf(a.bootstrap, password, a.user)
            print(json.dumps({"changed": [str(sec.kafka_client_conf_of(a.user))] if changed
                              else [], "password": password}))
            return 0
        if a.cmd == "ensure":
            changed = sec.ensure(json.loads(a.services), a.client or [CLIENT_KEY_NAME])
        else:
            step = sec.rotate_begin if a.phase == "begin" else sec.rotate_finish
            changed = [name for name in a.key if step(name)]
    except (SecurityConfigError, OSError, ValueError, KeyError) as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    print(json.dumps({"changed": changed}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
