"""Kubernetes API models for Karpenter's kinds (pydantic v2, pure).

NodePool and NodeClaim (``karpenter.sh/v1``), EC2NodeClass (``karpenter.k8s.aws/v1``),
KWOKNodeClass (``karpenter.kwok.sh/v1alpha1``) and NodeOverlay (``karpenter.sh/v1alpha1``), with
upstream's fields, defaults and validation.
Parse with ``Kind.model_validate(obj)``; write with ``model_dump(by_alias=True,
exclude_none=True)``. ``crds.build_crds()`` turns the same models into CRDs.
"""

from karpenter_py.model.api.base import format_validation_error
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.api.meta import Condition, ObjectMeta
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.api.nodepool import NodePool

__all__ = [
    "Condition",
    "EC2NodeClass",
    "KWOKNodeClass",
    "NodeClaim",
    "NodeOverlay",
    "NodePool",
    "ObjectMeta",
    "format_validation_error",
]
