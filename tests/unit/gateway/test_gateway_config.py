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
