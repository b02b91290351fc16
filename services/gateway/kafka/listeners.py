"""Kafka's listener configs, parsed (pure; imported by the gateway's config).

    listeners=PLAINTEXT://127.0.0.1:9092            name://host:port, comma-separated; an empty
                                                     host binds every interface, port 0 a free port
    advertised.listeners=PLAINTEXT://gw1.example:9092   what Metadata tells clients (empty: the
                                                     listeners, with host.name for an empty host)
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT   listener name -> security protocol

As in Kafka, a listener's name is its security protocol unless the map says otherwise, names are
unique, and an advertised listener must name a listener. Every security protocol is served:
PLAINTEXT, SSL (TLS; with ssl.client.auth the principal is the client certificate's DN),
SASL_PLAINTEXT and SASL_SSL (sasl.enabled.mechanisms: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN).
`check_security` checks the SASL and SSL keys those listeners need.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

KAFKA_DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = SECURITY_PROTOCOLS
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
SSL_CLIENT_AUTH = ("none", "requested", "required")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]*\]|[^:/\[\]]*):([0-9]+)$")


class ListenerError(ValueError):
    """A listener config that cannot be used (the message names the key and the value)."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str              # e.g. PLAINTEXT, or a custom name mapped to a protocol
    host: str              # "" = every interface (bind) / host.name (advertised)
    port: int              # 0 = any free port (bind only)
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_protocol_map(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in SECURITY_PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                                f"with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        if name in out:
            raise ListenerError(f"listener.security.protocol.map names {name} twice")
        out[name] = proto
    return out


def parse_listeners(value: str, protocol_map: dict[str, str] | None, key: str = "listeners",
                    allow_port_zero: bool = True) -> tuple[Listener, ...]:
    """`protocol_map` None: names are not resolved to protocols (another gateway's advertised
    endpoints, read from ZooKeeper)."""
    out: list[Listener] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None:
            raise ListenerError(f"{key}: {item!r} is not NAME://HOST:PORT")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if not (0 <= port < 65536) or (port == 0 and not allow_port_zero):
            raise ListenerError(f"{key}: {item!r} has no usable port")
        if protocol_map is None:
            proto = ""
        else:
            proto = protocol_map.get(name, name if name in SECURITY_PROTOCOLS else "")
        if not proto and protocol_map is not None:
            raise ListenerError(f"{key}: listener {name} has no security protocol in "
                                "listener.security.protocol.map")
        if any(li.name == name for li in out):
            raise ListenerError(f"{key}: listener {name} is named twice")
        out.append(Listener(name, host, port, proto))
    return tuple(out)


def resolve(listeners: str, advertised_listeners: str, protocol_map: str, host_name: str
            ) -> tuple[tuple[Listener, ...], tuple[Listener, ...]]:
    """(listeners to bind, listeners to advertise) from the three configs; ListenerError when
    they do not fit together. An advertised listener
    with port 0 stays 0 here: the shell fills in the port it bound."""
    pmap = parse_protocol_map(protocol_map)
    bind = parse_listeners(listeners, pmap)
    if advertised_listeners.strip():
        adv = parse_listeners(advertised_listeners, pmap, key="advertised.listeners",
                              allow_port_zero=False)
        names = {li.name for li in bind}
        for li in adv:
            if li.name not in names:
                raise ListenerError(f"advertised.listeners: {li.name} is not in listeners")
        given = {li.name for li in adv}
        adv = adv + tuple(li for li in bind if li.name not in given)
    else:
        adv = bind
    adv = tuple(Listener(li.name, li.host or host_name, li.port, li.security_protocol)
                for li in adv)
    return bind, adv


def check_mechanisms(value: str) -> tuple[str, ...]:
    """`sasl.enabled.mechanisms` -> the mechanisms, in order (ListenerError for one not served:
    GSSAPI and OAUTHBEARER are not)."""
    out = tuple(dict.fromkeys(m.strip().upper() for m in value.split(",") if m.strip()))
    for m in out:
        if m not in SASL_MECHANISMS:
            raise ListenerError(f"sasl.enabled.mechanisms: {m} is not served (only "
                                f"{', '.join(SASL_MECHANISMS)})")
    if not out:
        raise ListenerError("sasl.enabled.mechanisms must name at least one mechanism")
    return out


def check_tls_versions(value: str) -> tuple[str, ...]:
    """`ssl.enabled.protocols` -> the TLS versions (TLSv1.2, TLSv1.3)."""
    out = tuple(v.strip() for v in value.split(",") if v.strip())
    if not out or any(v not in TLS_VERSIONS for v in out):
        raise ListenerError(f"ssl.enabled.protocols={value!r}: expected some of "
                            f"{', '.join(TLS_VERSIONS)}")
    return out


def check_security(bind: tuple[Listener, ...], *, sasl_enabled_mechanisms: str,
                   ssl_keystore_type: str, ssl_keystore_location: str,
                   ssl_truststore_type: str, ssl_truststore_location: str,
                   ssl_client_auth: str, ssl_enabled_protocols: str) -> None:
    """ListenerError when the listeners' security protocols lack the keys they need. Kafka's
    names; keystores and truststores are PEM files (Kafka 2.7+'s ssl.keystore.type=PEM)."""
    protos = {li.security_protocol for li in bind}
    if protos & set(SASL_PROTOCOLS):
        check_mechanisms(sasl_enabled_mechanisms)
    if ssl_client_auth not in SSL_CLIENT_AUTH:
        raise ListenerError(f"ssl.client.auth={ssl_client_auth!r}: expected one of "
                            f"{', '.join(SSL_CLIENT_AUTH)}")
    if not protos & set(TLS_PROTOCOLS):
        return
    check_tls_versions(ssl_enabled_protocols)
    for key, value in (("ssl.keystore.type", ssl_keystore_type),
                       ("ssl.truststore.type", ssl_truststore_type)):
        if value.upper() != "PEM":
            raise ListenerError(f"{key}={value}: only PEM files are read (a JKS or PKCS12 "
                                "store converts with keytool/openssl)")
    if not ssl_keystore_location.strip():
        raise ListenerError("an SSL or SASL_SSL listener needs ssl.keystore.location (a PEM file "
                            "with the private key and the certificate chain)")
    if ssl_client_auth != "none" and not ssl_truststore_location.strip():
        raise ListenerError(f"ssl.client.auth={ssl_client_auth} needs ssl.truststore.location "
                            "(the CA certificates that sign client certificates, PEM)")
