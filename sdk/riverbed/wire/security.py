"""CurveZMQ (RFC 26) for Riverbed's sockets: key files, a client's security settings, and the
socket options that turn them on.

Keys are `zmq.auth` certificate files (ZPL text): `<name>.key` holds the public key and a
`metadata` section, `<name>.key_secret` also holds the secret key. Riverbed reads three metadata
fields:

- `name`: the principal is `User:<name>` (else the file's stem);
- `kind`: `service` for a fleet service's key (service principals hold ClusterAction), else
  `client`;
- `endpoints`: comma-separated `tcp://host:port` a service serves with this key; a client looks
  the server's public key up there by the endpoint it connects to.

A client's settings (`ClientSecurity`) come from keyword arguments, then `RIVERBED_*`
environment variables, then a client properties file named by `RIVERBED_CLIENT_PROPERTIES`
(what `riverbed fleet status --json` reports as `client_properties`):

    argument                 environment variable              properties key
    security_protocol        RIVERBED_SECURITY_PROTOCOL        security.protocol       NONE | CURVE
    curve_secret_key_file    RIVERBED_CURVE_SECRET_KEY_FILE    curve.secret.key.file   the client's .key_secret
    curve_server_public_key  RIVERBED_CURVE_SERVER_PUBLIC_KEY  curve.server.public.key one key (Z85 or a .key file) for every server
    curve_server_keys_dir    RIVERBED_CURVE_SERVER_KEYS_DIR    curve.server.keys.dir   servers' .key files, looked up by endpoint

With CURVE every request and response is encrypted and the server knows the client by its key.
"""
from __future__ import annotations

import os
import pathlib
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = [
    "ANONYMOUS", "PROTOCOLS", "Certificate", "ClientSecurity", "SecurityConfigError", "client_security",
    "create_keypair", "normalize_endpoint", "add_public_key", "parse_public_key", "read_certificate",
    "read_certificates", "check_protocol",
]

ANONYMOUS = "User:ANONYMOUS"
PROTOCOLS = ("NONE", "CURVE")
ZAP_DOMAIN = "riverbed"

ENV_PROTOCOL = "RIVERBED_SECURITY_PROTOCOL"
ENV_SECRET_KEY_FILE = "RIVERBED_CURVE_SECRET_KEY_FILE"
ENV_SERVER_PUBLIC_KEY = "RIVERBED_CURVE_SERVER_PUBLIC_KEY"
ENV_SERVER_KEYS_DIR = "RIVERBED_CURVE_SERVER_KEYS_DIR"
ENV_CLIENT_PROPERTIES = "RIVERBED_CLIENT_PROPERTIES"
CLIENT_ENV_VARS = (ENV_PROTOCOL, ENV_SECRET_KEY_FILE, ENV_SERVER_PUBLIC_KEY, ENV_SERVER_KEYS_DIR,
                   ENV_CLIENT_PROPERTIES)

