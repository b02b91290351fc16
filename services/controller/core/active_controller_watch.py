"""A standby's judgement of the active controller's process: gone or not (pure, no I/O).

ZooKeeper removes a dead controller's /controller ephemeral only when its session expires
(zookeeper.session.timeout.ms, 6 s, plus up to a tick), and that was most of a controller
failover. A standby can know sooner, and safely, in one case: the process that registered
/controller is gone from its host. The shell keeps a ZeroMQ connection to the active
controller's endpoint (ZMTP heartbeats, a socket monitor) and feeds this class what it sees:

    connected()        the connection (handshake included) is up
    connection_lost()  it broke: a killed process's kernel closes it at once; a stopped
                       (SIGSTOP) or unreachable one is noticed by the heartbeat timeout
    connect_refused()  a reconnect was refused: nothing listens on that port any more
    connect_failed()   a reconnect failed otherwise (timed out, unreachable): proves nothing

`gone()` names the watched controller once, when it was connected, the connection was then
lost, and `refusals_to_confirm` reconnects in a row were refused since. A paused process, a
busy one, or a host cut off by the network keeps its listening socket (connects succeed or time
out), so it is never judged gone here; its session expiry remains the only signal, as before.

The verdict is an optimisation, never the fence: the standby then deletes that /controller
znode (only that one: same creation zxid) and runs the ordinary election, which bumps
/controller_epoch, so a controller wrongly judged gone can change nothing (every write of its
is checked against the epoch's version) and resigns when it sees /controller name another.
"""
from __future__ import annotations

from dataclasses import dataclass

# Two refused reconnects in a row (libzmq retries every 100 ms): one refusal could be a
# listen-queue overflow; two, 100 ms apart, are a port nobody listens on.
REFUSALS_TO_CONFIRM = 2


@dataclass(frozen=True, slots=True)
class ActiveController:
    """The controller /controller names: its id, endpoint and the znode's creation zxid (one
    election's znode: a re-elected controller has a new one)."""
    controller_id: int
    endpoint: str
    czxid: int


class ActiveControllerWatch:
    def __init__(self, refusals_to_confirm: int = REFUSALS_TO_CONFIRM):
        if refusals_to_confirm < 1:
            raise ValueError("refusals_to_confirm must be >= 1")
        self.refusals_to_confirm = refusals_to_confirm
        self.target: ActiveController | None = None
        self._was_up = False
        self._lost = False
        self._refusals = 0
        self._reported = False

    def watch(self, target: ActiveController | None) -> bool:
        """Watch `target` (None: nobody). True when that is a change (the shell reconnects)."""
        if target == self.target:
            return False
        self.target = target
        self._was_up = self._lost = self._reported = False
        self._refusals = 0
        return True

    def connected(self) -> None:
        self._was_up = True
        self._lost = False
        self._refusals = 0

    def connection_lost(self) -> None:
        if self._was_up:
            self._lost = True
            self._refusals = 0

    def connect_refused(self) -> None:
        if self._lost:
            self._refusals += 1

    def connect_failed(self) -> None:
        self._refusals = 0

    def gone(self) -> ActiveController | None:
        """The watched controller, once, when its process is judged gone; else None."""
        if (self.target is None or self._reported or not self._lost
                or self._refusals < self.refusals_to_confirm):
            return None
        self._reported = True
        return self.target
