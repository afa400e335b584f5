"""A static NodePool's (``spec.replicas``) NodeClaims as the cluster state holds them: which are
the pool's, how many stay and how many are on their way out, and its ``limits.nodes``. One rule
for static provisioning, static deprovisioning and static drift (upstream's NodePoolState)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import is_disrupted_taint
from karpenter_py.state.statenode import StateNode
from karpenter_py.state.usage import RESOURCE_NODES


@dataclass(frozen=True, slots=True)
class Count:
    """A static pool's NodeClaims: staying (``running``), and leaving (``deleting``)."""

    running: int
    deleting: int

    @property
    def total(self) -> int:
        return self.running + self.deleting


def is_static(np: NodePool) -> bool:
    return np.spec.replicas is not None


def pool_members(nodes: Iterable[StateNode], pool: str) -> list[StateNode]:
    """The pool's NodeClaims (a Node without one is not the pool's to count or remove)."""
    return [sn for sn in nodes if sn.nodeclaim is not None and sn.node_pool == pool]


def leaving(sn: StateNode) -> bool:
    """Being deleted, or taken by a disruption command (its node tainted
    ``karpenter.sh/disrupted``): the command creates the replacement before it marks the node
    for deletion, and in between the pool must not count one node too many and remove the
    replacement."""
    if sn.marked_for_deletion:
        return True
    return sn.node is not None and any(is_disrupted_taint(t) for t in sn.node.taints)


def count(members: Iterable[StateNode]) -> Count:
    running = deleting = 0
    for sn in members:
        if leaving(sn):
            deleting += 1
        else:
            running += 1
    return Count(running, deleting)


def node_limit(np: NodePool) -> int | None:
    """``limits.nodes``, or None when unset."""
    if not np.spec.limits or RESOURCE_NODES not in np.spec.limits:
        return None
    return int(np.spec.limits[RESOURCE_NODES])
