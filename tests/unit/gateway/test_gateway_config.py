import pytest

from services.common.config import ConfigError, build
from services.gateway.config import GatewayConfig


def test_builds_from_kafka_keys():
    cfg = build(GatewayConfig, {"gateway.id": "3", "port": "9200", "request.timeout.ms": "500"})
    assert (cfg.gateway_id, cfg.port, cfg.request_timeout_ms) == (3, 9200, 500)
    assert cfg.endpoint == "tcp://127.0.0.1:9200" and cfg.metadata_max_age_ms == 300000


@pytest.mark.parametrize("props, key", [
    ({}, "gateway.id"),
    ({"gateway.id": "1", "port": "0"}, "port"),
    ({"gateway.id": "1", "request.timeout.ms": "-1"}, "request.timeout.ms"),
    ({"gateway.id": "1", "no.such.key": "1"}, "no.such.key"),
    ({"gateway.id": "x"}, "gateway.id"),
])
def test_bad_config_names_the_key(props, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build(GatewayConfig, props)


def test_authorization_keys_and_their_defaults():
    cfg = build(GatewayConfig, {"gateway.id": "1"})
    assert cfg.allow_everyone and cfg.super_user_principals == ()     # NONE: open as before
    cfg = build(GatewayConfig, {"gateway.id": "1", "security.protocol": "CURVE",
                                "super.users": "User:admin; User:ops"})
    assert not cfg.allow_everyone                                      # CURVE: closed by default
    assert cfg.super_user_principals == ("User:admin", "User:ops")
    cfg = build(GatewayConfig, {"gateway.id": "1", "allow.everyone.if.no.acl.found": "false"})
    assert not cfg.allow_everyone


@pytest.mark.parametrize("props, key", [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"allow.everyone.if.no.acl.found": "maybe"}, "allow.everyone.if.no.acl.found"),
    ({"super.users": "admin"}, "super.users"),
    ({"security.protocol": "CURVE", "insecure.principal.from.client.id": "true"},
     "insecure.principal.from.client.id"),
    ({"quota.window.num": "1"}, "quota.window.num"),
])
def test_bad_authorization_config_names_the_key(props, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build(GatewayConfig, {"gateway.id": "1", **props})
