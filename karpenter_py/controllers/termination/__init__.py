"""Termination controllers: NodeClaim and Node finalizers, draining through the eviction queue.
Each declares what wakes it (``watches()``)."""

from karpenter_py.controllers.termination.eviction import EvictionQueue
from karpenter_py.controllers.termination.node import NodeTermination
from karpenter_py.controllers.termination.nodeclaim import NodeClaimTermination

__all__ = ["EvictionQueue", "NodeClaimTermination", "NodeTermination"]
