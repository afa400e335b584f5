"""Domain-free asyncio kit: clock, batcher, backoff, token bucket, single flight, task helpers and
resources."""

from karpenter_py.aio.backoff import Backoff
from karpenter_py.aio.batcher import Batcher, BatcherStatistics, CallBatcher
from karpenter_py.aio.clock import Clock, FakeClock, RealClock
from karpenter_py.aio.resource import AsyncResource
from karpenter_py.aio.singleflight import SingleFlight
from karpenter_py.aio.tasks import (
    bounded,
    cancel_and_wait,
    checkpoint,
    gather_limited,
    supervise,
)
from karpenter_py.aio.tokenbucket import TokenBucket

__all__ = [
    "AsyncResource",
    "Backoff",
    "Batcher",
    "BatcherStatistics",
    "CallBatcher",
    "Clock",
    "FakeClock",
    "RealClock",
    "SingleFlight",
    "TokenBucket",
    "bounded",
    "cancel_and_wait",
    "checkpoint",
    "gather_limited",
    "supervise",
]
