"""NodePool controllers: the status counter (resources and node count) and readiness
(ValidationSucceeded, NodeClassReady, Ready conditions and the nodepool-hash annotations)."""

from karpenter_py.controllers.nodepool.counter import NodePoolCounter
from karpenter_py.controllers.nodepool.readiness import NodePoolReadiness

__all__ = ["NodePoolCounter", "NodePoolReadiness"]
