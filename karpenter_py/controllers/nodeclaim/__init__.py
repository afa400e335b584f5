"""NodeClaim controllers: the lifecycle (launch, registration, initialization, liveness), garbage
collection, pod events (``lastPodEventTime``), the consistency (node shape) check and the
disruption conditions (``Consolidatable``, ``Drifted``). Each declares what wakes it
(``watches()``)."""

from karpenter_py.controllers.nodeclaim.consistency import NodeClaimConsistency
from karpenter_py.controllers.nodeclaim.disruption import NodeClaimDisruption
from karpenter_py.controllers.nodeclaim.garbagecollection import NodeClaimGarbageCollector
from karpenter_py.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpenter_py.controllers.nodeclaim.podevents import NodeClaimPodEvents

__all__ = [
    "NodeClaimConsistency",
    "NodeClaimDisruption",
    "NodeClaimGarbageCollector",
    "NodeClaimLifecycle",
    "NodeClaimPodEvents",
]
