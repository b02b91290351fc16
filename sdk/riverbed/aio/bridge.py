"""Run the SDK's synchronous client logic on an asyncio loop, without threads (greenlets).

The sync clients wait in a few places only: a Channel waiting for its socket, a sleep between
retries, a condition (producer metadata, buffer memory). `run_sync(fn)` runs `fn` in a greenlet;
when the code inside reaches one of those waits, `await_(awaitable)` switches back to the
coroutine that called run_sync, which awaits it on the loop and switches back in with the
result. The loop keeps running other tasks meanwhile, and every line of client logic
(metadata, failover, retries, group membership, offsets) is the sync clients' own. This is the
technique SQLAlchemy's asyncio extension uses for its sync ORM (`greenlet_spawn`/`await_only`).

Outside a run_sync greenlet, `await_` raises WouldBlock: riverbed.aio's producer calls the sync
send path directly (no greenlet per record) and reruns a send that would have to wait (metadata
unknown, buffer full) inside run_sync; both waits come before the record is appended, so the
rerun appends it once.
"""
from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, Awaitable, Callable, TypeVar

import greenlet

__all__ = ["run_sync", "await_", "in_bridge", "sleep", "WouldBlock", "AsyncCondition"]

T = TypeVar("T")


class WouldBlock(Exception):
    """Sync client code would wait, and it is not running inside run_sync."""


class _BridgeGreenlet(greenlet.greenlet):
    __slots__ = ("driver",)

    def __init__(self, fn: Callable[..., Any], driver: greenlet.greenlet):
        super().__init__(fn, driver)
        self.driver = driver


def in_bridge() -> bool:
    """True inside a run_sync greenlet (sync code may wait there)."""
    return isinstance(greenlet.getcurrent(), _BridgeGreenlet)


def await_(awaitable: Awaitable[T]) -> T:
    """From sync code inside run_sync: wait for `awaitable` on the loop and return its result
    (or raise its exception). Elsewhere: WouldBlock."""
    current = greenlet.getcurrent()
    if not isinstance(current, _BridgeGreenlet):
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise WouldBlock("this call would wait: run it with riverbed.aio.bridge.run_sync")
    return current.driver.switch(awaitable)  # type: ignore[no-any-return]


async def run_sync(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run the sync function `fn(*args, **kwargs)` on this loop, awaiting what it waits for."""
    g = _BridgeGreenlet(fn, greenlet.getcurrent())
    result = g.switch(*args, **kwargs)
    while not g.dead:
        try:
            value = await result
        except BaseException:  # noqa: BLE001 - delivered into the sync code, where it belongs
            result = g.throw(*sys.exc_info())
        else:
            result = g.switch(value)
    return result  # type: ignore[no-any-return]


def sleep(seconds: float) -> None:
    """time.sleep for sync code run by run_sync: an asyncio.sleep of the loop."""
    await_(asyncio.sleep(seconds))


class AsyncCondition:
    """threading.Condition's interface for sync code run by run_sync on one loop: wait()
    releases the lock and awaits a notify (or the timeout) on the loop. Single-threaded: the
    lock is only ever taken by code on the loop's thread, so it is free while we wait."""

    def __init__(self, lock: Any = None):
        self._lock = lock if lock is not None else threading.Lock()
        self._waiters: list[asyncio.Future[None]] = []

    def __enter__(self) -> bool:
        return bool(self._lock.__enter__())

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)

    def wait(self, timeout: float | None = None) -> bool:
        if not in_bridge():
            raise WouldBlock("waiting on a condition outside run_sync")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._lock.release()
        try:
            await_(asyncio.wait_for(asyncio.shield(fut), timeout))
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self._lock.acquire()
            if fut in self._waiters:
                self._waiters.remove(fut)

    def wait_for(self, predicate: Callable[[], T], timeout: float | None = None) -> T:
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        result = predicate()
        while not result:
            left = None if end is None else end - loop.time()
            if left is not None and left <= 0:
                break
            self.wait(left)
            result = predicate()
        return result

    def notify(self, n: int = 1) -> None:
        for fut in self._waiters[:n]:
            if not fut.done():
                fut.set_result(None)
        del self._waiters[:n]

    def notify_all(self) -> None:
        self.notify(len(self._waiters))
