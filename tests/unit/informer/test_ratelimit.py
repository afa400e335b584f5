import pytest

from karpenter_py.informer import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)


class Mono:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_item_exponential_per_key():
    rl = ItemExponentialRateLimiter[str](base=0.005, maximum=1000)
    assert [rl.when("a") for _ in range(4)] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert rl.when("b") == pytest.approx(0.005)  # keys are independent
    assert rl.num_requeues("a") == 4
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == pytest.approx(0.005)


def test_item_exponential_caps_and_survives_huge_counts():
    rl = ItemExponentialRateLimiter[str](base=1, maximum=60)
    delays = [rl.when("k") for _ in range(200)]
    assert max(delays) == 60
    assert delays[-1] == 60


def test_bucket_limits_globally():
    mono = Mono()
    rl = BucketRateLimiter[str](qps=10, burst=2, monotonic=mono)
    assert [rl.when(k) for k in ("a", "b")] == [0, 0]
    assert rl.when("c") == pytest.approx(0.1)
    assert rl.num_requeues("c") == 0


def test_max_of_takes_larger_delay_and_forgets_everywhere():
    mono = Mono()
    item = ItemExponentialRateLimiter[str](base=0.005, maximum=1000)
    bucket = BucketRateLimiter[str](qps=10, burst=1, monotonic=mono)
    rl = MaxOfRateLimiter(item, bucket)
    assert rl.when("a") == pytest.approx(0.005)  # bucket has a token: per-item delay wins
    assert rl.when("b") == pytest.approx(0.1)  # bucket exhausted: its delay wins
    assert rl.num_requeues("a") == 1
    rl.forget("a")
    assert rl.num_requeues("a") == 0


def test_default_controller_rate_limiter_shape():
    rl: MaxOfRateLimiter[str] = default_controller_rate_limiter()
    assert rl.when("x") == pytest.approx(0.005)
    assert rl.when("x") == pytest.approx(0.01)


def test_max_of_needs_a_limiter():
    with pytest.raises(ValueError):
        MaxOfRateLimiter[str]()
