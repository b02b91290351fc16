"""Client quotas as a pure core (KIP-13 byte rates, KIP-124 request percentage): windowed rates
and throttle times the way Kafka's `ClientQuotaManager` computes them. Time is passed in.

Which quota applies to a request (Kafka's precedence, users and client ids; user+client pairs
are not supported here):

    /config/users/<user>  >  /config/users/<default>  >  /config/clients/<id>  >  /config/clients/<default>

A user quota is shared by every client id of that user (the rate is kept per user); a client-id
quota by every user with that client id (the rate is kept per client id); a `<default>` quota
gives each user (or client id) its own rate with the default bound.

Rates are Kafka's `Rate` over a `SampledStat`: `quota.window.num` samples of
`quota.window.size.seconds` each; the rate is the sum of the live samples divided by the elapsed
window, counted as at least `num - 1` full windows (so a first burst is not read as an infinite
rate). After recording, if the rate is above the bound the throttle time is Kafka's
`QuotaUtils.throttleTime`: `(rate - bound) / bound * window_ms`, at most `num * size` seconds.
The request is never refused: the response carries `throttle_time_ms` and the server holds that
client's next request until the time has passed (KIP-219).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from services.common.acl.layout import DEFAULT_ENTITY

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)


class QuotaConfigError(ValueError):
    """A quota value that is not a positive number."""


def check_quota_config(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity config as numbers; raises QuotaConfigError on a bad one."""
    out: dict[str, float] = {}
    for key, value in config.items():
        if key not in QUOTA_KEYS:
            raise QuotaConfigError(f"unknown quota config {key!r}; expected one of "
                                   f"{', '.join(QUOTA_KEYS)}")
        try:
            v = float(value)
        except ValueError:
            raise QuotaConfigError(f"{key}={value!r}: not a number") from None
        if not v > 0:
            raise QuotaConfigError(f"{key}={value!r}: must be positive")
        out[key] = v
    return out


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    samples: int = 11               # quota.window.num
    window_ms: int = 1000           # quota.window.size.seconds * 1000

    def __post_init__(self) -> None:
        if self.samples < 2 or self.window_ms <= 0:
            raise QuotaConfigError("quota.window.num must be >= 2 and quota.window.size.seconds > 0")

    @property
    def max_throttle_ms(self) -> int:
        return self.samples * self.window_ms


class Rate:
    """Kafka's Rate(SampledStat): values per second over the last `samples` windows."""

    __slots__ = ("_window", "_starts", "_values", "_current")

    def __init__(self, window: QuotaWindow, now_ms: int):
        self._window = window
        self._starts: list[int | None] = [now_ms] + [None] * (window.samples - 1)
        self._values = [0.0] * window.samples
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        w = self._window
        start = self._starts[self._current]
        if start is None or now_ms >= start + w.window_ms:
            self._current = (self._current + 1) % w.samples
            self._starts[self._current] = now_ms
            self._values[self._current] = 0.0
        self._values[self._current] += value

    def _purge(self, now_ms: int) -> None:
        w = self._window
        expire = w.samples * w.window_ms
        for i, start in enumerate(self._starts):
            if start is not None and now_ms - start >= expire:
                self._starts[i] = now_ms if i == self._current else None
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: int) -> int:
        w = self._window
        self._purge(now_ms)
        oldest = min(s for s in self._starts if s is not None)
        elapsed = now_ms - oldest
        full = elapsed // w.window_ms
        if full < w.samples - 1:
            elapsed += (w.samples - 1 - full) * w.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """The rate in units per second."""
        size = self.window_size_ms(now_ms)      # purges first
        return sum(self._values) / (size / 1000.0)


def throttle_time_ms(rate: float, bound: float, window_size_ms: int, max_ms: int) -> int:
    """Kafka's QuotaUtils.throttleTime, bounded: 0 when within the quota."""
    if rate <= bound:
        return 0
    return min(max_ms, round((rate - bound) / bound * window_size_ms))


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    kind: str          # "user" or "client": whose rate is shared
    name: str


class ClientQuotas:
    """One quota type (a key of QUOTA_KEYS) for every user and client id."""

    def __init__(self, key: str, window: QuotaWindow = QuotaWindow()):
        if key not in QUOTA_KEYS:
            raise QuotaConfigError(f"unknown quota type {key!r}")
        self.key = key
        self.window = window
        self._users: dict[str, float] = {}
        self._clients: dict[str, float] = {}
        self._rates: dict[QuotaEntity, Rate] = {}

    def set_configs(self, configs: Mapping[tuple[str, str], Mapping[str, str]]) -> None:
        """(entity type 'users'|'clients', name or <default>) -> config. Unreadable values are
        skipped (the tool validates what it writes)."""
        users: dict[str, float] = {}
        clients: dict[str, float] = {}
        for (etype, name), cfg in configs.items():
            raw = cfg.get(self.key)
            if raw is None:
                continue
            try:
                value = check_quota_config({self.key: raw})[self.key]
            except QuotaConfigError:
                continue
            (users if etype == "users" else clients)[name] = value
        self._users, self._clients = users, clients

    @property
    def enabled(self) -> bool:
        return bool(self._users or self._clients)

    def quota_for(self, user: str, client_id: str) -> tuple[QuotaEntity, float] | None:
        """The entity whose rate counts and its bound, or None (no quota)."""
        if user in self._users:
            return QuotaEntity("user", user), self._users[user]
        if DEFAULT_ENTITY in self._users:
            return QuotaEntity("user", user), self._users[DEFAULT_ENTITY]
        if client_id in self._clients:
            return QuotaEntity("client", client_id), self._clients[client_id]
        if DEFAULT_ENTITY in self._clients:
            return QuotaEntity("client", client_id), self._clients[DEFAULT_ENTITY]
        return None

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` (bytes, or percent-seconds of request time) and return the throttle
        time in ms (0 when within the quota or without one)."""
        found = self.quota_for(user, client_id)
        if found is None:
            return 0
        entity, bound = found
        rate = self._rates.get(entity)
        if rate is None:
            rate = self._rates[entity] = Rate(self.window, now_ms)
        rate.record(value, now_ms)
        return throttle_time_ms(rate.measure(now_ms), bound, rate.window_size_ms(now_ms),
                                self.window.max_throttle_ms)

    def rate(self, user: str, client_id: str, now_ms: int) -> float:
        found = self.quota_for(user, client_id)
        if found is None or found[0] not in self._rates:
            return 0.0
        return self._rates[found[0]].measure(now_ms)

    def expire(self, now_ms: int) -> None:
        """Forget rates idle for longer than the whole window (bounded memory)."""
        horizon = self.window.samples * self.window.window_ms
        for entity, rate in list(self._rates.items()):
            starts = [s for s in rate._starts if s is not None]
            if not starts or now_ms - max(starts) >= horizon:
                del self._rates[entity]


def user_name(principal: str) -> str:
    """The quota user of a principal: 'User:alice' -> 'alice' (Kafka keys user quotas by the
    principal's name)."""
    kind, sep, name = principal.partition(":")
    return name if sep else principal
