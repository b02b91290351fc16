"""The storage node shell's clock: milliseconds on the monotonic clock (deadlines, lag)."""
from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.monotonic() * 1000)
