"""What every NodeClaim/Node controller package shares (the packages never import each other):
their dependencies, the queue controller built on them, and reading a NodeClaim and its Nodes
from the cache with an API fallback."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import ValidationError

from karpenter_py.aio.clock import Clock
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.controllers.runtime import QueueController
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster

log = logging.getLogger("karpenter.controllers")


@dataclass(frozen=True, slots=True)
class Deps:
    client: KubeClient
    cluster: Cluster
    cloud: CloudProvider
    recorder: EventRecorder
    clock: Clock
    metrics: Metrics | None = None


class DepsController(QueueController):
    """A queue controller over the shared :class:`Deps` (``self.deps``), constructed the way the
    NodeClaim and Node controllers are: ``(client, cluster, cloud, recorder, *, clock, ...)``."""

    def __init__(
        self,
        client: KubeClient,
        cluster: Cluster,
        cloud: CloudProvider,
        recorder: EventRecorder,
        *,
        clock: Clock,
        metrics: Metrics | None = None,
        workers: int | None = None,
    ) -> None:
        super().__init__(client, cluster, clock=clock, metrics=metrics, workers=workers)
        self.deps = Deps(client, cluster, cloud, recorder, clock, metrics)


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
