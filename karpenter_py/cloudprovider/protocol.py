"""The boundary between Karpenter's core and a cloud: the ``CloudProvider`` protocol.

Mirrors upstream's nine-method interface (pkg/cloudprovider/types.go). NodeClaims travel as the
API model; instance types as the ``InstanceType`` model. Implementations: ``kwok`` (fake nodes
in a real cluster) and, later, ``aws``.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Protocol

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.instancetype import InstanceType


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A node condition that, held for ``toleration_seconds``, means the node should be replaced."""

    condition_type: str
    condition_status: str
    toleration_seconds: float


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    group: str
    kind: str


class CloudProvider(Protocol):
    @property
    def name(self) -> str: ...

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one instance for the NodeClaim; return it with status (providerID, capacity,
        allocatable) and labels resolved. Must be idempotent for the same NodeClaim name."""
        ...

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Terminate the instance; raise NodeClaimNotFoundError once it is gone."""
        ...

    async def get(self, provider_id: str) -> NodeClaim:
        """The NodeClaim shape of a live instance; NodeClaimNotFoundError if there is none."""
        ...

    async def list(self) -> builtins.list[NodeClaim]:
        """Every instance this provider launched for the cluster (for garbage collection)."""
        ...

    async def get_instance_types(self, nodepool: NodePool) -> builtins.list[InstanceType]:
        """All instance types the NodePool's NodeClass allows, unavailable offerings included."""
        ...

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """A drift reason, or "" when the instance still matches its NodeClass."""
        ...

    def repair_policies(self) -> builtins.list[RepairPolicy]: ...

    def supported_node_classes(self) -> builtins.list[NodeClassRef]: ...
