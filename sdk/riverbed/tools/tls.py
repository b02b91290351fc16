"""TLS certificates for the gateways' Kafka listeners (SSL, SASL_SSL), made with `cryptography`:
a certificate authority, and certificates it signs for servers (with the names clients connect
to as subject alternative names) or for clients (mutual TLS: the principal is the subject DN).

    <dir>/ca.pem             the CA certificate: clients' ssl.ca.location, the gateways'
                             ssl.truststore.location (it verifies client certificates)
    <secret dir>/ca.key      the CA's private key (0600): needed only to sign more certificates
    <secret dir>/NAME.pem    a keystore: NAME's private key and its certificate chain (0600),
                             a gateway's ssl.keystore.location (Kafka's PEM keystore), or a
                             client's ssl.certificate.location + ssl.key.location

Keys are ECDSA P-256 (every TLS 1.2/1.3 client speaks it); certificates use SHA-256.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import pathlib

CA_CERT = "ca.pem"
CA_KEY = "ca.key"
DEFAULT_CA_DAYS = 3650
DEFAULT_DAYS = 825          # the longest validity browsers accept; clients here do not care


class TlsError(ValueError):
    """A TLS file that cannot be made or read (the message names the file)."""


def _write(path: pathlib.Path, data: bytes, mode: int) -> None:
    """Atomically, with `mode` from the start (a key is never readable by others)."""
    from riverbed.wire.security import _write_atomic
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, data.decode("ascii"), mode)           # PEM is ASCII


def _new_key():
    from cryptography.hazmat.primitives.asymmetric import ec
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str, organization: str = "Riverbed"):
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca(directory: str | os.PathLike, secret_dir: str | os.PathLike | None = None, *,
            common_name: str = "Riverbed CA", days: int = DEFAULT_CA_DAYS,
            overwrite: bool = False, key_name: str = CA_KEY,
            cert_name: str = CA_CERT) -> tuple[pathlib.Path, pathlib.Path]:
    """Write ca.pem (0644) and ca.key (0600); returns their paths. An existing CA is kept
    unless `overwrite` (replacing it invalidates every certificate it signed)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    cert_path = pathlib.Path(directory) / cert_name
    key_path = pathlib.Path(secret_dir or directory) / key_name
    if cert_path.exists() and key_path.exists() and not overwrite:
        raise TlsError(f"{cert_path} exists: keep it, or replace it (and every certificate it "
                       "signed) with --force")
    key = _new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    name = _name(common_name)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    key_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, _cert_pem(cert), 0o644)
    return cert_path, key_path


def _load_ca(ca_dir: str | os.PathLike, ca_secret_dir: str | os.PathLike | None,
             key_name: str = CA_KEY, cert_name: str = CA_CERT):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    cert_path = pathlib.Path(ca_dir) / cert_name
    key_path = pathlib.Path(ca_secret_dir or ca_dir) / key_name
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError) as e:
        raise TlsError(f"the CA in {cert_path} / {key_path}: {e} (make one with "
                       "`riverbed keys tls-ca`)") from None
    return cert, key


def parse_san(value: str):
    """`DNS:name`, `IP:1.2.3.4`, or a bare name / address -> an x509 GeneralName."""
    from cryptography import x509
    kind, sep, rest = value.partition(":")
    if sep and kind.upper() in ("DNS", "IP"):
        value = rest
        if kind.upper() == "DNS":
            return x509.DNSName(value)
    try:
        return x509.IPAddress(ipaddress.ip_address(value))
    except ValueError:
        if sep and kind.upper() == "IP":
            raise TlsError(f"{value!r} is not an IP address") from None
        return x509.DNSName(value)


def make_certificate(name: str, directory: str | os.PathLike, *, ca_dir: str | os.PathLike,
                     ca_secret_dir: str | os.PathLike | None = None, sans: tuple[str, ...] = (),
                     client: bool = False, common_name: str | None = None,
                     days: int = DEFAULT_DAYS, ca_key_name: str = CA_KEY,
                     ca_cert_name: str = CA_CERT) -> pathlib.Path:
    """Write <directory>/NAME.pem (0600): a new private key and its certificate signed by the
    CA, then the CA's certificate (the chain). A server certificate names `sans` (the hosts
    clients connect to: DNS names or IP addresses); a client certificate (`client`) is for
    mutual TLS, its principal `User:CN=<common name>,O=Riverbed`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID
    if not name or name != pathlib.Path(name).name or name.startswith("."):
        raise TlsError(f"{name!r}: expected a plain name")
    if not client and not sans:
        raise TlsError("a server certificate needs the names clients connect to (--san)")
    ca_cert, ca_key = _load_ca(ca_dir, ca_secret_dir, ca_key_name, ca_cert_name)
    key = _new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    b = (x509.CertificateBuilder().subject_name(_name(common_name or name))
         .issuer_name(ca_cert.subject).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
         .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                        critical=False))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName([parse_san(s) for s in sans]),
                            critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    path = pathlib.Path(directory) / f"{name}.pem"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write(path, _key_pem(key) + _cert_pem(cert) + _cert_pem(ca_cert), 0o600)
    return path


def certificate_sans(path: str | os.PathLike) -> tuple[str, ...]:
    """The subject alternative names of the first certificate in a PEM file (DNS:..., IP:...),
    empty when it has none or cannot be read."""
    from cryptography import x509
    try:
        cert = x509.load_pem_x509_certificate(pathlib.Path(path).read_bytes())
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return ()
    return tuple([f"DNS:{n}" for n in ext.get_values_for_type(x509.DNSName)]
                 + [f"IP:{a}" for a in ext.get_values_for_type(x509.IPAddress)])
