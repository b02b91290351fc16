"""The asyncio admin client (aiokafka's AIOKafkaAdminClient API) over riverbed.admin.Admin.

    admin = Admin(bootstrap_servers="tcp://127.0.0.1:9092")
    await admin.start()
    await admin.create_topics([NewTopic("orders", 3, 1)])
    print(await admin.list_topics())
    await admin.close()

Every call is riverbed.Admin's, or aiokafka's name of it with its shape (kafka-python 2.x's:
riverbed.kafka_python_v2), run through riverbed.aio.bridge.run_sync on AsyncChannels: the loop runs other tasks while it waits for the
gateway. Calls are serialised (an asyncio.Lock), as the sync Admin is used by one thread.
"""
from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable, Sequence

from riverbed import errors, kafka_python_v2
from riverbed.admin import Admin as _SyncAdmin
from riverbed.aio import bridge
from riverbed.aio.channel import AsyncChannel
from riverbed.structs import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

__all__ = ["Admin", "AIOKafkaAdminClient", "NewTopic", "NewPartitions", "ConfigResource",
           "ConfigResourceType"]


class _AdminCore(_SyncAdmin):
    _sleep = staticmethod(bridge.sleep)  # type: ignore[assignment]


# riverbed.Admin's calls that the asyncio client awaits
_CALLS = (
    "create_topics", "delete_topics", "create_partitions", "list_topics", "describe_topics",
    "describe_configs", "alter_configs", "describe_cluster", "elect_leaders",
    "alter_partition_reassignments", "list_partition_reassignments", "list_groups",
    "describe_groups", "list_group_offsets", "alter_group_offsets", "delete_group_offsets",
    "describe_group_offsets", "plan_reset_offsets", "reset_offsets", "list_offsets",
    "describe_log_dirs", "alter_replica_log_dirs", "delete_records", "delete_groups",
    "describe_acls", "create_acls", "delete_acls", "list_transactions", "describe_transactions",
)
# aiokafka's (kafka-python 2.x's) group calls, with their shapes, over the same Admin
_V2_CALLS = ("list_consumer_groups", "describe_consumer_groups", "list_consumer_group_offsets",
             "alter_consumer_group_offsets")


class Admin:
    """Topics, configs, partitions, records, consumer groups, transactions, ACLs and the
    cluster from asyncio code. Takes riverbed.Admin's settings; every call of riverbed.Admin
    listed in _CALLS is a coroutine here with the same arguments and result."""

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any):
        self._args = dict(bootstrap_servers=bootstrap_servers, **config)
        self._core: _AdminCore | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        if self._core is None:
            self._core = _AdminCore(_channel_factory=AsyncChannel, **self._args)

    async def close(self) -> None:
        if self._core is not None:
            async with self._lock:
                self._core.close()

    stop = close

    async def __aenter__(self) -> "Admin":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _run(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return await self._run_on_core(lambda core, *a, **k: getattr(core, name)(*a, **k),
                                       *args, **kwargs)

    async def _run_on_core(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """fn(the sync Admin, *args, **kwargs), serialised, on the loop's bridge."""
        if self._core is None:
            raise errors.ClientError("admin client not started: await admin.start() first")
        async with self._lock:
            return await bridge.run_sync(fn, self._core, *args, **kwargs)


def _coroutine(name: str) -> Callable[..., Any]:
    sync = getattr(_SyncAdmin, name)

    @functools.wraps(sync)
    async def call(self: Admin, *args: Any, **kwargs: Any) -> Any:
        return await self._run(name, *args, **kwargs)
    return call


def _v2_coroutine(name: str) -> Callable[..., Any]:
    fn = getattr(kafka_python_v2, name)

    @functools.wraps(fn)
    async def call(self: Admin, *args: Any, **kwargs: Any) -> Any:
        return await self._run_on_core(fn, *args, **kwargs)
    return call


for _name in _CALLS:
    if hasattr(_SyncAdmin, _name):
        setattr(Admin, _name, _coroutine(_name))
for _name in _V2_CALLS:
    setattr(Admin, _name, _v2_coroutine(_name))

AIOKafkaAdminClient = Admin
