"""loadgen.clickstream's pure core: seeded, realistic, with the truth a job must reproduce."""
import json

import pytest

from loadgen.clickstream import (
    ClickstreamGenerator,
    Truth,
    build_parser,
    format_time,
    minute_of,
    page_catalog,
    parse_time,
)

START = parse_time("2026-11-25T00:00:00Z")


def gen(**kw):
    kw.setdefault("start_ms", START)
    kw.setdefault("step_ms", 50)
    return ClickstreamGenerator(**kw)


def test_same_seed_same_events_and_event_shape():
    a = [e.value for e in gen(seed=3).events(500)]
    assert a == [e.value for e in gen(seed=3).events(500)]
    assert a != [e.value for e in gen(seed=4).events(500)]
    good = [json.loads(e.value) for e in gen(bad_ratio=0).events(200)]
    assert set(good[0]) == {"event_id", "ts", "user_id", "session_id", "event_type", "page",
                            "referrer", "user_agent", "country", "duration_ms"}
    assert all(e["event_type"] in ("page_view", "click", "add_to_cart", "purchase") for e in good)
    assert all(e["ts"].endswith("Z") and e["page"].startswith("/") for e in good)


def test_synthetic_clock_with_bounded_disorder():
    events = list(gen(jitter_ms=2000).events(1000))
    for n, e in enumerate(events):
        assert START + n * 50 - 2000 <= e.timestamp_ms <= START + n * 50
        if not e.bad_kind:
            assert json.loads(e.value)["ts"] == format_time(e.timestamp_ms)
    assert all(e.key.startswith(b"u-") for e in events)


def test_bad_events_and_the_truth():
    g = gen(bad_ratio=0.2, seed=9)
    truth = Truth()
    events = list(g.events(2000))
    for e in events:
        truth.add(e)
    bad = [e for e in events if e.bad_kind]
    assert 300 < len(bad) < 500
    assert {e.bad_kind for e in bad} == {"truncated", "not_json", "no_page", "bad_ts"}
    for e in bad:
        if e.bad_kind in ("truncated", "not_json"):
            with pytest.raises(ValueError):
                json.loads(e.value)
        elif e.bad_kind == "no_page":
            assert "page" not in json.loads(e.value)
    out = truth.to_json()
    assert out["events"] == 2000 and out["good"] + out["bad"] == 2000
    assert sum(c["views"] for c in out["per_page_minute"]) == out["good"]
    assert all(c["minute_ms"] == minute_of(c["minute_ms"]) for c in out["per_page_minute"])
    hb = g.heartbeat(300_000)
    assert hb.timestamp_ms == g.last_ms + 300_000 and hb.page == "/heartbeat"


def test_popular_pages_are_popular():
    pages = [e.page for e in gen(bad_ratio=0, pages=200).events(5000)]
    top = max(set(pages), key=pages.count)
    assert pages.count(top) > 5000 / 200 * 5
    assert len(page_catalog(200)) == 200 and page_catalog(3) == ["/", "/search", "/cart"]


def test_parser_and_times():
    args = build_parser().parse_args(["--start", "2026-11-25T00:00:00Z", "--step-ms", "20",
                                      "--events", "5"])
    assert args.start == START == 1795564800000 and args.step_ms == 20
    assert parse_time("1795564800000") == START
    assert format_time(START + 5) == "2026-11-25T00:00:00.005Z"
    with pytest.raises(ValueError, match="both start_ms and step_ms"):
        ClickstreamGenerator(start_ms=START)
