"""The gateway's authorization and quota shell: the current ACLs and quota configs (watched in
ZooKeeper by services/common/acl/store.py), the caller's principal, and a wrapper around every
client handler that holds throttled clients and stamps `throttle_time_ms`.

Principal: `req.principal` (set by the RpcServer from the CURVE User-Id), or, only with
`insecure.principal.from.client.id=true` (refused unless security.protocol=NONE), a client id
of the form `User:<name>` — for testing ACLs on a fleet without keys.

Quotas (Kafka's way, KIP-13/KIP-124/KIP-219): after a request is handled its bytes (PRODUCE:
the record-batch frames in; FETCH: the frames out) and its gateway time (handler time minus the
time waiting on storage nodes) are recorded against the client's quota entity; the response
carries the throttle time, and the same client's (principal, client id) next request is held
until that time has passed. Nothing is refused or dropped.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from riverbed._proto.v1 import header_pb2
from riverbed.wire.framing import frame_nbytes
from services.common import rpc
from services.common.acl import scram, store
from services.common.acl.authorizer import ANONYMOUS, Authorizer, Operation, ResourceType
from services.common.acl.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaWindow,
    user_name,
)
from services.gateway.config import GatewayConfig
from services.gateway.core.authorization import May, MayAny

ApiKey = header_pb2.ApiKey
log = logging.getLogger(__name__)


def _allow_all(op: Operation, rtype: ResourceType, name: str) -> bool:
    return True


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Guard:
    def __init__(self, config: GatewayConfig):
        self.config = config
        self.authorizer = Authorizer(super_users=config.super_user_principals,
                                     allow_everyone_if_no_acl_found=config.allow_everyone)
        window = QuotaWindow(config.quota_window_num, config.quota_window_size_seconds * 1000)
        self.produce = ClientQuotas(PRODUCER_BYTE_RATE, window)
        self.fetch = ClientQuotas(CONSUMER_BYTE_RATE, window)
        self.request = ClientQuotas(REQUEST_PERCENTAGE, window)
        self._held_until: dict[tuple[str, str], float] = {}
        # SCRAM credentials (user -> mechanism -> credential) of the Kafka listener's SASL
        # users: the same /config/users znodes as the user quotas, so the same watch
        self.scram: dict[str, dict[str, scram.ScramCredential]] = {}
        self._watches: list = []
        # metrics
        self.denied: dict[tuple[str, str], int] = {}       # (api, resource type) -> count
        self.throttle_ms: dict[str, float] = {}            # quota type -> total ms throttled
        self.throttled: dict[str, int] = {}                # quota type -> throttled responses

    # -- ZooKeeper (blocking: call from a thread) -----------------------------------------------
    def watch(self, zk) -> None:
        self._watches.append(store.watch_acls(zk, self._set_acls, name="gateway-acls"))
        self._watches.append(store.watch_configs(zk, self._set_quota_configs,
                                                 name="gateway-quotas"))

    def stop(self) -> None:
        for w in self._watches:
            w.stop()
        self._watches.clear()

    def _set_acls(self, snapshot: store.AclSnapshot) -> None:
        # One reference swap: handlers on the loop see the old or the new snapshot, whole.
        self.authorizer = Authorizer(snapshot, super_users=self.config.super_user_principals,
                                     allow_everyone_if_no_acl_found=self.config.allow_everyone)
        log.info("ACLs loaded: %d resource patterns", len(snapshot))

    def _set_quota_configs(self, snapshot: store.ConfigSnapshot) -> None:
        for q in (self.produce, self.fetch, self.request):
            q.set_configs(snapshot)
        self.scram = scram.credentials_of(snapshot)       # one reference swap, as for ACLs
        log.info("quota configs loaded: %d entities, SCRAM credentials of %d users",
                 len(snapshot), len(self.scram))

    def scram_credential(self, user: str, mechanism: str) -> scram.ScramCredential | None:
        """The Kafka listener's SASL credential lookup."""
        return self.scram.get(user, {}).get(mechanism)

    # -- principals and decisions -------------------------------------------------------------
    def principal(self, req: rpc.Request) -> str:
        if self.config.insecure_principal_from_client_id:
            cid = req.header.client_id
            kind, sep, name = cid.partition(":")
            return cid if sep and kind == "User" and name else ANONYMOUS
        return req.principal or ANONYMOUS

    def may(self, req: rpc.Request) -> May:
        principal, host, authorizer = self.principal(req), req.host, self.authorizer
        if principal in authorizer.super_users or (
                not authorizer.acls and authorizer.allow_everyone_if_no_acl_found):
            return _allow_all          # an open fleet (or a super user) pays nothing per check
        api = req.api

        def may(op: Operation, rtype: ResourceType, name: str) -> bool:
            ok = authorizer.authorize(principal, host, op, rtype, name)
            if not ok:
                key = (header_pb2.ApiKey.Name(api), rtype.value)
                self.denied[key] = self.denied.get(key, 0) + 1
                log.debug("denied %s %s on %s %r (%s)", principal, op.value, rtype.value, name,
                          header_pb2.ApiKey.Name(api))
            return ok
        return may

    def may_any(self, req: rpc.Request) -> MayAny:
        principal, host, authorizer = self.principal(req), req.host, self.authorizer
        return lambda op, rtype: authorizer.authorize_any(principal, host, op, rtype)

    # -- quotas -----------------------------------------------------------------------------
    def wrap(self, handler: Callable) -> Callable:
        async def guarded(req: rpc.Request):
            principal = self.principal(req)
            client_id = req.header.client_id
            key = (principal, client_id)
            held = self._held_until.get(key)
            if held is not None:
                wait_ms = held - _now_ms()
                if wait_ms > 0:
                    await asyncio.sleep(wait_ms / 1000.0)     # the client's throttle, served
            t0 = time.perf_counter()
            reply = await handler(req)
            if not (self.produce.enabled or self.fetch.enabled or self.request.enabled):
                return reply
            # this request's own time at the gateway: less its waits on others, if counted
            gateway_s = time.perf_counter() - t0 - rpc.remote_seconds()
            throttle = self._record(req, reply, user_name(principal), client_id, gateway_s)
            if throttle > 0:
                self._held_until[key] = _now_ms() + throttle
                body = reply.body if reply is not None else None
                if body is not None and "throttle_time_ms" in body.DESCRIPTOR.fields_by_name:
                    body.throttle_time_ms = max(body.throttle_time_ms, throttle)
            return reply
        return guarded

    def _record(self, req: rpc.Request, reply, user: str, client_id: str, gateway_s: float) -> int:
        now = int(_now_ms())
        throttle = 0
        if req.api == ApiKey.PRODUCE and self.produce.enabled:
            n = sum(frame_nbytes(f) for f in req.payloads)
            throttle = max(throttle, self._count(PRODUCER_BYTE_RATE,
                                                 self.produce.record(user, client_id, n, now)))
        elif req.api == ApiKey.FETCH and self.fetch.enabled and reply is not None:
            n = sum(frame_nbytes(f) for f in reply.payloads)
            throttle = max(throttle, self._count(CONSUMER_BYTE_RATE,
                                                 self.fetch.record(user, client_id, n, now)))
        if self.request.enabled:
            # Kafka records request time as a percentage of one thread: seconds * 100.
            t = self.request.record(user, client_id, max(gateway_s, 0.0) * 100.0, now)
            throttle = max(throttle, self._count(REQUEST_PERCENTAGE, t))
        return throttle

    def _count(self, kind: str, ms: int) -> int:
        if ms > 0:
            self.throttled[kind] = self.throttled.get(kind, 0) + 1
            self.throttle_ms[kind] = self.throttle_ms.get(kind, 0.0) + ms
        return ms

    def tick(self) -> None:
        """Forget idle rates and holds that have passed (bounded memory)."""
        now = _now_ms()
        for q in (self.produce, self.fetch, self.request):
            q.expire(int(now))
        for key, until in list(self._held_until.items()):
            if until <= now:
                del self._held_until[key]

    def register_metrics(self, tel) -> None:
        tel.counter("riverbed.gateway.authorization.denied", lambda: [
            (c, {"api": a, "resource_type": r}) for (a, r), c in list(self.denied.items())],
            description="checks the ACLs denied, per API and resource type")
        tel.counter("riverbed.gateway.quota.throttled", lambda: [
            (c, {"quota": k}) for k, c in list(self.throttled.items())],
            description="responses that carried a throttle time, per quota type")
        tel.counter("riverbed.gateway.quota.throttle.time", lambda: [
            (v / 1000.0, {"quota": k}) for k, v in list(self.throttle_ms.items())], unit="s",
            description="throttle time handed to clients, per quota type")
