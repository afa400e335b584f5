"""The ``v1beta1`` API versions Karpenter's v0.3x releases served.

``karpenter.sh/v1beta1`` NodePool and NodeClaim and ``karpenter.k8s.aws/v1beta1`` EC2NodeClass,
as users' older manifests spell them. They are read, never stored: the CRDs keep ``v1`` as the
storage version and ``karpenter_py.model.api.convert`` turns one form into the other (the
conversion webhook and ``karpenter-py plan`` both use it). Status sub-objects are the v1 ones:
the controller writes status in v1 and a v1beta1 reader sees the same fields.
"""

from karpenter_py.model.api.v1beta1.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.v1beta1.nodeclaim import NodeClaim
from karpenter_py.model.api.v1beta1.nodepool import NodePool

__all__ = ["EC2NodeClass", "NodeClaim", "NodePool"]
