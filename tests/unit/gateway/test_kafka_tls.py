"""TLS material for the Kafka listener: `riverbed keys tls-ca/tls-cert` files, the gateway's
SSLContext from Kafka's ssl.* keys, and the principal of a client certificate (Kafka's default
principal builder: the subject DN)."""
from __future__ import annotations

import ssl
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from riverbed.cli import main
from riverbed.tools import tls as certs
from services.gateway.kafka import tls


def test_ca_and_certificates(tmp_path, capsys):
    pub, priv = tmp_path / "tls", tmp_path / "private"
    assert main(["keys", "tls-ca", "--dir", str(pub), "--secret-dir", str(priv)]) == 0
    assert main(["keys", "tls-ca", "--dir", str(pub), "--secret-dir", str(priv)]) == 1  # kept
    assert main(["keys", "tls-cert", "gateway-1", "--san", "127.0.0.1", "--san", "DNS:gw1.example",
                 "--dir", str(priv), "--ca-dir", str(pub), "--ca-secret-dir", str(priv)]) == 0
    assert main(["keys", "tls-cert", "app1", "--client", "--dir", str(priv), "--ca-dir", str(pub),
                 "--ca-secret-dir", str(priv)]) == 0
    assert main(["keys", "tls-cert", "nosan", "--dir", str(priv), "--ca-dir", str(pub),
                 "--ca-secret-dir", str(priv)]) == 1              # a server needs its names
    assert "User:CN=app1,O=Riverbed" in capsys.readouterr().out
    for f in (priv / "ca.key", priv / "gateway-1.pem", priv / "app1.pem"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert certs.certificate_sans(priv / "gateway-1.pem") == ("DNS:gw1.example", "IP:127.0.0.1")
    ctx = tls.server_context(keystore_location=str(priv / "gateway-1.pem"),
                             truststore_location=str(pub / "ca.pem"), client_auth="required",
                             enabled_protocols=("TLSv1.3",))
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    leaf = x509.load_pem_x509_certificates((priv / "app1.pem").read_bytes())[0]
    der = leaf.public_bytes(serialization.Encoding.DER)
    assert tls.principal_of(der) == "User:CN=app1,O=Riverbed"
    assert tls.principal_of(None) == "User:ANONYMOUS"


def test_a_missing_keystore_stops_the_listener_at_start(tmp_path):
    with pytest.raises(OSError):
        tls.server_context(keystore_location=str(tmp_path / "none.pem"))
