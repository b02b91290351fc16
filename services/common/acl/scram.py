"""SCRAM credentials as Kafka stores them (KIP-84; Kafka's `ScramCredentialUtils` and
`ScramFormatter`): pure functions, no ZooKeeper.

A user's credentials live in the user's config znode beside its quotas (layout.py):

    /config/users/alice  {"version":1,"config":{
        "SCRAM-SHA-512":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096",
        "producer_byte_rate":"1048576"}}

    SaltedPassword = Hi(UTF-8(password), salt, iterations)       (PBKDF2 with the mechanism's HMAC)
    StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey      = HMAC(SaltedPassword, "Server Key")

The password is used as its UTF-8 bytes, as Kafka's ScramFormatter and librdkafka do (no
SASLprep), and is never stored. Iterations are bounded as Kafka bounds them (4096..16384, KIP-554).

`kafka-configs --alter --add-config` spelling (Kafka's ConfigCommand):

    SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MECHANISMS = tuple(HASHES)
MIN_ITERATIONS = 4096           # Kafka's ScramMechanism.minIterations (RFC 7677's minimum)
MAX_ITERATIONS = 16384          # Kafka's maximum (KIP-554)
DEFAULT_ITERATIONS = 4096       # kafka-configs' default
SALT_BYTES = 24                 # Kafka's ScramFormatter.secureRandomBytes: about as many


class ScramConfigError(ValueError):
    """A SCRAM credential or `SCRAM-SHA-...=[...]` config that cannot be used (the message never
    holds the password)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:      # keys are secrets: never in logs
        return f"ScramCredential(iterations={self.iterations})"


def _hash(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ScramConfigError(f"{mechanism!r} is not a SCRAM mechanism; expected one of "
                               f"{', '.join(MECHANISMS)}") from None


def check_iterations(iterations: int) -> int:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramConfigError(f"iterations={iterations}: must be in "
                               f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")
    return iterations


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


def make_credential(mechanism: str, password: str, salt: bytes,
                    iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """The credential for `password` (`salt`: random bytes the caller draws, SALT_BYTES)."""
    name = _hash(mechanism)
    check_iterations(iterations)
    if not password:
        raise ScramConfigError("the password must not be empty")
    if not salt:
        raise ScramConfigError("the salt must not be empty")
    sp = salted_password(mechanism, password, salt, iterations)
    client_key = hmac.digest(sp, b"Client Key", name)
    return ScramCredential(salt, hashlib.new(name, client_key).digest(),
                           hmac.digest(sp, b"Server Key", name), iterations)


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes,
                                    iterations: int) -> ScramCredential:
    """The credential for a client-side salted password (Kafka's AlterUserScramCredentials
    sends Hi(password, salt, iterations), never the password)."""
    name = _hash(mechanism)
    check_iterations(iterations)
    if not salt or len(salted) != hashlib.new(name).digest_size:
        raise ScramConfigError(f"{mechanism}: an empty salt or a salted password of the wrong "
                               "length")
    client_key = hmac.digest(salted, b"Client Key", name)
    return ScramCredential(salt, hashlib.new(name, client_key).digest(),
                           hmac.digest(salted, b"Server Key", name), iterations)


def verify_password(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from (constant-time compare): how
    SASL/PLAIN checks a password against the SCRAM store."""
    try:
        again = make_credential(mechanism, password, credential.salt, credential.iterations)
    except ScramConfigError:
        return False
    return hmac.compare_digest(again.stored_key, credential.stored_key) and \
        hmac.compare_digest(again.server_key, credential.server_key)


def encode_credential(c: ScramCredential) -> str:
    """Kafka's `credentialToString`."""
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    return (f"salt={b64(c.salt)},stored_key={b64(c.stored_key)},"
            f"server_key={b64(c.server_key)},iterations={c.iterations}")


def decode_credential(text: str) -> ScramCredential:
    """Kafka's `credentialFromString`: exactly salt, stored_key, server_key and iterations."""
    props: dict[str, str] = {}
    for item in str(text).split(","):
        k, sep, v = item.partition("=")
        if not sep or k in props:
            raise ScramConfigError("a SCRAM credential is salt=..,stored_key=..,server_key=..,"
                                   "iterations=..")
        props[k] = v
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ScramConfigError("a SCRAM credential has exactly salt, stored_key, server_key "
                               "and iterations")
    try:
        salt, stored, server = (base64.b64decode(props[k], validate=True)
                                for k in ("salt", "stored_key", "server_key"))
        iterations = int(props["iterations"])
    except (binascii.Error, ValueError):
        raise ScramConfigError("a SCRAM credential with bad base64 or iterations") from None
    if not salt or not stored or not server or iterations <= 0:
        raise ScramConfigError("a SCRAM credential with an empty key or no iterations")
    return ScramCredential(salt, stored, server, iterations)


def credentials_of(configs: Mapping[tuple[str, str], Mapping[str, str]]
                   ) -> dict[str, dict[str, ScramCredential]]:
    """user -> {mechanism: credential} from a snapshot of entity configs ((entity type, name) ->
    config, store.read_configs). Unreadable credentials are left out (that user cannot log in
    with that mechanism); `<default>` holds none."""
    out: dict[str, dict[str, ScramCredential]] = {}
    for (etype, name), cfg in configs.items():
        if etype != "users":
            continue
        for mech in MECHANISMS:
            raw = cfg.get(mech)
            if raw is None:
                continue
            try:
                out.setdefault(name, {})[mech] = decode_credential(raw)
            except ScramConfigError:
                continue
    return out


# --- kafka-configs' spelling ------------------------------------------------------------------

def split_config(text: str) -> list[str]:
    """`a=1,SCRAM-SHA-256=[iterations=8192,password=x],b=2` -> its items (commas inside [...]
    do not split), as Kafka's ConfigCommand parses --add-config."""
    items, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ScramConfigError("--add-config: a ']' without its '['")
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ScramConfigError("--add-config: a '[' without its ']'")
    items.append("".join(cur))
    return [i.strip() for i in items if i.strip()]


def parse_scram_value(mechanism: str, value: str) -> tuple[str, int]:
    """`[iterations=8192,password=x]` (or `[password=x]`) -> (password, iterations)."""
    _hash(mechanism)
    v = value.strip()
    if not (v.startswith("[") and v.endswith("]")):
        raise ScramConfigError(f"{mechanism}: expected {mechanism}=[password=...] or "
                               f"{mechanism}=[iterations=N,password=...]")
    password, iterations = None, DEFAULT_ITERATIONS
    inner = v[1:-1]
    # the password is last and may itself hold commas: split off iterations=N first
    if inner.startswith("iterations="):
        head, sep, inner = inner.partition(",")
        if not sep:
            raise ScramConfigError(f"{mechanism}: no password given")
        try:
            iterations = int(head[len("iterations="):])
        except ValueError:
            raise ScramConfigError(f"{mechanism}: iterations must be a number") from None
    if inner.startswith("password="):
        password = inner[len("password="):]
    if not password:
        raise ScramConfigError(f"{mechanism}: no password given")
    check_iterations(iterations)
    return password, iterations


def describe(config: Mapping[str, str]) -> str:
    """`SCRAM-SHA-256=iterations=8192,SCRAM-SHA-512=iterations=4096` (what kafka-configs
    --describe shows: never the salt or keys); empty without credentials."""
    out = []
    for mech in MECHANISMS:
        raw = config.get(mech)
        if raw is None:
            continue
        try:
            out.append(f"{mech}=iterations={decode_credential(raw).iterations}")
        except ScramConfigError:
            out.append(f"{mech}=unreadable")
    return ",".join(out)
