"""The token bucket behind --throughput: time is passed in, so these run on a virtual clock."""
import pytest

from loadgen.ratelimit import TokenBucket, Unlimited, make_limiter


def test_burst_is_free_then_each_record_waits_one_period():
    b = TokenBucket(rate=100, burst=5, now=0.0)
    assert [b.take(1, 0.0) for _ in range(5)] == [0.0] * 5
    assert b.take(1, 0.0) == pytest.approx(0.01)
    assert b.take(1, 0.0) == pytest.approx(0.02)    # debt accumulates


def test_long_run_rate_matches_target_on_virtual_clock():
    rate = 1000.0
    b = TokenBucket(rate=rate, burst=10, now=0.0)
    now = 0.0
    for _ in range(5000):
        now += b.take(1, now)          # a perfect sleeper
    # 5000 records at 1000/s, minus the initial burst of 10 records.
    assert now == pytest.approx((5000 - 10) / rate, rel=1e-9)


def test_idle_time_refills_only_up_to_burst():
    b = TokenBucket(rate=100, burst=3, now=0.0)
    for _ in range(3):
        b.take(1, 0.0)
    assert b.take(1, 100.0) == 0.0     # a long pause refills...
    b.take(1, 100.0)
    b.take(1, 100.0)
    assert b.take(1, 100.0) > 0        # ...but never beyond the burst


def test_take_many_at_once_for_bulk_sends():
    b = TokenBucket(rate=1000, burst=100, now=0.0)
    assert b.take(100, 0.0) == 0.0
    assert b.take(500, 0.0) == pytest.approx(0.5)


def test_make_limiter_kafka_semantics():
    assert isinstance(make_limiter(-1, 0.0), Unlimited)
    assert make_limiter(-1, 0.0).take(10**9, 0.0) == 0.0
    assert isinstance(make_limiter(50, 0.0), TokenBucket)
    with pytest.raises(ValueError):
        make_limiter(0, 0.0)
    with pytest.raises(ValueError):
        TokenBucket(rate=float("inf"))
