"""The gateway's config: Kafka-style keys (docs/contracts.md "Gateway").

Field names are the keys in snake_case (`request.timeout.ms` <-> `request_timeout_ms`), built with
`services.common.config.build` from defaults, a .properties file, then `--override` pairs.
"""
from __future__ import annotations

from dataclasses import dataclass

from services.common.config import ConfigError
from services.gateway.kafka import listeners as kafka_listeners


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    gateway_id: int = -1
    host_name: str = "127.0.0.1"
    port: int = 9092
    # Prometheus text endpoint on host.name (http://host:port/metrics): 0 picks a free port, -1 none.
    metrics_port: int = 0
    zookeeper_connect: str = "127.0.0.1:2181/riverbed"
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    # Largest request the ROUTER accepts (ZMQ_MAXMSGSIZE); Kafka's default, 100 MiB.
    socket_request_max_bytes: int = 104857600
    # Largest record batch; the gateway never decodes batches, the storage node enforces it.
    message_max_bytes: int = 1000012
    # How long a forwarded request may wait for its storage node or the controller when the
    # client's header does not say (Kafka's request.timeout.ms).
    request_timeout_ms: int = 30000
    # Ask the controller for a full snapshot when none arrived for this long (Kafka's
    # metadata.max.age.ms); the controller also publishes one every second.
    metadata_max_age_ms: int = 300000
    # Requests being handled at once at most (Kafka's queued.max.requests): past it the ROUTER
    # stops reading and libzmq pushes back on clients.
    queued_max_requests: int = 500
    # -- the Kafka wire protocol (services/gateway/kafka, docs/kafka-protocol.md) ----------
    # Kafka's keys. Empty: no Kafka listener (the ZeroMQ port above serves the SDK either way).
    # NAME://HOST:PORT, comma-separated; an empty HOST binds every interface, PORT 0 a free port.
    listeners: str = ""
    # What Metadata tells Kafka clients to connect to (empty: `listeners`, an empty host
    # replaced by host.name). Each entry must name a listener.
    advertised_listeners: str = ""
    # Listener name -> security protocol (Kafka's default map): PLAINTEXT, SSL, SASL_PLAINTEXT,
    # SASL_SSL (docs/kafka-protocol.md, Security).
    listener_security_protocol_map: str = kafka_listeners.KAFKA_DEFAULT_PROTOCOL_MAP
    # Kafka's default, 10 minutes: a Kafka connection with nothing read and nothing in flight
    # for this long is closed (clients reconnect when they need to).
    connections_max_idle_ms: int = 600000
    # SASL listeners (SASL_PLAINTEXT, SASL_SSL): Kafka's key. SCRAM-SHA-256, SCRAM-SHA-512
    # (credentials in ZooKeeper: `riverbed configs --entity-type users ... SCRAM-SHA-512=[...]`)
    # and PLAIN (checked against the same SCRAM credentials; off unless listed: it sends the
    # password itself, so only over SASL_SSL). Kafka's default is GSSAPI, not served here.
    sasl_enabled_mechanisms: str = "SCRAM-SHA-256,SCRAM-SHA-512"
    # Kafka's key and default: the largest frame read from a client before it has authenticated
    # (a SASL token is small; an unauthenticated peer never makes the gateway buffer 100 MiB).
    sasl_server_max_receive_size: int = 524288
    # TLS (SSL, SASL_SSL listeners): Kafka's keys, PEM files (Kafka 2.7+'s ssl.keystore.type=PEM).
    # The keystore is one PEM file holding the private key and the certificate chain
    # (`riverbed keys tls-cert`); ssl.key.password decrypts an encrypted key.
    ssl_keystore_type: str = "PEM"
    # The PEM keystore: the listener's private key and certificate chain in one file
    # (`riverbed keys tls-cert` writes one). Required by SSL and SASL_SSL listeners.
    ssl_keystore_location: str = ""
    # Decrypts an encrypted private key in the keystore (empty: the key is not encrypted).
    ssl_key_password: str = ""
    # CA certificates that sign client certificates (needed when ssl.client.auth asks for them).
    ssl_truststore_type: str = "PEM"
    # The PEM file of those CA certificates (empty: no client certificate can be verified).
    ssl_truststore_location: str = ""
    # none | requested | required (Kafka's). With a client certificate on an SSL listener the
    # principal is User:<its subject DN> (Kafka's default principal builder), e.g.
    # User:CN=app1,O=example; on SASL_SSL the SASL user is the principal.
    ssl_client_auth: str = "none"
    # The TLS versions the listeners accept, comma-separated (Kafka's default).
    ssl_enabled_protocols: str = "TLSv1.2,TLSv1.3"
    # -- authorization (ACLs in ZooKeeper, services/common/acl) ---------------------------
    # NONE | CURVE. Sets the default of allow.everyone.if.no.acl.found (CURVE sockets
    # themselves are configured by the RPC layer with the same key).
    security_protocol: str = "NONE"
    # Kafka's key. Empty: true under security.protocol=NONE (today's open fleets keep working),
    # false under CURVE (a resource with no ACL is closed to everyone but super users).
    allow_everyone_if_no_acl_found: str = ""
    # Kafka's key: principals allowed everything, ';'-separated (User:admin;User:ops).
    super_users: str = ""
    # FOR TESTS OF ACLS WITHOUT KEYS: take the principal from a client id of the form
    # User:<name>. Anyone can claim any client id, so this is refused unless
    # security.protocol=NONE (where there is no authentication to weaken anyway).
    insecure_principal_from_client_id: bool = False
    # -- quotas (KIP-13/KIP-124; values per user / client id in ZooKeeper /config/...) ----
    quota_window_num: int = 11             # Kafka's default: 11 samples ...
    quota_window_size_seconds: int = 1     # ... of 1 s each

    def __post_init__(self) -> None:
        if self.security_protocol not in ("NONE", "CURVE"):
            raise ConfigError(f"security.protocol={self.security_protocol}: expected NONE or CURVE")
        if self.allow_everyone_if_no_acl_found.strip().lower() not in ("", "true", "false"):
            raise ConfigError("allow.everyone.if.no.acl.found: expected true, false or empty")
        if self.insecure_principal_from_client_id and self.security_protocol != "NONE":
            raise ConfigError("insecure.principal.from.client.id=true is only allowed with "
                              "security.protocol=NONE (principals come from CURVE keys)")
        for p in self.super_user_principals:
            if ":" not in p:
                raise ConfigError(f"super.users: {p!r} is not a principal (User:<name>)")
        if self.quota_window_num < 2 or self.quota_window_size_seconds <= 0:
            raise ConfigError("quota.window.num must be >= 2 and quota.window.size.seconds > 0")
        if not -1 <= self.metrics_port < 65536:
            raise ConfigError(f"metrics.port={self.metrics_port}: must be -1 (none), 0 (any "
                              "free port) or a TCP port")
        if self.gateway_id < 0:
            raise ConfigError("gateway.id must be set to a non-negative integer")
        if not (0 < self.port < 65536):
            raise ConfigError(f"port={self.port}: must be in 1..65535")
        if not self.host_name.strip():
            raise ConfigError("host.name must not be empty")
        if not self.zookeeper_connect.strip():
            raise ConfigError("zookeeper.connect must not be empty")
        for key, value in (("zookeeper.session.timeout.ms", self.zookeeper_session_timeout_ms),
                           ("zookeeper.connection.timeout.ms", self.zookeeper_connection_timeout_ms),
                           ("socket.request.max.bytes", self.socket_request_max_bytes),
                           ("message.max.bytes", self.message_max_bytes),
                           ("request.timeout.ms", self.request_timeout_ms),
                           ("metadata.max.age.ms", self.metadata_max_age_ms),
                           ("queued.max.requests", self.queued_max_requests),
                           ("connections.max.idle.ms", self.connections_max_idle_ms),
                           ("sasl.server.max.receive.size", self.sasl_server_max_receive_size)):
            if value <= 0:
                raise ConfigError(f"{key}={value}: must be positive")

        try:
            bind, _ = self.kafka_listeners
            kafka_listeners.check_security(
                bind, sasl_enabled_mechanisms=self.sasl_enabled_mechanisms,
                ssl_keystore_type=self.ssl_keystore_type,
                ssl_keystore_location=self.ssl_keystore_location,
                ssl_truststore_type=self.ssl_truststore_type,
                ssl_truststore_location=self.ssl_truststore_location,
                ssl_client_auth=self.ssl_client_auth,
                ssl_enabled_protocols=self.ssl_enabled_protocols)
        except kafka_listeners.ListenerError as e:
            raise ConfigError(str(e)) from None

    @property
    def kafka_listeners(self) -> tuple[tuple[kafka_listeners.Listener, ...],
                                       tuple[kafka_listeners.Listener, ...]]:
        """(listeners to bind, listeners to advertise), parsed from Kafka's three keys."""
        return kafka_listeners.resolve(self.listeners, self.advertised_listeners,
                                       self.listener_security_protocol_map, self.host_name)

    @property
    def sasl_mechanisms(self) -> tuple[str, ...]:
        return kafka_listeners.check_mechanisms(self.sasl_enabled_mechanisms)

    @property
    def super_user_principals(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.super_users.split(";") if p.strip())

    @property
    def allow_everyone(self) -> bool:
        v = self.allow_everyone_if_no_acl_found.strip().lower()
        return self.security_protocol == "NONE" if not v else v == "true"

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host_name}:{self.port}"
