"""Who may do what in a local fleet: the operator's ACLs, the Kafka clients' SCRAM user, the
gateways' certificate names and the SDK's client settings.

A mixin of deploy.fleet.Fleet, split out of it along this seam; it never imports deploy.fleet.
The chroot is created with the fleet's ZooKeeper ACL (`_ensure_chroot`). With CURVE the
fleet's own client key gets every operation (`_grant_operator`) before any
gateway starts; the SASL_SSL listeners' SCRAM user and D/security/kafka-client.conf are written
by `_ensure_kafka_user`. The keys and files themselves are deploy/fleet_security.py's.
"""
from __future__ import annotations

from deploy.fleet_roles import SESSION_TIMEOUT_MS
from deploy.fleet_security import (CLIENT_GRANTS, CLIENT_KEY_NAME, KAFKA_CLIENT_USER,
                                   KAFKA_SASL_MECHANISMS)


class FleetAccess:
    """ACLs, the SCRAM user, certificate names, client settings (mixed into Fleet)."""

    def _ensure_chroot(self) -> None:
        from services.common import zk as zkmod  # deploy may use services; the SDK may not
        # with CURVE the chroot is created with the fleet's ACL (zookeeper.set.acl)
        client = zkmod.connect(self.zk_connect, timeout_s=self.ready_timeout_s,
                               session_timeout_ms=SESSION_TIMEOUT_MS,
                               auth=self.security.zk_auth())
        zkmod.close(client)

    def _grant_operator(self) -> None:
        """With CURVE, ACLs are enforced and nothing is open by default
        (allow.everyone.if.no.acl.found=false): the fleet's own client key — the operator's,
        which `make run`, the tools and the tests use — gets every operation on every topic,
        group, transactional id and the cluster, written before any gateway starts. It is not
        a super user: ClusterAction stays with the services' keys. Other keys get what
        `riverbed acls` gives them.

        The gateways' PLAINTEXT Kafka listeners (bound to the fleet's host) authenticate no
        one: their clients are User:ANONYMOUS. Where that host is a loopback address, as in
        Kafka's quickstart, User:ANONYMOUS connecting from that address gets the same grants,
        so kcat and other Kafka clients on this machine work; from elsewhere it gets
        nothing."""
        if not self.security.curve:
            return
        from services.common import zk as zkmod
        from services.common.acl import store
        from services.common.acl.authorizer import (WILDCARD, AclEntry, Operation, Permission,
                                                    ResourcePattern, ResourceType)
        client = zkmod.connect(self.zk_connect, timeout_s=self.ready_timeout_s,
                               session_timeout_ms=SESSION_TIMEOUT_MS, create_chroot=False,
                               auth=self.security.zk_auth())
        try:
            entries = [AclEntry(f"User:{CLIENT_KEY_NAME}", WILDCARD, Operation.ALL, Permission.ALLOW)]
            if self.kafka_sasl_ssl_bootstrap_servers:
                entries.append(AclEntry(f"User:{KAFKA_CLIENT_USER}", WILDCARD, Operation.ALL,
                                        Permission.ALLOW))
            if self.host.startswith("127.") and any(r.extra.get("kafka_listeners")
                                                    for r in self._records.values()):
                entries.append(AclEntry("User:ANONYMOUS", self.host, Operation.ALL,
                                        Permission.ALLOW))
            for rtype, name in CLIENT_GRANTS:      # the Ansible roles grant the same
                store.add_acls(client, ResourcePattern(ResourceType(rtype), name), entries)
        finally:
            zkmod.close(client)

    def _kafka_tls_names(self) -> dict[str, list[str]]:
        """Each gateway with a SASL_SSL listener -> the names its certificate holds: the host
        it advertises (and localhost with a loopback address)."""
        out = {}
        for r in self._records.values():
            if r.role == "gateway" and "kafka.sasl_ssl.port" in r.extra.get("ports", {}):
                names = [self.host] + (["DNS:localhost"] if self.host.startswith("127.") else [])
                out[r.name] = names
        return out

    def _ensure_kafka_user(self) -> None:
        """The SCRAM user Kafka clients of the SASL_SSL listeners log in as (KAFKA_CLIENT_USER,
        with SCRAM-SHA-256 and SCRAM-SHA-512 credentials of one password, kept across `up`s),
        and D/security/kafka-client.conf naming it. Written in ZooKeeper before any gateway
        starts (`riverbed configs` writes the same znode)."""
        bootstrap = self.kafka_sasl_ssl_bootstrap_servers
        if not bootstrap:
            return
        import secrets as _secrets

        from services.common import zk as zkmod
        from services.common.acl import layout, scram, store
        password = self.security.kafka_client_password()
        client = zkmod.connect(self.zk_connect, timeout_s=self.ready_timeout_s,
                               session_timeout_ms=SESSION_TIMEOUT_MS, create_chroot=False,
                               auth=self.security.zk_auth())
        try:
            try:
                current = layout.decode_config(
                    client.get(layout.config_path("users", KAFKA_CLIENT_USER))[0])
            except Exception:  # noqa: BLE001 - none yet (or unreadable): written below
                current = {}
            set_ = {}
            for mech in KAFKA_SASL_MECHANISMS:
                try:
                    ok = scram.verify_password(mech, scram.decode_credential(current[mech]),
                                               password)
                except (KeyError, scram.ScramConfigError):
                    ok = False
                if not ok:
                    set_[mech] = scram.encode_credential(scram.make_credential(
                        mech, password, _secrets.token_bytes(scram.SALT_BYTES)))
            if set_:
                store.alter_config(client, "users", KAFKA_CLIENT_USER, set_=set_)
        finally:
            zkmod.close(client)
        self.security.write_kafka_client_conf(bootstrap, password)

    @property
    def zk_auth(self):
        """The fleet's ZooKeeper credentials (services.common.zk.ZkAuth): pass as `auth=` to
        zk.connect to change znodes of a CURVE fleet (anonymous sessions may only read)."""
        return self.security.zk_auth()

    def client_config(self) -> dict[str, str]:
        """What an SDK client of this fleet needs, as keyword arguments (security_protocol,
        curve_secret_key_file, curve_server_keys_dir)."""
        return {k.replace(".", "_"): v for k, v in self.security.client_properties().items()}
