"""The gateway's group/offset/transaction routing shell: watches the shard owners of the group
coordinators, offset managers and transaction coordinators in ZooKeeper and forwards the group,
offset and transaction APIs (core/group_routing.py and core/txn_routing.py say which API goes
where).

Owners are cached from `<root>/shards/*` (ChildrenWatch; a change of owner is a delete then a
create, so the children watch sees it) and the live coordinators from
`/riverbed/group_coordinators/ids`. A NOT_COORDINATOR answer re-reads the owners and retries
once; a shard with no owner answers COORDINATOR_NOT_AVAILABLE (retriable); an owner that does not
answer in time likewise.

The forwarded request carries the client's client_id (the coordinator names members after it).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from riverbed import errors
from riverbed._proto.v1 import group_pb2, header_pb2, transaction_pb2 as tx
from riverbed.coordinator.offsets_topic import OFFSETS_TOPIC, partition_for
from riverbed.coordinator.transaction_log import TRANSACTION_STATE_TOPIC
from services.common import rpc, znodes
from services.gateway.core import authorization as authz
from services.gateway.core import txn_routing
from services.gateway.core.group_routing import (
    GROUP_COORDINATOR, OFFSET_MANAGER, PER_GROUP_APIS, REROUTE_CODES, error_body,
    find_coordinator_error, find_coordinator_role, fit_heartbeat_wait, merge_described,
    merge_listed,
)

if TYPE_CHECKING:
    import logging

    from services.gateway.config import GatewayConfig
    from services.gateway.core.metadata_cache import MetadataCache
    from services.gateway.shell.guard import Guard


class GatewayParts(Protocol):
    """What a GroupRouter uses of its gateway (services.gateway.shell.gateway.Gateway): named
    here, so this module does not import the gateway's (which imports this one)."""

    config: "GatewayConfig"
    cache: "MetadataCache"
    guard: "Guard"
    log: "logging.LoggerAdapter"
    _loop: asyncio.AbstractEventLoop
    _zk: Any
    _pool: rpc.ChannelPool

    def _timeout(self, req: Any) -> int: ...

    async def _wait_refresh(self, timeout_ms: int) -> None: ...

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
TRANSACTION_COORDINATOR = txn_routing.TRANSACTION_COORDINATOR
ROOTS = {GROUP_COORDINATOR: znodes.GROUP_COORDINATORS, OFFSET_MANAGER: znodes.OFFSET_MANAGERS,
         TRANSACTION_COORDINATOR: znodes.TRANSACTION_COORDINATORS}
# the topic each role's shards are the partitions of
SHARD_TOPIC = {GROUP_COORDINATOR: OFFSETS_TOPIC, OFFSET_MANAGER: OFFSETS_TOPIC,
               TRANSACTION_COORDINATOR: TRANSACTION_STATE_TOPIC}


async def call_as(channel: rpc.AsyncChannel, client_id: str, api: int, body, timeout_ms: int,
                  api_version: int = 0):
    """channel.call with the client's client_id in the header. Channels to coordinators are used
    only from here and every call sets the id first; AsyncChannel.call encodes the header
    synchronously before its first await, so the id of this call is the one encoded."""
    channel.client_id = client_id
    return await channel.call(api, body, timeout_ms=timeout_ms, api_version=api_version)


def _codes(api: int, body) -> set[int]:
    if api == ApiKey.DESCRIBE_GROUPS:
        return {g.error_code for g in body.groups}
    if api == ApiKey.DELETE_GROUPS:
        return {g.error_code for g in body.results}
    return txn_routing.response_codes(api, body)


def _error_body(api: int, body, code: int, message: str):
    if api in txn_routing.PER_TXN_ID_APIS or api in (ApiKey.TXN_OFFSET_COMMIT,
                                                        ApiKey.DESCRIBE_TRANSACTIONS,
                                                        ApiKey.LIST_TRANSACTIONS):
        return txn_routing.error_body(api, body, code, message)
    return error_body(api, body, code, message)


