"""Counters the hot paths bump: plain attribute and dict arithmetic (well under a microsecond),
read by the observable instruments of services.common.telemetry at collection. Pure: no clock,
no I/O; callers pass the durations they measured.

- RequestMetrics: per API, requests, errors per code, and the time split Kafka's RequestMetrics
  uses (queue, local, remote = waiting for followers or for fetch data, response send, total),
  as totals in seconds and the largest total seen.
- TopicCounters: bytes in, bytes out, messages in per topic (counted per batch, never per record).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["ApiStats", "RequestMetrics", "TopicCounters", "PHASES"]

PHASES = ("queue", "local", "remote", "send")


class ApiStats:
    __slots__ = ("requests", "queue", "local", "remote", "send", "total", "max_total")

    def __init__(self) -> None:
        self.requests = 0
        self.queue = self.local = self.remote = self.send = self.total = 0.0
        self.max_total = 0.0


class RequestMetrics:
    def __init__(self) -> None:
        self.apis: dict[str, ApiStats] = {}
        self.errors: dict[tuple[str, str], int] = {}      # (api, error name) -> count
        self.clients: dict[tuple[str, str], int] = {}     # (api, client id) -> requests
        self.track_clients = False

    def record(self, api: str, queue_s: float, local_s: float, remote_s: float,
               send_s: float, client_id: str = "") -> None:
        st = self.apis.get(api)
        if st is None:
            st = self.apis[api] = ApiStats()
        st.requests += 1
        st.queue += queue_s
        st.local += local_s
        st.remote += remote_s
        st.send += send_s
        total = queue_s + local_s + remote_s + send_s
        st.total += total
        if total > st.max_total:
            st.max_total = total
        if self.track_clients:
            key = (api, client_id)
            self.clients[key] = self.clients.get(key, 0) + 1

    def error(self, api: str, error: str) -> None:
        key = (api, error)
        self.errors[key] = self.errors.get(key, 0) + 1

    # -- observations for the telemetry callbacks ---------------------------------------------
    def requests_obs(self) -> Iterable[tuple[float, dict[str, Any]]]:
        return [(st.requests, {"api": api}) for api, st in list(self.apis.items())]

    def time_obs(self) -> Iterable[tuple[float, dict[str, Any]]]:
        out: list[tuple[float, dict[str, Any]]] = []
        for api, st in list(self.apis.items()):
            for phase in PHASES:
                out.append((getattr(st, phase), {"api": api, "phase": phase}))
            out.append((st.total, {"api": api, "phase": "total"}))
        return out

    def max_obs(self) -> Iterable[tuple[float, dict[str, Any]]]:
        return [(st.max_total, {"api": api}) for api, st in list(self.apis.items())]

    def errors_obs(self) -> Iterable[tuple[float, dict[str, Any]]]:
        return [(n, {"api": api, "error": e}) for (api, e), n in list(self.errors.items())]

    def clients_obs(self) -> Iterable[tuple[float, dict[str, Any]]]:
        return [(n, {"api": api, "client_id": c}) for (api, c), n in list(self.clients.items())]


class TopicCounters:
    """Per-topic totals: one dict lookup per batch or per partition of a request."""

    def __init__(self) -> None:
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.messages_in: dict[str, int] = {}

    def produced(self, topic: str, nbytes: int, records: int) -> None:
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + nbytes
        self.messages_in[topic] = self.messages_in.get(topic, 0) + records

    def fetched(self, topic: str, nbytes: int) -> None:
        if nbytes:
            self.bytes_out[topic] = self.bytes_out.get(topic, 0) + nbytes

    def forget(self, topic: str) -> None:
        for d in (self.bytes_in, self.bytes_out, self.messages_in):
            d.pop(topic, None)

    @staticmethod
    def obs(d: dict[str, int]) -> Iterable[tuple[float, dict[str, Any]]]:
        return [(n, {"topic": t}) for t, n in list(d.items())]
