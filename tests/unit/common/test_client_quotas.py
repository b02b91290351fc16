"""The quota core: Kafka's windowed Rate, throttle times and entity precedence (virtual time)."""
from __future__ import annotations

import pytest

from services.common.acl.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaConfigError,
    QuotaEntity,
    QuotaWindow,
    Rate,
    check_quota_config,
    throttle_time_ms,
    user_name,
)

W = QuotaWindow(samples=11, window_ms=1000)


def test_rate_counts_at_least_samples_minus_one_windows():
    r = Rate(W, 0)
    r.record(10_000, 0)
    assert r.window_size_ms(0) == 10_000           # a first burst is spread over 10 windows
    assert r.measure(0) == pytest.approx(1000.0)
    r.record(10_000, 5_000)
    assert r.measure(5_000) == pytest.approx(2000.0)


def test_rate_forgets_samples_older_than_the_whole_window():
    r = Rate(W, 0)
    r.record(1_000_000, 0)
    for t in range(1_000, 30_001, 1_000):
        r.record(100, t)
    # Only the last 11 windows count: 11 x 100 bytes over 11 s (the window is full by now).
    assert r.measure(30_000) == pytest.approx(1100 / 10.0, rel=0.15)


def test_throttle_time_is_kafkas_formula_bounded():
    assert throttle_time_ms(100, 100, 10_000, 11_000) == 0
    assert throttle_time_ms(150, 100, 10_000, 11_000) == 5_000
    assert throttle_time_ms(10_000, 100, 10_000, 11_000) == 11_000


def test_a_producer_at_twice_its_quota_is_throttled_back_to_it():
    q = ClientQuotas(PRODUCER_BYTE_RATE, W)
    q.set_configs({("users", "alice"): {PRODUCER_BYTE_RATE: "1000"}})
    now, sent, held_until = 0, 0, 0
    # A client that honours throttle_time_ms: send 500 B whenever it is allowed to.
    while now < 60_000:
        if now >= held_until:
            t = q.record("alice", "app", 500, now)
            sent += 500
            held_until = now + t
        now += 50
    assert 0.8 * 60_000 <= sent <= 1.3 * 60_000       # ~1000 B/s over 60 s
    assert q.record("bob", "app", 10**9, now) == 0    # bob has no quota


def test_entity_precedence_and_sharing():
    q = ClientQuotas(CONSUMER_BYTE_RATE, W)
    q.set_configs({("users", "alice"): {CONSUMER_BYTE_RATE: "100"},
                   ("users", "<default>"): {CONSUMER_BYTE_RATE: "200"},
                   ("clients", "etl"): {CONSUMER_BYTE_RATE: "300"},
                   ("clients", "<default>"): {CONSUMER_BYTE_RATE: "400"},
                   ("users", "carol"): {PRODUCER_BYTE_RATE: "5"}})      # another quota type
    assert q.quota_for("alice", "etl") == (QuotaEntity("user", "alice"), 100)
    assert q.quota_for("bob", "etl") == (QuotaEntity("user", "bob"), 200)
    q.set_configs({("clients", "etl"): {CONSUMER_BYTE_RATE: "300"},
                   ("clients", "<default>"): {CONSUMER_BYTE_RATE: "400"}})
    assert q.quota_for("bob", "etl") == (QuotaEntity("client", "etl"), 300)
    assert q.quota_for("bob", "web") == (QuotaEntity("client", "web"), 400)
    # One client id shared by two users: one rate.
    q.set_configs({("clients", "etl"): {CONSUMER_BYTE_RATE: "100"}})
    assert q.record("alice", "etl", 1000, 0) == 0
    assert q.record("bob", "etl", 1000, 0) > 0
    assert q.record("bob", "web", 10**6, 0) == 0


def test_request_percentage_and_config_checks():
    q = ClientQuotas(REQUEST_PERCENTAGE, W)
    q.set_configs({("users", "alice"): {REQUEST_PERCENTAGE: "50"}})
    # 0.5 s of request time per second is 50 %: fine; 2 s per second is not.
    assert q.record("alice", "x", 0.5 * 100 * 10, 0) == 0
    assert q.record("alice", "x", 2 * 100 * 10, 0) > 0
    with pytest.raises(QuotaConfigError):
        check_quota_config({"producer_byte_rate": "-1"})
    with pytest.raises(QuotaConfigError):
        check_quota_config({"bytes": "1"})
    with pytest.raises(QuotaConfigError):
        check_quota_config({"consumer_byte_rate": "fast"})
    assert user_name("User:alice") == "alice"


def test_idle_rates_are_forgotten():
    q = ClientQuotas(PRODUCER_BYTE_RATE, W)
    q.set_configs({("clients", "<default>"): {PRODUCER_BYTE_RATE: "10"}})
    for i in range(100):
        q.record("", f"c{i}", 1, 0)
    q.expire(20_000)
    assert q._rates == {}