class GroupRouter:
    def __init__(self, gateway: GatewayParts):
        self.gw = gateway
        self._owners: dict[str, dict[int, str]] = {role: {} for role in ROOTS}
        self._coordinators: dict[int, str] = {}
        self._txn_coordinators: dict[int, str] = {}
        self._changed: dict[str, asyncio.Event] = {role: asyncio.Event() for role in ROOTS}
        self._ids_changed = asyncio.Event()
        self._txn_ids_changed = asyncio.Event()

    # -- ZooKeeper ------------------------------------------------------------------------
    def watch(self, zk) -> None:
        """Set the watches (zk is connected; blocking kazoo calls: run it in a thread)."""
        loop = self.gw._loop
        for role, root in ROOTS.items():
            zk.ensure_path(znodes.shard_owners_path(root))
            ChildrenWatch(zk, znodes.shard_owners_path(root),
                          lambda _c, ev=self._changed[role]: loop.call_soon_threadsafe(ev.set))
        zk.ensure_path(znodes.shard_instances_path(znodes.GROUP_COORDINATORS))
        ChildrenWatch(zk, znodes.shard_instances_path(znodes.GROUP_COORDINATORS),
                      lambda _c: loop.call_soon_threadsafe(self._ids_changed.set))
        zk.ensure_path(znodes.shard_instances_path(znodes.TRANSACTION_COORDINATORS))
        ChildrenWatch(zk, znodes.shard_instances_path(znodes.TRANSACTION_COORDINATORS),
                      lambda _c: loop.call_soon_threadsafe(self._txn_ids_changed.set))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for role in ROOTS:
                tg.create_task(self._owners_loop(role))
            tg.create_task(self._ids_loop())
            tg.create_task(self._txn_ids_loop())

    async def _owners_loop(self, role: str) -> None:
        while True:
            await self._changed[role].wait()
            self._changed[role].clear()
            await self._reread(role)

    async def _reread(self, role: str) -> None:
        try:
            self._owners[role] = await asyncio.to_thread(self._read_owners, ROOTS[role])
        except Exception as e:  # noqa: BLE001 - ZooKeeper hiccup; the watch fires again
            self.gw.log.warning("could not read %s owners: %r", role, e)

    def _read_owners(self, root: str) -> dict[int, str]:
        zk = self.gw._zk
        out = {}
        base = znodes.shard_owners_path(root)
        for child in zk.get_children(base):
            try:
                shard = int(child)
                out[shard] = znodes.decode_shard_owner(shard, zk.get(f"{base}/{child}")[0]).endpoint
            except (ValueError, NoNodeError, znodes.ZnodeDataError):
                continue
        return out

    async def _ids_loop(self) -> None:
        while True:
            await self._ids_changed.wait()
            self._ids_changed.clear()
            try:
                self._coordinators = await asyncio.to_thread(self._read_ids)
            except Exception as e:  # noqa: BLE001
                self.gw.log.warning("could not read the group coordinators: %r", e)

    async def _txn_ids_loop(self) -> None:
        while True:
            await self._txn_ids_changed.wait()
            self._txn_ids_changed.clear()
            try:
                self._txn_coordinators = await asyncio.to_thread(
                    self._read_ids, znodes.TRANSACTION_COORDINATORS)
            except Exception as e:  # noqa: BLE001
                self.gw.log.warning("could not read the transaction coordinators: %r", e)

    def _read_ids(self, root: str = znodes.GROUP_COORDINATORS) -> dict[int, str]:
        zk = self.gw._zk
        base = znodes.shard_instances_path(root)
        out = {}
        for child in zk.get_children(base):
            try:
                i = int(child)
                out[i] = znodes.decode_coordinator_instance(i, zk.get(f"{base}/{child}")[0]).endpoint
            except (ValueError, NoNodeError, znodes.ZnodeDataError):
                continue
        return out

    # -- handlers -------------------------------------------------------------------------
    def handlers(self) -> dict:
        h = {api: self._per_group for api in PER_GROUP_APIS}
        h[ApiKey.DESCRIBE_GROUPS] = self._describe_groups
        h[ApiKey.LIST_GROUPS] = self._list_groups
        h[ApiKey.FIND_COORDINATOR] = self._find_coordinator
        h[ApiKey.TXN_OFFSET_COMMIT] = self._txn_offset_commit
        for api in (ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN):
            h[api] = self._per_txn_id
        h[ApiKey.DESCRIBE_TRANSACTIONS] = self._describe_transactions
        h[ApiKey.LIST_TRANSACTIONS] = self._list_transactions
        h[ApiKey.DELETE_GROUPS] = self._delete_groups
        return h

    def _timeout(self, req: rpc.Request) -> int:
        timeout = self.gw._timeout(req)
        if req.api == ApiKey.JOIN_GROUP and req.header.timeout_ms == 0:
            b = req.body
            timeout += b.rebalance_timeout_ms or b.session_timeout_ms   # a join waits for the others
        return timeout

    async def _shard(self, group_id: str, timeout_ms: int,
                     topic: str = OFFSETS_TOPIC) -> int | None:
        n = self.gw.cache.partition_count(topic)
        if not n:
            await self.gw._wait_refresh(timeout_ms)
            n = self.gw.cache.partition_count(topic)
        return partition_for(group_id, n) if n else None

    async def _call_owner(self, role: str, shard: int, req: rpc.Request, body, timeout_ms: int,
                          api: int | None = None):
        """The owner's response body, or (code, message) when there is none to ask or it failed.
        `api`: the API to call (the client's, with its version, by default)."""
        api = req.api if api is None else api
        for attempt in (0, 1):
            endpoint = self._owners[role].get(shard)
            if endpoint is None:
                if attempt == 0:
                    await self._reread(role)
                    continue
                return E.COORDINATOR_NOT_AVAILABLE, f"no {role.replace('_', ' ')} owns shard {shard}"
            try:
                resp = await call_as(self.gw._pool.get(endpoint), req.header.client_id, api,
                                     body, timeout_ms, req.header.api_version if api == req.api else 0)
            except errors.NotCoordinatorError as e:
                result = (e.code, e.message)
            except errors.KafkaError as e:
                if isinstance(e, (errors.RequestTimedOutError, errors.NetworkError)):
                    return E.COORDINATOR_NOT_AVAILABLE, f"{role} at {endpoint}: {e}"
                return e.code, e.message or e.name
            else:
                codes = _codes(api, resp.body)
                if not codes & REROUTE_CODES or attempt == 1:
                    return resp.body
                result = (E.NOT_COORDINATOR, f"{role} at {endpoint} does not own shard {shard}")
            if attempt == 0:
                self.gw.log.info("%s at %s answered NOT_COORDINATOR for shard %d; re-reading owners",
                                 role, endpoint, shard)
                await self._reread(role)
        return result

    async def _per_group(self, req: rpc.Request) -> rpc.Reply:
        role = PER_GROUP_APIS[req.api]
        body = req.body
        if not body.group_id:
            return rpc.Reply(error_body(req.api, body, E.INVALID_GROUP_ID, "group id is empty"))
        may = self.gw.guard.may(req)
        why = authz.group_denied(req.api, body, may)
        if why is not None:      # checked before anything is forwarded: nothing changes
            return rpc.Reply(error_body(req.api, body, E.GROUP_AUTHORIZATION_FAILED, why))
        if req.api in authz.OFFSET_TOPIC_OPS:
            forward, denied = authz.split_offsets(req.api, body, may)
            result = None
            if forward is not None:
                result = (await self._per_group_call(role, req, forward)).body
                if result.error_code != E.NONE:    # the whole request failed (NOT_COORDINATOR...)
                    return rpc.Reply(error_body(req.api, body, result.error_code,
                                                result.error_message))
            return rpc.Reply(authz.offsets_response(req.api, body, result, denied, may))
        return await self._per_group_call(role, req, body)

    async def _per_group_call(self, role: str, req: rpc.Request, body) -> rpc.Reply:
        timeout = self._timeout(req)
        shard = await self._shard(body.group_id, timeout // 2)
        if shard is None:
            return rpc.Reply(error_body(req.api, body, E.COORDINATOR_NOT_AVAILABLE,
                                        f"{OFFSETS_TOPIC} does not exist yet"))
        if req.api == ApiKey.HEARTBEAT:    # a long-polled one: held no longer than we wait
            body = fit_heartbeat_wait(body, timeout)
        result = await self._call_owner(role, shard, req, body, timeout)
        if isinstance(result, tuple):
            return rpc.Reply(error_body(req.api, body, *result))
        return rpc.Reply(result)

    async def _describe_groups(self, req: rpc.Request) -> rpc.Reply:
        timeout = self._timeout(req)
        by_shard: dict[int, list[str]] = {}
        answers: dict[str, group_pb2.DescribedGroup] = {}
        allowed, denied = authz.split_described(dict.fromkeys(req.body.groups),
                                                self.gw.guard.may(req))
        for gid in denied:
            answers[gid] = group_pb2.DescribedGroup(
                group_id=gid, error_code=E.GROUP_AUTHORIZATION_FAILED,
                error_message=authz.denied_message("group", gid, authz.O.DESCRIBE))
        for gid in allowed:
            shard = await self._shard(gid, timeout // 2) if gid else None
            if shard is None:
                answers[gid] = group_pb2.DescribedGroup(
                    group_id=gid, error_code=E.INVALID_GROUP_ID if not gid else E.COORDINATOR_NOT_AVAILABLE)
                continue
            by_shard.setdefault(shard, []).append(gid)

        async def one(shard: int, gids: list[str]) -> None:
            sub = group_pb2.DescribeGroupsRequest(groups=gids)
            result = await self._call_owner(GROUP_COORDINATOR, shard, req, sub, timeout)
            body = error_body(ApiKey.DESCRIBE_GROUPS, sub, *result) if isinstance(result, tuple) else result
            for d in body.groups:
                answers[d.group_id] = d

        await asyncio.gather(*(one(s, g) for s, g in by_shard.items()))
        return rpc.Reply(merge_described(list(req.body.groups), answers))

    async def _delete_groups(self, req: rpc.Request) -> rpc.Reply:
        """Kafka's DeleteGroups, per shard: the group coordinator deletes the groups that have no
        members (their tombstones written), then the offset manager deletes their offsets
        committed before the tombstones, and those of groups the coordinator did not know
        (offsets only: standalone consumers'); see group.proto."""
        timeout = self._timeout(req)
        may = self.gw.guard.may(req)
        results: dict[str, group_pb2.DeleteGroupsResult] = {}
        by_shard: dict[int, list[str]] = {}
        for gid in dict.fromkeys(req.body.group_ids):
            if not gid:
                results[gid] = group_pb2.DeleteGroupsResult(
                    group_id=gid, error_code=E.INVALID_GROUP_ID, error_message="group id is empty")
            elif not may(authz.O.DELETE, authz.GROUP, gid):
                results[gid] = group_pb2.DeleteGroupsResult(
                    group_id=gid, error_code=E.GROUP_AUTHORIZATION_FAILED,
                    error_message=authz.denied_message("group", gid, authz.O.DELETE))
            else:
                shard = await self._shard(gid, timeout // 2)
                if shard is None:
                    results[gid] = group_pb2.DeleteGroupsResult(
                        group_id=gid, error_code=E.COORDINATOR_NOT_AVAILABLE,
                        error_message=f"{OFFSETS_TOPIC} does not exist yet")
                else:
                    by_shard.setdefault(shard, []).append(gid)

        def failed(gids, code: int, msg: str) -> None:
            for gid in gids:
                results[gid] = group_pb2.DeleteGroupsResult(group_id=gid, error_code=code,
                                                            error_message=msg)

        async def one(shard: int, gids: list[str]) -> None:
            first = await self._call_owner(GROUP_COORDINATOR, shard, req,
                                           group_pb2.DeleteGroupsRequest(group_ids=gids), timeout)
            if isinstance(first, tuple):
                return failed(gids, *first)
            tombstones = []
            for r in first.results:
                results[r.group_id] = r
                if r.error_code == E.NONE or r.error_code == E.GROUP_ID_NOT_FOUND:
                    tombstones.append(group_pb2.GroupTombstone(
                        group_id=r.group_id,
                        log_offset=r.tombstone_offset if r.error_code == E.NONE else -1))
            if not tombstones:
                return
            second = await self._call_owner(OFFSET_MANAGER, shard, req,
                                            group_pb2.DeleteGroupsRequest(tombstones=tombstones),
                                            timeout)
            if isinstance(second, tuple):
                return failed([t.group_id for t in tombstones], *second)
            for r in second.results:
                results[r.group_id] = r

        await asyncio.gather(*(one(s, g) for s, g in by_shard.items()))
        resp = group_pb2.DeleteGroupsResponse()
        for gid in dict.fromkeys(req.body.group_ids):
            resp.results.add().CopyFrom(results.get(gid) or group_pb2.DeleteGroupsResult(
                group_id=gid, error_code=E.COORDINATOR_NOT_AVAILABLE,
                error_message="no coordinator answered for this group"))
        return rpc.Reply(resp)

    async def _list_groups(self, req: rpc.Request) -> rpc.Reply:
        if not self._coordinators:
            self._coordinators = await asyncio.to_thread(self._read_ids)
        answers = await self._ask_every(req, self._coordinators, "group coordinator")
        return rpc.Reply(authz.filter_listed(merge_listed(answers), self.gw.guard.may(req)))

    async def _ask_every(self, req: rpc.Request, instances: dict[int, str], what: str) -> list:
        """The request at every live instance: each one's response body, or (code, message)
        for one that did not answer."""
        timeout = self._timeout(req)

        async def one(endpoint: str):
            try:
                resp = await call_as(self.gw._pool.get(endpoint), req.header.client_id, req.api,
                                     req.body, timeout)
                return resp.body
            except errors.KafkaError as e:
                return E.COORDINATOR_NOT_AVAILABLE, f"{what} at {endpoint}: {e}"

        return list(await asyncio.gather(*(one(ep) for ep in sorted(set(instances.values())))))

    # -- transactions -----------------------------------------------------------------------
    async def init_transactional(self, req: rpc.Request) -> rpc.Reply:
        """INIT_PRODUCER_ID with a transactional id (v1): the id's transaction coordinator."""
        body = req.body
        if req.header.api_version < 1:
            return rpc.Reply(txn_routing.error_body(
                req.api, body, E.UNSUPPORTED_VERSION,
                "a transactional id needs INIT_PRODUCER_ID v1"))
        return await self._per_txn_id(req)

    async def _per_txn_id(self, req: rpc.Request) -> rpc.Reply:
        body = req.body
        if not body.transactional_id:
            return rpc.Reply(txn_routing.error_body(req.api, body, E.INVALID_REQUEST,
                                                    "transactional id is empty"))
        refused = txn_routing.denied(req.api, body, self.gw.guard.may(req))
        if refused is not None:      # checked before anything is forwarded: nothing changes
            return rpc.Reply(refused)
        timeout = self._timeout(req)
        shard = await self._shard(body.transactional_id, timeout // 2, TRANSACTION_STATE_TOPIC)
        if shard is None:
            return rpc.Reply(await self._without_txn_topic(req, body, timeout))
        result = await self._call_owner(TRANSACTION_COORDINATOR, shard, req, body, timeout)
        if isinstance(result, tuple):
            return rpc.Reply(txn_routing.error_body(req.api, body, *result))
        return rpc.Reply(result)

    async def _without_txn_topic(self, req: rpc.Request, body, timeout_ms: int):
        """__transaction_state does not exist yet: a transaction coordinator creates it on the
        first transactional request (Kafka's rule), so the request goes to any live one, which
        answers COORDINATOR_NOT_AVAILABLE (retriable) while it does."""
        if not self._txn_coordinators:
            self._txn_coordinators = await asyncio.to_thread(self._read_ids,
                                                             znodes.TRANSACTION_COORDINATORS)
        for endpoint in sorted(set(self._txn_coordinators.values()))[:1]:
            try:
                resp = await call_as(self.gw._pool.get(endpoint), req.header.client_id, req.api,
                                     body, timeout_ms, req.header.api_version)
                return resp.body
            except errors.KafkaError as e:
                self.gw.log.debug("transaction coordinator at %s: %s", endpoint, e)
        return txn_routing.error_body(req.api, body, E.COORDINATOR_NOT_AVAILABLE,
                                      f"{TRANSACTION_STATE_TOPIC} does not exist yet and no "
                                      "transaction coordinator is live")

    async def _txn_offset_commit(self, req: rpc.Request) -> rpc.Reply:
        body = req.body
        if not body.group_id:
            return rpc.Reply(txn_routing.error_body(req.api, body, E.INVALID_GROUP_ID,
                                                    "group id is empty"))
        whole, refused = txn_routing.txn_offset_commit_denied(body, self.gw.guard.may(req))
        if whole is not None:
            return rpc.Reply(whole)
        forward = txn_routing.txn_offset_commit_split(body, refused)
        result = None
        if forward is not None:
            timeout = self._timeout(req)
            shard = await self._shard(body.group_id, timeout // 2)
            if shard is None:
                return rpc.Reply(txn_routing.error_body(req.api, body, E.COORDINATOR_NOT_AVAILABLE,
                                                        f"{OFFSETS_TOPIC} does not exist yet"))
            answer = await self._call_owner(OFFSET_MANAGER, shard, req, forward, timeout)
            if isinstance(answer, tuple):
                return rpc.Reply(txn_routing.error_body(req.api, body, *answer))
            result = answer
        return rpc.Reply(txn_routing.txn_offset_commit_response(body, result, refused))

    async def _describe_transactions(self, req: rpc.Request) -> rpc.Reply:
        timeout = self._timeout(req)
        may = self.gw.guard.may(req)
        ids = list(req.body.transactional_ids)
        answers: dict[str, tx.TransactionStateDescription] = {}
        by_shard: dict[int, list[str]] = {}
        for tid in dict.fromkeys(ids):
            if not may(txn_routing.O.DESCRIBE, txn_routing.TXN_ID, tid):
                answers[tid] = tx.TransactionStateDescription(
                    transactional_id=tid, error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    error_message=f"not authorized to describe transactional id {tid!r}",
                    producer_id=-1, producer_epoch=-1, transaction_start_time_ms=-1)
                continue
            shard = await self._shard(tid, timeout // 2, TRANSACTION_STATE_TOPIC) if tid else None
            if shard is None:
                answers[tid] = tx.TransactionStateDescription(
                    transactional_id=tid, producer_id=-1, producer_epoch=-1,
                    transaction_start_time_ms=-1,
                    error_code=E.INVALID_REQUEST if not tid else E.COORDINATOR_NOT_AVAILABLE)
                continue
            by_shard.setdefault(shard, []).append(tid)

        async def one(shard: int, tids: list[str]) -> None:
            sub = tx.DescribeTransactionsRequest(transactional_ids=tids)
            result = await self._call_owner(TRANSACTION_COORDINATOR, shard, req, sub, timeout)
            body = txn_routing.error_body(req.api, sub, *result) if isinstance(result, tuple) \
                else result
            for d in body.transaction_states:
                answers[d.transactional_id] = d

        await asyncio.gather(*(one(s, t) for s, t in by_shard.items()))
        return rpc.Reply(txn_routing.merge_described(ids, answers))

    async def _list_transactions(self, req: rpc.Request) -> rpc.Reply:
        if not self._txn_coordinators:
            self._txn_coordinators = await asyncio.to_thread(self._read_ids,
                                                             znodes.TRANSACTION_COORDINATORS)
        answers = await self._ask_every(req, self._txn_coordinators, "transaction coordinator")
        return rpc.Reply(txn_routing.merge_listed(answers, self.gw.guard.may(req)))

    async def _find_coordinator(self, req: rpc.Request) -> rpc.Reply:
        body = req.body
        if body.key_type == group_pb2.TRANSACTION:
            return await self._find_txn_coordinator(req)
        err = find_coordinator_error(body)
        if err is not None:
            return rpc.Reply(group_pb2.FindCoordinatorResponse(error_code=err[0], error_message=err[1]))
        why = authz.group_denied(req.api, body, self.gw.guard.may(req))
        if why is not None:
            return rpc.Reply(group_pb2.FindCoordinatorResponse(
                error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=why))
        shard = await self._shard(body.key, self._timeout(req) // 2)
        if shard is None:
            return rpc.Reply(group_pb2.FindCoordinatorResponse(
                error_code=E.COORDINATOR_NOT_AVAILABLE, error_message=f"{OFFSETS_TOPIC} does not exist yet"))
        role = find_coordinator_role(body)
        if shard not in self._owners[role]:
            await self._reread(role)
        if shard not in self._owners[role]:
            return rpc.Reply(group_pb2.FindCoordinatorResponse(
                error_code=E.COORDINATOR_NOT_AVAILABLE, shard=shard,
                error_message=f"shard {shard} has no {role.replace('_', ' ')} yet"))
        cfg = self.gw.config
        # Clients keep talking to gateways: this gateway is the coordinator they see.
        return rpc.Reply(group_pb2.FindCoordinatorResponse(
            error_code=E.NONE, node_id=cfg.gateway_id, host=cfg.host_name, port=cfg.port,
            endpoint=cfg.endpoint, shard=shard))

    async def _find_txn_coordinator(self, req: rpc.Request) -> rpc.Reply:
        """FIND_COORDINATOR v1 key_type TRANSACTION: this gateway, once the id's shard of
        __transaction_state has an owner (Describe on the TransactionalId)."""
        body = req.body
        if req.header.api_version < 1:
            return rpc.Reply(group_pb2.FindCoordinatorResponse(
                error_code=E.INVALID_REQUEST, error_message="key_type TRANSACTION needs v1"))
        if not body.key:
            return rpc.Reply(group_pb2.FindCoordinatorResponse(
                error_code=E.INVALID_REQUEST, error_message="empty transactional id"))
        if not self.gw.guard.may(req)(txn_routing.O.DESCRIBE, txn_routing.TXN_ID, body.key):
            return rpc.Reply(group_pb2.FindCoordinatorResponse(
                error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                error_message=f"not authorized to describe transactional id {body.key!r}"))
        shard = await self._shard(body.key, self._timeout(req) // 2, TRANSACTION_STATE_TOPIC)
        owners = self._owners[TRANSACTION_COORDINATOR]
        if shard is not None and shard not in owners:
            await self._reread(TRANSACTION_COORDINATOR)
            owners = self._owners[TRANSACTION_COORDINATOR]
        if shard is None or shard not in owners:
            return rpc.Reply(group_pb2.FindCoordinatorResponse(
                error_code=E.COORDINATOR_NOT_AVAILABLE, shard=shard if shard is not None else -1,
                error_message="no transaction coordinator owns the id's shard yet"))
        cfg = self.gw.config
        return rpc.Reply(group_pb2.FindCoordinatorResponse(
            error_code=E.NONE, node_id=cfg.gateway_id, host=cfg.host_name, port=cfg.port,
            endpoint=cfg.endpoint, shard=shard))
