"""Kafka's listener configs, parsed (pure; imported by the gateway's config).

    listeners=PLAINTEXT://127.0.0.1:9092            name://host:port, comma-separated; an empty
                                                     host binds every interface, port 0 a free port
    advertised.listeners=PLAINTEXT://gw1.example:9092   what Metadata tells clients (empty: the
                                                     listeners, with host.name for an empty host)
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT   listener name -> security protocol

As in Kafka, a listener's name is its security protocol unless the map says otherwise, names are
unique, and an advertised listener must name a listener. Only PLAINTEXT is served in this phase:
SSL, SASL_PLAINTEXT and SASL_SSL listeners are refused with a clear config error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

KAFKA_DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = ("PLAINTEXT",)
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
    they do not fit together or use a security protocol not served yet. An advertised listener
    with port 0 stays 0 here: the shell fills in the port it bound."""
    pmap = parse_protocol_map(protocol_map)
    bind = parse_listeners(listeners, pmap)
    for li in bind:
        if li.security_protocol not in SERVED_PROTOCOLS:
            raise ListenerError(f"listeners: {li} uses {li.security_protocol}, which the Kafka "
                                f"listener does not serve yet (only {', '.join(SERVED_PROTOCOLS)})")
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
