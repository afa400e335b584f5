"""A node as Karpenter sees it: the Node object, its NodeClaim, or both, merged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from karpenter_py.model.api.common import slim_taints
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node, Taint, normalize_label
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
    # When the nomination runs out (the later of the Node's and the NodeClaim's): disruption
    # looks again at that moment rather than waiting for a cluster change.
    nominated_until: datetime | None = None
    # The largest capacity a NodeClaim created a moment ago may launch with (``Cluster.reserve``),
    # charged against its NodePool's limits until it reports its own.
    reserved: Mapping[str, int] = field(default_factory=dict)

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
        """What the scheduler may count on the node carrying. A Node Karpenter has not finished
        setting up (not initialized) is judged by its NodeClaim, as upstream's state does: a
        kubelet may register it bare (user data without ``--node-labels``) and registration copies
        the claim's labels over only a moment later, so the Node's labels plus the claim's (what
        registration will write). For a NodeClaim in flight, what its node will carry."""
        if self.node is None:
            return self._claim_labels()
        if self.nodeclaim is None or self.initialized:
            return self.node.labels
        return {**self.node.labels, **self._claim_labels()}

    def _claim_labels(self) -> dict[str, str]:
        """The claim's labels plus every single-valued ``In`` requirement (as upstream labels a
        new node)."""
        assert self.nodeclaim is not None
        labels = dict(self.nodeclaim.metadata.labels or {})
        for req in self.nodeclaim.spec.requirements:
            if req.operator == "In" and len(req.values) == 1:
                labels.setdefault(normalize_label(req.key), req.values[0])
        return labels

    @property
    def node_pool(self) -> str:
        return self.labels.get(LABEL_NODEPOOL, "")

    @property
    def managed(self) -> bool:
        # The Node's own labels: ``labels`` itself depends on whether the node is managed.
        return self.nodeclaim is not None or (
            self.node is not None and bool(self.node.labels.get(LABEL_NODEPOOL))
        )

    @property
    def registered(self) -> bool:
        return self.node is not None and (
            not self.managed or self.node.labels.get(LABEL_NODE_REGISTERED) == "true"
        )

    @property
    def initialized(self) -> bool:
        if self.node is None:
            return False
        return not self.managed or self.node.labels.get(LABEL_NODE_INITIALIZED) == "true"

    @property
    def in_flight(self) -> bool:
        return self.node is None

    @property
    def launched(self) -> bool:
        """A Node, or a NodeClaim that reports what it launched (``status.capacity`` or
        ``status.allocatable``): its size is known, not predicted."""
        if self.node is not None:
            return True
        assert self.nodeclaim is not None
        return bool(self.nodeclaim.status.capacity or self.nodeclaim.status.allocatable)

    @property
    def taints(self) -> tuple[Taint, ...]:
        """The taints pods will meet, as upstream's state judges a managed node that is not
        initialized: before registration (in flight, or a Node registered bare whose taints are
        not synced yet) the claim's ``spec.taints``; after it, the Node's without the claim's
        startup taints. Startup taints are expected to go away."""
        if self.nodeclaim is not None and not self.registered:
            return slim_taints(self.nodeclaim.spec.taints)
        assert self.node is not None
        if self.nodeclaim is None or self.initialized:
            return self.node.taints
        startup = {(t.key, t.effect) for t in self.nodeclaim.spec.startup_taints}
        return tuple(t for t in self.node.taints if (t.key, t.effect) not in startup)

    @property
    def allocatable(self) -> dict[str, int]:
        """What pods may use. A launched NodeClaim without ``status.allocatable`` offers its
        capacity; before it launches, only what it was sized for (``spec.resources.requests``)."""
        if self.node is not None and self.node.allocatable:
            return dict(self.node.allocatable)
        if self.nodeclaim is None:
            return {}
        status = self.nodeclaim.status
        if status.allocatable or status.capacity:
            return parse_resources(status.allocatable or status.capacity)
        return parse_resources(self.nodeclaim.spec.resources.requests)

    @property
    def capacity(self) -> dict[str, int]:
        if self.node is not None and self.node.capacity:
            return dict(self.node.capacity)
        if self.nodeclaim is not None and self.nodeclaim.status.capacity:
            return parse_resources(self.nodeclaim.status.capacity)
        return self.allocatable

    @property
    def charged(self) -> dict[str, int]:
        """What the node counts against its NodePool's limits: its capacity once launched;
        before that, the largest capacity it may launch with when reserved, else what it was
        sized for. Charging NodeClaims in flight keeps a burst from overshooting the limits."""
        if not self.launched and self.reserved:
            return dict(self.reserved)
        return self.capacity

    @property
    def hostname(self) -> str:
        return self.labels.get(LABEL_HOSTNAME, self.name)

    @property
    def do_not_disrupt(self) -> bool:
        annotations = self.node.annotations if self.node is not None else {}
        return annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true"
