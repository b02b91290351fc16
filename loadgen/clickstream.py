"""Clickstream events for the Spark jobs (jobs/): realistic JSON page views to a topic.

    python -m loadgen.clickstream --bootstrap-server tcp://127.0.0.1:9092 --topic clicks \\
        --events 100000 [--rate 2000] [--bad-ratio 0.01] [--seed 1] \\
        [--start 2026-11-25T00:00:00Z --step-ms 50] [--close-windows-ms 300000] \\
        [--truth truth.json]

One event per record, keyed by user (a user's events stay in order on one partition), the
record's timestamp the event's time:

    {"event_id": "e1-000042", "ts": "2026-11-25T00:00:02.113Z", "user_id": "u-00017",
     "session_id": "s-00017-3", "event_type": "page_view", "page": "/products/12",
     "referrer": "https://www.google.com/", "user_agent": "Mozilla/5.0 (...)",
     "country": "DE", "duration_ms": 5120}

Pages are drawn with Zipf-like popularity (a few hot pages, a long tail), users browse in
sessions (landing page, then links, sometimes a cart and a purchase), some users are bots.
Event times are the wall clock, or a synthetic clock (`--start`, `--step-ms`) for repeatable
runs, with up to `--jitter-ms` of disorder. `--bad-ratio` of the events are bad in one of four
ways (truncated JSON, not JSON, no page, a time that does not parse): the jobs send those to a
dead-letter topic. `--close-windows-ms` ends the run with one more good event that far past the
last one (a heartbeat), so a streaming job's watermark passes every window of the run.

`--truth FILE` writes what a correct job must output: good events per page per minute, the
bad events' ids, and counts. The generator is a pure core (`ClickstreamGenerator`, seeded) and
a thin shell (`main`: the SDK's Producer, acks=all).
"""
from __future__ import annotations

import argparse
import bisect
import dataclasses
import datetime as dt
import json
import os
import random
import sys
import time
from typing import Iterator

__all__ = ["ClickstreamGenerator", "Event", "Truth", "main", "minute_of", "parse_time"]

EVENT_TYPES = ("page_view", "click", "add_to_cart", "purchase")
COUNTRIES = ("DE", "US", "FR", "GB", "NL", "BR", "IN", "JP", "ES", "IT")
COUNTRY_WEIGHTS = (18, 30, 9, 10, 5, 6, 8, 5, 5, 4)
REFERRERS = (None, "https://www.google.com/", "https://duckduckgo.com/", "https://news.ycombinator.com/",
             "https://t.co/", "https://www.facebook.com/", "https://mail.example.com/")
BROWSERS = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
)
BOTS = ("Googlebot/2.1 (+http://www.google.com/bot.html)", "Mozilla/5.0 (compatible; bingbot/2.0)")
BAD_KINDS = ("truncated", "not_json", "no_page", "bad_ts")


def page_catalog(pages: int) -> list[str]:
    """Site paths: home, a few sections, then product pages (pages >= 8)."""
    fixed = ["/", "/search", "/cart", "/checkout", "/account", "/help", "/deals", "/blog"]
    return fixed[:pages] + [f"/products/{i}" for i in range(max(0, pages - len(fixed)))]


