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

Keys are generated once and kept across `up`s (a service's key is regenerated only when its
endpoints changed). Rotating the client key: `riverbed keys generate` a new one, `riverbed keys
add` it to certificates/ (the services admit it within curve.trusted.keys.reload.ms, or at once
on SIGHUP), move clients over, then delete the old `.key` from certificates/.
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
    check_protocol,
    create_keypair,
    read_certificate,
)

__all__ = ["FleetSecurity", "CLIENT_KEY_NAME", "ZK_USER"]

CLIENT_KEY_NAME = "client"
ZK_USER = "riverbed"


class FleetSecurity:
    def __init__(self, data_dir: pathlib.Path, protocol: str = "CURVE"):
        self.protocol = check_protocol(protocol)
        self.root = data_dir / "security"
        self.trust_dir = self.root / "certificates"
        self.private_dir = self.root / "private"
        self.zk_credentials_file = self.root / "zookeeper.credentials"
        self.client_properties_file = self.root / "client.properties"

    @property
    def curve(self) -> bool:
        return self.protocol == "CURVE"

    def secret_key_file(self, name: str) -> pathlib.Path:
        return self.private_dir / f"{name}.key_secret"

    def ensure(self, services: Mapping[str, Iterable[str]]) -> None:
        """Create what is missing: a keypair per service (name -> its endpoints), the client
        keypair, ZooKeeper credentials and client.properties. No-op for NONE."""
        if not self.curve:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.private_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.private_dir, 0o700)
        for name, endpoints in services.items():
            eps = tuple(endpoints)
            self._ensure_key(name, "service", eps)
        self._ensure_key(CLIENT_KEY_NAME, "client", ())
        if not self.zk_credentials_file.exists():
            fd = os.open(self.zk_credentials_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(f"{ZK_USER}:{secrets.token_urlsafe(24)}\n")
        self.client_properties_file.write_text(
            "# a client of this fleet: riverbed tools --command-config, RIVERBED_CLIENT_PROPERTIES\n"
            + "".join(f"{k}={v}\n" for k, v in self.client_properties().items()))

    def _ensure_key(self, name: str, kind: str, endpoints: tuple[str, ...]) -> None:
        pub = self.trust_dir / f"{name}.key"
        sec = self.secret_key_file(name)
        if pub.exists() and sec.exists():
            try:
                cert = read_certificate(pub)
                if cert.endpoints == endpoints and cert.kind == kind and \
                        read_certificate(sec).public_key == cert.public_key:
                    return
            except SecurityConfigError:
                pass
        create_keypair(self.trust_dir, name, kind=kind, endpoints=endpoints,
                       secret_dir=self.private_dir, overwrite=True)

    def service_properties(self, name: str) -> dict[str, str]:
        """The security keys of service `name`'s .properties."""
        if not self.curve:
            return {"security.protocol": "NONE"}
        return {"security.protocol": "CURVE",
                "curve.secret.key.file": str(self.secret_key_file(name)),
                "curve.trusted.keys.dir": str(self.trust_dir),
                "zookeeper.set.acl": "true",
                "zookeeper.credentials.file": str(self.zk_credentials_file)}

    def client_properties(self) -> dict[str, str]:
        if not self.curve:
            return {"security.protocol": "NONE"}
        return {"security.protocol": "CURVE",
                "curve.secret.key.file": str(self.secret_key_file(CLIENT_KEY_NAME)),
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
        out["env"] = self.client_env()
        return out

    def zk_auth(self):
        from services.common import zk as zkmod   # deploy may use services; the SDK may not
        if not self.curve:
            return zkmod.ZkAuth()
        return zkmod.ZkAuth.from_file(str(self.zk_credentials_file), set_acl=True)


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
