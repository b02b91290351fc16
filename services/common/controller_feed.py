"""Following the active controller as the `/controller` znode names it.

Gateways and the sharded roles (group coordinator, offset manager) keep the active
controller's ControllerInfo (its RPC endpoint for METADATA and admin requests) and keep their
metadata Subscriber connected to its PUB endpoint only. No I/O of its own: the caller hands in
each `/controller` payload from its watch and its Subscriber.
"""
from __future__ import annotations

import logging

from services.common import znodes


class ControllerFeed:
    def __init__(self, log: logging.Logger | logging.LoggerAdapter):
        self.log = log
        self.current: znodes.ControllerInfo | None = None

    def update(self, data: bytes | None, subscriber) -> bool:
        """Apply a `/controller` payload (None or empty: no active controller; unreadable: logged
        and treated as none). Returns True when the active controller changed; the subscriber
        then leaves the old PUB endpoint and joins the new one."""
        info = None
        if data:
            try:
                info = znodes.decode_controller(data)
            except znodes.ZnodeDataError as e:
                self.log.warning("unreadable /controller: %s", e)
        if info == self.current:
            return False
        old, self.current = self.current, info
        if old is not None and old.pub_endpoint:
            subscriber.disconnect(old.pub_endpoint)
        if info is not None and info.pub_endpoint:
            subscriber.connect(info.pub_endpoint)
        return True