def format_time(ms: int) -> str:
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_time(text: str) -> int:
    """ISO 8601 ('2026-11-25T00:00:00Z') or ms since the epoch -> ms since the epoch."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1000)


def minute_of(ms: int) -> int:
    return ms - ms % 60_000


@dataclasses.dataclass(frozen=True)
class Event:
    key: bytes
    value: bytes
    timestamp_ms: int
    event_id: str
    page: str | None          # None for bad events
    bad_kind: str | None = None


@dataclasses.dataclass
class Truth:
    """What a correct job outputs: good events per (page, minute start in ms), bad ids."""
    events: int = 0
    good: int = 0
    per_page_minute: dict = dataclasses.field(default_factory=dict)
    bad_ids: list = dataclasses.field(default_factory=list)
    heartbeat_id: str | None = None

    def add(self, e: Event) -> None:
        self.events += 1
        if e.bad_kind is not None:
            self.bad_ids.append(e.event_id)
            return
        self.good += 1
        k = (e.page, minute_of(e.timestamp_ms))
        self.per_page_minute[k] = self.per_page_minute.get(k, 0) + 1

    def to_json(self) -> dict:
        return {"events": self.events, "good": self.good, "bad": len(self.bad_ids),
                "bad_ids": self.bad_ids, "heartbeat_id": self.heartbeat_id,
                "per_page_minute": [{"page": p, "minute": format_time(m), "minute_ms": m,
                                     "views": n}
                                    for (p, m), n in sorted(self.per_page_minute.items())]}


class ClickstreamGenerator:
    """Seeded, deterministic events. clock(): the next event's base time in ms (the wall clock,
    or start_ms + n * step_ms); jitter_ms of disorder is added on top."""

    def __init__(self, *, seed: int = 1, users: int = 2000, pages: int = 200,
                 bad_ratio: float = 0.01, bot_ratio: float = 0.03, start_ms: int | None = None,
                 step_ms: float | None = None, jitter_ms: int = 2000):
        if not 0 <= bad_ratio <= 1:
            raise ValueError(f"bad_ratio {bad_ratio} is not in [0, 1]")
        if (start_ms is None) != (step_ms is None):
            raise ValueError("give both start_ms and step_ms (a synthetic clock), or neither")
        self.rng = random.Random(seed)
        self.seed = seed
        self.pages = page_catalog(pages)
        weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(self.pages))]
        self._cum = list(_accumulate(weights))
        self.users = users
        self.bad_ratio = bad_ratio
        self._bots = {u for u in range(users) if self.rng.random() < bot_ratio}
        self._user_agent = {u: self.rng.choice(BOTS if u in self._bots else BROWSERS)
                            for u in range(users)}
        self._country = {u: self.rng.choices(COUNTRIES, COUNTRY_WEIGHTS)[0] for u in range(users)}
        self._session: dict[int, list] = {}      # user -> [session number, events left, page]
        self.start_ms = start_ms
        self.step_ms = step_ms
        self.jitter_ms = jitter_ms
        self.n = 0
        self.last_ms = 0

    def _page(self) -> str:
        i = bisect.bisect_left(self._cum, self.rng.random() * self._cum[-1])
        return self.pages[min(i, len(self.pages) - 1)]

    def _clock(self) -> int:
        if self.start_ms is None:
            return int(time.time() * 1000)
        assert self.step_ms is not None
        return self.start_ms + int(self.n * self.step_ms)

    def _good(self, user: int, ts: int) -> dict:
        s = self._session.get(user)
        if s is None or s[1] <= 0:
            number = (s[0] + 1) if s else 1
            s = self._session[user] = [number, self.rng.randint(1, 12), None]
            referrer = self.rng.choice(REFERRERS)
            page = self._page()
            event_type = "page_view"
        else:
            referrer = None
            r = self.rng.random()
            if s[2] == "/cart" and r < 0.35:
                page, event_type = "/checkout", "purchase"
            elif r < 0.08 and s[2] and s[2].startswith("/products/"):
                page, event_type = "/cart", "add_to_cart"
            else:
                page = self._page()
                event_type = "click" if r < 0.5 else "page_view"
        s[1] -= 1
        s[2] = page
        return {"event_id": f"e{self.seed}-{self.n:09d}", "ts": format_time(ts),
                "user_id": f"u-{user:05d}", "session_id": f"s-{user:05d}-{s[0]}",
                "event_type": event_type, "page": page, "referrer": referrer,
                "user_agent": self._user_agent[user], "country": self._country[user],
                "duration_ms": int(self.rng.expovariate(1 / 8000))}

    def next(self) -> Event:
        base = self._clock()
        ts = max(0, base - self.rng.randint(0, self.jitter_ms)) if self.jitter_ms else base
        user = self.rng.randrange(self.users)
        body = self._good(user, ts)
        key = body["user_id"].encode()
        event_id = body["event_id"]
        self.n += 1
        self.last_ms = max(self.last_ms, ts)
        if self.rng.random() >= self.bad_ratio:
            return Event(key, json.dumps(body, separators=(",", ":")).encode(), ts, event_id,
                         body["page"])
        kind = self.rng.choice(BAD_KINDS)
        if kind == "truncated":
            text = json.dumps(body, separators=(",", ":"))
            value = text[: self.rng.randint(10, len(text) - 2)].encode()
        elif kind == "not_json":
            value = b"\x00\xff" + event_id.encode() + b" <html>502 Bad Gateway</html>"
        elif kind == "no_page":
            del body["page"]
            value = json.dumps(body, separators=(",", ":")).encode()
        else:
            body["ts"] = "yesterday around noon"
            value = json.dumps(body, separators=(",", ":")).encode()
        return Event(key, value, ts, event_id, None, kind)

    def heartbeat(self, after_ms: int) -> Event:
        """One good event after_ms past the latest event so far (closes a job's windows)."""
        ts = self.last_ms + after_ms
        body = {"event_id": f"e{self.seed}-heartbeat", "ts": format_time(ts),
                "user_id": "u-heartbeat", "session_id": "s-heartbeat", "event_type": "page_view",
                "page": "/heartbeat", "referrer": None, "user_agent": BOTS[0], "country": "US",
                "duration_ms": 0}
        return Event(b"u-heartbeat", json.dumps(body, separators=(",", ":")).encode(), ts,
                     body["event_id"], "/heartbeat")

    def events(self, count: int) -> Iterator[Event]:
        for _ in range(count):
            yield self.next()


def _accumulate(weights):
    total = 0.0
    for w in weights:
        total += w
        yield total


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m loadgen.clickstream",
                                description="Produce clickstream JSON events to a topic.")
    p.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap_server",
                   default=os.environ.get("RIVERBED_BOOTSTRAP") or "tcp://127.0.0.1:9092",
                   help="a gateway (default: $RIVERBED_BOOTSTRAP or tcp://127.0.0.1:9092)")
    p.add_argument("--topic", default="clicks")
    p.add_argument("--events", type=int, default=100_000, help="how many (default %(default)s)")
    p.add_argument("--rate", type=float, default=0, help="events/s (default: as fast as possible)")
    p.add_argument("--bad-ratio", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--pages", type=int, default=200)
    p.add_argument("--start", type=parse_time, default=None,
                   help="a synthetic clock's start (ISO 8601 or ms); with --step-ms")
    p.add_argument("--step-ms", type=float, default=None, help="synthetic ms between events")
    p.add_argument("--jitter-ms", type=int, default=2000, help="disorder of event times")
    p.add_argument("--close-windows-ms", type=int, default=0,
                   help="end with a heartbeat event this many ms after the last event")
    p.add_argument("--truth", help="write what a correct job outputs to this JSON file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from riverbed import Producer
    gen = ClickstreamGenerator(seed=args.seed, users=args.users, pages=args.pages,
                               bad_ratio=args.bad_ratio, start_ms=args.start,
                               step_ms=args.step_ms, jitter_ms=args.jitter_ms)
    truth = Truth()
    started = time.monotonic()
    with Producer([args.bootstrap_server], acks="all", linger_ms=5) as producer:
        futures = []
        for i, e in enumerate(gen.events(args.events)):
            if args.rate > 0:
                ahead = i / args.rate - (time.monotonic() - started)
                if ahead > 0.002:
                    time.sleep(ahead)
            futures.append(producer.send(args.topic, e.value, key=e.key, timestamp_ms=e.timestamp_ms))
            truth.add(e)
            if len(futures) >= 50_000:
                for f in futures:
                    f.result(60)
                futures = []
        if args.close_windows_ms:
            e = gen.heartbeat(args.close_windows_ms)
            futures.append(producer.send(args.topic, e.value, key=e.key,
                                         timestamp_ms=e.timestamp_ms))
            truth.heartbeat_id = e.event_id
        producer.flush(120)
        for f in futures:
            f.result(0)
    elapsed = time.monotonic() - started
    print(f"{truth.events} events ({len(truth.bad_ids)} bad) to {args.topic} in {elapsed:.1f} s",
          file=sys.stderr)
    if args.truth:
        with open(args.truth, "w") as f:
            json.dump(truth.to_json(), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
