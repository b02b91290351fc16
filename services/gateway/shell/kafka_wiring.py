"""The gateway's Kafka listeners (services/gateway/kafka/): started beside the RpcServer on the
gateway's event loop with the same handlers and guard, their TLS and SASL settings, Kafka's
Describe/AlterUserScramCredentials, and the brokers Kafka clients see (the live gateways'
advertised listeners). A mixin of services.gateway.shell.gateway.Gateway, split out of it along
this seam; it never imports that module.
"""
from __future__ import annotations

import asyncio

from riverbed import errors
from riverbed.coordinator.offsets_topic import OFFSETS_TOPIC
from services.gateway.kafka.brokers import KafkaBroker

E = errors.ErrorCode


class KafkaListeners:
    """The Kafka listeners of a Gateway (mixed into it; uses its config, guard, handlers and
    ZooKeeper session)."""

    async def _start_kafka_listeners(self) -> None:
        from services.gateway.kafka.listener import KafkaListener   # kio only when used
        cfg = self.config
        bind, advertised = cfg.kafka_listeners
        handlers = self._handlers()
        for b in bind:
            adv = next(a for a in advertised if a.name == b.name)
            listener = KafkaListener(
                b, adv, gateway_id=cfg.gateway_id, handlers=handlers, brokers=self.kafka_brokers,
                socket_request_max_bytes=cfg.socket_request_max_bytes,
                connections_max_idle_ms=cfg.connections_max_idle_ms,
                queued_max_requests=cfg.queued_max_requests, name=self.name,
                security=self._kafka_security(b.security_protocol),
                offsets_partitions=lambda: self.cache.partition_count(OFFSETS_TOPIC))
            self.kafka_listeners.append(listener)
            await listener.start()     # a port in use: the gateway does not start (_close)

    def _kafka_security(self, protocol: str):
        """A Kafka listener's TLS context and SASL mechanisms (none for PLAINTEXT). The PEM
        files are read here: a missing one stops the gateway at start with the reason."""
        from services.gateway.kafka import listeners as kl
        from services.gateway.kafka import tls
        from services.gateway.kafka.listener import ListenerSecurity
        cfg = self.config
        ctx = None
        if protocol in kl.TLS_PROTOCOLS:
            ctx = tls.server_context(
                keystore_location=cfg.ssl_keystore_location, key_password=cfg.ssl_key_password,
                truststore_location=cfg.ssl_truststore_location, client_auth=cfg.ssl_client_auth,
                enabled_protocols=kl.check_tls_versions(cfg.ssl_enabled_protocols))
        mechanisms = cfg.sasl_mechanisms if protocol in kl.SASL_PROTOCOLS else ()
        return ListenerSecurity(ssl_context=ctx, sasl_mechanisms=mechanisms,
                                credentials=self.guard.scram_credential,
                                sasl_max_receive_size=cfg.sasl_server_max_receive_size,
                                scram_admin=self._scram_admin)

    async def _scram_admin(self, kreq, principal: str, host: str):
        """Kafka's Describe/AlterUserScramCredentials: DESCRIBE / ALTER on the cluster (as
        Kafka), answered from the credentials this gateway holds; alterations written to the
        users' znodes as `riverbed configs` writes them (every gateway sees them within moments)."""
        from services.common.acl import store
        from services.common.acl.authorizer import CLUSTER_NAME, Operation, ResourceType
        from services.gateway.kafka import scram_admin as sa
        op = Operation.DESCRIBE if kreq.api_key == sa.DESCRIBE_USER_SCRAM_CREDENTIALS \
            else Operation.ALTER
        ok = self.guard.authorizer.authorize(principal, host, op, ResourceType.CLUSTER,
                                             CLUSTER_NAME)
        if op is Operation.DESCRIBE:
            return sa.describe(kreq.api_version, kreq.body, self.guard.scram, ok)
        plan = sa.plan_alter(kreq.body, self.guard.scram, ok)
        failed = {}
        for user, (set_, delete) in plan.writes.items():
            try:
                await asyncio.to_thread(store.alter_config, self._zk, "users", user,
                                        set_=set_, delete=delete)
            except Exception as e:  # noqa: BLE001 - ZooKeeper refused or is away: that user's
                failed[user] = (E.Value("UNKNOWN_SERVER_ERROR"), f"not written: {e}")
        self.log.info("%s altered the SCRAM credentials of %s", principal,
                      sorted(u for u in plan.writes if u not in failed))
        return sa.alter_response(kreq.api_version, plan, failed)

    def kafka_brokers(self, listener_name: str) -> tuple[KafkaBroker, ...]:
        """The live gateways advertising `listener_name`, by id (the brokers Kafka clients see)."""
        out = []
        for gid, endpoints in sorted(self._kafka_endpoints.items()):
            for name, host, port in endpoints:
                if name == listener_name:
                    out.append(KafkaBroker(gid, host, port))
        return tuple(out)
