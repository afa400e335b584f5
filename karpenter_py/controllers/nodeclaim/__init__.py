"""NodeClaim controllers: the lifecycle (launch, registration, initialization, liveness), garbage
collection, pod events (``lastPodEventTime``) and the consistency (node shape) check. See each
module's docstring for how the manager wires it."""

from karpenter_py.controllers.nodeclaim.consistency import NodeClaimConsistency
from karpenter_py.controllers.nodeclaim.garbagecollection import NodeClaimGarbageCollector
from karpenter_py.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpenter_py.controllers.nodeclaim.podevents import NodeClaimPodEvents

__all__ = [
    "NodeClaimConsistency",
    "NodeClaimGarbageCollector",
    "NodeClaimLifecycle",
    "NodeClaimPodEvents",
]
