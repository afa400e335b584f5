"""EC2NodeClass controllers: status (subnets, security groups, AMIs, instance profile),
conditions and the termination finalizer."""

from karpenter_py.controllers.nodeclass.status import KubernetesVersion, NodeClassStatus

__all__ = ["KubernetesVersion", "NodeClassStatus"]