_Z85_KEY = re.compile(r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class SecurityConfigError(ValueError):
    """A key file, key or security setting is missing or malformed (named in the message)."""


def check_protocol(value: str | None) -> str:
    p = (value or "NONE").strip().upper()
    if p not in PROTOCOLS:
        raise SecurityConfigError(f"security.protocol={value!r}: expected one of {', '.join(PROTOCOLS)}")
    return p


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise SecurityConfigError(f"key name {name!r}: use letters, digits, '.', '_' or '-' (max 100)")
    return name


# ---------------------------------------------------------------------------------------------
# certificates

@dataclass(frozen=True)
class Certificate:
    path: pathlib.Path
    public_key: bytes                     # Z85, 40 bytes
    secret_key: bytes | None              # Z85, or None for a public certificate
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.metadata.get("name") or self.path.name.split(".key")[0]

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    @property
    def kind(self) -> str:
        return self.metadata.get("kind", "client")

    @property
    def endpoints(self) -> tuple[str, ...]:
        return tuple(e.strip() for e in self.metadata.get("endpoints", "").split(",") if e.strip())


def _parse_zpl(text: str) -> dict[str, dict[str, str]]:
    """The two-level subset of ZPL that zmq.auth writes: `section` lines, indented `k = "v"`."""
    out: dict[str, dict[str, str]] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            section = line.strip()
            out.setdefault(section, {})
            continue
        if "=" not in line:
            continue
        k, v = line.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
            v = v[1:-1]
        out.setdefault(section, {})[k.strip()] = v
    return out


def read_certificate(path: str | os.PathLike) -> Certificate:
    """A `zmq.auth` certificate (public `.key` or secret `.key_secret`). Raises SecurityConfigError."""
    p = pathlib.Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SecurityConfigError(f"cannot read key file {p}: {e.strerror or e}") from None
    zpl = _parse_zpl(text)
    curve = zpl.get("curve", {})
    public = curve.get("public-key", "").encode()
    secret = curve.get("secret-key", "").encode() or None
    if not _Z85_KEY.match(public.decode()):
        raise SecurityConfigError(f"{p}: no valid curve public-key (a zmq.auth certificate?)")
    if secret is not None and not _Z85_KEY.match(secret.decode()):
        raise SecurityConfigError(f"{p}: malformed curve secret-key")
    return Certificate(p, public, secret, dict(zpl.get("metadata", {})))


def read_certificates(directory: str | os.PathLike) -> list[Certificate]:
    """Every public certificate (`*.key`) in a directory, sorted by file name; unreadable or
    malformed files are skipped (a half-written file during a rollout must not stop a server)."""
    d = pathlib.Path(directory)
    out = []
    try:
        names = sorted(d.iterdir())
    except OSError as e:
        raise SecurityConfigError(f"cannot read key directory {d}: {e.strerror or e}") from None
    for f in names:
        if f.suffix != ".key" or not f.is_file():
            continue
        try:
            out.append(read_certificate(f))
        except SecurityConfigError:
            continue
    return out


def create_keypair(directory: str | os.PathLike, name: str, *, kind: str = "client",
                   endpoints: tuple[str, ...] = (), secret_dir: str | os.PathLike | None = None,
                   overwrite: bool = False) -> tuple[pathlib.Path, pathlib.Path]:
    """Write `<name>.key` (public) into `directory` and `<name>.key_secret` (mode 0600) into
    `secret_dir` (default: the same directory). Returns (public path, secret path)."""
    import zmq
    check_name(name)
    if kind not in ("client", "service"):
        raise SecurityConfigError(f"kind={kind!r}: expected client or service")
    pub_dir = pathlib.Path(directory)
    sec_dir = pathlib.Path(secret_dir) if secret_dir is not None else pub_dir
    pub_dir.mkdir(parents=True, exist_ok=True)
    sec_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    pub, sec = pub_dir / f"{name}.key", sec_dir / f"{name}.key_secret"
    if not overwrite and (pub.exists() or sec.exists()):
        raise SecurityConfigError(f"a key named {name!r} exists already ({pub} or {sec})")
    metadata = {"name": name, "kind": kind}
    if endpoints:
        metadata["endpoints"] = ",".join(endpoints)
    public, secret = zmq.curve_keypair()
    _write_atomic(sec, _zpl(metadata, public, secret, "Secret"), 0o600)
    _write_atomic(pub, _zpl(metadata, public, None, "Public"), 0o644)
    return pub, sec


def _zpl(metadata: Mapping[str, str], public: bytes, secret: bytes | None, what: str) -> str:
    """The zmq.auth certificate format (zmq.auth.load_certificate reads it), metadata in both
    files (pyzmq's own writer puts it only in the secret one)."""
    lines = [f"#   ZeroMQ CURVE {what} Certificate (riverbed keys)", "", "metadata"]
    lines += [f'    {k} = "{v}"' for k, v in metadata.items()]
    lines += ["curve", f'    public-key = "{public.decode()}"']
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode()}"')
    return "\n".join(lines) + "\n"


