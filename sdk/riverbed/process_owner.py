"""Which process owns a client: clients refuse to be used after `os.fork()`.

A Producer, Consumer or Admin holds ZeroMQ sockets and (the producer) a sender thread. After
`os.fork()` the child has copies of the objects but neither working sockets nor the thread: a
child's `send()` would queue records nobody sends and `get()` would wait forever. So every
client remembers the process that created it, and any use from another process raises
`riverbed.errors.ForkedClientError` at once. Create clients in the child instead (after the
fork, e.g. in a multiprocessing worker's initializer).

`owner_pid()` is read on hot paths, so it is a module global updated by an
`os.register_at_fork(after_in_child=...)` hook rather than an `os.getpid()` system call; the same
hook tells live producers to leave their inlined send path (`_on_fork`).
"""
from __future__ import annotations

import os
import weakref
from typing import Protocol

from riverbed import errors

__all__ = ["current_pid", "check_owner", "register_fork_listener"]


class _ForkListener(Protocol):
    def _on_fork(self) -> None: ...


_pid = os.getpid()
_listeners: "weakref.WeakSet[_ForkListener]" = weakref.WeakSet()


def current_pid() -> int:
    """This process's id, kept current across forks without a system call."""
    return _pid


def check_owner(owner_pid: int, what: str) -> None:
    """Raise ForkedClientError when called outside the process that created the client."""
    if owner_pid != _pid:
        raise errors.ForkedClientError(
            f"{what} was created in process {owner_pid} and cannot be used in process {_pid} "
            "(after os.fork()): create a new client in this process")


def register_fork_listener(obj: _ForkListener) -> None:
    """Call obj._on_fork() in a forked child (weakly referenced: no leak)."""
    _listeners.add(obj)


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()
    for obj in list(_listeners):
        try:
            obj._on_fork()
        except Exception:  # noqa: BLE001 - never break the child's fork
            pass
    _listeners.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
