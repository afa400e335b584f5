"""Generic list+watch machinery: reflector, store, sinks, work queue and rate limiters.

Knows nothing about Karpenter types; ``manager`` connects reflector sinks to ``state``.
"""

from karpenter_py.informer.events import CallbackSink, Sink
from karpenter_py.informer.ratelimit import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from karpenter_py.informer.reflector import Reflector, ReflectorStatistics
from karpenter_py.informer.source import KubeListWatch, ListWatch
from karpenter_py.informer.store import IndexFunc, ReplaceDiff, Store, field_indexer
from karpenter_py.informer.workqueue import (
    QueueClosedError,
    QueueEmptyError,
    QueueStatistics,
    WorkQueue,
)

__all__ = [
    "BucketRateLimiter",
    "CallbackSink",
    "IndexFunc",
    "ItemExponentialRateLimiter",
    "KubeListWatch",
    "ListWatch",
    "MaxOfRateLimiter",
    "QueueClosedError",
    "QueueEmptyError",
    "QueueStatistics",
    "RateLimiter",
    "Reflector",
    "ReflectorStatistics",
    "ReplaceDiff",
    "Sink",
    "Store",
    "WorkQueue",
    "default_controller_rate_limiter",
    "field_indexer",
]
