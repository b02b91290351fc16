"""Running asyncio servers from synchronous code: `ServerThread` runs an RpcServer (or any
object with `serve()`/`close()`/`bound_endpoint`) on its own event loop in a daemon thread.
For tests, benchmarks and tools; services run their servers in their own TaskGroup."""
from __future__ import annotations

import asyncio
import threading
from typing import Callable

__all__ = ["ServerThread"]


class ServerThread:
    """`with ServerThread(lambda: RpcServer(...)) as st: st.endpoint ...`

    The factory is called inside the thread's event loop (zmq.asyncio sockets belong to it).
    """

    def __init__(self, factory: Callable[[], object], *, name: str = "rpc-server"):
        self._factory = factory
        self._name = name
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._thread: threading.Thread | None = None
        self.server = None
        self.endpoint: str = ""

    def start(self, timeout_s: float = 10.0) -> str:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"{self._name} did not start")
        if self._error is not None:
            raise self._error
        return self.endpoint

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            self.server = self._factory()
            self.endpoint = self.server.bound_endpoint
            self._task = asyncio.current_task()
        except BaseException as e:
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            await self.server.serve()
        except asyncio.CancelledError:
            pass
        finally:
            await self.server.close()

    def call_soon(self, fn: Callable, *args) -> None:
        """Run fn(*args) on the server's loop (thread-safe)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._loop is not None and self._task is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._task.cancel)
            except RuntimeError:  # loop already closed
                pass
        if self._thread is not None:
            self._thread.join(timeout_s)

    def __enter__(self) -> "ServerThread":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
