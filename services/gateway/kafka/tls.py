"""TLS for the Kafka listener (SSL and SASL_SSL): the server's SSLContext from Kafka's ssl.* keys
(PEM files, read here: a shell helper) and the principal of a client certificate.

    ssl.keystore.location    PEM: the private key and the certificate chain (Kafka 2.7+'s PEM
                             keystore; `riverbed keys tls-cert` writes one)
    ssl.key.password         decrypts an encrypted private key
    ssl.truststore.location  PEM: the CAs client certificates must chain to (ssl.client.auth)
    ssl.client.auth          none | requested | required
    ssl.enabled.protocols    TLSv1.2,TLSv1.3

The principal of a client certificate is Kafka's default: `User:` + the subject's distinguished
name in RFC 2253/4514 form, most specific part first (`User:CN=app1,OU=ops,O=example`).
"""
from __future__ import annotations

import ssl

ANONYMOUS = "User:ANONYMOUS"
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def server_context(*, keystore_location: str, key_password: str = "",
                   truststore_location: str = "", client_auth: str = "none",
                   enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")) -> ssl.SSLContext:
    """OSError / ssl.SSLError when a file is missing or unreadable (the gateway does not start)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in enabled_protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ctx.load_cert_chain(keystore_location, password=key_password or None)
    if truststore_location:
        ctx.load_verify_locations(cafile=truststore_location)
    ctx.verify_mode = _VERIFY[client_auth]
    return ctx


def principal_of(der: bytes | None) -> str:
    """`User:<subject DN>` of a DER client certificate; User:ANONYMOUS without one."""
    if not der:
        return ANONYMOUS
    from cryptography import x509
    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
