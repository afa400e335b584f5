"""What the nodeclaim controllers share: dependencies, phase results, reads and optimistic writes.

Reads come from the in-memory :class:`Cluster` (the informers' view) and fall back to the API
when the cache has not seen an object yet. Every write that replaces a list (finalizers, taints,
conditions) carries the resourceVersion it was computed from, so a concurrent writer makes it
fail with ``ConflictError`` and the work queue retries on fresher data instead of clobbering.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.errors import ConflictError, NotFoundError
from karpenter_py.kube.events import object_ref
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import NODECLAIMS, NODES
from karpenter_py.model.api.nodeclaim import API_VERSION, KIND, NodeClaim
from karpenter_py.model.labels import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, LABEL_TOPOLOGY_ZONE

log = logging.getLogger("karpenter.nodeclaim")


@dataclass(frozen=True, slots=True)
class PhaseResult:
    requeue_after: float | None = None
    deleted: bool = False  # the NodeClaim was deleted: skip the remaining phases and the write


DONE = PhaseResult()


def nodeclaim_ref(nc: NodeClaim) -> KubeObject:
    return object_ref(API_VERSION, KIND, nc.name, uid=nc.metadata.uid or None)


def nodepool_of(nc: NodeClaim) -> str:
    return nc.metadata.labels.get(LABEL_NODEPOOL, "")


async def get_node_raw(client: KubeClient, name: str) -> KubeObject | None:
    try:
        return await client.get(NODES, name)
    except NotFoundError:
        return None


async def delete_nodeclaim(deps: Deps, nc: NodeClaim, reason: str) -> bool:
    """Delete with a UID precondition (never a same-named successor); count it as upstream does.
    False when it was already gone (or replaced by a same-named successor)."""
    try:
        await deps.client.delete(NODECLAIMS, nc.name, uid=nc.metadata.uid or None)
    except (NotFoundError, ConflictError):
        return False
    log.info("deleted nodeclaim", extra={"nodeclaim": nc.name, "reason": reason})
    if deps.metrics is not None:
        deps.metrics.nodeclaims_disrupted.labels(
            reason=reason,
            nodepool=nodepool_of(nc),
            capacity_type=nc.metadata.labels.get(LABEL_CAPACITY_TYPE, ""),
        ).inc()
    return True


def zone_of(labels: dict[str, str]) -> str:
    return labels.get(LABEL_TOPOLOGY_ZONE, "")


def map_diff(old: dict[str, str], new: dict[str, str]) -> dict[str, Any]:
    """A merge-patch fragment turning ``old`` into ``new`` (None deletes a key)."""
    out: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    out.update({k: None for k in old if k not in new})
    return out
