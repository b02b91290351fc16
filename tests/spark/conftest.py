"""Fixtures for the Spark tests (`make test-spark`): one fleet and one local SparkSession for
the whole run (a SparkSession costs seconds and a JVM; two cores are shared).

- `fleet`: ZooKeeper, a controller, three storage nodes, an offset manager, a transaction
  coordinator and a gateway (no group coordinator: the source and sink join no group; the sink's
  exactly-once mode commits transactions and its batch markers' offsets), on free ports of
  127.0.0.1, retention checked every 500 ms; stopped by PID at the end.
- `bootstrap`: the gateway, as a list for the SDK; `bootstrap_option`: as the
  `bootstrap.servers` option.
- `spark`: local[2] with the `riverbed` format registered; stopped (and its JVM ended) at the
  end, pass or fail.

Every test here is marked `spark` and `integration`.
"""
from __future__ import annotations

import pathlib

import pytest

from deploy.fleet import Fleet, free_base_port
from spark_helpers import start_session, stop_session


def pytest_collection_modifyitems(config, items):
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("spark-fleet"), free_base_port(), storage_nodes=3,
              controllers=1, gateways=1, counts={"group_coordinator": 0, "offset_manager": 1,
                                                 "transaction_coordinator": 1},
              # retention runs often: a test has old segments deleted
              config_overrides={"storage_node": {"log.retention.check.interval.ms": "500"}})
    with f:
        f.up()
        yield f


@pytest.fixture(scope="session")
def bootstrap(fleet):
    return [fleet.gateway_endpoint]


@pytest.fixture(scope="session")
def bootstrap_option(fleet):
    return fleet.gateway_endpoint


@pytest.fixture(scope="session")
def spark(tmp_path_factory, fleet):
    # after the fleet: its up() exports the client's CURVE settings (RIVERBED_*), which the
    # JVM and its Python workers inherit
    session = start_session(tmp_path_factory.mktemp("spark"))
    try:
        yield session
    finally:
        stop_session(session)
