"""Readiness beyond an open port: `riverbed fleet up` returns once every gateway lists every
gateway, so a Kafka client's first Metadata names all of them as brokers (a gateway registers
in ZooKeeper after its ports open, and each learns of the others through a watch). Without
this, a client that asked a gateway at once could see one broker only and wait for the other
(librdkafka's AdminClient waited 30 s for a broker-addressed request)."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any


def wait_gateways_know_each_other(records: Iterable[Any], timeout_s: float, *,
                                  alive: Callable[[], bool]) -> None:
    """Poll each gateway's METADATA (the SDK's, over ZeroMQ with this process's client
    settings) until it lists every gateway of `records` (the fleet's ProcessRecords). TimeoutError
    after `timeout_s`, naming the gateways still missing; returns early when `alive()` turns
    false (the caller's liveness check reports that)."""
    from riverbed import errors
    from riverbed._proto.v1 import metadata_pb2
    from riverbed.wire.apis import ApiKey
    from riverbed.wire.client import secure_channel_factory

    pending = {r.id: r.endpoint for r in records if r.role == "gateway"}
    want = set(pending)
    factory = secure_channel_factory()
    deadline = time.monotonic() + timeout_s
    while pending and alive():
        for gid, endpoint in list(pending.items()):
            try:
                with factory(endpoint) as ch:
                    resp = ch.call(ApiKey.METADATA, metadata_pb2.MetadataRequest(),
                                   timeout_ms=2000)
                if {g.gateway_id for g in resp.body.gateways} >= want:
                    del pending[gid]
            except errors.RiverbedError:
                pass                          # not answering yet: asked again
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"gateways {sorted(pending)} do not list every gateway "
                               f"{sorted(want)} after {timeout_s:.0f} s")
        if pending:
            time.sleep(0.05)
