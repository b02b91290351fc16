"""The gateway's config: Kafka-style keys (docs/contracts.md "Gateway").

Field names are the keys in snake_case (`request.timeout.ms` <-> `request_timeout_ms`), built with
`services.common.config.build` from defaults, a .properties file, then `--override` pairs.
"""
from __future__ import annotations

from dataclasses import dataclass

from services.common.config import ConfigError


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

    def __post_init__(self) -> None:
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
                           ("queued.max.requests", self.queued_max_requests)):
            if value <= 0:
                raise ConfigError(f"{key}={value}: must be positive")

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host_name}:{self.port}"
