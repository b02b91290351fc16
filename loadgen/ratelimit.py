"""A token bucket for `--throughput` (records/s): pure, time is passed in.

Kafka's perf tool throttles by sleeping until `sent / elapsed <= target`; a bucket does the same
on average and bounds the burst after a stall (a GC pause, a full buffer) to `burst` records
instead of letting the sender catch up at full speed.

    bucket = TokenBucket(rate=1000, burst=100, now=0.0)
    delay = bucket.take(1, now)    # seconds to wait before sending (0.0: send now)
"""
from __future__ import annotations

import math

__all__ = ["TokenBucket", "Unlimited", "make_limiter"]


class TokenBucket:
    """`rate` tokens per second, at most `burst` stored. `take(n, now)` spends n tokens
    (possibly going into debt) and returns how long to wait until the debt is paid."""

    __slots__ = ("rate", "burst", "_tokens", "_last")

    def __init__(self, rate: float, burst: float | None = None, now: float = 0.0):
        if not rate > 0 or math.isinf(rate):
            raise ValueError(f"rate must be a positive finite number, not {rate!r}")
        self.rate = float(rate)
        # Default burst: 10 ms worth of records, at least one.
        self.burst = float(burst) if burst is not None else max(1.0, self.rate / 100.0)
        if self.burst < 1.0:
            raise ValueError("burst must be >= 1")
        self._tokens = self.burst
        self._last = now

    def _refill(self, now: float) -> None:
        if now > self._last:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now

    def take(self, n: float, now: float) -> float:
        """Spend n tokens at time `now`; return the seconds to wait (0.0 if none)."""
        self._refill(now)
        self._tokens -= n
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.rate

    @property
    def tokens(self) -> float:
        return self._tokens


class Unlimited:
    """`--throughput -1`: never waits."""

    __slots__ = ()

    def take(self, n: float, now: float) -> float:  # noqa: ARG002 - same shape as TokenBucket
        return 0.0


def make_limiter(records_per_sec: float, now: float, burst: float | None = None):
    """A TokenBucket for a positive rate, Unlimited for a negative (Kafka's -1) one."""
    if records_per_sec is None or records_per_sec < 0:
        return Unlimited()
    if records_per_sec == 0:
        raise ValueError("--throughput 0 would never send: use a positive rate or -1")
    return TokenBucket(records_per_sec, burst, now)