def _write_atomic(path: pathlib.Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def add_public_key(trust_dir: str | os.PathLike, certificate: str | os.PathLike) -> pathlib.Path:
    """Copy a public certificate into a trust directory (validated; a secret file is refused)."""
    cert = read_certificate(certificate)
    if cert.secret_key is not None:
        raise SecurityConfigError(f"{certificate} holds a secret key: add the public .key file instead")
    d = pathlib.Path(trust_dir)
    d.mkdir(parents=True, exist_ok=True)
    dest = d / f"{check_name(cert.name)}.key"
    # atomic: a server re-reading the directory never sees half a file
    _write_atomic(dest, cert.path.read_text(), 0o644)
    return dest


def parse_public_key(value: str) -> bytes:
    """A Z85 public key (40 characters) or the path of a certificate file holding one."""
    v = value.strip()
    if _Z85_KEY.match(v):
        return v.encode()
    return read_certificate(v).public_key


def normalize_endpoint(endpoint: str) -> str:
    """`tcp://localhost:9092` -> `127.0.0.1:9092` (the key a server's certificate is found by)."""
    ep = endpoint.strip()
    if "://" in ep:
        ep = ep.split("://", 1)[1]
    host, _, port = ep.rpartition(":")
    host = host.strip("[]").lower()
    if host in ("localhost", "", "*", "0.0.0.0"):
        host = "127.0.0.1"
    return f"{host}:{port}"


def server_key_map(certs: list[Certificate]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for c in certs:
        for ep in c.endpoints:
            out[normalize_endpoint(ep)] = c.public_key
    return out


# ---------------------------------------------------------------------------------------------
# the client side

@dataclass
class ClientSecurity:
    """A client's CURVE settings. `apply(sock, endpoint)` before `connect`."""
    protocol: str = "NONE"
    public_key: bytes = b""
    secret_key: bytes = b""
    server_public_key: bytes = b""        # one key for every server, if given
    server_keys_dir: str = ""             # else: servers' certificates, by endpoint
    principal: str = ANONYMOUS
    _server_keys: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def curve(self) -> bool:
        return self.protocol == "CURVE"

    def server_key_for(self, endpoint: str) -> bytes:
        if self.server_public_key:
            return self.server_public_key
        ep = normalize_endpoint(endpoint)
        key = self._server_keys.get(ep)
        if key is None and self.server_keys_dir:
            # a new server, or rotated keys: read the directory again
            self._server_keys = server_key_map(read_certificates(self.server_keys_dir))
            key = self._server_keys.get(ep)
        if key is None:
            raise SecurityConfigError(f"no CURVE public key known for server {endpoint} (set "
                            f"curve_server_public_key, or curve_server_keys_dir to a directory "
                            f"holding its certificate)")
        return key

    def apply(self, sock: Any, endpoint: str) -> None:
        """Make `sock` (not yet connected) a CURVE client of `endpoint`; no-op for NONE."""
        if not self.curve:
            return
        import zmq
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.server_key_for(endpoint))
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public_key)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret_key)


NO_SECURITY = ClientSecurity()


def _properties(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = pathlib.Path(path).read_text()
    except OSError as e:
        raise SecurityConfigError(f"cannot read client properties {path}: {e.strerror or e}") from None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!" or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def client_security(*, security_protocol: str | None = None,
                    curve_secret_key_file: str | None = None,
                    curve_server_public_key: str | None = None,
                    curve_server_keys_dir: str | None = None,
                    env: Mapping[str, str] | None = None) -> ClientSecurity:
    """A client's settings: arguments, else RIVERBED_* environment variables, else the client
    properties file RIVERBED_CLIENT_PROPERTIES names. Raises SecurityConfigError when CURVE is asked for
    without a usable key."""
    env = os.environ if env is None else env
    props = _properties(env[ENV_CLIENT_PROPERTIES]) if env.get(ENV_CLIENT_PROPERTIES) else {}

    def pick(arg, env_key, prop_key):
        if arg is not None:
            return arg
        if env.get(env_key):
            return env[env_key]
        return props.get(prop_key) or None

    protocol = check_protocol(pick(security_protocol, ENV_PROTOCOL, "security.protocol"))
    if protocol == "NONE":
        return ClientSecurity()
    secret_file = pick(curve_secret_key_file, ENV_SECRET_KEY_FILE, "curve.secret.key.file")
    if not secret_file:
        raise SecurityConfigError("security_protocol=CURVE needs curve_secret_key_file (the client's "
                        ".key_secret file; `riverbed keys generate` makes one)")
    cert = read_certificate(secret_file)
    if cert.secret_key is None:
        raise SecurityConfigError(f"{secret_file} holds no secret key (use the .key_secret file)")
    server_key = pick(curve_server_public_key, ENV_SERVER_PUBLIC_KEY, "curve.server.public.key")
    keys_dir = pick(curve_server_keys_dir, ENV_SERVER_KEYS_DIR, "curve.server.keys.dir")
    if not server_key and not keys_dir:
        raise SecurityConfigError("security_protocol=CURVE needs curve_server_public_key or "
                        "curve_server_keys_dir (to know the servers' public keys)")
    return ClientSecurity("CURVE", cert.public_key, cert.secret_key,
                          parse_public_key(server_key) if server_key else b"", keys_dir or "",
                          cert.principal)
