"""A node as Karpenter sees it: the Node object, its NodeClaim, or both, merged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node, Taint
from karpenter_py.model.labels import (
    ANNOTATION_DO_NOT_DISRUPT,
    LABEL_HOSTNAME,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    LABEL_NODEPOOL,
)
from karpenter_py.model.quantity import parse_resources


@dataclass(frozen=True, slots=True, eq=False)
class StateNode:
    """``node`` is None while a NodeClaim is in flight; ``nodeclaim`` is None for nodes Karpenter
    does not manage."""

    node: Node | None
    nodeclaim: NodeClaim | None
    marked_for_deletion: bool = False
    nominated: bool = False

    @property
    def name(self) -> str:
        if self.node is not None:
            return self.node.name
        assert self.nodeclaim is not None
        return self.nodeclaim.status.node_name or self.nodeclaim.metadata.name or ""

    @property
    def nodeclaim_name(self) -> str:
        return (self.nodeclaim.metadata.name or "") if self.nodeclaim is not None else ""

    @property
    def provider_id(self) -> str:
        if self.node is not None and self.node.provider_id:
            return self.node.provider_id
        return self.nodeclaim.status.provider_id if self.nodeclaim is not None else ""

    @property
    def labels(self) -> Mapping[str, str]:
        if self.node is not None:
            return self.node.labels
        assert self.nodeclaim is not None
        return self.nodeclaim.metadata.labels or {}

    @property
    def node_pool(self) -> str:
        return self.labels.get(LABEL_NODEPOOL, "")

    @property
    def managed(self) -> bool:
        return self.nodeclaim is not None or bool(self.node_pool)

    @property
    def registered(self) -> bool:
        return self.node is not None and (
            not self.managed or self.labels.get(LABEL_NODE_REGISTERED) == "true"
        )

    @property
    def initialized(self) -> bool:
        if self.node is None:
            return False
        return not self.managed or self.labels.get(LABEL_NODE_INITIALIZED) == "true"

    @property
    def in_flight(self) -> bool:
        return self.node is None

    @property
    def taints(self) -> tuple[Taint, ...]:
        if self.node is not None:
            return self.node.taints
        assert self.nodeclaim is not None
        return tuple(
            Taint(key=t.key, effect=t.effect, value=t.value or "")
            for t in self.nodeclaim.spec.taints
        )

    @property
    def allocatable(self) -> dict[str, int]:
        """What pods may use. Before a NodeClaim launches, only what it was sized for."""
        if self.node is not None and self.node.allocatable:
            return dict(self.node.allocatable)
        if self.nodeclaim is None:
            return {}
        if self.nodeclaim.status.allocatable:
            return parse_resources(self.nodeclaim.status.allocatable)
        return parse_resources(self.nodeclaim.spec.resources.requests)

    @property
    def capacity(self) -> dict[str, int]:
        if self.node is not None and self.node.capacity:
            return dict(self.node.capacity)
        if self.nodeclaim is not None and self.nodeclaim.status.capacity:
            return parse_resources(self.nodeclaim.status.capacity)
        return self.allocatable

    @property
    def hostname(self) -> str:
        return self.labels.get(LABEL_HOSTNAME, self.name)

    @property
    def do_not_disrupt(self) -> bool:
        annotations = self.node.annotations if self.node is not None else {}
        return annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true"
