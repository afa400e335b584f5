"""NodeClaim controllers: the lifecycle (launch, registration, initialization, liveness) and
garbage collection. See each module's docstring for how the manager wires it."""

from karpenter_py.controllers.nodeclaim.garbagecollection import NodeClaimGarbageCollector
from karpenter_py.controllers.nodeclaim.lifecycle import NodeClaimLifecycle

__all__ = ["NodeClaimGarbageCollector", "NodeClaimLifecycle"]
