"""NodeClaim, ``karpenter.sh/v1beta1``: its spec carries ``kubelet`` and no ``expireAfter``."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from karpenter_py.model.api.base import KubeModel
from karpenter_py.model.api.meta import ObjectMeta
from karpenter_py.model.api.nodeclaim import NodeClaimStatus
from karpenter_py.model.api.v1beta1.common import NodeClaimSpecBase

API_VERSION: Final = "karpenter.sh/v1beta1"
KIND: Final = "NodeClaim"


class NodeClaim(KubeModel):
    """NodeClaim, karpenter.sh/v1beta1 (served for older clients; stored as v1)."""

    api_version: Literal["karpenter.sh/v1beta1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["NodeClaim"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeClaimSpecBase
    status: NodeClaimStatus = Field(default_factory=NodeClaimStatus)
