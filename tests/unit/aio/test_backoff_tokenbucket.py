import random

import pytest

from karpenter_py.aio import Backoff, TokenBucket


def test_backoff_doubles_to_cap_without_jitter():
    b = Backoff(initial=0.8, maximum=30, jitter=0)
    delays = [b.next() for _ in range(8)]
    assert delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    assert b.attempts == 8
    b.reset()
    assert b.next() == 0.8


def test_backoff_jitter_stays_in_bounds():
    b = Backoff(initial=1, maximum=100, jitter=1.0, rng=random.Random(7))
    for n in range(6):
        d = b.next()
        base = 2.0**n
        assert base <= d <= min(100, 2 * base)


def test_backoff_validates():
    with pytest.raises(ValueError):
        Backoff(initial=0)
    with pytest.raises(ValueError):
        Backoff(initial=5, maximum=1)


class Mono:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_token_bucket_burst_then_qps():
    mono = Mono()
    bucket = TokenBucket(qps=10, burst=3, monotonic=mono)
    assert [bucket.reserve() for _ in range(3)] == [0, 0, 0]
    # debt accumulates: the 4th waits 0.1s, the 5th 0.2s
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)
    mono.t = 0.1  # 1 token refilled, but 2 are owed: still nothing available
    assert not bucket.try_acquire()
    mono.t = 10.0  # long idle: refills up to burst, never beyond
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_token_bucket_unlimited():
    bucket = TokenBucket(qps=0, burst=0)
    assert bucket.unlimited
    assert all(bucket.reserve() == 0 for _ in range(1000))


async def test_token_bucket_acquire_waits_for_debt():
    bucket = TokenBucket(qps=50, burst=1)
    await bucket.acquire()
    await bucket.acquire()  # ~20ms; only checks that it returns
