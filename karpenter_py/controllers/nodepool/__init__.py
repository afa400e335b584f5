"""NodePool controllers: the status counter (resources and node count)."""

from karpenter_py.controllers.nodepool.counter import NodePoolCounter

__all__ = ["NodePoolCounter"]
