"""What every NodeClaim/Node controller package shares (the packages never import each other):
reading a NodeClaim and its Nodes from the cache with an API fallback, and deleting a NodeClaim
(expiry, liveness, garbage collection and static deprovisioning all do)."""

from __future__ import annotations

import logging

from pydantic import ValidationError

from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.errors import ConflictError, NotFoundError
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node
from karpenter_py.model.labels import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL
from karpenter_py.state.cluster import Cluster

log = logging.getLogger("karpenter.controllers")


async def load_nodeclaim(deps: Deps, name: str) -> NodeClaim | None:
    """The cached NodeClaim, or the API's when the cache has not caught up (None: gone)."""
    cached = deps.cluster.nodeclaims.get(name)
    if cached is not None:
        return cached
    try:
        raw = await deps.client.get(NODECLAIMS, name)
    except NotFoundError:
        return None
    try:
        return NodeClaim.model_validate(raw)
    except ValidationError as e:
        log.warning("skipping unparsable nodeclaim", extra={"nodeclaim": name, "error": str(e)})
        return None


def nodes_for(cluster: Cluster, nc: NodeClaim) -> list[Node]:
    """Nodes backing a NodeClaim, matched by provider ID (more than one means something is wrong)."""
    pid = nc.status.provider_id
    if not pid:
        return []
    return [n for n in cluster.nodes.values() if n.provider_id == pid]


def nodepool_of(nc: NodeClaim) -> str:
    return nc.metadata.labels.get(LABEL_NODEPOOL, "")


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
