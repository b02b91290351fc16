"""The gateway's cluster-wide admin APIs: log dirs (KIP-113, asked of the storage nodes
themselves), ACLs (Kafka's DescribeAcls / CreateAcls / DeleteAcls on the znodes `riverbed acls`
writes), and the admin requests forwarded to the active controller (with its NOT_CONTROLLER
retries). A mixin of services.gateway.shell.gateway.Gateway, split out of it along this seam; it
never imports that module.
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from services.common import rpc, znodes
from services.common.acl import store as acl_store
from services.gateway.core import acl_admin
from services.gateway.core import authorization as authz
from services.gateway.core import log_dirs

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
# Admin requests that change topics: refresh the cache right after so this gateway routes them.
TOPIC_CHANGING_APIS = (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS)
# Calls to the active controller per admin request: the one it names, a second after a
# NOT_CONTROLLER or a dropped channel, a third when that change raced another one.
CONTROLLER_ATTEMPTS = 3


class ClusterAdmin:
    """Log dirs, ACLs and controller-bound admin of a Gateway (mixed into it; uses its cache,
    channel pool, guard, controller feed and ZooKeeper session)."""

    # -- log dirs (KIP-113): asked of the storage nodes themselves -------------------------
    def _live_nodes(self) -> list[int]:
        return [b.node_id for b in self.cache.describe_cluster().brokers]

    async def _ask_node(self, node_id: int, api: int, body, timeout_ms: int):
        endpoint = self.cache.endpoint_of(node_id)
        if endpoint is None:
            return E.BROKER_NOT_AVAILABLE, f"node {node_id} is not live", None
        try:
            resp = await self._pool.get(endpoint).call(api, body, timeout_ms=timeout_ms)
        except errors.KafkaError as e:
            return e.code, e.message or e.name, None
        except Exception as e:  # noqa: BLE001 - that node's answer is an error, the others stand
            return E.NETWORK_EXCEPTION, f"node {node_id}: {e}", None
        return E.NONE, "", resp.body

    async def _describe_log_dirs(self, req: rpc.Request) -> rpc.Reply:
        why = authz.cluster_denied(req.api, self.guard.may(req))
        if why is not None:
            raise errors.ClusterAuthorizationFailedError(why)
        timeout = self._timeout(req)
        await self._ensure_metadata(timeout // 2)
        ask, dead = log_dirs.describe_targets(req.body, self._live_nodes())
        body = log_dirs.node_describe_request(req.body)
        answers = await asyncio.gather(*(self._ask_node(n, req.api, body, timeout) for n in ask))
        return rpc.Reply(log_dirs.merge_describe(dict(zip(ask, answers)), dead))

    async def _alter_replica_log_dirs(self, req: rpc.Request) -> rpc.Reply:
        why = authz.cluster_denied(req.api, self.guard.may(req))
        if why is not None:
            raise errors.ClusterAuthorizationFailedError(why)
        timeout = self._timeout(req)
        await self._ensure_metadata(timeout // 2)
        per, failed = log_dirs.split_moves(req.body, self._live_nodes())
        nodes = sorted(per)
        answers = await asyncio.gather(*(self._ask_node(n, req.api, per[n], timeout)
                                         for n in nodes))
        return rpc.Reply(log_dirs.merge_moves(per, dict(zip(nodes, answers)), failed))

    # -- ACLs (Kafka's DescribeAcls / CreateAcls / DeleteAcls): the znodes `riverbed acls`
    # writes, read and written here; every process watching them applies a change at once.
    def _acl_cluster_check(self, req: rpc.Request) -> None:
        why = authz.cluster_denied(req.api, self.guard.may(req))
        if why is not None:
            raise errors.ClusterAuthorizationFailedError(why)

    async def _describe_acls(self, req: rpc.Request) -> rpc.Reply:
        self._acl_cluster_check(req)
        snapshot = await asyncio.to_thread(acl_store.read_acls, self._zk)
        return rpc.Reply(acl_admin.describe(snapshot, req.body.filter))

    async def _create_acls(self, req: rpc.Request) -> rpc.Reply:
        self._acl_cluster_check(req)
        plan = acl_admin.plan_create(req.body.creations)
        await self._write_acls(req, "added", acl_store.add_acls, plan.adds, plan.response.results)
        return rpc.Reply(plan.response)

    async def _delete_acls(self, req: rpc.Request) -> rpc.Reply:
        self._acl_cluster_check(req)
        snapshot = await asyncio.to_thread(acl_store.read_acls, self._zk)
        plan = acl_admin.plan_delete(snapshot, req.body.filters)
        await self._write_acls(req, "removed", acl_store.remove_acls, plan.removes,
                               plan.response.results)
        return rpc.Reply(plan.response)

    async def _write_acls(self, req: rpc.Request, what: str, write, changes, results) -> None:
        """Each pattern's entries written with `write` (the store's add or remove); when that
        fails, the results that asked for it (their indexes) say so."""
        for pattern, (entries, indexes) in changes.items():
            try:
                await asyncio.to_thread(write, self._zk, pattern, entries)
            except Exception as e:  # noqa: BLE001 - ZooKeeper failed: these results say so
                self.log.warning("ACLs %s for %s failed: %r", what, pattern, e)
                for i in indexes:
                    results[i].error_code, results[i].error_message = (E.UNKNOWN_SERVER_ERROR,
                                                                       f"ZooKeeper: {e}")
            else:
                self.log.info("ACLs %s for %s by %s: %d", what, pattern,
                              self.guard.principal(req), len(entries))

    async def _admin(self, req: rpc.Request) -> rpc.Reply:
        api, body, may = req.api, req.body, self.guard.may(req)
        why = authz.cluster_denied(api, may)
        if why is not None:
            raise errors.ClusterAuthorizationFailedError(why)
        if api == ApiKey.INIT_PRODUCER_ID:
            denied = authz.init_producer_id_denied(body, may, self.guard.may_any(req))
            if denied is not None:
                return rpc.Reply(denied)
            if body.transactional_id:        # v1: the transactional id's coordinator
                return await self._groups.init_transactional(req)
        if api not in authz.ADMIN_TOPIC_OPS:
            resp = await self._call_controller(api, body, self._timeout(req))
            return rpc.Reply(resp.body)
        forward, denied_topics = authz.split_admin(api, body, may)
        theirs = None
        if forward is not None:
            theirs = (await self._call_controller(api, forward, self._timeout(req))).body
            if api in TOPIC_CHANGING_APIS:
                self._ensure_refresh()
        return rpc.Reply(authz.admin_response(api, theirs, denied_topics, may))

    async def _call_controller(self, api: int, body, timeout_ms: int,
                               payloads: Sequence = ()) -> rpc.Response:
        """Call the active controller; on NOT_CONTROLLER (or none known) re-read /controller
        and retry, on a dropped channel (/controller changed while the call was out) retry on
        the new one: at most CONTROLLER_ATTEMPTS calls. KafkaErrors propagate (the RpcServer
        answers with an envelope error)."""
        last = CONTROLLER_ATTEMPTS - 1
        for attempt in range(CONTROLLER_ATTEMPTS):
            info = self._controller.current
            if info is None or not info.endpoint:
                if attempt < last:
                    await self._reread_controller()
                    continue
                raise errors.NotControllerError("no active controller")
            try:
                return await self._pool.get(info.endpoint).call(api, body, payloads=payloads,
                                                                 timeout_ms=timeout_ms)
            except errors.NetworkError:
                # The channel was dropped because /controller changed (or is gone): again on
                # whoever is active now. The new one may itself be a controller that has
                # already resigned (it answers NOT_CONTROLLER), hence more than two attempts.
                now = self._controller.current
                if attempt == last or (now is not None and now.endpoint == info.endpoint):
                    raise
                continue
            except errors.NotControllerError:
                if attempt == last:
                    raise
                self.log.info("controller %d answered NOT_CONTROLLER; re-reading %s",
                              info.controller_id, znodes.CONTROLLER)
                await self._reread_controller()
        raise AssertionError("unreachable")
