"""What every NodeClaim/Node controller package shares (the packages never import each other):
reading a NodeClaim and its Nodes from the cache with an API fallback."""

from __future__ import annotations

import logging

from pydantic import ValidationError

from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node
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
