"""Named failpoints in shells, on only in tests (STYLE §8): `RIVERBED_FAILPOINTS` in a service's
environment, a comma-separated list of `name=action`, read once at start. Unset (every
deployment): every call answers None at the cost of a dict lookup.

    RIVERBED_FAILPOINTS=transaction_coordinator.before_markers=hang

Actions a shell may honour: `hang` (stop at that point for good: the test then kills the
process there, e.g. a transaction coordinator between its durable decision and its markers).
The names a shell checks are listed where it checks them.
"""
from __future__ import annotations

import os

ENV = "RIVERBED_FAILPOINTS"


def _parse(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(","):
        name, _, action = item.strip().partition("=")
        if name:
            out[name] = action or "on"
    return out


_ACTIVE = _parse(os.environ.get(ENV, ""))


def action(name: str) -> str | None:
    """The action configured for failpoint `name`, or None (the usual case)."""
    return _ACTIVE.get(name) if _ACTIVE else None
